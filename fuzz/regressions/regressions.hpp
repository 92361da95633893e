#pragma once
// Inputs that once broke a harness's contract, written by the seed generator
// (qsgd-fuzz-seeds) into <build>/fuzz/regressions/<harness>/<name> and
// replayed by ctest (label fuzz; fuzz/CMakeLists.txt lists each with what it
// must do). Each one is built here from its meaning, not stored as bytes.

#include <cstdint>
#include <vector>

namespace qsgd_fuzz {

struct Regression {
  const char* harness;  // e.g. "train-options"
  const char* name;     // file name, and the ctest name after fuzz.regression.
  std::vector<std::uint8_t> (*make)();
};

const std::vector<Regression>& regressions();

}  // namespace qsgd_fuzz
