// Compressed allgather (spec section 4).
//
// Algorithm: each rank encodes Q(g_r) with key (seed, step, r, tensor) into
// one message; the 4-word metadata (size, n, tensor, step) is allgathered,
// then the messages (MPI_Iallgatherv). Every rank zeroes out and runs
// decode_accumulate(message_r, 1/K) for r = 0, 1, ..., K-1, so every rank
// performs the same float operations on the same bytes in the same order:
// identical bits everywhere, its own message included.
// Cost per rank: one encode of n, K decodes of n; receives the other K-1
// messages: wire_bytes = sum_{r != me} bytes_r + 32 (K-1).

#include "detail/exchange_base.hpp"

namespace qsgd::comm::detail {
namespace {

template <class E>
class Allgather final : public ExchangeBase<E> {
  using B = ExchangeBase<E>;
  using typename B::OpT;

 public:
  using B::B;

 protected:
  void begin(OpT& op) override {
    const int K = this->ranks();
    const std::uint64_t maxw = this->max_words(op.n);
    op.send.reserve(maxw);
    op.recv.reserve(maxw * static_cast<std::uint64_t>(K));  // upper bound: no growth in steady state
    op.meta_send.resize(meta_words);
    op.meta_recv.resize(static_cast<std::size_t>(meta_words) * K);
    op.counts.resize(K);
    op.displs.resize(K);
    const std::size_t bytes =
        this->encode(op, op.grad, op.n, this->key(op, static_cast<std::uint32_t>(this->rank())), op.send.span(0, maxw));
    const std::uint64_t words = words_of(bytes);
    this->maybe_inject(op, 1, op.send, 0, words);
    op.stats.encoded_bytes = bytes;
    this->set_meta(op, op.meta_send.data(), words);
    this->post_allgather(op, op.meta_send.data(), meta_words, op.meta_recv.data());
    op.phase = 1;
  }

  bool next(OpT& op) override {
    const int K = this->ranks(), me = this->rank();
    if (op.phase == 1) {
      const std::uint64_t maxw = this->max_words(op.n);
      std::uint64_t total = 0, wire = 0;
      for (int r = 0; r < K; ++r) {
        const std::uint64_t* m = &op.meta_recv[static_cast<std::size_t>(r) * meta_words];
        this->check_meta(op, r, m, maxw);
        op.counts[r] = static_cast<int>(m[0]);
        op.displs[r] = this->as_count(total, "allgather");
        total += m[0];
        if (r != me) wire += m[0] * 8 + meta_words * 8;
      }
      this->as_count(total, "allgather");
      op.stats.wire_bytes = wire;
      this->post_allgatherv(op, op.send, op.counts[me], op.recv, op.counts, op.displs);
      op.phase = 2;
      return false;
    }
    const std::uint64_t total = static_cast<std::uint64_t>(op.displs[K - 1]) + op.counts[K - 1];
    this->from_mpi(op, op.recv, 0, total);
    this->zero(op, op.out, op.n);
    const float w = this->weight();
    for (int r = 0; r < K; ++r)
      this->decode_accumulate(op, r, op.recv.span(op.displs[r], op.counts[r]), std::size_t(op.counts[r]) * 8, w, op.out,
                              op.n);
    return true;
  }
};

}  // namespace

template <class E>
std::unique_ptr<Exchange<E>> make_allgather(const ExchangeConfig& cfg, const Communicator& comm, const E& exec) {
  return std::make_unique<Allgather<E>>(cfg, comm, exec);
}

QSGD_COMM_INSTANTIATE_FACTORY(make_allgather)

}  // namespace qsgd::comm::detail
