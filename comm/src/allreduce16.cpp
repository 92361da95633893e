// 16-bit allreduce baseline: what NCCL does with half-precision gradients.
//
// Algorithm: h_i = round16(g_i * (1/K)) (bf16 by default, fp16 when the codec
// says so; round to nearest even), MPI_Iallreduce in place on n 16-bit words
// with a user-defined commutative operator a (+) b = round16(float(a) +
// float(b)), then out_i = float(sum_i). Pre-scaling by 1/K keeps every
// partial sum within the range of the inputs (fp16 overflows above 65504).
// Each addition rounds to 16 bits, so the error grows with K (about K/2
// roundings of 2^-9 relative for bf16, 2^-12 for fp16).
// Identical bits on every rank: the operator is commutative bit for bit
// (float addition is), so the argument of allreduce.cpp applies.
// Wire bytes are honest: 2 bytes per element in the reduction itself,
// wire_bytes = 2 (K-1)/K * 2n.
// Errors: a non-finite gradient, an fp16 overflow at conversion, or a sum that
// overflowed end the job with exit code 2.

#include "detail/exchange_base.hpp"
#include "qsgd/kernels/detail/float_codec.hpp"

namespace qsgd::comm::detail {

template <bool Half>
KOKKOS_INLINE_FUNCTION std::uint16_t to16(float x) {
  if constexpr (Half)
    return qsgd::detail::float_to_half(x);
  else
    return qsgd::detail::float_to_bf16(x);
}
template <bool Half>
KOKKOS_INLINE_FUNCTION float from16(std::uint16_t h) {
  if constexpr (Half)
    return qsgd::detail::half_to_float(h);
  else
    return qsgd::detail::bf16_to_float(h);
}

template <bool Half>
void sum16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = to16<Half>(qsgd::detail::add_rn(from16<Half>(a[i]), from16<Half>(b[i])));
}

// The same operator for the ring transport.
template <bool Half>
void ring_sum16(const void* in, const void* own, void* out, std::size_t n) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  const auto* b = static_cast<const std::uint16_t*>(own);
  auto* o = static_cast<std::uint16_t*>(out);
  for (std::size_t i = 0; i < n; ++i) o[i] = to16<Half>(qsgd::detail::add_rn(from16<Half>(a[i]), from16<Half>(b[i])));
}

// h[i] = round16(g[i] * w); returns the first index whose result is not
// finite (non-finite input, or fp16 overflow), or no_index. The conversion
// pass only ORs a flag (a reduction compilers vectorize); the first bad index
// is searched for only when the flag is set.
template <bool Half>
KOKKOS_INLINE_FUNCTION unsigned bad16(float x, std::uint16_t v) {
  return (qsgd::detail::is_finite_f(x) && (v & 0x7fffu) < (Half ? 0x7c00u : 0x7f80u)) ? 0u : 1u;
}

template <bool Half, class E, class GView>
std::uint64_t pack16(const E& exec, const GView& g, std::uint16_t* h, std::uint64_t n, float w) {
  unsigned any = 0;
  Kokkos::parallel_reduce(
      "qsgd::comm::allreduce16::pack", Kokkos::RangePolicy<E>(exec, 0, n),
      KOKKOS_LAMBDA(std::uint64_t i, unsigned& flag) {
        const float x = g(i);
        const std::uint16_t v = to16<Half>(qsgd::detail::mul_rn(x, w));
        h[i] = v;
        flag |= bad16<Half>(x, v);
      },
      Kokkos::BOr<unsigned>(any));
  if (!any) return qsgd::detail::no_index;
  std::uint64_t bad = qsgd::detail::no_index;
  Kokkos::parallel_reduce(
      "qsgd::comm::allreduce16::pack_check", Kokkos::RangePolicy<E>(exec, 0, n),
      KOKKOS_LAMBDA(std::uint64_t i, std::uint64_t & first) {
        if (bad16<Half>(g(i), h[i]) && i < first) first = i;
      },
      Kokkos::Min<std::uint64_t>(bad));
  return bad;
}

template <bool Half, class E, class OView>
std::uint64_t unpack16(const E& exec, const std::uint16_t* h, const OView& out, std::uint64_t n) {
  unsigned any = 0;
  Kokkos::parallel_reduce(
      "qsgd::comm::allreduce16::unpack", Kokkos::RangePolicy<E>(exec, 0, n),
      KOKKOS_LAMBDA(std::uint64_t i, unsigned& flag) {
        const float x = from16<Half>(h[i]);
        out(i) = x;
        flag |= qsgd::detail::is_finite_f(x) ? 0u : 1u;
      },
      Kokkos::BOr<unsigned>(any));
  if (!any) return qsgd::detail::no_index;
  std::uint64_t bad = qsgd::detail::no_index;
  Kokkos::parallel_reduce(
      "qsgd::comm::allreduce16::unpack_check", Kokkos::RangePolicy<E>(exec, 0, n),
      KOKKOS_LAMBDA(std::uint64_t i, std::uint64_t & first) {
        if (!qsgd::detail::is_finite_f(from16<Half>(h[i])) && i < first) first = i;
      },
      Kokkos::Min<std::uint64_t>(bad));
  return bad;
}

