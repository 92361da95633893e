// Replay of a described model (qsgd/models/replay.hpp, docs/replay.md): the
// description's reader and writer, the order and lower bounds of the hooks'
// times, and gradients drawn from the described distribution. How closely
// replayed steps match real ones is measured by benchmarks/replay/validate.sh,
// not here (a timed unit test would test the machine's load).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "qsgd/models/error.hpp"
#include "qsgd/models/replay.hpp"

namespace {

using namespace qsgd::models;
using Clock = std::chrono::steady_clock;

std::string scratch(const std::string& tag) {
  return "/tmp/qsgd-replay-test-" + std::to_string(::getpid()) + "-" + tag + ".json";
}

ModelDescription three_tensors() {
  ModelDescription d;
  d.model = "test";
  d.batch = 8;
  d.train_samples = 800;
  d.times_source = "measured";
  d.device = "cpu";
  d.device_name = "test cpu";
  d.forward_s = 0.002;
  d.backward_s = 0.012;
  d.optimizer_s = 0.001;
  d.data_s = 0.0005;
  d.backward_spread = {0.9, 1.0, 1.0, 1.3};
  d.gradients_source = "normal";
  d.tensors = {{"fc2.bias", {10}, 10, 0.002, 0.1, {}},
               {"fc2.weight", {10, 300}, 3000, 0.004, 0.01, {0.1, 0.5, 1.0, 2.0}},
               {"fc1.weight", {300, 784}, 235200, 0.008, 0.001, {}}};
  d.provenance = {{"tool", "test"}};
  return d;
}

TEST(Replay, DescriptionRoundTrips) {
  const ModelDescription d = three_tensors();
  const std::string path = scratch("roundtrip");
  save_model_description(d, path);
  const ModelDescription r = load_model_description(path);
  std::remove(path.c_str());
  EXPECT_EQ(r.model, d.model);
  EXPECT_EQ(r.batch, d.batch);
  EXPECT_EQ(r.train_samples, d.train_samples);
  EXPECT_EQ(r.device, "cpu");
  EXPECT_EQ(r.forward_s, d.forward_s);
  EXPECT_EQ(r.backward_s, d.backward_s);
  EXPECT_EQ(r.optimizer_s, d.optimizer_s);
  EXPECT_EQ(r.data_s, d.data_s);
  EXPECT_EQ(r.backward_spread, d.backward_spread);
  EXPECT_TRUE(r.forward_spread.empty());
  EXPECT_TRUE(r.backward_rank_spread.empty());
  ModelDescription shared = d;  // a description recorded from all ranks
  shared.forward_spread = {0.8, 1.0, 1.4};
  shared.forward_rank_spread = {0.95, 1.0, 1.1};
  shared.backward_rank_spread = {0.9, 1.0, 1.2};
  save_model_description(shared, path);
  const ModelDescription rs = load_model_description(path);
  std::remove(path.c_str());
  EXPECT_EQ(rs.forward_rank_spread, shared.forward_rank_spread);
  EXPECT_EQ(rs.backward_rank_spread, shared.backward_rank_spread);
  EXPECT_TRUE(rs.optimizer_rank_spread.empty());
  ASSERT_EQ(r.tensors.size(), 3u);
  EXPECT_EQ(r.parameters(), 10u + 3000u + 235200u);
  EXPECT_EQ(r.tensors[1].shape, (std::vector<std::size_t>{10, 300}));
  EXPECT_EQ(r.tensors[1].abs_quantiles, d.tensors[1].abs_quantiles);
  EXPECT_EQ(r.tensors[2].ready_s, 0.008);
  EXPECT_EQ(r.provenance, d.provenance);
}

// Each broken description is refused with a DataError naming the file and the field.
TEST(Replay, BrokenDescriptionsNameTheFileAndTheField) {
  const std::string path = scratch("broken");
  const std::string good_tensor = R"({"name": "w", "shape": [4, 5], "ready_s": 0.001, "grad_std": 0.1})";
  auto doc = [&](const std::string& times, const std::string& tensors, int version = 1) {
    return std::string(R"({"format": "qsgd-model-description", "version": )") + std::to_string(version) +
           R"(, "model": "m", "batch": 4, "train_samples": 100, "times": )" + times +
           R"(, "gradients": {"source": "normal"}, "tensors": )" + tensors + "}";
  };
  const std::string times = R"({"source": "measured", "device": "cpu", "device_name": "x", "forward_s": 0.001,
    "backward_s": 0.002, "optimizer_s": 0.0005})";
  struct Case {
    std::string text, what;
  } cases[] = {
      {"{not json", "not JSON"},
      {doc(times, "[" + good_tensor + "]", 2), "version 2, this build reads version 1"},
      {doc(R"({"source": "guessed", "device": "cpu", "device_name": "x", "forward_s": 0, "backward_s": 0,
              "optimizer_s": 0})", "[" + good_tensor + "]"), "'source' is not measured or flops"},
      {doc(R"({"source": "flops", "device": "cuda", "device_name": "x", "forward_s": 0, "backward_s": 0.002,
              "optimizer_s": 0})", "[" + good_tensor + "]"), "has no 'flops_rate'"},
      {doc(R"({"source": "measured", "device": "cpu", "device_name": "x", "forward_s": -1, "backward_s": 0.002,
              "optimizer_s": 0})", "[" + good_tensor + "]"), "'forward_s' = -1 is not a time"},
      {doc(times, "[]"), "'tensors' is not an array of 1 to 2^20"},
      {doc(times, R"([{"name": "w", "shape": [4, 0], "ready_s": 0.001, "grad_std": 0.1}])"), "tensor 0 (w): 'shape'"},
      {doc(times, R"([{"name": "w", "shape": [1048576, 1048576], "ready_s": 0.001, "grad_std": 0.1}])"),
       "more than 2^36 elements"},
      {doc(times, "[" + good_tensor + R"(, {"name": "v", "shape": [3], "ready_s": 0.0005, "grad_std": 0.1}])"),
       "tensor 1 (v): ready before the tensor before it"},
      {doc(times, R"([{"name": "w", "shape": [3], "ready_s": 0.003, "grad_std": 0.1}])"),
       "ready after the end of backward"},
      {doc(times, R"([{"name": "w", "shape": [3], "ready_s": 0.001, "grad_std": 0.1, "abs_quantiles": [1, 0.5]}])"),
       "'abs_quantiles' must be finite, nondecreasing"},
      {doc(times, R"([{"name": "w", "shape": [3], "ready_s": 0.001}])"), "tensor 0 (w): has no 'grad_std'"},
      {doc(R"({"source": "measured", "device": "cpu", "device_name": "x", "forward_s": 0.001, "backward_s": 0.002,
              "optimizer_s": 0, "spread": {"backward": [1.2, 0.8]}})", "[" + good_tensor + "]"),
       "times.spread: 'backward' must be finite, nondecreasing"},
      {doc(R"({"source": "measured", "device": "cpu", "device_name": "x", "forward_s": 0.001, "backward_s": 0.002,
              "optimizer_s": 0, "rank_spread": {"forward": [0.9, 1.1]}})", "[" + good_tensor + "]"),
       "times.rank_spread: 'forward' needs times.spread's 'forward'"},
      {doc(R"({"source": "measured", "device": "cpu", "device_name": "x", "forward_s": 0.001, "backward_s": 0.002,
              "optimizer_s": 0, "spread": {"forward": [1, 1]}, "rank_spread": {"forward": [1, -1]}})",
           "[" + good_tensor + "]"),
       "times.rank_spread: 'forward' must be finite, nondecreasing"},
  };
  for (const Case& c : cases) {
    {
      std::ofstream f(path);
      f << c.text;
    }
    try {
      load_model_description(path);
      ADD_FAILURE() << "accepted; expected '" << c.what << "' for " << c.text;
    } catch (const DataError& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("model description " + path + ": "), std::string::npos) << w;
      EXPECT_NE(w.find(c.what), std::string::npos) << w;
    }
  }
  std::remove(path.c_str());
  EXPECT_THROW(load_model_description(path), DataError);  // missing
}

