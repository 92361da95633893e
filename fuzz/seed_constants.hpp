#pragma once
// Values the seed generator writes and the harnesses expect back.

#include <cstdint>

namespace qsgd_fuzz {

// Checkpoints: the configuration hash, parameter count and rank count of
// the seeds, which fuzz_checkpoint.cpp expects when its input asks for a
// fixed run.
namespace checkpoint_seed {
constexpr std::uint64_t hash = 0x9e3779b97f4a7c15ull;
constexpr std::uint64_t n = 5;
constexpr std::uint64_t ranks = 3;
}  // namespace checkpoint_seed

}  // namespace qsgd_fuzz
