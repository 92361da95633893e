// The parameter server's push checks (algorithms/src/push.hpp): a push's
// size, its header, and a message that the channel refuses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../algorithms/src/push.hpp"
#include "qsgd/algorithms/channel.hpp"

namespace {

using qsgd::algorithms::Channel;
using qsgd::algorithms::Vec;
using qsgd::algorithms::WireConfig;
namespace pd = qsgd::algorithms::detail;

TEST(Push, SizeOutsideTheHeaderAndTheChannelIsRefused) {
  EXPECT_NE(pd::push_size_fault(2, 10).find("size 2 words outside [3, 13]"), std::string::npos);
  EXPECT_EQ(pd::push_size_fault(3, 10), "");
  EXPECT_EQ(pd::push_size_fault(13, 10), "");
  EXPECT_NE(pd::push_size_fault(14, 10), "");
}

TEST(Push, HeaderFromTheFutureOrLongerThanThePushIsCorrupt) {
  const std::vector<std::uint64_t> ok = {4, 9, 16, 0, 0};
  const pd::PushHeader h = pd::parse_push(ok.data(), ok.size(), 4);
  EXPECT_EQ(h.version, 4u);
  EXPECT_EQ(h.step, 9u);
  EXPECT_EQ(h.bytes, 16u);
  auto refuses = [](std::vector<std::uint64_t> w, std::uint64_t v, const std::string& what) {
    try {
      pd::parse_push(w.data(), w.size(), v);
      ADD_FAILURE() << "accepted; expected " << what;
    } catch (const qsgd::Error& e) {
      EXPECT_EQ(e.code(), qsgd::Errc::corrupt_message);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refuses({5, 9, 16, 0, 0}, 4, "version 5 from the future (server at 4)");
  refuses({4, 9, 17, 0, 0}, 4, "message bytes 17 exceed the push's 16");
  refuses({0, 0, ~std::uint64_t{0}, 0}, 0, "exceed the push");
}

TEST(Push, AWorkersMessageRoundTripsAndAFlippedBitIsRefused) {
  WireConfig w;
  w.s = 4;
  Channel worker(w, 300), server(w, 300);
  Vec g(300);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = 0.01 * static_cast<double>(i % 17) - 0.08;
  const std::size_t bytes = worker.encode(g, qsgd::RngKey{1, 2, 3, 0});
  const std::size_t words = (bytes + 7) / 8;
  std::vector<std::uint64_t> push = {0, 2, bytes};
  push.insert(push.end(), worker.buffer(), worker.buffer() + words);
  ASSERT_EQ(pd::push_size_fault(push.size(), server.buffer_words()), "");
  const pd::PushHeader h = pd::parse_push(push.data(), push.size(), 0);
  std::copy(push.begin() + pd::push_header_words, push.end(), server.buffer());
  Vec a(300, 0.0), b(300, 0.0);
  server.accumulate(h.bytes, 1.0, a);
  worker.accumulate(bytes, 1.0, b);
  EXPECT_EQ(a, b);
  push[pd::push_header_words + words / 2] ^= 1u << 5;
  std::copy(push.begin() + pd::push_header_words, push.end(), server.buffer());
  EXPECT_THROW(server.accumulate(h.bytes, 1.0, a), qsgd::Error);
}

}  // namespace
