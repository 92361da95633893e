// benchmarks/common/stats.hpp: the definitions every benchmark reports.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "stats.hpp"

using qsgd::bench::median_of;
using qsgd::bench::minimum_of;
using qsgd::bench::percentile;

TEST(Stats, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(median_of({5, 1, 3}), 3);
  EXPECT_EQ(median_of({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median_of({7}), 7);
}

TEST(Stats, MinimumIsTheSmallestSample) { EXPECT_EQ(minimum_of({3, -1, 2}), -1); }

// Nearest rank: the smallest sample with at least a fraction p at or below it.
TEST(Stats, PercentileIsTheNearestRank) {
  std::vector<double> ten;
  for (int i = 10; i >= 1; --i) ten.push_back(i);  // unsorted on purpose
  EXPECT_EQ(percentile(ten, 0.99), 10);           // ceil(9.9) = 10th
  EXPECT_EQ(percentile(ten, 0.5), 5);             // ceil(5) = 5th
  EXPECT_EQ(percentile(ten, 0.0), 1);             // at least the first
  std::vector<double> two_hundred;
  for (int i = 1; i <= 200; ++i) two_hundred.push_back(i);
  EXPECT_EQ(percentile(two_hundred, 0.99), 198);  // ceil(198) = 198th: the third largest
}

TEST(Stats, NoSamplesIsAnError) {
  EXPECT_THROW(median_of({}), std::invalid_argument);
  EXPECT_THROW(minimum_of({}), std::invalid_argument);
  EXPECT_THROW(percentile({}, 0.99), std::invalid_argument);
}
