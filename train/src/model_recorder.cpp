// --record-model (model_recorder.hpp).
#include "model_recorder.hpp"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace qsgd::train {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Each step's time over the median, at probabilities (k + 0.5) / Q.
std::vector<double> spread(const std::vector<double>& v) {
  const double m = median(v);
  if (v.size() < 2 || !(m > 0)) return {};
  std::vector<double> r;
  for (double x : v) r.push_back(x / m);
  std::sort(r.begin(), r.end());
  std::vector<double> q;
  for (std::size_t k = 0; k < ModelRecorder::quantiles; ++k) {
    const double at = (static_cast<double>(k) + 0.5) / ModelRecorder::quantiles * static_cast<double>(r.size() - 1);
    const auto i = static_cast<std::size_t>(at);
    const double f = at - static_cast<double>(i);
    q.push_back(i + 1 < r.size() ? r[i] + f * (r[i + 1] - r[i]) : r.back());
  }
  return q;
}

// The spreads of one phase from every rank's times v[r][s] (equal lengths,
// K >= 2): the factor the ranks share in step s, c(s) = median over r of
// v[r][s] / median(v[r]), and each rank's own, v[r][s] / median(v[r]) / c(s).
// Both empty where a median is not positive.
std::pair<std::vector<double>, std::vector<double>> shared_and_own(const std::vector<std::vector<double>>& v) {
  const std::size_t K = v.size(), n = v.empty() ? 0 : v[0].size();
  std::vector<double> med(K);
  for (std::size_t r = 0; r < K; ++r) {
    med[r] = median(v[r]);
    if (!(med[r] > 0)) return {};
  }
  std::vector<double> common(n), own;
  for (std::size_t s = 0; s < n; ++s) {
    std::vector<double> x(K);
    for (std::size_t r = 0; r < K; ++r) x[r] = v[r][s] / med[r];
    common[s] = median(x);
    if (!(common[s] > 0)) return {};
    for (double y : x) own.push_back(y / common[s]);
  }
  return {spread(common), spread(own)};
}

}  // namespace

std::vector<double> ModelRecorder::series() const {
  std::vector<double> out(forward_);
  out.insert(out.end(), backward_.begin(), backward_.end());
  out.insert(out.end(), update_.begin(), update_.end());
  return out;
}

ModelRecorder::ModelRecorder(const models::Model& model, std::uint64_t stats_step) : stats_step_(stats_step) {
  const auto& ts = model.tensors();
  ready_.assign(ts.size(), 0.0);
  ready_steps_.resize(ts.size());
  std_.assign(ts.size(), 0.0);
  abs_q_.resize(ts.size());
  for (const auto& t : ts) {
    names_.push_back(t.name);
    shapes_.push_back(t.shape);
  }
}

void ModelRecorder::on_ready(const models::Model& model, std::size_t t, double hook_s) {
  ready_[t] = std::max(0.0, std::chrono::duration<double>(Clock::now() - t_backward_).count() - hook_s);
  if (step_ != stats_step_) return;
  // The statistics step (excluded from the times): this rank's gradient of t.
  auto g = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.store().grad_view(t));
  const std::size_t n = g.extent(0);
  double sum = 0, sq = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sum += g(i);
    sq += static_cast<double>(g(i)) * g(i);
  }
  const double mean = n ? sum / static_cast<double>(n) : 0;
  const double sd = n ? std::sqrt(std::max(0.0, sq / static_cast<double>(n) - mean * mean)) : 0;
  std_[t] = sd;
  abs_q_[t].clear();
  if (n == 0 || !(sd > 0)) return;
  std::vector<float> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = std::fabs(g(i));
  for (std::size_t k = 0; k < quantiles; ++k) {  // |g| at probability (k + 0.5) / Q, over sd
    const auto at = static_cast<std::size_t>((static_cast<double>(k) + 0.5) / quantiles * static_cast<double>(n));
    std::nth_element(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(std::min(at, n - 1)), a.end());
    abs_q_[t].push_back(a[std::min(at, n - 1)] / sd);
  }
  for (std::size_t k = 1; k < quantiles; ++k) abs_q_[t][k] = std::max(abs_q_[t][k], abs_q_[t][k - 1]);
  have_stats_ = true;
}

