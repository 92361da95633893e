#pragma once
// Fashion-MNIST (Xiao, Rasul, Vollgraf 2017) from Debian's
// dataset-fashion-mnist package, which installs
//   /usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
// 60,000 training and 10,000 test images, 28x28 grey, 10 classes.
//
// Features: pixel / 255, then standardized with the training set's mean
// and standard deviation (fashion_mnist_mean, fashion_mnist_stddev) unless
// standardize is false. These two constants are the one place the suite and
// its PyTorch peers take them from (qsgd-peer-inputs writes them for the
// peers).
// Checks: images 3-D (n x 28 x 28), labels 1-D with the same n, every label
// < 10; otherwise a DataError naming the file.

#include <string>

#include "qsgd/models/data/dataset.hpp"

namespace qsgd::models {

enum class Split { train, test };

inline constexpr float fashion_mnist_mean = 0.2860f;
inline constexpr float fashion_mnist_stddev = 0.3530f;

// $QSGD_FASHION_MNIST_DIR if set, else /usr/share/datasets/fashion-mnist.
std::string default_fashion_mnist_dir();

// <dir>/<stem> if it exists, else <dir>/<stem>.gz; a DataError naming both
// paths if neither exists.
std::string find_idx_file(const std::string& dir, const std::string& stem);

LabeledDataset load_fashion_mnist(const std::string& dir, Split split, bool standardize = true);

// The shape a caller expects of an image file: n images of rows x cols
// (0: any). The readers are given the byte counts it implies as their
// limit, so a file that claims more is refused at its header, and the shape
// is checked before anything is converted to floats.
struct IdxImagesShape {
  std::size_t n = 0, rows = 0, cols = 0;
};

// Builds a labelled dataset from an image file and a label file (IDX,
// gzipped or not), with the checks above, for the shape `expect` (any
// image size by default).
LabeledDataset load_idx_classification(const std::string& images_path, const std::string& labels_path,
                                       std::size_t classes, bool standardize, float mean, float stddev,
                                       const IdxImagesShape& expect = {});

}  // namespace qsgd::models