// Hooks in backward order, none before its described time; with spin, a
// slow hook delays the next gradient by its own time (CPU compute and hook
// work share the core), with sleep not beyond the described time.
TEST(Replay, HooksComeInOrderAndNotBeforeTheirTimes) {
  ModelDescription d = three_tensors();
  d.backward_spread.clear();  // the described times exactly
  for (ReplayCompute c : {ReplayCompute::spin, ReplayCompute::sleep}) {
    ReplayModel m(d, c, 1);
    ASSERT_EQ(m.tensors().size(), 3u);
    EXPECT_EQ(m.tensors()[0].name, "fc2.bias");
    EXPECT_EQ(m.tensors()[2].name, "fc1.weight");
    std::vector<std::size_t> order;
    std::vector<double> at;
    Clock::time_point t0;
    m.set_grad_ready_hook([&](std::size_t t) {
      order.push_back(t);
      at.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      if (t == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a slow exchange start
    });
    t0 = Clock::now();
    m.backward();
    const double total = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(order, (std::vector<std::size_t>{0, 1, 2})) << to_string(c);
    ASSERT_EQ(at.size(), 3u);
    EXPECT_GE(at[0], 0.002) << to_string(c);
    if (c == ReplayCompute::spin) {
      EXPECT_GE(at[1], 0.004 + 0.005) << "spin: tensor 1 after its time plus the slow hook";
      EXPECT_GE(total, 0.012 + 0.005);
    } else {
      EXPECT_GE(at[1], 0.004);
      EXPECT_GE(total, 0.012);
    }
  }
}

// A phase's spread scales each step's time: a constant factor of 3 makes
// forward and backward last at least 3x their medians (lower bounds only).
TEST(Replay, TheSpreadScalesEachStepsPhases) {
  ModelDescription d = three_tensors();
  d.forward_spread = {3.0, 3.0};
  d.backward_spread = {3.0, 3.0, 3.0};
  ReplayModel m(d, ReplayCompute::sleep, 1, 2);
  std::vector<double> at;
  const auto t0 = Clock::now();
  m.forward(Batch{});
  const double fwd = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GE(fwd, 3 * 0.002);
  m.set_grad_ready_hook([&](std::size_t) { at.push_back(std::chrono::duration<double>(Clock::now() - t0).count()); });
  const auto t1 = Clock::now();
  m.backward();
  const double bwd = std::chrono::duration<double>(Clock::now() - t1).count();
  EXPECT_GE(bwd, 3 * 0.012);
  ASSERT_EQ(at.size(), 3u);
  EXPECT_GE(at[2] - fwd, 3 * 0.008);
}

TEST(Replay, GradientsFollowTheDescribedScaleAndQuantiles) {
  ModelDescription d = three_tensors();
  d.tensors[2].grad_std = 0.01;
  d.tensors[2].abs_quantiles.clear();
  for (int k = 0; k < 16; ++k) d.tensors[2].abs_quantiles.push_back(2.0 * (k + 0.5) / 16);  // |g| / std ~ U(0, 2)
  ReplayModel m(d, ReplayCompute::sleep, 3);
  m.backward();
  auto g = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m.store().grad_view(2));
  std::vector<double> a(g.extent(0));
  double pos = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = std::fabs(g(i)) / 0.01;
    pos += g(i) > 0;
  }
  std::sort(a.begin(), a.end());
  // U(0, 2): median 1, quartiles 0.5 and 1.5 (the pool of 65,536 draws, repeated).
  EXPECT_NEAR(a[a.size() / 2], 1.0, 0.03);
  EXPECT_NEAR(a[a.size() / 4], 0.5, 0.03);
  EXPECT_NEAR(a[3 * a.size() / 4], 1.5, 0.03);
  EXPECT_LE(a.back(), 2.0 + 1e-6);
  EXPECT_NEAR(pos / static_cast<double>(a.size()), 0.5, 0.01);  // symmetric signs
  // The normal default for tensor 0 (no quantiles): its std is grad_std.
  auto g0 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m.store().grad_view(1));
  double sq = 0;
  for (std::size_t i = 0; i < g0.extent(0); ++i) sq += static_cast<double>(g0(i)) * g0(i);
  EXPECT_GT(std::sqrt(sq / static_cast<double>(g0.extent(0))), 0.0);
  // The next step writes the pool rotated: other values, drawn from the same pool.
  std::vector<float> first(g.data(), g.data() + g.extent(0));
  m.zero_grad();
  m.backward();
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m.store().grad_view(2));
  std::vector<float> second(h.data(), h.data() + h.extent(0));
  EXPECT_NE(first, second);
  std::sort(first.begin(), first.end());
  for (float v : second) ASSERT_TRUE(std::binary_search(first.begin(), first.end(), v)) << v;
}

}  // namespace