void ModelRecorder::end_step(double data_s, double forward_s, double backward_s, double update_s) {
  if (step_ < warmup_steps || step_ == stats_step_) return;
  for (std::size_t t = 0; t < ready_.size(); ++t) ready_steps_[t].push_back(ready_[t]);
  data_.push_back(data_s);
  forward_.push_back(forward_s);
  backward_.push_back(backward_s);
  update_.push_back(update_s);
}

models::ModelDescription ModelRecorder::describe(const std::string& model_name, std::size_t batch,
                                                 std::size_t train_samples,
                                                 const std::map<std::string, std::string>& provenance,
                                                 const std::vector<std::vector<double>>& ranks) const {
  if (forward_.empty() || !have_stats_)
    throw std::runtime_error("--record-model: no step was measured (the first " + std::to_string(warmup_steps) +
                             " are warm-up and step " + std::to_string(stats_step_) +
                             " takes the gradients' statistics): run more steps");
  models::ModelDescription d;
  d.model = model_name;
  d.batch = batch;
  d.train_samples = train_samples;
  d.times_source = "measured";
  d.device = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::DefaultExecutionSpace::memory_space>::accessible
                 ? "cpu"
                 : "cuda";
  const auto cpu = provenance.find("cpu_model");
  d.device_name = d.device == "cpu" && cpu != provenance.end() ? cpu->second : Kokkos::DefaultExecutionSpace::name();
  d.data_s = median(data_);
  d.forward_spread = spread(forward_);
  d.backward_spread = spread(backward_);
  d.optimizer_spread = spread(update_);
  const std::size_t n = forward_.size();
  const bool all_ranks = ranks.size() >= 2 && std::all_of(ranks.begin(), ranks.end(), [&](const auto& r) {
    return r.size() == 3 * n;
  });
  if (all_ranks) {
    for (auto [phase, common, own] : {std::tuple{0, &d.forward_spread, &d.forward_rank_spread},
                                      std::tuple{1, &d.backward_spread, &d.backward_rank_spread},
                                      std::tuple{2, &d.optimizer_spread, &d.optimizer_rank_spread}}) {
      std::vector<std::vector<double>> v;
      for (const auto& r : ranks)
        v.emplace_back(r.begin() + static_cast<std::ptrdiff_t>(phase * n),
                       r.begin() + static_cast<std::ptrdiff_t>((phase + 1) * n));
      auto [c, o] = shared_and_own(v);
      if (c.empty() || o.empty()) continue;  // keep rank 0's own spread
      *common = std::move(c);
      *own = std::move(o);
    }
  }
  d.forward_s = median(forward_);
  d.optimizer_s = median(update_);
  d.gradients_source = "recorded";
  double prev = 0;
  for (std::size_t t = 0; t < names_.size(); ++t) {
    models::DescribedTensor x;
    x.name = names_[t];
    x.shape = shapes_[t];
    x.size = 1;
    for (std::size_t s : x.shape) x.size *= s;
    x.ready_s = std::max(prev, median(ready_steps_[t]));  // backward order: never before the one before
    prev = x.ready_s;
    x.grad_std = std_[t];
    x.abs_quantiles = abs_q_[t];
    d.tensors.push_back(std::move(x));
  }
  d.backward_s = std::max(prev, median(backward_));
  d.provenance.emplace_back("tool", "qsgd-train --record-model");
  d.provenance.emplace_back("steps_measured", std::to_string(forward_.size()));
  d.provenance.emplace_back("statistics_step", std::to_string(stats_step_));
  d.provenance.emplace_back("spread_ranks", std::to_string(all_ranks ? ranks.size() : 1));
  for (const char* k : {"cpu_model", "cpu_flags", "compiler", "kokkos_version", "git_commit", "host"}) {
    const auto it = provenance.find(k);
    if (it != provenance.end()) d.provenance.emplace_back(k, it->second);
  }
  return d;
}

}  // namespace qsgd::train
