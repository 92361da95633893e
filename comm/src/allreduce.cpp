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
// agree bitwise whenever the block boundaries do. The ring reads grad in
// place and writes out directly, and each block's owner applies the x (1/K)
// before the allgather: out <- grad and the scaling pass are not needed (the
// same operations on the same values, so the same bits).
// Staging: reductions run through a host buffer when the memory space is not
// host-accessible (libnbc and the ring apply operators on the host).
// wire_bytes = 2 (K-1)/K * 4n (ring reduce-scatter + allgather).

#include "detail/exchange_base.hpp"

namespace qsgd::comm::detail {

namespace {

template <class E>
class Allreduce final : public ExchangeBase<E> {
  using B = ExchangeBase<E>;
  // Where an operation stands (op.phase).
  enum Phase : int {
    reduced = 1,  // library allreduce (or staged ring) done: scale out
    ring_done     // unstaged ring: out is complete and scaled
  };
  using typename B::OpT;

 public:
  using B::B;

 protected:
  void begin(OpT& op) override {
    const int K = this->ranks();
    const int count = this->as_count(op.n, "allreduce");
    const auto out = Kokkos::subview(op.out, Kokkos::make_pair<std::uint64_t>(0, op.n));
    op.stats.encoded_bytes = op.n * 4;
    op.stats.wire_bytes = 2 * static_cast<std::uint64_t>(K - 1) * op.n * 4 / static_cast<std::uint64_t>(K);
    if (op.sent.extent(0) != 0) {  // error feedback: fp32 sends the gradient exactly
      const auto t0 = Clock::now();
      Kokkos::deep_copy(this->exec_, Kokkos::subview(op.sent, Kokkos::make_pair<std::uint64_t>(0, op.n)),
                        Kokkos::subview(op.grad, Kokkos::make_pair<std::uint64_t>(0, op.n)));
      this->exec_.fence();
      op.stats.encode_s += seconds_since(t0);
    }
    if (this->ring() && !this->local() && !this->stage_reductions_) {
      // The ring reads the gradient where it is and writes every element of
      // out, already scaled: no copy before, no pass after.
      op.phase = ring_done;
      this->start_schedule(op, op.ring, [&](ScheduleTimes& t) {
        op.ring.start(op.comm.get(), this->rank(), K, op.grad.data(), op.out.data(), op.n, sizeof(float),
                      &ring_sum_f32, &ring_scale_f32, this->weight(), this->cfg_.segment_bytes, this->cfg_.window, t,
                      this->cfg_.ring_checksums, this->ring_inject(op));
        op.stats.wire_bytes += op.ring.checksum_bytes();  // a CRC32C per segment received
      });
      return;
    }
    if (op.out.data() != op.grad.data()) {
      const auto t0 = Clock::now();
      Kokkos::deep_copy(this->exec_, out, Kokkos::subview(op.grad, Kokkos::make_pair<std::uint64_t>(0, op.n)));
      this->exec_.fence();
      op.stats.encode_s += seconds_since(t0);
    }
    op.phase = reduced;
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
        op.ring.start(op.comm.get(), this->rank(), K, ptr, ptr, op.n, sizeof(float), &ring_sum_f32, &ring_scale_f32,
                      this->weight(), this->cfg_.segment_bytes, this->cfg_.window, t,
                      this->cfg_.ring_checksums, this->ring_inject(op));
        op.stats.wire_bytes += op.ring.checksum_bytes();  // a CRC32C per segment received
      });
      return;
    }
    const auto t1 = Clock::now();
    this->check(op,
                MPI_Iallreduce(MPI_IN_PLACE, ptr, count, MPI_FLOAT, MPI_SUM, op.comm.get(),
                               this->new_request(op, "library allreduce")),
                "MPI_Iallreduce", "library allreduce");
    op.stats.comm_s += seconds_since(t1);
  }

  bool next(OpT& op) override {
    if (op.phase == ring_done) return true;  // unstaged ring: out is complete and scaled
    const auto out = Kokkos::subview(op.out, Kokkos::make_pair<std::uint64_t>(0, op.n));
    if (this->stage_reductions_ && !this->local()) {
      const auto t0 = Clock::now();
      Kokkos::deep_copy(out, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                 reinterpret_cast<const float*>(op.send.mpi()), op.n));
      op.stats.comm_s += seconds_since(t0);
    }
    if (this->ranks() > 1 && !this->ring()) {  // the staged ring scaled on the host already
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
