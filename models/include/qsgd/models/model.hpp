#pragma once
// What every model offers the trainer.
//
//   model.forward(batch);      // loss() and accuracy() now describe this batch
//   model.zero_grad();         // or keep accumulating, as in PyTorch
//   model.backward();          // grads() += d(mean loss)/d(params)
//   ... exchange grads() (whole, or tensor by tensor from the hook) ...
//   sgd.step();                // on params() (see sgd.hpp)
//
// Parameters and gradients: params() and grads() are two flat float Views of
// num_parameters() elements; tensors() lists the named tensors in backward
// order with their offsets and sizes (param_store.hpp). They never move
// after construction, so views taken once stay valid for the model's life.
//
// Memory: the first forward/backward at a given batch size allocates the
// activation workspaces; later steps at that size or smaller allocate
// nothing (workspace_allocations() counts it).

#include <cstdint>
#include <string>

#include "qsgd/models/layers/softmax_cross_entropy.hpp"
#include "qsgd/models/param_store.hpp"
#include "qsgd/models/types.hpp"

namespace qsgd::models {

// A batch on the device. Feature models read x (n x features); token models
// read tokens (n x T). labels holds n class ids, or for token models n*T
// next-token ids in sample-major order (sample i, step t at i*T + t).
struct Batch {
  Kokkos::View<const float**, Kokkos::LayoutRight, MemSpace> x;
  Kokkos::View<const int**, Kokkos::LayoutRight, MemSpace> tokens;
  Kokkos::View<const int*, Kokkos::LayoutRight, MemSpace> labels;
  std::size_t size() const { return x.extent(0) > 0 ? x.extent(0) : tokens.extent(0); }
};

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  virtual std::string name() const = 0;
  virtual void forward(const Batch& batch) = 0;
  // Adds the gradient of the last forward's mean loss to grads().
  virtual void backward() = 0;

  void zero_grad() { store_.zero_grad(); }
  // Re-draws every parameter from its initial distribution (param_store.hpp).
  void init(std::uint64_t seed) { store_.init_uniform(seed); }

  const ParamStore::Flat& params() const { return store_.params(); }
  const ParamStore::Flat& grads() const { return store_.grads(); }
  const std::vector<TensorInfo>& tensors() const { return store_.tensors(); }
  std::size_t num_parameters() const { return store_.size(); }
  ParamStore& store() { return store_; }
  const ParamStore& store() const { return store_; }
  void set_grad_ready_hook(GradReadyHook hook) { store_.set_grad_ready_hook(std::move(hook)); }

  // Of the last forward: mean loss per prediction, fraction of correct
  // predictions, and their number (batch size, or batch size * T).
  double loss() const { return stats_.loss; }
  double accuracy() const { return stats_.accuracy(); }
  const LossStats& stats() const { return stats_; }

 protected:
  Model() = default;
  ParamStore store_;
  LossStats stats_;
};

}  // namespace qsgd::models
