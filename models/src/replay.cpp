// Replay of a described model (qsgd/models/replay.hpp, docs/replay.md).
#include "qsgd/models/replay.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "qsgd/models/detail/host_rng.hpp"
#include "qsgd/models/error.hpp"
#include "qsgd/support/durable_file.hpp"

namespace qsgd::models {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr std::size_t max_file_bytes = std::size_t{64} << 20;
constexpr std::size_t max_tensors = std::size_t{1} << 20;
constexpr std::size_t max_parameters = std::size_t{1} << 36;
constexpr std::size_t max_quantiles = 256;
constexpr std::size_t max_pool = 65536;  // values drawn per tensor; a step reuses them rotated

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw DataError("model description " + path + ": " + what);
}

std::string read_capped(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) bad(path, std::string("cannot open: ") + std::strerror(errno));
  std::string s;
  char buf[65536];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) {
    s.append(buf, static_cast<std::size_t>(f.gcount()));
    if (s.size() > max_file_bytes) bad(path, "larger than 64 MiB");
  }
  return s;
}

// A field of `j` (an object): present, of the right kind, in range.
const json& field(const std::string& path, const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) bad(path, where + "has no '" + key + "'");
  return j.at(key);
}
double time_field(const std::string& path, const json& j, const char* key, const std::string& where) {
  const json& v = field(path, j, key, where);
  if (!v.is_number()) bad(path, where + "'" + key + "' is not a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0 || x > 1e6) bad(path, where + "'" + key + "' = " + v.dump() + " is not a time in 0..1e6 s");
  return x;
}
std::size_t count_field(const std::string& path, const json& j, const char* key, const std::string& where,
                        std::size_t lo, std::size_t hi) {
  const json& v = field(path, j, key, where);
  if (!v.is_number_unsigned()) bad(path, where + "'" + key + "' is not a non-negative integer");
  const auto x = v.get<std::uint64_t>();
  if (x < lo || x > hi)
    bad(path, where + "'" + key + "' = " + std::to_string(x) + " is outside " + std::to_string(lo) + ".." +
                  std::to_string(hi));
  return static_cast<std::size_t>(x);
}
std::string string_field(const std::string& path, const json& j, const char* key, const std::string& where) {
  const json& v = field(path, j, key, where);
  if (!v.is_string()) bad(path, where + "'" + key + "' is not a string");
  return v.get<std::string>();
}

DescribedTensor parse_tensor(const std::string& path, const json& t, std::size_t i, double backward_s,
                             double prev_ready) {
  DescribedTensor d;
  const std::string at = "tensor " + std::to_string(i) + ": ";
  d.name = string_field(path, t, "name", at);
  const std::string where = "tensor " + std::to_string(i) + " (" + d.name + "): ";
  const json& shape = field(path, t, "shape", where);
  if (!shape.is_array() || shape.empty() || shape.size() > 8) bad(path, where + "'shape' is not an array of 1 to 8 sizes");
  d.size = 1;
  for (const json& s : shape) {
    if (!s.is_number_unsigned() || s.get<std::uint64_t>() == 0 || s.get<std::uint64_t>() > max_parameters)
      bad(path, where + "'shape' holds " + s.dump() + ", not a size in 1..2^36");
    const auto x = static_cast<std::size_t>(s.get<std::uint64_t>());
    if (d.size > max_parameters / x) bad(path, where + "more than 2^36 elements");
    d.size *= x;
    d.shape.push_back(x);
  }
  d.ready_s = time_field(path, t, "ready_s", where);
  if (d.ready_s < prev_ready) bad(path, where + "ready before the tensor before it (gradients come in backward order)");
  if (d.ready_s > backward_s) bad(path, where + "ready after the end of backward (times.backward_s)");
  const json& g = field(path, t, "grad_std", where);
  if (!g.is_number() || !std::isfinite(g.get<double>()) || g.get<double>() < 0)
    bad(path, where + "'grad_std' is not a finite non-negative number");
  d.grad_std = g.get<double>();
  if (t.contains("abs_quantiles")) {
    const json& q = t.at("abs_quantiles");
    if (!q.is_array() || q.size() > max_quantiles) bad(path, where + "'abs_quantiles' is not an array of at most 256");
    double prev = 0;
    for (const json& v : q) {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < prev || v.get<double>() > 1e6)
        bad(path, where + "'abs_quantiles' must be finite, nondecreasing and in 0..1e6");
      prev = v.get<double>();
      d.abs_quantiles.push_back(prev);
    }
  }
  return d;
}

