// Checkpoint reader harness (train/include/qsgd/train/checkpoint.hpp). Contract:
// load_checkpoint returns the state or throws std::runtime_error whose
// message names the file; it allocates only after the file's size matched
// the parameter, rank and error feedback expectations (so in proportion to
// the file); a state it returns is what the file holds (with error
// feedback: the expected rank's state and ef21's mean; the exchange state),
// and saving a state without error feedback again writes the same file.
//
// Input: u8 mode, then the file. Mode bit 0 re-seals the trailing CRC32C so
// that mutations reach the fields behind it; bit 1 makes the run expect a
// fixed configuration hash, parameter count and rank count (those of the
// seeds), else the ones the file states, so that both the mismatch checks
// and the size and allocation logic after them are reached; bit 2 makes it
// expect the error feedback the file states (bits 4-7 pick the rank), else
// none; bit 3 makes it expect the exchange state's size the file states,
// else none.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <qsgd/kernels/crc32c.hpp>

#include "qsgd/train/checkpoint.hpp"
#include "common.hpp"
#include "seed_constants.hpp"

namespace {

using namespace qsgd_fuzz;

// checkpoint.hpp: magic, version, ranks, five u64, flags, error feedback,
// the exchange state's size; then 32 bytes per rank.
constexpr std::size_t head = 8 + 4 + 4 + 5 * 8 + 4 + 4 + 8;
constexpr std::size_t rank_bytes = 32;
// A model's size as the trainer passes it: the largest reference model has
// about 20 M parameters; above this the harness expects this many instead.
constexpr std::uint64_t max_expected_n = std::uint64_t(1) << 24;
// Ranks as a run passes them: 1 to this many.
constexpr std::uint64_t max_expected_ranks = 1024;

std::uint32_t u32_at(const std::vector<std::uint8_t>& b, std::size_t at) {
  std::uint32_t v = 0;
  if (b.size() >= at + 4) std::memcpy(&v, b.data() + at, 4);
  return v;
}

std::uint64_t u64_at(const std::vector<std::uint8_t>& b, std::size_t at) {
  std::uint64_t v = 0;
  if (b.size() >= at + 8) std::memcpy(&v, b.data() + at, 8);
  return v;
}

void put_crc(std::vector<std::uint8_t>& b) {
  if (b.size() < 4) return;
  const std::uint32_t crc = qsgd::detail::crc32c_bytes_host(b.data(), b.size() - 4);
  std::memcpy(b.data() + b.size() - 4, &crc, 4);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ScratchFile file("checkpoint");
  static const ScratchFile again("checkpoint-saved");
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  std::vector<std::uint8_t> b(data + 1, data + size);
  if (mode & 1) put_crc(b);
  file.write(b.data(), b.size());

  std::uint64_t expect_hash = checkpoint_seed::hash, expect_n = checkpoint_seed::n;
  std::uint64_t expect_ranks = checkpoint_seed::ranks;
  if (!(mode & 2)) {
    expect_hash = u64_at(b, 16);
    expect_n = std::min(u64_at(b, 48), max_expected_n);
    expect_ranks = std::clamp<std::uint64_t>(u32_at(b, 12), 1, max_expected_ranks);
  }
  const std::uint32_t expect_fb = (mode & 4) ? std::min<std::uint32_t>(u32_at(b, 60), 3) : 0;
  const std::uint64_t rank = (mode >> 4) % expect_ranks;
  // The feedback section (every rank's n floats, ef21's mean) must stay
  // within what a run could hold: the harness lowers n, as a trainer would
  // never pass more.
  if (expect_fb != 0) expect_n = std::min(expect_n, max_expected_n / (expect_ranks + 1));
  const std::uint64_t expect_state = (mode & 8) ? std::min(u64_at(b, 64), max_expected_n) : 0;

  qsgd::train::CheckpointState st;
  try {
    st = qsgd::train::load_checkpoint(file.path(), expect_hash, expect_n, expect_ranks, expect_fb, rank, expect_state);
  } catch (const std::runtime_error& e) {
    QSGD_FUZZ_CHECK(std::string(e.what()).find(file.path()) != std::string::npos, "checkpoint.error-names-file",
                    "the message does not name the file: " << e.what());
    return 0;
  } catch (const std::exception& e) {
    violation("checkpoint.error-type", std::string("load_checkpoint threw a non-runtime_error exception: ") + e.what());
  }

  // Accepted: the state is the file's content.
  const std::size_t body = head + rank_bytes * expect_ranks;
  const std::size_t fb_bytes = expect_fb == 0 ? 0 : 4 * expect_n * (expect_ranks + (expect_fb == 3 ? 1 : 0));
  QSGD_FUZZ_CHECK(b.size() == body + 8 * expect_n + fb_bytes + 4 * expect_state + 4, "checkpoint.accepted-size",
                  "accepted a " << b.size() << "-byte file for " << expect_n << " parameters and " << expect_ranks
                                << " ranks");
  QSGD_FUZZ_CHECK(st.config_hash == expect_hash && st.params.size() == expect_n && st.momentum.size() == expect_n &&
                      st.ranks.size() == expect_ranks,
                  "checkpoint.accepted-fields", "the state's hash or sizes differ from what the run expects");
  QSGD_FUZZ_CHECK(st.step == u64_at(b, 24) && st.epoch == u64_at(b, 32) && st.step_in_epoch == u64_at(b, 40) &&
                      st.target_reached == (u32_at(b, 56) == 1),
                  "checkpoint.accepted-fields", "step, epoch, step in epoch or flags differ from the file's");
  for (std::size_t r = 0; r < st.ranks.size(); ++r) {
    const qsgd::train::RankTotals& t = st.ranks[r];
    const std::size_t at = head + rank_bytes * r;
    QSGD_FUZZ_CHECK(std::memcmp(&t.train_time, b.data() + at, 8) == 0 &&
                        std::memcmp(&t.epoch_time, b.data() + at + 8, 8) == 0 &&
                        std::memcmp(&t.loss_sum, b.data() + at + 16, 8) == 0 && t.loss_n == u64_at(b, at + 24),
                    "checkpoint.accepted-fields", "rank " << r << "'s totals differ from the file's");
  }
  QSGD_FUZZ_CHECK(expect_n == 0 || (std::memcmp(st.params.data(), b.data() + body, 4 * expect_n) == 0 &&
                                    std::memcmp(st.momentum.data(), b.data() + body + 4 * expect_n, 4 * expect_n) == 0),
                  "checkpoint.accepted-fields", "parameters or momentum differ from the file's");
  const std::size_t fb_at = body + 8 * expect_n;
  QSGD_FUZZ_CHECK(st.feedback == expect_fb &&
                      st.feedback_state.size() == (expect_fb != 0 && expect_n > 0 ? expect_n : 0) &&
                      st.feedback_mean.size() == (expect_fb == 3 && expect_n > 0 ? expect_n : 0),
                  "checkpoint.accepted-fields", "the error feedback state's kind or sizes differ from the file's");
  QSGD_FUZZ_CHECK(st.feedback_state.empty() ||
                      std::memcmp(st.feedback_state.data(), b.data() + fb_at + 4 * expect_n * rank, 4 * expect_n) == 0,
                  "checkpoint.accepted-fields", "rank " << rank << "'s error feedback state differs from the file's");
  QSGD_FUZZ_CHECK(st.feedback_mean.empty() ||
                      std::memcmp(st.feedback_mean.data(), b.data() + fb_at + 4 * expect_n * expect_ranks,
                                  4 * expect_n) == 0,
                  "checkpoint.accepted-fields", "ef21's mean differs from the file's");
  QSGD_FUZZ_CHECK(st.exchange_state.size() == expect_state &&
                      (expect_state == 0 ||
                       std::memcmp(st.exchange_state.data(), b.data() + fb_at + fb_bytes, 4 * expect_state) == 0),
                  "checkpoint.accepted-fields", "the exchange state differs from the file's");
  if (expect_fb != 0) return 0;  // a loaded state holds one rank's feedback: not a whole file to save

  // Saving the state writes the file back.
  try {
    qsgd::train::save_checkpoint(again.path(), st);
  } catch (const std::exception& e) {
    violation("checkpoint.resave", std::string("saving a loaded state failed: ") + e.what());
  }
  QSGD_FUZZ_CHECK(again.read() == b, "checkpoint.resave", "saving the loaded state wrote another file");
  return 0;
}
