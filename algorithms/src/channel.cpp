#include "qsgd/algorithms/channel.hpp"

#include <algorithm>
#include <cmath>

namespace qsgd::algorithms {

std::string WireConfig::label() const {
  if (!quantized()) return to_string(codec);
  return "s=" + (s == 0 ? std::string("sqrt(n)") : std::to_string(s)) + " " + to_string(codec) + " " + to_string(norm) +
         " d=" + (d == 0 ? std::string("n") : std::to_string(d));
}

WireConfig full_precision_wire() {
  WireConfig w;
  w.codec = CodecKind::fp32;
  w.norm = Norm::none;
  return w;
}

std::uint32_t sqrt_levels(std::size_t n) {
  const auto s = static_cast<std::uint32_t>(std::lround(std::sqrt(static_cast<double>(n))));
  return std::max<std::uint32_t>(1u, s);
}

struct Channel::Impl {
  using Codec = qsgd::Codec<HostExec>;
  Codec codec;
  Codec::values_view values;  // float input, then decoded output
  Codec::words_view words;
  Codec::quantized_type q;
  Expect expect;
  Impl(const CodecConfig& c, std::size_t n, std::size_t words_n)
      : codec(c),
        values(Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::algorithms::values"), n),
        words("qsgd::algorithms::message", words_n) {
    expect.n = n;
    expect.max_n = n;
  }
};

Channel::Channel(const WireConfig& cfg, std::size_t n) : cfg_(cfg), n_(n) {
  CodecConfig c;
  c.codec = cfg.codec;
  c.d = cfg.d;
  // Float codecs ignore s and the norm; they keep validate() happy.
  c.norm = cfg.quantized() ? cfg.norm : Norm::max;
  levels_ = cfg.quantized() ? (cfg.s == 0 ? sqrt_levels(n) : cfg.s) : 0;
  c.s = cfg.quantized() ? levels_ : 1;
  // Room for the configured code and for a deterministic message (s = 1, one
  // L2 bucket) in the same code.
  std::size_t bytes = max_message_bytes(c, n);
  if (cfg.quantized()) {
    CodecConfig det = c;
    det.s = 1;
    det.d = 0;
    det.norm = Norm::l2;
    bytes = std::max(bytes, max_message_bytes(det, n));
  }
  impl_ = std::make_unique<Impl>(c, n, (bytes + 7) / 8);
}

Channel::~Channel() = default;

std::uint64_t* Channel::buffer() { return impl_->words.data(); }
std::size_t Channel::buffer_words() const { return impl_->words.extent(0); }

std::size_t Channel::encode(const Vec& g, const RngKey& key) {
  auto& v = impl_->values;
  for (std::size_t i = 0; i < n_; ++i) v(i) = static_cast<float>(g[i]);
  const std::size_t bytes = impl_->codec.encode(v, n_, key, impl_->words);
  bits_ += 8 * bytes;
  ++messages_;
  return bytes;
}

std::size_t Channel::encode_deterministic(const Vec& g) {
  if (!cfg_.quantized())
    throw Error(Errc::invalid_argument, "encode_deterministic: the channel's codec is not quantized");
  auto& v = impl_->values;
  for (std::size_t i = 0; i < n_; ++i) v(i) = static_cast<float>(g[i]);
  quantize_deterministic(HostExec(), v, n_, impl_->q);
  const std::size_t bytes = impl_->codec.encode(impl_->q, impl_->words);
  bits_ += 8 * bytes;
  ++messages_;
  return bytes;
}

void Channel::accumulate(std::size_t bytes, double weight, Vec& acc) {
  auto& v = impl_->values;
  impl_->codec.decode(impl_->words, bytes, v, impl_->expect);
  for (std::size_t i = 0; i < n_; ++i) acc[i] += weight * static_cast<double>(v(i));
}

}  // namespace qsgd::algorithms
