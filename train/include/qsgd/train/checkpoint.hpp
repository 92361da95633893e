#pragma once
// Checkpoints of a data-parallel run: parameters, optimizer momentum, the
// position in the schedule, and each rank's running totals (training time,
// the current epoch's time and loss sums), so that a resumed run reports the
// same times and losses an uninterrupted one would. Replicas are bitwise
// identical, so rank 0 writes one file and every rank reads it back on resume.
//
// File (version 4, little-endian as the machine writes it):
//   "QSGDCKPT" | u32 version | u32 ranks K | u64 config hash | u64 global step
//   | u64 epoch | u64 step in epoch | u64 n | u32 flags (bit 0: the target
//   accuracy was reached) | u32 error feedback (feedback.hpp's Feedback: 0
//   none, 1 ef, 2 ef-unscaled, 3 ef21) | u64 m, the exchange's state
//   | K x {f64 training time, f64 epoch time, f64 epoch loss sum, u64 epoch
//   loss count} | n f32 params | n f32 momentum
//   | with error feedback: K x n f32, every rank's state (e or h) in rank
//   order | ef21: n f32, the ranks' mean m
//   | m f32: the compressed exchange's state (Exchange::state(): powersgd's
//   warm-start Qs; the same on every rank; m = 0 for the other strategies)
//   | u32 CRC32C of everything before it.
// Error feedback's state differs per rank, so rank 0 gathers it; on resume
// every rank keeps its own (the file is read whole to check its checksum).
// Written to a temporary file beside <path> (a name no other writer uses),
// synced, renamed over <path>, and the directory synced
// (qsgd/support/durable_file.hpp): a run killed at any moment, or a node that
// loses power, leaves the previous complete checkpoint or the new one.

#include <cstdint>
#include <string>
#include <vector>

namespace qsgd::train {

// One rank's totals at the checkpoint (all of them since the run began, or
// since the current epoch began).
struct RankTotals {
  double train_time = 0;  // seconds of training steps so far
  double epoch_time = 0;  // seconds of steps in the current epoch
  double loss_sum = 0;    // training loss summed over the current epoch's steps
  std::uint64_t loss_n = 0;
};

struct CheckpointState {
  std::uint64_t config_hash = 0;
  std::uint64_t step = 0;           // global steps completed
  std::uint64_t epoch = 0;          // epoch of the next step
  std::uint64_t step_in_epoch = 0;  // steps of that epoch already done
  bool target_reached = false;
  std::vector<RankTotals> ranks;    // one entry per rank, in rank order
  std::vector<float> params;
  std::vector<float> momentum;
  std::uint32_t feedback = 0;         // Feedback as stored (0: none)
  std::vector<float> feedback_state;  // save: K x n in rank order; load: this rank's n
  std::vector<float> feedback_mean;   // ef21: n; otherwise empty
  std::vector<float> exchange_state;  // Exchange::state() of the compressed exchange
};

void save_checkpoint(const std::string& path, const CheckpointState& st);
// Throws std::runtime_error naming the path and what is wrong (missing,
// truncated, bad checksum, other format version, other configuration, other
// model size, other number of ranks, other error feedback, another size of
// exchange state). Memory is bounded by expect_n, expect_ranks,
// expect_feedback and expect_state: the file's size is checked against them
// before its body is read. `rank` picks the error feedback state returned.
CheckpointState load_checkpoint(const std::string& path, std::uint64_t expect_hash, std::uint64_t expect_n,
                                std::uint64_t expect_ranks, std::uint32_t expect_feedback = 0,
                                std::uint64_t rank = 0, std::uint64_t expect_state = 0);

}  // namespace qsgd::train
