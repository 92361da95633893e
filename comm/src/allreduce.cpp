// fp32 allreduce: the uncompressed baseline (spec section 4).
//
// Algorithm: out <- grad (unless they are the same View), MPI_Iallreduce
// (MPI_IN_PLACE, MPI_SUM) on n floats, then out <- out * (1/K).
// Identical bits on every rank: MPI_Allreduce's result is one sum per element
// that every rank receives (ring, Rabenseifner: each element is reduced on
// one rank and then copied) or that every rank forms from the same operands
// with a commutative operator (recursive doubling: a+b == b+a in IEEE
// arithmetic). This is a property of Open MPI's algorithms, not of the MPI
// standard; the test suite checks it at every rank count. Unlike the other
// strategies, the order of the additions may depend on n (the algorithm is
// chosen by message size), so a fused bucket can differ from per-tensor
// exchanges in the last bit at K >= 3. For a result independent of bucketing
// use allgather or scatter_reduce with the fp32 codec (rank-order sums).
// Transport ring (default): the pipelined ring of detail/p2p.hpp instead of
// MPI_Iallreduce; its sums run in ring order (element i of block b is summed
// starting at rank b), independent of the segment size and of n's effect on
// the library's algorithm choice, so fused buckets and per-tensor exchanges
// agree bitwise whenever the block boundaries do.
// Staging: reductions run through a host buffer when the memory space is not
// host-accessible (libnbc and the ring apply operators on the host).
// wire_bytes = 2 (K-1)/K * 4n (ring reduce-scatter + allgather).

#include "detail/exchange_base.hpp"

namespace qsgd::comm::detail {

// x[i] <- x[i] * w, one rounding. (A free function: CUDA lambdas may not sit
// in non-public member functions.)
template <class E, class View>
void scale(const E& exec, const View& x, std::uint64_t n, float w) {
  Kokkos::parallel_for(
      "qsgd::comm::allreduce::scale", Kokkos::RangePolicy<E>(exec, 0, n),
      KOKKOS_LAMBDA(std::uint64_t i) { x(i) = qsgd::detail::mul_rn(x(i), w); });
}

inline void ring_sum_f32(const void* in, void* inout, std::size_t n) {
  const float* __restrict a = static_cast<const float*>(in);
  float* __restrict b = static_cast<float*>(inout);
  for (std::size_t i = 0; i < n; ++i) b[i] = a[i] + b[i];
}

namespace {

template <class E>
class Allreduce final : public ExchangeBase<E> {
  using B = ExchangeBase<E>;
  using typename B::OpT;

 public:
  using B::B;

 protected:
  void begin(OpT& op) override {
    const int K = this->ranks();
    const int count = this->as_count(op.n, "allreduce");
    const auto out = Kokkos::subview(op.out, Kokkos::make_pair<std::uint64_t>(0, op.n));
    if (op.out.data() != op.grad.data()) {
      const auto t0 = Clock::now();
      Kokkos::deep_copy(this->exec_, out, Kokkos::subview(op.grad, Kokkos::make_pair<std::uint64_t>(0, op.n)));
      this->exec_.fence();
      op.stats.encode_s += seconds_since(t0);
    }
    op.stats.encoded_bytes = op.n * 4;
    op.stats.wire_bytes = 2 * static_cast<std::uint64_t>(K - 1) * op.n * 4 / static_cast<std::uint64_t>(K);
    op.phase = 1;
    if (this->local()) return;
    const auto t0 = Clock::now();
    float* ptr = op.out.data();
    if (this->stage_reductions_) {
      op.send.set_staged(true);
      op.send.reserve(words_of(op.n * 4));
      ptr = reinterpret_cast<float*>(op.send.mpi());
      Kokkos::deep_copy(Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ptr, op.n), out);
    }
    op.stats.comm_s += seconds_since(t0);
    if (this->ring()) {
      this->start_schedule(op, op.ring, [&](ScheduleTimes& t) {
        op.ring.start(op.comm.get(), this->rank(), K, ptr, op.n, sizeof(float), &ring_sum_f32,
                      this->cfg_.segment_bytes, this->cfg_.window, t);
      });
      return;
    }
    const auto t1 = Clock::now();
    MPI_Iallreduce(MPI_IN_PLACE, ptr, count, MPI_FLOAT, MPI_SUM, op.comm.get(), this->new_request(op));
    op.stats.comm_s += seconds_since(t1);
  }

  bool next(OpT& op) override {
    const auto out = Kokkos::subview(op.out, Kokkos::make_pair<std::uint64_t>(0, op.n));
    if (this->stage_reductions_ && !this->local()) {
      const auto t0 = Clock::now();
      Kokkos::deep_copy(out, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                 reinterpret_cast<const float*>(op.send.mpi()), op.n));
      op.stats.comm_s += seconds_since(t0);
    }
    if (this->ranks() > 1) {
      const auto t0 = Clock::now();
      scale(this->exec_, op.out, op.n, this->weight());
      this->exec_.fence();
      op.stats.decode_s += seconds_since(t0);
    }
    return true;
  }
};

}  // namespace

template <class E>
std::unique_ptr<Exchange<E>> make_allreduce(const ExchangeConfig& cfg, const Communicator& comm, const E& exec) {
  return std::make_unique<Allreduce<E>>(cfg, comm, exec);
}

QSGD_COMM_INSTANTIATE_FACTORY(make_allreduce)

}  // namespace qsgd::comm::detail