// The factors of replayed phases over 12 steps, for ranks (streams) 0..3.
std::vector<std::vector<double>> factors_by_rank(const ModelDescription& d, int phase) {
  std::vector<std::vector<double>> out;
  for (std::uint64_t rank = 0; rank < 4; ++rank) {
    ReplayModel m(d, ReplayCompute::sleep, 7, rank);
    std::vector<double> f;
    for (int step = 0; step < 12; ++step) {
      f.push_back(m.phase_factor(phase));
      m.backward();  // the next step
    }
    out.push_back(f);
  }
  return out;
}

// With a rank spread, a phase's spread is one draw per step for all ranks
// (ranks slow together) times each rank's own; without one, each rank draws
// the spread on its own.
TEST(Replay, RanksShareTheStepsFactorWhereARankSpreadIsDescribed) {
  ModelDescription d = three_tensors();
  d.backward_s = 0.0005;  // short steps
  for (auto& t : d.tensors) t.ready_s = std::min(t.ready_s, 0.0005);
  d.forward_spread = {0.5, 2.0};
  d.backward_spread = {0.5, 2.0};

  ModelDescription shared = d;  // the ranks' own factors are 1: every rank's factor is the shared one
  shared.forward_rank_spread = {1.0, 1.0};
  const auto same = factors_by_rank(shared, 0);
  for (std::size_t r = 1; r < same.size(); ++r) EXPECT_EQ(same[r], same[0]) << "rank " << r;
  EXPECT_GT(*std::max_element(same[0].begin(), same[0].end()), *std::min_element(same[0].begin(), same[0].end()))
      << "the shared factor varies from step to step";

  const auto own = factors_by_rank(d, 1);  // backward: no rank spread, each rank draws its own
  EXPECT_NE(own[0], own[1]);
  EXPECT_NE(own[0], own[2]);

  ModelDescription apart = d;  // a shared factor of 1 and a rank spread: ranks differ by their own draws
  apart.forward_spread = {1.0, 1.0};
  apart.forward_rank_spread = {0.5, 2.0};
  const auto mixed = factors_by_rank(apart, 0);
  EXPECT_NE(mixed[0], mixed[1]);
  for (const auto& f : mixed)
    for (double x : f) EXPECT_TRUE(x >= 0.5 && x <= 2.0) << x;
  EXPECT_THROW(ReplayModel(d, ReplayCompute::sleep, 7, 0).phase_factor(3), std::invalid_argument);
}