// times.spread's (or times.rank_spread's: key) list for one phase: at most
// 256 nondecreasing factors in 0..1000.
std::vector<double> parse_spread(const std::string& path, const json& sp, const char* phase,
                                 const char* key = "spread") {
  std::vector<double> out;
  if (!sp.contains(phase)) return out;
  const json& q = sp.at(phase);
  const std::string where = std::string("times.") + key + ": '" + phase + "'";
  if (!q.is_array() || q.size() > max_quantiles) bad(path, where + " is not an array of at most 256");
  double prev = 0;
  for (const json& v : q) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < prev || v.get<double>() > 1000)
      bad(path, where + " must be finite, nondecreasing and in 0..1000");
    prev = v.get<double>();
    out.push_back(prev);
  }
  return out;
}

constexpr const char* spread_phases[] = {"forward", "backward", "optimizer"};
using PhaseSpreads = std::array<std::vector<double>*, 3>;  // forward, backward, optimizer

// times[key] (spread or rank_spread), where present, into the phases' lists.
void read_spreads(const std::string& path, const json& times, const char* key, const PhaseSpreads& out) {
  if (!times.contains(key)) return;
  const json& sp = times.at(key);
  if (!sp.is_object()) bad(path, std::string("times: '") + key + "' is not an object");
  for (std::size_t p = 0; p < 3; ++p) *out[p] = parse_spread(path, sp, spread_phases[p], key);
}

// The phases' lists as times[key], where any is not empty.
void write_spreads(json& times, const char* key, const std::array<const std::vector<double>*, 3>& in) {
  json sp = json::object();
  for (std::size_t p = 0; p < 3; ++p)
    if (!in[p]->empty()) sp[spread_phases[p]] = *in[p];
  if (!sp.empty()) times[key] = sp;
}

// The value at probability u of quantiles at (k + 0.5) / Q: piecewise linear
// between them, flat beyond.
double quantile_at(const std::vector<double>& q, double u) {
  const std::size_t Q = q.size();
  const double x = u * static_cast<double>(Q) - 0.5;
  if (x <= 0) return q.front();
  const auto k = static_cast<std::size_t>(x);
  if (k + 1 >= Q) return q.back();
  const double f = x - static_cast<double>(k);
  return q[k] + f * (q[k + 1] - q[k]);
}

// |g| / std at probability u from the tensor's quantiles (piecewise linear
// between the midpoints (k + 0.5) / Q, flat beyond), or a normal's.
double abs_value(const DescribedTensor& t, double u, std::mt19937_64& g) {
  if (t.abs_quantiles.empty()) return std::fabs(detail::normal01(g));
  return quantile_at(t.abs_quantiles, u);
}

void emulate_for(ReplayCompute c, Clock::duration d) {
  const auto end = Clock::now() + d;
  if (c == ReplayCompute::sleep) {
    std::this_thread::sleep_until(end);
    return;
  }
  while (Clock::now() < end) {
  }
}

void emulate_until(ReplayCompute c, Clock::time_point end) {
  if (c == ReplayCompute::sleep)
    std::this_thread::sleep_until(end);
  else
    while (Clock::now() < end) {
    }
}

// A gradient: its pool, rotated by `rot`, repeated over the tensor, in
// contiguous copies (memcpy speed: backward writes its gradients too).
template <class G>
void fill_from_pool(const G& g, const Kokkos::View<float*, MemSpace>& pool, std::size_t rot) {
  const std::size_t m = pool.extent(0), n = g.extent(0);
  using Range = std::pair<std::size_t, std::size_t>;
  for (std::size_t off = 0; off < n; off += m) {
    const std::size_t len = std::min(m, n - off);
    const std::size_t first = std::min(len, m - rot);  // pool[rot, rot + first), then pool[0, len - first)
    Kokkos::deep_copy(Kokkos::subview(g, Range(off, off + first)), Kokkos::subview(pool, Range(rot, rot + first)));
    if (len > first)
      Kokkos::deep_copy(Kokkos::subview(g, Range(off + first, off + len)), Kokkos::subview(pool, Range(0, len - first)));
  }
}

Clock::duration secs(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

}  // namespace

std::size_t ModelDescription::parameters() const {
  std::size_t n = 0;
  for (const auto& t : tensors) n += t.size;
  return n;
}