namespace {

template <class E>
class Allreduce16 final : public ExchangeBase<E> {
  using B = ExchangeBase<E>;
  // Where an operation stands (op.phase): one phase, the reduction posted.
  enum Phase : int { reduced = 1 };
  using typename B::OpT;

 public:
  Allreduce16(const ExchangeConfig& cfg, const Communicator& comm, const E& exec)
      : B(cfg, comm, exec), half_(this->codec_.config().codec == CodecKind::fp16) {
    if (!comm.is_serial())
      comm.check(MPI_Op_create(half_ ? &sum16<true> : &sum16<false>, 1, &sum_), "MPI_Op_create",
                 {"sum operator", "allreduce16"});
  }
  ~Allreduce16() override {
    if (sum_ == MPI_OP_NULL) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) this->comm_.check(MPI_Op_free(&sum_), "MPI_Op_free", {"sum operator", "allreduce16"});
  }

 protected:
  const char* format() const { return half_ ? "fp16" : "bf16"; }

  std::uint16_t* buffer(OpT& op) { return reinterpret_cast<std::uint16_t*>(op.send.dev().data()); }

  bool reports_sent() const override { return false; }  // sums round to 16 bits on the way

  void begin(OpT& op) override {
    const int K = this->ranks();
    const int count = this->as_count(op.n, "allreduce16");
    op.send.set_staged(this->stage_reductions_);
    op.send.reserve(words_of(op.n * 2));
    auto t0 = Clock::now();
    const std::uint64_t bad = half_ ? pack16<true>(this->exec_, op.grad, buffer(op), op.n, this->weight())
                                    : pack16<false>(this->exec_, op.grad, buffer(op), op.n, this->weight());
    op.stats.encode_s += seconds_since(t0);
    if (bad != qsgd::detail::no_index) {
      float x = 0;
      Kokkos::deep_copy(x, Kokkos::subview(op.grad, bad));
      throw Error(qsgd::detail::is_finite_f(x) ? Errc::out_of_range : Errc::non_finite_input,
                  std::string("allreduce16: element ") + std::to_string(bad) + " = " + std::to_string(x) +
                      (qsgd::detail::is_finite_f(x) ? " overflows " : " cannot be sent as ") + format());
    }
    op.stats.encoded_bytes = op.n * 2;
    op.stats.wire_bytes = 2 * static_cast<std::uint64_t>(K - 1) * op.n * 2 / static_cast<std::uint64_t>(K);
    op.phase = reduced;
    if (this->local()) return;
    t0 = Clock::now();
    op.send.to_mpi(0, words_of(op.n * 2));
    op.stats.comm_s += seconds_since(t0);
    if (this->ring()) {
      this->start_schedule(op, op.ring, [&](ScheduleTimes& t) {
        op.ring.start(op.comm.get(), this->rank(), K, op.send.mpi(), op.send.mpi(), op.n, sizeof(std::uint16_t),
                      half_ ? &ring_sum16<true> : &ring_sum16<false>, nullptr, 1.0f, this->cfg_.segment_bytes,
                      this->cfg_.window, t,
                      this->cfg_.ring_checksums, this->ring_inject(op));
        op.stats.wire_bytes += op.ring.checksum_bytes();  // a CRC32C per segment received
      });
      return;
    }
    t0 = Clock::now();
    this->check(op,
                MPI_Iallreduce(MPI_IN_PLACE, op.send.mpi(), count, MPI_UINT16_T, sum_, op.comm.get(),
                               this->new_request(op, "library allreduce")),
                "MPI_Iallreduce", "library allreduce");
    op.stats.comm_s += seconds_since(t0);
  }

  bool next(OpT& op) override {
    if (!this->local()) this->from_mpi(op, op.send, 0, words_of(op.n * 2));
    const auto t0 = Clock::now();
    const std::uint64_t bad = half_ ? unpack16<true>(this->exec_, buffer(op), op.out, op.n)
                                    : unpack16<false>(this->exec_, buffer(op), op.out, op.n);
    op.stats.decode_s += seconds_since(t0);
    if (bad != qsgd::detail::no_index)
      throw Error(Errc::out_of_range, std::string("allreduce16: the ") + format() + " sum of element " +
                                          std::to_string(bad) + " overflowed");
    return true;
  }

 private:
  bool half_;
  MPI_Op sum_ = MPI_OP_NULL;
};

}  // namespace

template <class E>
std::unique_ptr<Exchange<E>> make_allreduce16(const ExchangeConfig& cfg, const Communicator& comm, const E& exec) {
  return std::make_unique<Allreduce16<E>>(cfg, comm, exec);
}

QSGD_COMM_INSTANTIATE_FACTORY(make_allreduce16)

}  // namespace qsgd::comm::detail
