#include "qsgd/train/checkpoint.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <unistd.h>

#include "qsgd/kernels/crc32c.hpp"
#include "qsgd/support/durable_file.hpp"

namespace qsgd::train {
namespace {

constexpr char magic[8] = {'Q', 'S', 'G', 'D', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t version = 4;
constexpr std::uint32_t feedback_ef21 = 3, feedback_max = 3;  // feedback.hpp's Feedback
// Bytes of the error feedback section.
std::uint64_t feedback_bytes(std::uint32_t kind, std::uint64_t n, std::uint64_t ranks) {
  if (kind == 0) return 0;
  return 4 * n * ranks + (kind == feedback_ef21 ? 4 * n : 0);
}
constexpr std::size_t head = 8 + 4 + 4 + 5 * 8 + 4 + 4 + 8;  // through the exchange state's size
constexpr std::size_t rank_bytes = 4 * 8;                // RankTotals on the wire
// Above these a caller's expectation is a bug, not a file to read.
constexpr std::uint64_t max_n = std::uint64_t(1) << 60;
constexpr std::uint64_t max_ranks = std::uint64_t(1) << 24;

void put(std::vector<unsigned char>& b, const void* p, std::size_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  b.insert(b.end(), c, c + n);
}
template <class T>
void put(std::vector<unsigned char>& b, T v) {
  put(b, &v, sizeof v);
}

}  // namespace

void save_checkpoint(const std::string& path, const CheckpointState& st) {
  if (st.params.size() != st.momentum.size()) throw std::logic_error("checkpoint: params and momentum differ in size");
  if (st.ranks.empty() || st.ranks.size() > max_ranks) throw std::logic_error("checkpoint: no or too many ranks");
  const std::uint64_t fb = feedback_bytes(st.feedback, st.params.size(), st.ranks.size());
  if (st.feedback > feedback_max || 4 * (st.feedback_state.size() + st.feedback_mean.size()) != fb)
    throw std::logic_error("checkpoint: error feedback state of the wrong size");
  std::vector<unsigned char> b;
  b.reserve(head + rank_bytes * st.ranks.size() + 8 * st.params.size() + fb + 4 * st.exchange_state.size() + 4);
  put(b, magic, sizeof magic);
  put(b, version);
  put(b, static_cast<std::uint32_t>(st.ranks.size()));
  put(b, st.config_hash);
  put(b, st.step);
  put(b, st.epoch);
  put(b, st.step_in_epoch);
  put(b, std::uint64_t(st.params.size()));
  put(b, std::uint32_t(st.target_reached ? 1 : 0));
  put(b, st.feedback);
  put(b, std::uint64_t(st.exchange_state.size()));
  for (const RankTotals& r : st.ranks) {
    put(b, r.train_time);
    put(b, r.epoch_time);
    put(b, r.loss_sum);
    put(b, r.loss_n);
  }
  put(b, st.params.data(), 4 * st.params.size());
  put(b, st.momentum.data(), 4 * st.momentum.size());
  put(b, st.feedback_state.data(), 4 * st.feedback_state.size());
  put(b, st.feedback_mean.data(), 4 * st.feedback_mean.size());
  put(b, st.exchange_state.data(), 4 * st.exchange_state.size());
  put(b, qsgd::detail::crc32c_bytes_host(b.data(), b.size()));
  const std::string tmp = qsgd::support::temporary_name(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error("checkpoint: cannot create " + tmp + ": " + std::strerror(errno));
  const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size() && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    std::remove(tmp.c_str());
    throw std::runtime_error("checkpoint: writing " + tmp + " failed (disk full?); " + path + " is unchanged");
  }
  try {
    qsgd::support::durable_rename(tmp, path);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("checkpoint: ") + e.what());
  }
}

CheckpointState load_checkpoint(const std::string& path, std::uint64_t expect_hash, std::uint64_t expect_n,
                                std::uint64_t expect_ranks, std::uint32_t expect_feedback, std::uint64_t rank,
                                std::uint64_t expect_state) {
  if (expect_n > max_n || expect_ranks == 0 || expect_ranks > max_ranks || expect_feedback > feedback_max ||
      rank >= expect_ranks || (expect_feedback != 0 && expect_n > max_n / expect_ranks / 8) || expect_state > max_n)
    throw std::logic_error("checkpoint: implausible parameter, rank, error feedback or exchange state expectation");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("checkpoint: cannot open " + path);
  const std::streamoff file_size = in.tellg();
  in.seekg(0);
  if (file_size < 0 || static_cast<std::uint64_t>(file_size) < head + 4)
    throw std::runtime_error("checkpoint: " + path + " is truncated");
  const std::uint64_t size = static_cast<std::uint64_t>(file_size);
  const std::uint64_t want = head + rank_bytes * expect_ranks + 8 * expect_n +
                             feedback_bytes(expect_feedback, expect_n, expect_ranks) + 4 * expect_state + 4;
  std::vector<unsigned char> b(head);
  if (!in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(head)))
    throw std::runtime_error("checkpoint: reading " + path + " failed");
  if (std::memcmp(b.data(), magic, 8) != 0) throw std::runtime_error("checkpoint: " + path + " is not a checkpoint");
  std::uint32_t ver, ranks, feedback;
  std::uint64_t n, m;
  std::memcpy(&ver, b.data() + 8, 4);
  std::memcpy(&ranks, b.data() + 12, 4);
  std::memcpy(&n, b.data() + 16 + 32, 8);
  std::memcpy(&feedback, b.data() + 16 + 44, 4);
  std::memcpy(&m, b.data() + 16 + 48, 8);
  // The header's claims name the mismatch; the checksum below still decides
  // whether the file is what it claims.
  if (ver != version)
    throw std::runtime_error("checkpoint: " + path + " has format version " + std::to_string(ver) +
                             " (this build reads version " + std::to_string(version) + ")");
  if (size != want) {
    if (n != expect_n)
      throw std::runtime_error("checkpoint: " + path + " holds " + std::to_string(n) + " parameters, the model has " +
                               std::to_string(expect_n) + " (or the file is corrupt)");
    if (ranks != expect_ranks)
      throw std::runtime_error("checkpoint: " + path + " was written by " + std::to_string(ranks) +
                               " ranks, this run has " + std::to_string(expect_ranks) + " (or the file is corrupt)");
    if (feedback != expect_feedback)
      throw std::runtime_error("checkpoint: " + path + " was written with error feedback " +
                               std::to_string(feedback) + ", this run uses " + std::to_string(expect_feedback) +
                               " (or the file is corrupt)");
    if (m != expect_state)
      throw std::runtime_error("checkpoint: " + path + " holds " + std::to_string(m) +
                               " values of exchange state (powersgd's Qs), this run has " +
                               std::to_string(expect_state) + " (or the file is corrupt)");
    throw std::runtime_error("checkpoint: " + path + " has the wrong size (" + std::to_string(size) +
                             " bytes; a checkpoint of " + std::to_string(expect_n) + " parameters and " +
                             std::to_string(expect_ranks) + " ranks has " + std::to_string(want) + ")");
  }
  b.resize(size);
  if (!in.read(reinterpret_cast<char*>(b.data() + head), static_cast<std::streamsize>(size - head)))
    throw std::runtime_error("checkpoint: reading " + path + " failed");
  std::uint32_t crc;
  std::memcpy(&crc, b.data() + b.size() - 4, 4);
  if (qsgd::detail::crc32c_bytes_host(b.data(), b.size() - 4) != crc)
    throw std::runtime_error("checkpoint: " + path + " fails its checksum (corrupt or truncated)");
  CheckpointState st;
  std::uint32_t flags;
  const unsigned char* p = b.data() + 16;
  std::memcpy(&st.config_hash, p, 8);
  std::memcpy(&st.step, p + 8, 8);
  std::memcpy(&st.epoch, p + 16, 8);
  std::memcpy(&st.step_in_epoch, p + 24, 8);
  std::memcpy(&flags, p + 40, 4);
  if (st.config_hash != expect_hash)
    throw std::runtime_error("checkpoint: " + path + " was written by a run with another configuration");
  if (n != expect_n)
    throw std::runtime_error("checkpoint: " + path + " holds " + std::to_string(n) + " parameters, the model has " +
                             std::to_string(expect_n));
  if (ranks != expect_ranks)
    throw std::runtime_error("checkpoint: " + path + " was written by " + std::to_string(ranks) +
                             " ranks, this run has " + std::to_string(expect_ranks));
  if (feedback != expect_feedback)
    throw std::runtime_error("checkpoint: " + path + " was written with error feedback " + std::to_string(feedback) +
                             ", this run uses " + std::to_string(expect_feedback));
  if (m != expect_state)
    throw std::runtime_error("checkpoint: " + path + " holds " + std::to_string(m) +
                             " values of exchange state (powersgd's Qs), this run has " + std::to_string(expect_state));
  if (flags > 1) throw std::runtime_error("checkpoint: " + path + " has unknown flags " + std::to_string(flags));
  st.target_reached = flags == 1;
  st.ranks.resize(ranks);
  p = b.data() + head;
  for (RankTotals& r : st.ranks) {
    std::memcpy(&r.train_time, p, 8);
    std::memcpy(&r.epoch_time, p + 8, 8);
    std::memcpy(&r.loss_sum, p + 16, 8);
    std::memcpy(&r.loss_n, p + 24, 8);
    p += rank_bytes;
  }
  st.params.resize(n);
  st.momentum.resize(n);
  if (n > 0) {  // an empty vector's data() may be null, which memcpy may not be given
    std::memcpy(st.params.data(), p, 4 * n);
    std::memcpy(st.momentum.data(), p + 4 * n, 4 * n);
  }
  p += 8 * n;
  st.feedback = feedback;
  if (feedback != 0 && n > 0) {
    st.feedback_state.resize(n);
    std::memcpy(st.feedback_state.data(), p + 4 * n * rank, 4 * n);
    if (feedback == feedback_ef21) {
      st.feedback_mean.resize(n);
      std::memcpy(st.feedback_mean.data(), p + 4 * n * ranks, 4 * n);
    }
  }
  p += feedback_bytes(feedback, n, ranks);
  st.exchange_state.resize(m);
  if (m > 0) std::memcpy(st.exchange_state.data(), p, 4 * m);
  return st;
}

}  // namespace qsgd::train
