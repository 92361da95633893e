#pragma once
// The async-push harness's input layout (fuzz_async_push.cpp), shared with
// the seed generator (seeds.cpp).
//
//   u8  mode     bit 0: build the push from a worker's channel (its encoder
//                and the push header the worker writes), then apply the
//                input's edits; else the push's words are the rest of the input
//   u8  codec    CodecKind, modulo 7
//   u8  shape    s = {0 (sqrt n), 1, 4, 16}[shape & 3], d = {0, 64}[(shape >> 2) & 1],
//                norm l2 or max (bit 3)
//   u16 n        1 + n modulo 2048
//   u8  version  the server's parameter version
//   raw:    the push's words (the rest of the input; a partial last word is dropped)
//   built:  u8 seed, u8 worker version, then edits: (u16 byte offset, u8 xor)
//           until the input ends, offsets modulo the push's size; an offset
//           of 0xFFFF drops the xor's count of words from the end

#include <cstdint>

namespace qsgd_fuzz::async_push {

constexpr std::uint8_t built = 1;
constexpr std::uint32_t levels[4] = {0, 1, 4, 16};
constexpr std::uint32_t buckets[2] = {0, 64};
constexpr std::uint16_t truncate = 0xFFFF;

}  // namespace qsgd_fuzz::async_push
