#include "qsgd/models/detail/cublas_runtime.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace qsgd::models::detail {

std::vector<std::string> cublas_candidates() {
  if (const char* env = std::getenv("QSGD_CUBLAS"); env != nullptr && *env != '\0') return {env};
  return {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"};
}

namespace {

template <class Fn>
void resolve(void* lib, const std::string& file, const char* symbol, Fn& fn) {
  dlerror();
  void* p = dlsym(lib, symbol);
  if (p == nullptr) {
    throw std::runtime_error("cuBLAS: " + file + " does not export " + symbol +
                             " (not a cuBLAS of version 11 or later; QSGD_CUBLAS names the library to use)");
  }
  fn = reinterpret_cast<Fn>(p);
}

// The file a loaded library came from: the path of one of its symbols.
std::string file_of(void* symbol, const std::string& fallback) {
  Dl_info info{};
  if (dladdr(symbol, &info) != 0 && info.dli_fname != nullptr) {
    char buf[PATH_MAX];
    return realpath(info.dli_fname, buf) != nullptr ? std::string(buf) : std::string(info.dli_fname);
  }
  return fallback;
}

}  // namespace

CublasRuntime load_cublas(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const auto& name : candidates) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      tried += "\n  " + name + ": " + (why ? why : "not loaded");
      continue;
    }
    CublasRuntime rt;
    resolve(lib, name, "cublasCreate_v2", rt.create);
    resolve(lib, name, "cublasDestroy_v2", rt.destroy);
    resolve(lib, name, "cublasSetStream_v2", rt.set_stream);
    resolve(lib, name, "cublasGetProperty", rt.get_property);
    resolve(lib, name, "cublasSgemm_v2", rt.sgemm);
    resolve(lib, name, "cublasDgemm_v2", rt.dgemm);
    rt.path = file_of(reinterpret_cast<void*>(rt.create), name);
    int part[3] = {0, 0, 0};
    for (int i = 0; i < 3; ++i) {
      if (rt.get_property(i, &part[i]) != 0)
        throw std::runtime_error("cuBLAS: cublasGetProperty(" + std::to_string(i) + ") failed in " + rt.path);
    }
    rt.version = std::to_string(part[0]) + "." + std::to_string(part[1]) + "." + std::to_string(part[2]);
    return rt;
  }
  throw std::runtime_error(
      "cuBLAS: no library could be loaded; tried (set QSGD_CUBLAS to its path, or add its folder to "
      "LD_LIBRARY_PATH):" +
      tried);
}

const CublasRuntime& cublas_runtime() {
  static std::once_flag once;
  static CublasRuntime rt;
  static std::string error;
  std::call_once(once, [] {
    try {
      rt = load_cublas(cublas_candidates());
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw std::runtime_error(error);
  return rt;
}

}  // namespace qsgd::models::detail
