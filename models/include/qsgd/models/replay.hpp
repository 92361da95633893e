#pragma once
// Replay of a described model: the gradient schedule of a real model (each
// tensor's size, the moment backward produces its gradient, forward and
// optimizer time) emulated without its arithmetic, so that the trainer's
// Bucketer, exchanges, codecs, traces and summaries run on it unchanged.
// docs/replay.md defines the description format and what replay measures.
//
//   ModelDescription d = load_model_description("resnet50.json");
//   ReplayModel m(d, default_compute(d), seed);
//   m.load();           // the described data-loading time (the trainer's data/load)
//   m.forward(batch);   // the described forward time (batch ignored)
//   m.backward();       // each tensor's gradient written and its hook called at its described time
//   m.optimizer_step(); // the described optimizer time
//
// Compute is emulated by spinning (the core is busy, as CPU compute keeps
// it) or sleeping (the core is free, as it is while a GPU computes). Each
// gradient is written (its values copied from a pool drawn from the
// tensor's distribution) and its hook called at its described time from the
// start of backward; with spin, plus the time the hooks before it took, so
// that exchange work in a hook delays the rest of backward as it does on a
// CPU; with sleep not, as a GPU computes on while the host runs the hooks.

#include <cstdint>
#include <string>
#include <vector>

#include "qsgd/models/model.hpp"

namespace qsgd::models {

constexpr int model_description_version = 1;

struct DescribedTensor {
  std::string name;
  std::vector<std::size_t> shape;
  std::size_t size = 0;     // product of shape
  double ready_s = 0;       // from the start of backward to this gradient being ready
  double grad_std = 0;      // the gradient's standard deviation (one rank's mini-batch gradient)
  // |g| / grad_std at probabilities (k + 0.5) / Q, k = 0..Q-1 (nondecreasing);
  // empty: |g| / grad_std of a normal distribution.
  std::vector<double> abs_quantiles;
};

struct ModelDescription {
  int version = model_description_version;
  std::string model;              // "resnet50", "mlp 784-4096-4096-10", ...
  std::size_t batch = 0;          // per rank
  std::size_t train_samples = 0;  // an epoch's samples (all ranks)
  // Where the times come from: source "measured" (timed steps on `device`)
  // or "flops" (each layer's FLOPs at flops_rate FLOP/s); device "cpu" or
  // "cuda"; device_name as reported there.
  std::string times_source, device, device_name;
  double flops_rate = 0;  // FLOP/s where times_source is "flops"
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  double data_s = 0;  // host time per step to load a batch (0: none described)
  // Step-to-step variation (optional, empty: none): each phase's time in a
  // step over its median, at probabilities (k + 0.5) / Q (nondecreasing).
  // Without a rank spread, replay draws each step's factor per rank, so
  // ranks reach the exchanges apart as real ones do.
  std::vector<double> forward_spread, backward_spread, optimizer_spread;
  // Each rank's own variation about the step's common factor (optional,
  // recorded from all ranks of a run): where a phase has one, its spread is
  // the factor the ranks share in a step (one draw for all ranks) and this is
  // each rank's factor on top of it (drawn per rank), so that ranks that are
  // slow together (sharing cores, a common input) replay so.
  std::vector<double> forward_rank_spread, backward_rank_spread, optimizer_rank_spread;
  std::string gradients_source;        // "recorded" (from real gradients) or "normal"
  std::vector<DescribedTensor> tensors;  // backward order
  std::vector<std::pair<std::string, std::string>> provenance;  // tool, versions, command

  std::size_t parameters() const;
};

// Reads and checks a description (JSON, docs/replay.md). The file is read
// whole up to 64 MiB; at most 2^20 tensors and 2^36 parameters; every time
// finite and non-negative, gradients ready in backward order by the end of
// backward. Throws DataError naming the file and the field.
ModelDescription load_model_description(const std::string& path);
// Writes d as JSON to path (through a temporary file and a rename).
void save_model_description(const ModelDescription& d, const std::string& path);

enum class ReplayCompute { spin, sleep };
const char* to_string(ReplayCompute c);
// sleep where the described compute is a GPU's (device "cuda"), else spin.
ReplayCompute default_compute(const ModelDescription& d);

class ReplayModel final : public Model {
 public:
  // stream: this rank's draws of the step-to-step variation (its rank).
  ReplayModel(ModelDescription d, ReplayCompute compute, std::uint64_t seed, std::uint64_t stream = 0);
  std::string name() const override;
  void load();                                // the described data-loading time, spinning (host work)
  void forward(const Batch& batch) override;  // the batch is not read
  void backward() override;
  // The described optimizer time (replay runs no optimizer).
  void optimizer_step();
  const ModelDescription& description() const { return d_; }
  // Seconds spent writing gradients (a host copy of 4 bytes per parameter
  // where the build's memory is the host's), over backward() calls so far.
  double fill_seconds() const { return fill_s_; }
  std::uint64_t steps() const { return steps_; }
  ReplayCompute compute() const { return compute_; }
  // The factor of a phase's described time (0 forward, 1 backward, 2
  // optimizer) in the step now being replayed: the step's common draw times
  // this rank's own where the phase has a rank spread, else this rank's draw
  // from its spread; 1 without either.
  double phase_factor(int phase) const;

 private:
  void fill(std::size_t t);
  ModelDescription d_;
  ReplayCompute compute_;
  std::vector<Kokkos::View<float*, MemSpace>> pools_;  // per tensor: values drawn from its distribution
  double draw(const std::vector<double>& spread, int phase, bool common) const;
  std::uint64_t seed_, stream_;
  std::uint64_t steps_ = 0;
  double fill_s_ = 0;
};

}  // namespace qsgd::models
