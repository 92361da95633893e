#pragma once
// NVTX ranges for nsys. Names are hierarchical and documented in
// docs/profiling.md; a test checks that each one shows up in a real nsys run.
// Without NVTX headers (QSGD_HAVE_NVTX undefined) every call is a no-op.
//
//   qsgd::prof::Scope s("qsgd/encode");       nested push/pop range (this thread)
//   auto id = qsgd::prof::start("comm/allgather"); ... qsgd::prof::end(id);
//                                               start/end range (may span calls)

#include <cstdint>

#if defined(QSGD_HAVE_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

namespace qsgd::prof {

class Scope {
 public:
  explicit Scope(const char* name) {
#if defined(QSGD_HAVE_NVTX)
    nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  ~Scope() {
#if defined(QSGD_HAVE_NVTX)
    nvtxRangePop();
#endif
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
};

inline std::uint64_t start(const char* name) {
#if defined(QSGD_HAVE_NVTX)
  return nvtxRangeStartA(name);
#else
  (void)name;
  return 0;
#endif
}

inline void end(std::uint64_t id) {
#if defined(QSGD_HAVE_NVTX)
  nvtxRangeEnd(id);
#else
  (void)id;
#endif
}

inline bool enabled() {
#if defined(QSGD_HAVE_NVTX)
  return true;
#else
  return false;
#endif
}

}  // namespace qsgd::prof
