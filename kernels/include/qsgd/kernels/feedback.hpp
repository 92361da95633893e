#pragma once
// The forms of error feedback (spec section 4), one definition for
// qsgd::algorithms (one vector per worker) and qsgd::train (per tensor,
// train/feedback.hpp):
//   ef:          p = g + e, send C(p), e <- p - C(p)            C = Q / B
//   ef-unscaled: the same with C = Q (the spec's formula)
//   ef21:        send C(g - h), h <- h + C(g - h); the step follows the
//                mean of the h                                   C = Q / B
// B = second_moment_bound (config.hpp): Q / B is the contraction both
// analyses assume; Q alone is one only when B < 2.

#include <cstdint>
#include <string>

#include "qsgd/kernels/error.hpp"

namespace qsgd {

// The values are what checkpoints store (train/checkpoint.hpp).
enum class Feedback : std::uint32_t { none = 0, ef = 1, ef_unscaled = 2, ef21 = 3 };

// Names as command lines, traces and JSON write them.
inline std::string to_string(Feedback f) {
  switch (f) {
    case Feedback::none: return "none";
    case Feedback::ef: return "ef";
    case Feedback::ef_unscaled: return "ef-unscaled";
    case Feedback::ef21: return "ef21";
  }
  return "feedback#" + std::to_string(static_cast<std::uint32_t>(f));
}

// Throws qsgd::Error(invalid_argument) naming the value and the choices.
inline Feedback parse_feedback(const std::string& name) {
  for (Feedback f : {Feedback::none, Feedback::ef, Feedback::ef_unscaled, Feedback::ef21})
    if (name == to_string(f)) return f;
  throw Error(Errc::invalid_argument, "unknown error feedback '" + name + "' (none, ef, ef-unscaled, ef21)");
}

// c in C = c Q for a quantizer whose second-moment bound is `bound`: 1/B
// for ef and ef21, 1 for ef-unscaled (and none).
inline double feedback_scale(Feedback f, double bound) {
  return f == Feedback::ef || f == Feedback::ef21 ? 1.0 / bound : 1.0;
}

}  // namespace qsgd