ModelDescription load_model_description(const std::string& path) {
  json j;
  try {
    j = json::parse(read_capped(path));
  } catch (const json::exception& e) {
    bad(path, std::string("not JSON: ") + e.what());
  }
  ModelDescription d;
  if (string_field(path, j, "format", "") != "qsgd-model-description") bad(path, "'format' is not qsgd-model-description");
  d.version = static_cast<int>(count_field(path, j, "version", "", 1, 1000));
  if (d.version != model_description_version)
    bad(path, "version " + std::to_string(d.version) + ", this build reads version " +
                  std::to_string(model_description_version));
  d.model = string_field(path, j, "model", "");
  d.batch = count_field(path, j, "batch", "", 1, std::size_t{1} << 24);
  d.train_samples = count_field(path, j, "train_samples", "", 1, std::size_t{1} << 40);
  const json& times = field(path, j, "times", "");
  d.times_source = string_field(path, times, "source", "times: ");
  if (d.times_source != "measured" && d.times_source != "flops") bad(path, "times: 'source' is not measured or flops");
  d.device = string_field(path, times, "device", "times: ");
  if (d.device != "cpu" && d.device != "cuda") bad(path, "times: 'device' is not cpu or cuda");
  d.device_name = string_field(path, times, "device_name", "times: ");
  if (d.times_source == "flops") {
    const json& r = field(path, times, "flops_rate", "times: ");
    if (!r.is_number() || !std::isfinite(r.get<double>()) || !(r.get<double>() > 0))
      bad(path, "times: 'flops_rate' must be a positive number of FLOP/s where the source is flops");
    d.flops_rate = r.get<double>();
  }
  d.forward_s = time_field(path, times, "forward_s", "times: ");
  d.backward_s = time_field(path, times, "backward_s", "times: ");
  d.optimizer_s = time_field(path, times, "optimizer_s", "times: ");
  if (times.contains("data_s")) d.data_s = time_field(path, times, "data_s", "times: ");
  read_spreads(path, times, "spread", {&d.forward_spread, &d.backward_spread, &d.optimizer_spread});
  read_spreads(path, times, "rank_spread",
               {&d.forward_rank_spread, &d.backward_rank_spread, &d.optimizer_rank_spread});
  for (const auto& [phase, common, own] :
       {std::tuple{"forward", &d.forward_spread, &d.forward_rank_spread},
        std::tuple{"backward", &d.backward_spread, &d.backward_rank_spread},
        std::tuple{"optimizer", &d.optimizer_spread, &d.optimizer_rank_spread}})
    if (!own->empty() && common->empty())
      bad(path, std::string("times.rank_spread: '") + phase + "' needs times.spread's '" + phase +
                    "' (the factor the ranks share)");
  d.gradients_source = string_field(path, field(path, j, "gradients", ""), "source", "gradients: ");
  const json& ts = field(path, j, "tensors", "");
  if (!ts.is_array() || ts.empty() || ts.size() > max_tensors) bad(path, "'tensors' is not an array of 1 to 2^20 tensors");
  double prev = 0;
  std::size_t total = 0;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    d.tensors.push_back(parse_tensor(path, ts[i], i, d.backward_s, prev));
    prev = d.tensors.back().ready_s;
    total += d.tensors.back().size;
    if (total > max_parameters) bad(path, "more than 2^36 parameters");
  }
  if (j.contains("provenance")) {
    const json& p = j.at("provenance");
    if (!p.is_object()) bad(path, "'provenance' is not an object");
    for (auto it = p.begin(); it != p.end(); ++it) {
      if (!it.value().is_string()) bad(path, "provenance: '" + it.key() + "' is not a string");
      d.provenance.emplace_back(it.key(), it.value().get<std::string>());
    }
  }
  return d;
}

void save_model_description(const ModelDescription& d, const std::string& path) {
  json j;
  j["format"] = "qsgd-model-description";
  j["version"] = d.version;
  j["model"] = d.model;
  j["batch"] = d.batch;
  j["train_samples"] = d.train_samples;
  json times = {{"source", d.times_source},   {"device", d.device},         {"device_name", d.device_name},
                {"forward_s", d.forward_s},   {"backward_s", d.backward_s}, {"optimizer_s", d.optimizer_s},
                {"data_s", d.data_s}};
  if (d.times_source == "flops") times["flops_rate"] = d.flops_rate;
  write_spreads(times, "spread", {&d.forward_spread, &d.backward_spread, &d.optimizer_spread});
  write_spreads(times, "rank_spread", {&d.forward_rank_spread, &d.backward_rank_spread, &d.optimizer_rank_spread});
  j["times"] = times;
  j["gradients"] = {{"source", d.gradients_source}};
  json ts = json::array();
  for (const auto& t : d.tensors) {
    json x = {{"name", t.name}, {"shape", t.shape}, {"ready_s", t.ready_s}, {"grad_std", t.grad_std}};
    if (!t.abs_quantiles.empty()) x["abs_quantiles"] = t.abs_quantiles;
    ts.push_back(x);
  }
  j["tensors"] = ts;
  json p = json::object();
  for (const auto& [k, v] : d.provenance) p[k] = v;
  j["provenance"] = p;
  const std::string tmp = support::temporary_name(path);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << j.dump(1) << '\n';
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      throw DataError("model description " + path + ": cannot write " + tmp);
    }
  }
  try {
    support::durable_rename(tmp, path);
  } catch (const std::exception& e) {
    std::remove(tmp.c_str());
    throw DataError(std::string("model description ") + path + ": " + e.what());
  }
}

const char* to_string(ReplayCompute c) { return c == ReplayCompute::spin ? "spin" : "sleep"; }

