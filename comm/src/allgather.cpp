// Compressed allgather (spec section 4).
//
// Algorithm: each rank encodes Q(g_r) with key (seed, step, r, tensor) into
// one message; the 4-word metadata (size, n, tensor, step) is allgathered,
// then the messages (MPI_Iallgatherv). Every rank zeroes out and runs
// decode_accumulate(message_r, 1/K) for r = 0, 1, ..., K-1, so every rank
// performs the same float operations on the same bytes in the same order:
// identical bits everywhere, its own message included.
// Transport ring (default): the message goes out framed (metadata words in
// front) around the ring as soon as it is encoded, inside start(); receivers
// post slots of the largest possible size and check each frame's metadata
// before decoding (detail/p2p.hpp RingAllgather). Transport library: the
// metadata are allgathered first (MPI_Iallgather), then the messages.
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
    const bool ring = this->ring() && !this->local();
    const std::size_t head = ring ? meta_words : 0;  // a ring message travels framed
    op.send.reserve(head + maxw);
    op.recv.reserve((head + maxw) * static_cast<std::uint64_t>(K));  // upper bound: no growth in steady state
    op.meta_send.resize(meta_words);
    op.meta_recv.resize(static_cast<std::size_t>(meta_words) * K);
    op.counts.resize(K);
    op.displs.resize(K);
    const std::size_t bytes = this->encode(op, op.grad, op.n, this->key(op, static_cast<std::uint32_t>(this->rank())),
                                           op.send.span(head, maxw));
    const std::uint64_t words = words_of(bytes);
    this->maybe_inject(op, 1, op.send, head, words);
    op.stats.encoded_bytes = bytes;
    op.phase = 1;
    if (ring) {
      start_ring(op, words, maxw);
      return;
    }
    this->set_meta(op, op.meta_send.data(), words);
    this->post_allgather(op, op.meta_send.data(), meta_words, op.meta_recv.data());
  }

  void start_ring(OpT& op, std::uint64_t words, std::uint64_t maxw) {
    const int K = this->ranks();
    const std::size_t slot = (meta_words + maxw) * 8;
    this->write_meta(op, op.send, 0, words);
    op.send.to_mpi(0, meta_words + words);
    op.in_off.resize(K);
    op.in_cap.assign(K, slot);
    for (int r = 0; r < K; ++r) op.in_off[r] = slot * static_cast<std::size_t>(r);
    this->start_schedule(op, op.ring_gather, [&](ScheduleTimes& t) {
      op.ring_gather.start(op.comm.get(), this->rank(), K, op.send.mpi(), (meta_words + words) * 8, op.recv.mpi(),
                           op.in_off, op.in_cap, t);
    });
    op.phase = 3;
  }

  bool next(OpT& op) override {
    const int K = this->ranks(), me = this->rank();
    const float w = this->weight();
    if (op.phase == 3) {  // ring: every framed message is in
      const std::uint64_t maxw = this->max_words(op.n);
      const std::size_t slot_words = meta_words + maxw;
      const auto& sizes = op.ring_gather.sizes();
      std::uint64_t wire = 0;
      for (int r = 0; r < K; ++r) {
        if (r == me) continue;
        this->from_mpi(op, op.recv, slot_words * r, sizes[r] / 8);
        op.counts[r] = static_cast<int>(this->check_framed(op, r, op.recv, slot_words * r, sizes[r], maxw));
        wire += sizes[r];
      }
      op.stats.wire_bytes = wire;
      this->zero(op, op.out, op.n);
      for (int r = 0; r < K; ++r) {
        const auto msg = r == me ? op.send.span(meta_words, words_of(op.stats.encoded_bytes))
                                 : op.recv.span(slot_words * r + meta_words, op.counts[r]);
        this->decode_accumulate(op, r, msg, msg.extent(0) * 8, w, op.out, op.n);
      }
      return true;
    }
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
