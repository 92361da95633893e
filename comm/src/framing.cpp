// The exchanges' metadata and framing checks (detail/framing.hpp).
#include "detail/framing.hpp"

#include <climits>
#include <cstring>

#include "qsgd/comm/communicator.hpp"
#include "qsgd/kernels/crc32c.hpp"
#include "qsgd/kernels/message.hpp"

namespace qsgd::comm::detail {
namespace {

std::string where(const OpId& id) {
  return " at step " + std::to_string(id.step) + ", tensor " + std::to_string(id.tensor);
}

FrameFault corrupt(const OpId& id, int source, const std::string& what) {
  return {Errc::corrupt_message, exit_corrupt_message,
          "corrupt message from rank " + std::to_string(source) + where(id) + ": " + what};
}

void put_le(unsigned char* p, std::uint64_t x, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(x >> (8 * i));
}

}  // namespace

std::uint32_t meta_crc(const std::uint64_t* m) {
  unsigned char b[28];
  put_le(b, m[0], 8);
  put_le(b + 8, m[1], 8);
  put_le(b + 16, m[2] & 0xFFFFFFFFu, 4);
  put_le(b + 20, m[3], 8);
  return qsgd::detail::crc32c_host(0xFFFFFFFFu, b, sizeof b) ^ 0xFFFFFFFFu;
}

void set_meta(const OpId& id, std::uint64_t* m, std::uint64_t words) {
  m[0] = words;
  m[1] = id.n;
  m[2] = id.tensor;
  m[3] = id.step;
  m[2] |= static_cast<std::uint64_t>(meta_crc(m)) << 32;
}

FrameFault check_meta(const OpId& id, int source, const std::uint64_t* m, std::uint64_t max_w) {
  if (static_cast<std::uint32_t>(m[2] >> 32) != meta_crc(m))
    return corrupt(id, source, "its metadata fails its CRC32C (announced " + std::to_string(m[0]) + " words, n " +
                                   std::to_string(m[1]) + ", tensor " + std::to_string(m[2] & 0xFFFFFFFFu) +
                                   ", step " + std::to_string(m[3]) + ")");
  if (m[1] != id.n || (m[2] & 0xFFFFFFFFu) != id.tensor || m[3] != id.step)
    return {Errc::invalid_argument, exit_config_mismatch,
            "ranks disagree on the operation: rank " + std::to_string(source) + " started (n " + std::to_string(m[1]) +
                ", tensor " + std::to_string(m[2] & 0xFFFFFFFFu) + ", step " + std::to_string(m[3]) +
                "), this rank (n " + std::to_string(id.n) + ", tensor " + std::to_string(id.tensor) + ", step " +
                std::to_string(id.step) + ")"};
  if (m[0] < (header_bytes + 7) / 8 || m[0] > max_w)
    return corrupt(id, source,
                   "announced size of " + std::to_string(m[0]) + " words is outside " +
                       std::to_string((header_bytes + 7) / 8) + ".." + std::to_string(max_w));
  return {};
}

FrameFault check_frame_bytes(const OpId& id, int source, std::size_t bytes) {
  if (bytes < meta_words * 8 || bytes % 8 != 0)
    return corrupt(id, source, std::to_string(bytes) + " bytes received, not a framed message");
  return {};
}

FrameFault check_frame_size(const OpId& id, int source, const std::uint64_t* m, std::size_t bytes) {
  if ((m[0] + meta_words) * 8 != bytes)  // m[0] <= max_w (check_meta): no overflow
    return corrupt(id, source,
                   "announced " + std::to_string(m[0]) + " words, received " + std::to_string(bytes / 8 - meta_words));
  return {};
}

FrameFault layout_meta(const OpId& id, const std::uint64_t* meta_recv, int K, int self, std::uint64_t max_w,
                       const char* owner, std::vector<int>& counts, std::vector<int>& displs, std::uint64_t& wire) {
  counts.resize(static_cast<std::size_t>(K));
  displs.resize(static_cast<std::size_t>(K));
  std::uint64_t total = 0;
  wire = 0;
  for (int r = 0; r < K; ++r) {
    const std::uint64_t* m = meta_recv + static_cast<std::size_t>(r) * meta_words;
    if (FrameFault f = check_meta(id, r, m, max_w)) return f;
    total += m[0];  // m[0] <= max_w: no wrap for any size a codec allows
    if (total > static_cast<std::uint64_t>(INT_MAX))
      return {Errc::invalid_argument, exit_exchange_error,
              std::string(owner) + ": " + std::to_string(total) + " words exceed the MPI count limit (INT_MAX)"};
    counts[static_cast<std::size_t>(r)] = static_cast<int>(m[0]);
    displs[static_cast<std::size_t>(r)] = static_cast<int>(total - m[0]);
    if (r != self) wire += m[0] * 8 + meta_words * 8;
  }
  return {};
}

}  // namespace qsgd::comm::detail
