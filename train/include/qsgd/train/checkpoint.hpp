#pragma once
// Checkpoints of a data-parallel run: parameters, optimizer momentum and the
// position in the schedule. Replicas are bitwise identical, so rank 0 writes
// one file and every rank reads it back on resume.
//
// File: "QSGDCKPT" | u32 version | u32 reserved | u64 config hash | u64 global
// step | u64 epoch | u64 step in epoch | u64 n | n f32 params | n f32 momentum
// | u32 CRC32C of everything before it. Written to "<path>.tmp", flushed and
// renamed over <path>: a run killed at any moment leaves the previous
// complete checkpoint or the new one.

#include <cstdint>
#include <string>
#include <vector>

namespace qsgd::train {

struct CheckpointState {
  std::uint64_t config_hash = 0;
  std::uint64_t step = 0;           // global steps completed
  std::uint64_t epoch = 0;          // epoch of the next step
  std::uint64_t step_in_epoch = 0;  // steps of that epoch already done
  std::vector<float> params;
  std::vector<float> momentum;
};

void save_checkpoint(const std::string& path, const CheckpointState& st);
// Throws std::runtime_error naming the path and what is wrong (missing,
// truncated, bad checksum, other configuration, other model size).
CheckpointState load_checkpoint(const std::string& path, std::uint64_t expect_hash, std::uint64_t expect_n);

}  // namespace qsgd::train
