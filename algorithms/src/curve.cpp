#include "qsgd/algorithms/curve.hpp"

#include <sstream>

#include "qsgd/algorithms/problems.hpp"

namespace qsgd::algorithms {

CurvePoint evaluate(const Problem& p, const Vec& x, std::uint64_t iteration, std::uint64_t bits, const EvalSpec& e) {
  CurvePoint tp;
  tp.iteration = iteration;
  tp.bits = bits;
  if (p.has_optimum()) tp.suboptimality = p.suboptimality(x);
  if (e.loss) tp.loss = p.loss(x);
  if (e.grad_norm) tp.grad_norm2 = p.gradient_norm2(x);
  return tp;
}

std::uint64_t first_iteration_below(const Curve& t, double eps) {
  for (const CurvePoint& p : t)
    if (p.suboptimality <= eps) return p.iteration;
  return never;
}

std::string StepSchedule::describe_json() const {
  std::ostringstream os;
  os.precision(17);
  if (kind == Kind::constant)
    os << "{\"kind\":\"constant\",\"eta\":" << eta << "}";
  else if (kind == Kind::harmonic)
    os << "{\"kind\":\"harmonic\",\"formula\":\"eta/(1+t/t0)\",\"eta\":" << eta << ",\"t0\":" << t0 << "}";
  else
    os << "{\"kind\":\"inverse-time\",\"formula\":\"2/(l(t+1)+4L)\",\"l\":" << l << ",\"L\":" << L << "}";
  return os.str();
}

}  // namespace qsgd::algorithms
