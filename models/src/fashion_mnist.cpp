#include "qsgd/models/data/fashion_mnist.hpp"

#include <cstdlib>
#include <sys/stat.h>

#include "qsgd/models/data/idx.hpp"
#include "qsgd/models/error.hpp"

namespace qsgd::models {
namespace {

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

std::string dims_string(const std::vector<std::uint32_t>& d) {
  std::string s;
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? " x " : "") + std::to_string(d[i]);
  return s;
}

}  // namespace

std::string default_fashion_mnist_dir() {
  const char* env = std::getenv("QSGD_FASHION_MNIST_DIR");
  return env && *env ? std::string(env) : std::string("/usr/share/datasets/fashion-mnist");
}

std::string find_idx_file(const std::string& dir, const std::string& stem) {
  const std::string plain = dir + "/" + stem;
  if (exists(plain)) return plain;
  if (exists(plain + ".gz")) return plain + ".gz";
  throw DataError(plain + ": cannot open: neither it nor " + plain +
                  ".gz exists (Debian package dataset-fashion-mnist, or set QSGD_FASHION_MNIST_DIR)");
}

LabeledDataset load_idx_classification(const std::string& images_path, const std::string& labels_path,
                                       std::size_t classes, bool standardize, float mean, float stddev,
                                       const IdxImagesShape& expect) {
  const bool whole = expect.n && expect.rows && expect.cols;
  const IdxArray img = read_idx(images_path, whole ? expect.n * expect.rows * expect.cols : idx_default_max_bytes);
  if (img.dims.size() != 3) {
    throw DataError(images_path + ": wrong dimensions: " + dims_string(img.dims) + " (expected n x rows x cols)");
  }
  if ((expect.rows && img.dims[1] != expect.rows) || (expect.cols && img.dims[2] != expect.cols)) {
    throw DataError(images_path + ": wrong dimensions: images are " + std::to_string(img.dims[1]) + " x " +
                    std::to_string(img.dims[2]) + ", not " + std::to_string(expect.rows) + " x " +
                    std::to_string(expect.cols));
  }
  if (expect.n && img.dims[0] != expect.n) {
    throw DataError(images_path + ": wrong dimensions: " + std::to_string(img.dims[0]) + " images, expected " +
                    std::to_string(expect.n));
  }
  const IdxArray lab = read_idx(labels_path, expect.n ? expect.n : idx_default_max_bytes);
  if (lab.dims.size() != 1) {
    throw DataError(labels_path + ": wrong dimensions: " + dims_string(lab.dims) + " (expected n)");
  }
  if (lab.dims[0] != img.dims[0]) {
    throw DataError(labels_path + ": wrong dimensions: " + std::to_string(lab.dims[0]) + " labels for " +
                    std::to_string(img.dims[0]) + " images in " + images_path);
  }
  LabeledDataset d;
  d.name = images_path;
  d.features = std::size_t(img.dims[1]) * img.dims[2];
  d.classes = classes;
  d.y.resize(lab.dims[0]);
  for (std::size_t i = 0; i < d.y.size(); ++i) {
    if (lab.data[i] >= classes) {
      throw DataError(labels_path + ": label " + std::to_string(lab.data[i]) + " of sample " + std::to_string(i) +
                      " is not below " + std::to_string(classes));
    }
    d.y[i] = lab.data[i];
  }
  d.x.resize(img.data.size());
  const float m = standardize ? mean : 0.0f, inv = standardize ? 1.0f / stddev : 1.0f;
  for (std::size_t i = 0; i < img.data.size(); ++i) d.x[i] = (static_cast<float>(img.data[i]) / 255.0f - m) * inv;
  return d;
}

LabeledDataset load_fashion_mnist(const std::string& dir, Split split, bool standardize) {
  const std::string pre = split == Split::train ? "train" : "t10k";
  const std::string images = find_idx_file(dir, pre + "-images-idx3-ubyte");
  const std::string labels = find_idx_file(dir, pre + "-labels-idx1-ubyte");
  const std::size_t want = split == Split::train ? 60000 : 10000;
  LabeledDataset d;
  try {
    d = load_idx_classification(images, labels, 10, standardize, fashion_mnist_mean, fashion_mnist_stddev,
                                {want, 28, 28});
  } catch (const DataError& e) {
    throw DataError(std::string(e.what()) + " (Fashion-MNIST " + pre + " has " + std::to_string(want) +
                    " images of 28 x 28)");
  }
  d.name = "fashion-mnist/" + pre;
  return d;
}

}  // namespace qsgd::models
