#pragma once
// Synthetic teacher-network classification data for fast tests.
//
// A fixed random "teacher" MLP labels random inputs:
//   x ~ N(0, I_d),  h = tanh(W1 x + b1),  label = argmax(W2 h)
// with W1 (hidden x d) ~ N(0, 1/d), b1 ~ N(0, 0.1^2), W2 (classes x hidden)
// ~ N(0, 1/hidden). Everything is drawn from std::mt19937_64 seeded by
// `seed` through this library's own normal sampler (Box-Muller on 53-bit
// uniforms), not std::normal_distribution, whose output differs between
// standard libraries: the same seed gives the same dataset everywhere.
// Samples come from the same teacher for any n: a student that fits one
// split generalizes to another split drawn with a different data_seed.

#include <cstdint>

#include "qsgd/models/data/dataset.hpp"

namespace qsgd::models {

struct TeacherConfig {
  std::size_t samples = 4096;
  std::size_t features = 32;
  std::size_t hidden = 64;
  std::size_t classes = 4;
  std::uint64_t teacher_seed = 1;  // the teacher's weights
  std::uint64_t data_seed = 2;     // the inputs
};

LabeledDataset make_teacher_dataset(const TeacherConfig& config);

}  // namespace qsgd::models
