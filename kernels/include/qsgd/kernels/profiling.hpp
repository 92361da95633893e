#pragma once
// NVTX ranges for nsys. Names are hierarchical and documented in
// docs/profiling.md; a test checks that each one shows up in a real nsys run.
// Without NVTX headers (QSGD_HAVE_NVTX undefined) every call is a no-op.
//
//   qsgd::prof::Scope s("qsgd/encode");       nested push/pop range (this thread)
//   auto id = qsgd::prof::start("comm/allgather"); ... qsgd::prof::end(id);
//                                               start/end range (may span calls)
//   qsgd::prof::Scope s("train/step", step);  the same with a 64-bit payload,
//   qsgd::prof::start("comm/allgather", t);   shown on the range in the timeline
//                                               and exported as the event's
//                                               uint64Value (so that a range maps
//                                               to its row of the HDF5 trace)

#include <cstdint>

#if defined(QSGD_HAVE_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

namespace qsgd::prof {

#if defined(QSGD_HAVE_NVTX)
namespace detail {
// An ASCII range name with an unsigned 64-bit payload.
inline nvtxEventAttributes_t with_payload(const char* name, std::uint64_t value) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  a.payload.ullValue = value;
  return a;
}
}  // namespace detail
#endif

class Scope {
 public:
  explicit Scope(const char* name) {
#if defined(QSGD_HAVE_NVTX)
    nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  Scope(const char* name, std::uint64_t payload) {
#if defined(QSGD_HAVE_NVTX)
    const nvtxEventAttributes_t a = detail::with_payload(name, payload);
    nvtxRangePushEx(&a);
#else
    (void)name, (void)payload;
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

inline std::uint64_t start(const char* name, std::uint64_t payload) {
#if defined(QSGD_HAVE_NVTX)
  const nvtxEventAttributes_t a = detail::with_payload(name, payload);
  return nvtxRangeStartEx(&a);
#else
  (void)name, (void)payload;
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
