// The command-line helpers every program shares (benchmarks/common/cli.hpp).
#include <gtest/gtest.h>

#include <string>

#include "cli.hpp"

namespace {

using qsgd::bench::parse_bytes;
using qsgd::bench::parse_count;
using qsgd::bench::parse_real;
using qsgd::bench::split_list;
using qsgd::bench::UsageError;

// The message of the UsageError that f throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Cli, CountsAreDecimalDigitsInRange) {
  EXPECT_EQ(parse_count("--n", "0", 0, 10), 0u);
  EXPECT_EQ(parse_count("--n", "10", 0, 10), 10u);
  EXPECT_EQ(parse_count("--seed", "18446744073709551615", 0, ~0ull), ~0ull);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1x", "0x10", "1e3", "11", "99999999999999999999999"})
    EXPECT_NE(error_of([&] { parse_count("--n", bad, 0, 10); }).find("--n needs an integer in 0..10"),
              std::string::npos)
        << "'" << bad << "'";
  EXPECT_NE(error_of([] { parse_count("--iters", "0", 1, 5); }).find("got '0'"), std::string::npos);
}

TEST(Cli, SizesTakeBinarySuffixes) {
  EXPECT_EQ(parse_bytes("-b", "4096", 4, 1ull << 40), 4096u);
  EXPECT_EQ(parse_bytes("-b", "16K", 4, 1ull << 40), 16384u);
  EXPECT_EQ(parse_bytes("-b", "80M", 4, 1ull << 40), 80ull << 20);
  EXPECT_EQ(parse_bytes("-b", "2g", 4, 1ull << 40), 2ull << 30);
  for (const char* bad : {"", "M", "1.5M", "-4M", "4T", "4MB", "3", "2048G"})
    EXPECT_NE(error_of([&] { parse_bytes("-b", bad, 4, 1ull << 40); }).find("-b needs a size in bytes"),
              std::string::npos)
        << "'" << bad << "'";
}

TEST(Cli, RealsAreWholeFiniteNumbersInRange) {
  EXPECT_EQ(parse_real("--lr", "0.01", 0, 1), 0.01);
  EXPECT_EQ(parse_real("--lr", "1e-3", 0, 1), 1e-3);
  for (const char* bad : {"", "abc", "0.1x", " 0.1", "\t0.1", "\n1", "nan", "inf", "2", "-0.5"})
    EXPECT_NE(error_of([&] { parse_real("--lr", bad, 0, 1); }).find("--lr needs a finite number from"), std::string::npos)
        << "'" << bad << "'";
}

TEST(Cli, UnboundedValuesSayWhatTheyNeed) {
  EXPECT_EQ(parse_count("--seed", "7"), 7u);
  EXPECT_NE(error_of([] { parse_count("--batch", " -1"); }).find("--batch needs a non-negative integer, got ' -1'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_count("--k", "0", 2); }).find("--k needs an integer >= 2"), std::string::npos);
  EXPECT_EQ(parse_real("--x", "-1e300"), -1e300);
  EXPECT_NE(error_of([] { parse_real("--t", "-1", 0.0); }).find("--t needs a finite number >= 0, got '-1'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_real("--lr", "2", 0, 1); }).find("--lr needs a finite number from 0 to 1, got '2'"),
            std::string::npos);
  for (const char* bad : {"inf", "-inf", "nan", "1e999", "-1e999"})
    EXPECT_NE(error_of([&] { parse_real("--x", bad); }).find("--x needs a finite number, got"), std::string::npos)
        << "'" << bad << "'";
}

TEST(Cli, CountListsRefuseEmptyItemsAndShortLists) {
  using qsgd::bench::parse_count_list;
  EXPECT_EQ(parse_count_list("-w", "784,4096,10", 2, 1, 1u << 24), (std::vector<std::uint64_t>{784, 4096, 10}));
  EXPECT_EQ(parse_count_list("-w", "5", 1), (std::vector<std::uint64_t>{5}));
  for (const char* bad : {"784,,10", "784,10,", ",784", "", "784,0", "784,x"})
    EXPECT_NE(error_of([&] { parse_count_list("-w", bad, 2, 1, 1u << 24); }).find("-w needs an integer in 1..16777216"),
              std::string::npos)
        << "'" << bad << "'";
  EXPECT_NE(error_of([] { parse_count_list("-w", "784", 2, 1, 10000); }).find("-w needs at least 2 comma-separated"),
            std::string::npos);
}

TEST(Cli, ListsKeepTheirNonEmptyItemsInOrder) {
  EXPECT_EQ(split_list("a,b,,c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(split_list("").empty());
  EXPECT_TRUE(split_list(",,").empty());
}

}  // namespace
