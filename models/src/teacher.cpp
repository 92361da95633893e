#include "qsgd/models/data/teacher.hpp"

#include <cmath>
#include <random>
#include <stdexcept>

#include "qsgd/models/detail/host_rng.hpp"

namespace qsgd::models {

LabeledDataset make_teacher_dataset(const TeacherConfig& c) {
  if (c.features == 0 || c.hidden == 0 || c.classes < 2) throw std::invalid_argument("teacher: bad shape");
  std::mt19937_64 tg(detail::mix64(c.teacher_seed, 0x7EAC));
  std::vector<double> w1(c.hidden * c.features), b1(c.hidden), w2(c.classes * c.hidden);
  for (auto& v : w1) v = detail::normal01(tg) / std::sqrt(static_cast<double>(c.features));
  for (auto& v : b1) v = 0.1 * detail::normal01(tg);
  for (auto& v : w2) v = detail::normal01(tg) / std::sqrt(static_cast<double>(c.hidden));

  LabeledDataset d;
  d.name = "teacher";
  d.features = c.features;
  d.classes = c.classes;
  d.x.resize(c.samples * c.features);
  d.y.resize(c.samples);
  std::mt19937_64 dg(detail::mix64(c.data_seed, 0xDA7A));
  std::vector<double> x(c.features), h(c.hidden);
  for (std::size_t i = 0; i < c.samples; ++i) {
    for (std::size_t k = 0; k < c.features; ++k) {
      x[k] = detail::normal01(dg);
      d.x[i * c.features + k] = static_cast<float>(x[k]);
    }
    for (std::size_t j = 0; j < c.hidden; ++j) {
      double s = b1[j];
      for (std::size_t k = 0; k < c.features; ++k) s += w1[j * c.features + k] * x[k];
      h[j] = std::tanh(s);
    }
    int best = 0;
    double best_v = 0;
    for (std::size_t o = 0; o < c.classes; ++o) {
      double s = 0;
      for (std::size_t j = 0; j < c.hidden; ++j) s += w2[o * c.hidden + j] * h[j];
      if (o == 0 || s > best_v) {
        best_v = s;
        best = static_cast<int>(o);
      }
    }
    d.y[i] = best;
  }
  return d;
}

}  // namespace qsgd::models
