#pragma once
// Host-side datasets. A dataset is a list of samples addressed by index;
// the sampler (sampler.hpp) picks indices, the loader (batch_loader.hpp)
// copies the chosen samples into a device Batch.

#include <cstddef>
#include <string>
#include <vector>

namespace qsgd::models {

// Fixed-size feature vectors with a class label each (images, the teacher
// dataset). Row-major: sample i is x[i*features .. (i+1)*features).
struct LabeledDataset {
  std::string name;
  std::size_t features = 0;
  std::size_t classes = 0;
  std::vector<float> x;
  std::vector<int> y;
  std::size_t size() const { return y.size(); }
};

// A token stream cut into non-overlapping windows: sample i is
// tokens[i*T .. i*T + T) as input and tokens[i*T + 1 .. i*T + T] as targets,
// so size() = (tokens.size() - 1) / T and the last partial window is dropped.
struct TokenDataset {
  std::string name;
  std::size_t vocab = 0;
  std::size_t seq_len = 0;
  std::vector<int> tokens;
  std::size_t size() const { return tokens.size() > seq_len && seq_len ? (tokens.size() - 1) / seq_len : 0; }
};

}  // namespace qsgd::models
