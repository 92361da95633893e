#pragma once
// The exchange-meta harness's input layout (fuzz_exchange_meta.cpp), shared
// with the seed generator (seeds.cpp).
//
//   u8  mode     bit 0: gathered (K ranks' metadata) instead of one framed
//                message; bit 1: reseal: each metadata's CRC32C recomputed
//                after the input is read (so that mutations reach the
//                operation and size checks); bit 2 (framed): build the frame
//                from the library's encoder and set_meta, then apply the
//                input's edits to it
//   u8  codec    CodecKind, modulo 7
//   u8  shape    s = {1, 4, 16, 255}[shape & 3], d = {0, 64, 512}[(shape >> 2) % 3]
//   u16 n        modulo 4097
//   u16 tensor
//   u16 step
//   framed, raw:    the frame's bytes (the rest of the input)
//   framed, built:  u8 seed, then edits: (u16 byte offset, u8 xor) until
//                   the input ends, offsets modulo the frame's size; an
//                   offset of 0xFFFF truncates the frame by the xor's bytes
//   gathered:       u8 K (1 + K % 8), u8 self (modulo K), then K x 4 words

#include <cstdint>

namespace qsgd_fuzz::exchange_meta {

constexpr std::uint8_t gathered = 1, reseal = 2, built = 4;
constexpr std::uint32_t levels[4] = {1, 4, 16, 255};
constexpr std::uint32_t buckets[3] = {0, 64, 512};
constexpr std::uint16_t truncate = 0xFFFF;

}  // namespace qsgd_fuzz::exchange_meta
