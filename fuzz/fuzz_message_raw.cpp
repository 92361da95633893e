// Raw-bytes message harness: the whole input is one message, given to every
// decoder entry point as a receiver would (message_check.hpp has the
// contract). Mutations almost never keep the CRC32C valid, so this harness
// exercises the header validation and the checksum itself; the
// structure-aware harness reaches the decoders behind them.

#include <cstdint>
#include <cstring>
#include <vector>

#include "message_check.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  qsgd_fuzz::init_kokkos();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static qsgd_fuzz::MessageChecker checker;
  // Exactly ceil(size / 8) words, so that a read past the message's end is
  // past the buffer's end.
  std::vector<std::uint64_t> words((size + 7) / 8, 0);
  if (size > 0) std::memcpy(words.data(), data, size);
  qsgd::Expect expect;
  expect.max_n = qsgd_fuzz::receiver_max_n;
  checker.check(words, size, expect, false);
  return 0;
}
