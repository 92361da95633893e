#pragma once
// Replacing a file so that a crash leaves either the old or the new one:
// write a temporary file beside it (a name no other writer uses), fsync it,
// rename it over the target, then fsync the directory, without which the
// rename itself may not survive a node crash or power loss. Checkpoints and
// traces (qsgd::train) use it.

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

namespace qsgd::support {

// `path`.tmp.<pid>.<n>.<t>: unique among the writers of one machine (the
// process id and a per-process counter) and, in practice, among the nodes
// sharing a file system (the clock's nanoseconds).
inline std::string temporary_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  const auto ns = std::chrono::steady_clock::now().time_since_epoch().count();
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." +
         std::to_string(static_cast<unsigned long long>(ns) % 1000000000ull);
}

// The directory holding `path` ("." when the name has no slash).
inline std::string directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// rename(tmp, path), then fsync of path's directory. Throws
// std::runtime_error naming the step and the cause; a failed rename removes
// tmp (nothing half-written is left behind under either name).
inline void durable_rename(const std::string& tmp, const std::string& path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
  const std::string dir = directory_of(path);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open directory " + dir + " to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some network and FUSE file systems cannot sync a directory (EINVAL,
  // ENOTSUP): the rename stands there as the file system makes it durable.
  if (rc != 0 && err != EINVAL && err != ENOTSUP)
    throw std::runtime_error("cannot sync directory " + dir + ": " + std::strerror(err));
}

}  // namespace qsgd::support
