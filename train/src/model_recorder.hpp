#pragma once
// --record-model: the description of a real run's model (docs/replay.md),
// from its measured steps. Each step's forward, backward and update times
// come from the step record; each tensor's gradient-ready time is the time
// from the start of backward to its gradient hook, less the exchange work
// earlier hooks did (so it is compute alone, with or without overlap). One
// step's gradients (rank 0's own, before the exchange) give each tensor's
// standard deviation and the quantiles of |g| / std. Times are medians over
// the steps after the first two (warm-up) and the statistics step, rank 0's;
// the step-to-step spreads come from all ranks where describe() gets them.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "qsgd/models/model.hpp"
#include "qsgd/models/replay.hpp"

namespace qsgd::train {

class ModelRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t quantiles = 16;
  static constexpr std::size_t warmup_steps = 2;

  ModelRecorder(const models::Model& model, std::uint64_t stats_step);
  // At the start of a step's backward.
  void begin_backward(std::uint64_t step) {
    step_ = step;
    t_backward_ = Clock::now();
    ready_.assign(ready_.size(), 0.0);
  }
  // From tensor t's gradient hook, before its exchange starts.
  void on_ready(const models::Model& model, std::size_t t, double hook_s);
  void end_step(double data_s, double forward_s, double backward_s, double update_s);
  // This rank's measured steps' forward, backward and update times, in that
  // order (3 x measured_steps() values), for rank 0's describe().
  std::vector<double> series() const;
  std::size_t measured_steps() const { return forward_.size(); }
  // The description; throws std::runtime_error when too few steps were
  // measured. ranks: every rank's series() (rank 0's first), or empty. With
  // two or more ranks of the same length, each phase's spread is the factor
  // the ranks share in a step (the median over ranks of each rank's time
  // over its own median) and its rank spread each rank's time over that.
  models::ModelDescription describe(const std::string& model_name, std::size_t batch, std::size_t train_samples,
                                    const std::map<std::string, std::string>& provenance,
                                    const std::vector<std::vector<double>>& ranks = {}) const;

 private:
  std::uint64_t stats_step_, step_ = 0;
  Clock::time_point t_backward_;
  std::vector<double> ready_;                      // this step's, per tensor
  std::vector<std::vector<double>> ready_steps_;   // per tensor, per measured step
  std::vector<double> data_, forward_, backward_, update_;
  std::vector<double> std_;                        // per tensor (the statistics step)
  std::vector<std::vector<double>> abs_q_;
  std::vector<std::string> names_;
  std::vector<std::vector<std::size_t>> shapes_;
  bool have_stats_ = false;
};

}  // namespace qsgd::train
