#include "experiments.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <qsgd/algorithms.hpp>

#include "stats.hpp"

namespace qsgd::algorithms::program {

namespace {

// A convergence curve, under the JSON key "trace" (docs/algorithms.md's
// schema, which results/reference/algorithms holds).
void write_curve(Json& j, const Curve& t) {
  std::vector<std::uint64_t> it, bits;
  std::vector<double> sub, loss, gn;
  bool has_loss = false, has_gn = false;
  for (const CurvePoint& p : t) {
    it.push_back(p.iteration);
    bits.push_back(p.bits);
    sub.push_back(p.suboptimality);
    loss.push_back(p.loss);
    gn.push_back(p.grad_norm2);
    has_loss |= std::isfinite(p.loss);
    has_gn |= std::isfinite(p.grad_norm2);
  }
  j.begin_object().field("iteration", it).field("bits", bits).field("suboptimality", sub);
  if (has_loss) j.field("loss", loss);
  if (has_gn) j.field("grad_norm2", gn);
  j.end_object();
}

double as_double(std::uint64_t it) { return it == never ? INFINITY : static_cast<double>(it); }

// The wire at s levels: the dense Elias code near s = sqrt(n), the sparse
// code for small s (spec section 2), L2 scaling, one bucket (the analysis).
WireConfig wire_for(std::uint32_t s, std::size_t n) {
  WireConfig w;
  w.s = s;
  w.codec = 2 * s <= sqrt_levels(n) ? CodecKind::elias_sparse : CodecKind::elias_dense;
  return w;
}

std::string wire_name(const WireConfig& w, std::size_t n) {
  if (!w.quantized()) return "fp32";
  const std::uint32_t s = w.s ? w.s : sqrt_levels(n);
  return "s=" + std::to_string(s) + (s == sqrt_levels(n) ? " (sqrt n)" : "");
}

}  // namespace

// ---------------------------------------------------------------------------
// Convex QSGD: iterations to suboptimality eps, fp32 against QSGD at several s.
namespace {

struct ConvexSetup {
  std::vector<std::unique_ptr<Problem>> problems;
  std::vector<double> eps_rel;  // target suboptimality, relative to f(x0) - f*
  int batch = 4;
  std::uint64_t steps = 0;
};

// The tests' two problems (least squares n = 64, logistic n = 32), plus a
// larger instance of each, where the 64-byte message header weighs less.
ConvexSetup convex_setup(const Options& o) {
  ConvexSetup cs;
  auto add_ls = [&](std::size_t n, std::size_t m) {
    LeastSquaresSpec s;
    s.n = n, s.m = m;
    cs.problems.push_back(make_least_squares(s));
    cs.eps_rel.push_back(1e-3);
  };
  auto add_lg = [&](std::size_t n, std::size_t m) {
    LogisticSpec s;
    s.n = n, s.m = m;
    cs.problems.push_back(make_logistic(s));
    cs.eps_rel.push_back(1e-2);
  };
  if (o.quick) {
    add_ls(16, 512);
    add_lg(16, 512);
  } else {
    add_ls(64, 4096);
    add_ls(256, 8192);
    add_lg(32, 2048);
    add_lg(64, 4096);
  }
  cs.steps = o.quick ? 400 : 10000;
  return cs;
}

struct ConvexVariant {
  WireConfig wire;
  Feedback feedback = Feedback::none;
};

// The variants of one problem: fp32, then s = sqrt(n), 2 sqrt(n), sqrt(n)/2,
// 2, 1, then s = 2 with each kind of error feedback.
std::vector<ConvexVariant> convex_variants(std::size_t n) {
  const std::uint32_t rs = sqrt_levels(n);
  std::vector<ConvexVariant> vs = {{full_precision_wire()}};
  for (std::uint32_t s : {rs, 2 * rs, rs / 2, 2u, 1u})
    if (s >= 1 && std::none_of(vs.begin(), vs.end(), [&](const ConvexVariant& v) { return v.wire.s == s; }))
      vs.push_back({wire_for(s, n)});
  for (Feedback f : {Feedback::ef_unscaled, Feedback::ef, Feedback::ef21}) vs.push_back({wire_for(2, n), f});
  return vs;
}

std::string variant_name(const ConvexVariant& v, std::size_t n) {
  return wire_name(v.wire, n) + (v.feedback == Feedback::none ? "" : " " + to_string(v.feedback));
}

// Runs one wire on one problem for every seed (a "runs" entry each), prints
// its row and returns its "summary" entry; fp32_median is the fp32 row's
// median, set when w is fp32 (the first wire).
std::string convex_row(const Options& o, const ConvexSetup& cs, std::size_t pi, const ConvexVariant& v,
                       double& fp32_median, Json& j) {
  const WireConfig& w = v.wire;
  const Problem& p = *cs.problems[pi];
  const std::size_t n = p.dim();
  const std::uint32_t rs = sqrt_levels(n);
  const double eps = cs.eps_rel[pi] * p.suboptimality(p.initial_point());
  std::vector<double> its;
  std::uint64_t bits = 0, msgs = 0;
  int diverged = 0;
  for (int seed = 0; seed < o.seeds; ++seed) {
    QsgdConfig c;
    c.workers = o.workers;
    c.batch = cs.batch;
    c.steps = cs.steps;
    c.step = StepSchedule::inverse_time(p.strong_convexity(), p.smoothness());
    c.wire = w;
    c.feedback = v.feedback;
    c.seed = static_cast<std::uint64_t>(seed);
    c.eval = EvalSpec{10, false, false};
    const RunResult r = run_qsgd(p, c);
    const std::uint64_t it = first_iteration_below(r.curve, eps);
    its.push_back(as_double(it));
    bits += r.bits;
    msgs += r.messages;
    if (!r.diverged.empty()) ++diverged;
    j.begin_object()
        .field("problem", p.name())
        .field("n", static_cast<std::uint64_t>(n))
        .field("eps_relative", cs.eps_rel[pi])
        .field("wire", variant_name(v, n))
        .field("codec", to_string(w.codec))
        .field("s", static_cast<std::uint64_t>(w.quantized() ? (w.s ? w.s : rs) : 0))
        .field("feedback", to_string(v.feedback))
        .field("seed", seed)
        .field("iterations_to_eps", as_double(it))
        .field("diverged", r.diverged)
        .field("bits", r.bits)
        .field("messages", r.messages)
        .field("seconds", r.seconds);
    j.key("trace");
    write_curve(j, r.curve);
    j.end_object();
  }
  const double med = qsgd::bench::median_of(its);
  if (!w.quantized()) fp32_median = med;
  const double ratio = med / fp32_median;
  const double bpc = static_cast<double>(bits) / static_cast<double>(msgs) / static_cast<double>(n);
  const double bpc_body = bpc - 8.0 * header_bytes / static_cast<double>(n);
  const std::uint32_t s = w.quantized() ? (w.s ? w.s : rs) : 0;
  const double bound = w.quantized() ? second_moment_blowup(n, s) : 1.0;
  std::printf("%-14s %5zu %8.0e %-19s %-13s %10.0f %8.2f %8.2f %11.2f %11.2f\n", p.name().c_str(), n,
              cs.eps_rel[pi], variant_name(v, n).c_str(), to_string(w.codec).c_str(), med, ratio, bound, bpc, bpc_body);
  if (diverged > 0) std::printf("%-14s   %d of %d seeds diverged (the quantizer's input left the float range)\n", "", diverged, o.seeds);
  Json sj;
  sj.begin_object()
      .field("problem", p.name())
      .field("n", static_cast<std::uint64_t>(n))
      .field("eps_relative", cs.eps_rel[pi])
      .field("wire", variant_name(v, n))
      .field("codec", to_string(w.codec))
      .field("s", static_cast<std::uint64_t>(s))
      .field("feedback", to_string(v.feedback))
      .field("seeds_diverged", diverged)
      .field("median_iterations", med)
      .field("ratio_to_fp32", ratio)
      .field("second_moment_bound", bound)
      .field("bits_per_coordinate", bpc)
      .field("bits_per_coordinate_without_header", bpc_body)
      .field("iterations", its)
      .end_object();
  return sj.str();
}

}  // namespace

void experiment_convex(const Options& o, Json& j) {
  const ConvexSetup cs = convex_setup(o);
  j.key("parameters")
      .begin_object()
      .field("workers", o.workers)
      .field("batch", cs.batch)
      .field("steps", cs.steps)
      .field("seeds", o.seeds)
      .field("eps_relative", cs.eps_rel)
      .field("schedule", "inverse-time: eta_t = 2/(l(t+1)+4L)")
      .field("feedback", "s=2 rows with error feedback: ef-unscaled compresses with C = Q_s, ef and ef21 with "
                         "C = Q_s / B, B = 1 + min(n/s^2, sqrt(n)/s)")
      .field("header_bytes", static_cast<std::uint64_t>(header_bytes))
      .field("eval_every", 10)
      .field("norm", "l2")
      .field("bucket", "n (one bucket)")
      .end_object();
  j.key("problems").begin_array();
  for (const auto& p : cs.problems) j.raw(p->describe_json());
  j.end_array();

  std::printf("convex QSGD: %d workers, batch %d, median over %d seeds of the steps to eps (relative to f(x0) - f*)\n",
              o.workers, cs.batch, o.seeds);
  std::printf("%-14s %5s %8s %-19s %-13s %10s %8s %8s %11s %11s\n", "problem", "n", "eps", "wire", "code", "median it",
              "ratio", "B bound", "bits/coord", "w/o header");
  j.key("runs").begin_array();
  std::vector<std::string> summary;
  for (std::size_t pi = 0; pi < cs.problems.size(); ++pi) {
    double fp32_median = NAN;
    for (const ConvexVariant& v : convex_variants(cs.problems[pi]->dim()))
      summary.push_back(convex_row(o, cs, pi, v, fp32_median, j));
  }
  j.end_array();
  j.key("summary").begin_array();
  for (const auto& s : summary) j.raw(s);
  j.end_array();
}

// ---------------------------------------------------------------------------
// QSVRG: suboptimality per epoch; SVRG fp32, QSVRG (exact epoch gradient, the
// paper), QSVRG with the epoch gradient quantized (the spec's text).
void experiment_qsvrg(const Options& o, Json& j) {
  LeastSquaresSpec spec;
  spec.ridge = 0.05;
  spec.normalize_rows = true;
  if (o.quick) spec.n = 16, spec.m = 512;
  const auto p = make_least_squares(spec);
  const int epochs = o.quick ? 3 : 15;
  const int seeds = std::min(o.seeds, 3);
  const std::size_t n = p->dim();
  struct Variant {
    std::string name;
    WireConfig wire;
    FullGradient full;
  };
  std::vector<Variant> variants = {
      {"svrg fp32", full_precision_wire(), FullGradient::exact},
      {"qsvrg s=sqrt(n)", wire_for(sqrt_levels(n), n), FullGradient::exact},
      {"qsvrg s=sqrt(n), quantized epoch gradient (spec text)", wire_for(sqrt_levels(n), n), FullGradient::quantized},
      {"qsvrg s=2", wire_for(2, n), FullGradient::exact},
  };
  QsvrgConfig base;
  base.workers = o.workers;
  base.epochs = epochs;
  const QsvrgConfig res = base.resolved(*p);
  const double bound = qsvrg_rate_bound(res.eta, res.inner_steps, p->strong_convexity(), p->component_smoothness(),
                                        second_moment_blowup(n, sqrt_levels(n)));
  const double floor_pred = qsvrg_quantized_floor(*p, o.workers, sqrt_levels(n));
  j.key("parameters")
      .begin_object()
      .field("workers", o.workers)
      .field("epochs", epochs)
      .field("seeds", seeds)
      .field("eta", res.eta)
      .field("eta_formula", "0.05 / L_max")
      .field("inner_steps", res.inner_steps)
      .field("inner_steps_formula", "ceil(50 L_max / l)")
      .field("rate_bound_at_sqrt_n", bound)
      .field("predicted_floor_quantized_epoch_gradient", floor_pred)
      .end_object();
  j.key("problems").begin_array().raw(p->describe_json()).end_array();
  std::printf("QSVRG: %d workers, eta = 0.05/L_max = %.4g, T = ceil(50 L_max/l) = %llu, bound alpha = %.3f\n",
              o.workers, res.eta, static_cast<unsigned long long>(res.inner_steps), bound);
  std::printf("predicted floor with a quantized epoch gradient: %.3e (f(y0) - f* = %.3e)\n", floor_pred,
              p->suboptimality(p->initial_point()));
  std::printf("%-56s %10s %10s %12s %12s %11s\n", "variant", "max ratio", "geo ratio", "final", "mean last 5",
              "bits/coord");
  j.key("runs").begin_array();
  for (const Variant& v : variants) {
    for (int seed = 0; seed < seeds; ++seed) {
      QsvrgConfig c = base;
      c.wire = v.wire;
      c.full = v.full;
      c.seed = static_cast<std::uint64_t>(seed);
      c.inner_every = std::max<std::uint64_t>(1, res.inner_steps / 20);
      const QsvrgResult r = run_qsvrg(*p, c);
      std::vector<double> ratios;
      for (std::size_t e = 1; e < r.epochs.size(); ++e)
        ratios.push_back(r.epochs[e].suboptimality / r.epochs[e - 1].suboptimality);
      const double maxr = *std::max_element(ratios.begin(), ratios.end());
      const double geo = std::pow(r.epochs.back().suboptimality / r.epochs.front().suboptimality, 1.0 / epochs);
      const double msgs = static_cast<double>(epochs) * o.workers * (static_cast<double>(res.inner_steps) + 1);
      const double bpc = static_cast<double>(r.bits) / msgs / static_cast<double>(n);
      double last5 = 0.0;
      const std::size_t k5 = std::min<std::size_t>(5, r.epochs.size());
      for (std::size_t e = r.epochs.size() - k5; e < r.epochs.size(); ++e)
        last5 += r.epochs[e].suboptimality / static_cast<double>(k5);
      if (seed == 0)
        std::printf("%-56s %10.3f %10.3f %12.3e %12.3e %11.2f\n", v.name.c_str(), maxr, geo,
                    r.epochs.back().suboptimality, last5, bpc);
      j.begin_object()
          .field("variant", v.name)
          .field("wire", wire_name(v.wire, n))
          .field("full_gradient", to_string(v.full))
          .field("seed", seed)
          .field("ratios", ratios)
          .field("max_ratio", maxr)
          .field("geometric_mean_ratio", geo)
          .field("mean_last5", last5)
          .field("bits", r.bits)
          .field("bits_per_coordinate", bpc)
          .field("seconds", r.seconds);
      j.key("epochs");
      write_curve(j, r.epochs);
      j.key("inner");
      write_curve(j, r.inner);
      j.end_object();
    }
  }
  j.end_array();
}

// ---------------------------------------------------------------------------
// Deterministic quantized GD on the strongly convex quadratic, with its bound.
void experiment_dqgd(const Options& o, Json& j) {
  QuadraticSpec spec;
  if (o.quick) spec.n = 16;
  const auto p = make_quadratic(spec);
  const std::size_t n = p->dim();
  const double l = p->strong_convexity(), L = p->smoothness();
  const std::uint64_t iters = o.quick ? 200 : 3000;
  struct Variant {
    std::string name;
    double eta;
    bool quantize;
  };
  const double rn = std::sqrt(static_cast<double>(n));
  const std::vector<Variant> variants = {
      {"dqgd eta = l/(L^2 sqrt n) (spec)", dqgd_spec_step(l, L, n), true},
      {"dqgd eta = 1/(L sqrt n)", 1.0 / (L * rn), true},
      {"dqgd eta = 8/(L sqrt n) (too large)", 8.0 / (L * rn), true},
      {"gd fp32 eta = l/(L^2 sqrt n)", dqgd_spec_step(l, L, n), false},
      {"gd fp32 eta = 1/L", 1.0 / L, false},
  };
  j.key("parameters").begin_object().field("iterations", iters).field("codec", "elias-sparse").end_object();
  j.key("problems").begin_array().raw(p->describe_json()).end_array();
  std::printf("deterministic QGD on a quadratic, n = %zu, l = %g, L = %g\n", n, l, L);
  std::printf("%-40s %10s %10s %12s %12s %12s\n", "variant", "eta", "rho bound", "worst step", "final", "bits/coord");
  j.key("runs").begin_array();
  for (const Variant& v : variants) {
    DqgdConfig c;
    c.eta = v.eta;
    c.iterations = iters;
    c.quantize = v.quantize;
    const RunResult r = run_dqgd(*p, c);
    const double rho = v.quantize ? dqgd_rate_bound(v.eta, l, L, n) : 1.0 - 2.0 * l * v.eta * (1.0 - L * v.eta / 2.0);
    double worst = 0.0;
    const double f0 = r.curve.front().suboptimality;
    for (std::size_t t = 1; t < r.curve.size(); ++t)
      if (r.curve[t - 1].suboptimality > 1e-20 * f0)
        worst = std::max(worst, r.curve[t].suboptimality / r.curve[t - 1].suboptimality);
    const double bpc = static_cast<double>(r.bits) / static_cast<double>(r.messages) / static_cast<double>(n);
    std::printf("%-40s %10.4g %10.5f %12.5f %12.3e %12.2f\n", v.name.c_str(), v.eta, rho, worst,
                r.curve.back().suboptimality, bpc);
    j.begin_object()
        .field("variant", v.name)
        .field("eta", v.eta)
        .field("quantized", v.quantize)
        .field("rho_bound", rho)
        .field("worst_step_ratio", worst)
        .field("bits_per_coordinate", bpc);
    j.key("trace");
    write_curve(j, r.curve);
    j.end_object();
  }
  j.end_array();
}

// ---------------------------------------------------------------------------
// Asynchronous parameter server with bounded staleness (under mpirun).
namespace {

// One step schedule for every run of a problem, designed for the largest
// bounded tau of the sweep, so that runs differ only in staleness and wire:
// convex: inverse-time with L (1 + tau_d); non-convex: Robbins-Monro
// eta0 / (1 + v / (updates / 10)), eta0 = 1 / (2 L (1 + tau_d)).
StepSchedule async_schedule(const Problem& p, int tau_d, std::uint64_t updates) {
  const double f = 1.0 + tau_d;
  return p.convex() ? StepSchedule::inverse_time(p.strong_convexity(), p.smoothness() * f)
                    : StepSchedule::harmonic(1.0 / (2.0 * p.smoothness() * f), std::max(1.0, updates / 10.0));
}

// Mean of a measure over the last 5 evaluation points.
template <class F>
double tail5(const Curve& t, F f) {
  const std::size_t k = std::min<std::size_t>(5, t.size());
  double s = 0.0;
  for (std::size_t i = t.size() - k; i < t.size(); ++i) s += f(t[i]);
  return s / static_cast<double>(k);
}

// One "runs" entry of the async experiment, and its printed row on rank 0.
void record_async(Json& j, bool root, const Problem& p, const AsyncConfig& c, const AsyncResult& r,
                  const std::string& data, const std::string& group) {
  auto sub = [](const CurvePoint& t) { return t.suboptimality; };
  auto gn = [](const CurvePoint& t) { return t.grad_norm2; };
  const std::size_t n = p.dim();
  double mean_stale = 0.0;
  for (std::uint32_t st : r.staleness) mean_stale += st;
  mean_stale /= static_cast<double>(std::max<std::size_t>(1, r.staleness.size()));
  const double fsub = tail5(r.curve, sub), fgn = tail5(r.curve, gn);
  std::string share;
  for (std::size_t w = 0; w < r.applied_per_worker.size(); ++w)
    share += (w ? "/" : "") +
             std::to_string(static_cast<int>(std::lround(
                 100.0 * r.applied_per_worker[w] / static_cast<double>(std::max<std::uint64_t>(1, r.applied)))));
  if (root)
    std::printf("%-14s %-13s %-8s %5s %8llu %8llu %6llu %7.2f %11.3e %11.3e %9s\n", p.name().c_str(),
                wire_name(c.wire, n).c_str(), data.c_str(), c.tau >= 0 ? std::to_string(c.tau).c_str() : "inf",
                static_cast<unsigned long long>(r.applied), static_cast<unsigned long long>(r.rejected),
                static_cast<unsigned long long>(r.max_staleness), mean_stale, fsub, fgn, share.c_str());
  j.begin_object()
      .field("group", group)
      .field("problem", p.name())
      .field("wire", wire_name(c.wire, n))
      .field("tau", c.tau)
      .field("data", data)
      .field("window", c.window)
      .field("workers", r.workers)
      .field("worker_delay_us", c.worker_delay_us)
      .field("applied", r.applied)
      .field("rejected", r.rejected)
      .field("discarded", r.discarded)
      .field("pushes", r.pushes)
      .field("sent", r.sent)
      .field("max_staleness", r.max_staleness)
      .field("mean_staleness", mean_stale)
      .field("final_suboptimality", fsub)
      .field("final_grad_norm2", fgn)
      .field("staleness_hist", r.staleness_hist)
      .field("rejected_hist", r.rejected_hist)
      .field("applied_per_worker", r.applied_per_worker)
      .field("grad_bits", r.grad_bits)
      .field("bits_per_coordinate", static_cast<double>(r.grad_bits) /
                                        static_cast<double>(std::max<std::uint64_t>(1, r.pushes)) /
                                        static_cast<double>(n))
      .field("seconds", r.seconds)
      .field("staleness", std::vector<std::uint64_t>(r.staleness.begin(), r.staleness.end()));
  j.key("trace");
  write_curve(j, r.curve);
  j.end_object();
}

// The sequential baseline of a problem (rank 0 only): one worker, no
// staleness, fp32, the same batch, schedule and number of updates.
void async_baseline(Json& j, const Problem& p, int batch, std::uint64_t updates, std::uint64_t every,
                    const StepSchedule& step) {
  auto sub = [](const CurvePoint& t) { return t.suboptimality; };
  auto gn = [](const CurvePoint& t) { return t.grad_norm2; };
  QsgdConfig c;
  c.workers = 1;
  c.batch = batch;
  c.steps = updates;
  c.wire = full_precision_wire();
  c.seed = 1;
  c.eval = EvalSpec{every, !p.convex(), !p.convex()};
  c.step = step;
  const RunResult r = run_qsgd(p, c);
  std::printf("%-14s %-13s %-8s %5s %8llu %8s %6s %7s %11.3e %11.3e   (sequential SGD baseline)\n", p.name().c_str(),
              "fp32", "-", "-", static_cast<unsigned long long>(updates), "-", "-", "-", tail5(r.curve, sub),
              tail5(r.curve, gn));
  j.begin_object()
      .field("group", "baseline")
      .field("problem", p.name())
      .field("wire", "fp32")
      .field("baseline", "sequential SGD")
      .field("final_suboptimality", tail5(r.curve, sub))
      .field("final_grad_norm2", tail5(r.curve, gn));
  j.key("trace");
  write_curve(j, r.curve);
  j.end_object();
}

}  // namespace

void experiment_async(const Options& o, Json& j, const qsgd::comm::Communicator& comm) {
  LogisticSpec lg;
  RobustSpec rb;
  if (o.quick) lg.n = rb.n = 16, lg.m = rb.m = 512;
  std::vector<std::unique_ptr<Problem>> problems;
  problems.push_back(make_logistic(lg));
  problems.push_back(make_robust(rb));
  const int batch = 8;
  const std::uint64_t updates = o.quick ? 300 : o.updates;
  const bool root = comm.rank() == 0;
  const int K = comm.size() - 1;
  int tau_d = 0;
  for (int t : o.taus) tau_d = std::max(tau_d, t);
  const std::uint64_t every = std::max<std::uint64_t>(1, updates / 100);

  j.key("parameters")
      .begin_object()
      .field("workers", K)
      .field("batch", batch)
      .field("updates", updates)
      .field("window", o.window)
      .field("taus", o.taus)
      .field("tau_design", tau_d)
      .field("worker_delay_us", o.delay_us)
      .field("pull", "eager")
      .field("rejection", "pushes with staleness > tau are rejected (tau < 0: none)")
      .field("sampling", "each worker draws from the whole data set (replicated), unless sharded")
      .field("schedule_convex", "inverse-time 2/(l(v+1)+4L(1+tau_design))")
      .field("schedule_nonconvex", "harmonic eta0/(1+v/(updates/10)), eta0 = 1/(2L(1+tau_design))")
      .field("summary_measure", "mean over the last 5 evaluation points")
      .end_object();
  j.key("problems").begin_array();
  for (const auto& p : problems) j.raw(p->describe_json());
  j.end_array();
  if (root) {
    std::printf("async parameter server: %d workers, batch %d, %llu updates, window %d, steps designed for tau = %d\n",
                K, batch, static_cast<unsigned long long>(updates), o.window, tau_d);
    std::printf("%-14s %-13s %-8s %5s %8s %8s %6s %7s %11s %11s %9s\n", "problem", "wire", "data", "tau", "applied",
                "rejected", "max", "mean", "f - f*", "|grad f|^2", "per worker");
  }
  j.key("runs").begin_array();
  auto config = [&](const Problem& p, int tau, const WireConfig& wire) {
    AsyncConfig c;
    c.updates = updates;
    c.batch = batch;
    c.tau = tau;
    c.window = o.window;
    c.wire = wire;
    c.seed = 1;
    c.worker_delay_us = o.delay_us;
    c.eval = EvalSpec{every, !p.convex(), !p.convex()};
    c.step = async_schedule(p, tau_d, updates);
    return c;
  };
  for (const auto& p : problems) {
    const std::size_t n = p->dim();
    for (const bool quantized : {false, true}) {
      const WireConfig wire = quantized ? wire_for(sqrt_levels(n), n) : full_precision_wire();
      for (int tau : o.taus) {
        const AsyncConfig c = config(*p, tau, wire);
        record_async(j, root, *p, c, run_async(*p, c, comm), "replica", "staleness");
      }
    }
    if (root) async_baseline(j, *p, batch, updates, every, async_schedule(*p, tau_d, updates));
  }
  // Data placement under unequal worker speeds (K >= 2): worker rank r spends
  // (r - 1) x 500 us more per gradient; with sharded data the faster
  // workers' shards dominate the applied updates.
  if (K >= 2) {
    const auto& p = problems.front();
    for (const bool sharded : {false, true}) {
      AsyncConfig c = config(*p, tau_d, wire_for(sqrt_levels(p->dim()), p->dim()));
      c.worker_delay_us = o.quick ? 50.0 : 500.0;
      c.sharded = sharded;
      c.eval = EvalSpec{every, false, false};
      record_async(j, root, *p, c, run_async(*p, c, comm), sharded ? "shards" : "replica", "placement");
    }
  }
  j.end_array();
}

}  // namespace qsgd::algorithms::program