ReplayCompute default_compute(const ModelDescription& d) {
  return d.device == "cuda" ? ReplayCompute::sleep : ReplayCompute::spin;
}

ReplayModel::ReplayModel(ModelDescription d, ReplayCompute compute, std::uint64_t seed, std::uint64_t stream)
    : d_(std::move(d)), compute_(compute), seed_(seed), stream_(stream) {
  // Declared in forward order, so that tensors() lists them as described (backward order).
  for (auto it = d_.tensors.rbegin(); it != d_.tensors.rend(); ++it) store_.declare(it->name, it->shape, 0.0);
  store_.finalize();  // parameters stay zero: replay runs no model and no optimizer
  for (std::size_t t = 0; t < d_.tensors.size(); ++t) {
    const DescribedTensor& dt = d_.tensors[t];
    const std::size_t m = std::min(dt.size, max_pool);
    Kokkos::View<float*, MemSpace> pool(Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::replay::pool"), m);
    auto h = Kokkos::create_mirror_view(pool);
    std::mt19937_64 g(seed * 0x9E3779B97F4A7C15ull + 0x5bd1e995u + t);
    for (std::size_t i = 0; i < m; ++i) {
      const double u = detail::uniform01(g);
      const double sign = (g() & 1) ? 1.0 : -1.0;
      h(i) = static_cast<float>(sign * dt.grad_std * abs_value(dt, u, g));
    }
    Kokkos::deep_copy(pool, h);
    pools_.push_back(pool);
  }
}

std::string ReplayModel::name() const { return "replay " + d_.model; }

// One draw from a phase's (0 forward, 1 backward, 2 optimizer) spread for
// this step: by this rank's stream, or (common) by the step alone, the same
// on every rank.
double ReplayModel::draw(const std::vector<double>& spread, int phase, bool common) const {
  if (spread.empty()) return 1.0;
  const std::uint64_t stream = common ? 0x51ED270B27E6C3D5ull : (stream_ + 1) * 0xC2B2AE3D27D4EB4Full;
  std::mt19937_64 g(seed_ * 0x9E3779B97F4A7C15ull ^ stream ^
                    (steps_ * 3 + static_cast<std::uint64_t>(phase) + 1) * 0x165667B19E3779F9ull);
  return quantile_at(spread, detail::uniform01(g));
}

double ReplayModel::phase_factor(int phase) const {
  const std::vector<double>* spread[] = {&d_.forward_spread, &d_.backward_spread, &d_.optimizer_spread};
  const std::vector<double>* own[] = {&d_.forward_rank_spread, &d_.backward_rank_spread, &d_.optimizer_rank_spread};
  if (phase < 0 || phase > 2) throw std::invalid_argument("ReplayModel::phase_factor: phase is 0, 1 or 2");
  if (own[phase]->empty()) return draw(*spread[phase], phase, false);
  return draw(*spread[phase], phase, true) * draw(*own[phase], phase, false);
}

void ReplayModel::load() { emulate_for(ReplayCompute::spin, secs(d_.data_s)); }

void ReplayModel::forward(const Batch&) {
  emulate_for(compute_, secs(d_.forward_s * phase_factor(0)));
  stats_ = LossStats{};  // no loss: replay measures no accuracy
}

void ReplayModel::fill(std::size_t t) {
  fill_from_pool(store_.grad_view(t), pools_[t], static_cast<std::size_t>((steps_ * 7919u) % pools_[t].extent(0)));
}

// Gradient t is written, then its hook called at its described time from
// the start of backward; with spin, plus the time the hooks before it took
// (on a CPU, exchange work in a hook delays the rest of backward), with
// sleep not (a GPU computes on while the host runs the hooks).
void ReplayModel::backward() {
  const double f = phase_factor(1);  // every gradient's time scales alike
  const auto t0 = Clock::now();
  Clock::duration hooks{0};
  for (std::size_t t = 0; t < d_.tensors.size(); ++t) {
    const auto f0 = Clock::now();
    fill(t);
    Kokkos::fence();
    fill_s_ += std::chrono::duration<double>(Clock::now() - f0).count();
    emulate_until(compute_,
                  t0 + secs(f * d_.tensors[t].ready_s) + (compute_ == ReplayCompute::spin ? hooks : Clock::duration{0}));
    const auto h0 = Clock::now();
    store_.grads_ready({d_.tensors.size() - 1 - t});  // declaration handle of tensor t
    hooks += Clock::now() - h0;
  }
  emulate_until(compute_, t0 + secs(f * d_.backward_s) + (compute_ == ReplayCompute::spin ? hooks : Clock::duration{0}));
  ++steps_;
}

void ReplayModel::optimizer_step() {
  emulate_for(compute_, secs(d_.optimizer_s * phase_factor(2)));
}

}  // namespace qsgd::models
