// Compressed allgather (spec section 4).
//
// Algorithm: each rank encodes Q(g_r) with key (seed, step, r, tensor); every
// rank receives the other ranks' messages, zeroes out and runs
// decode_accumulate(message_r, 1/K) for r = 0, 1, ..., K-1, so every rank
// performs the same float operations on the same bytes in the same order:
// identical bits everywhere, its own message included.
// Transport ring (default): the vector is cut into pieces of segment_bytes of
// fp32 input (whole buckets; one piece when the vector is smaller), each
// piece's slice of Q(g_r) is its own message (the same levels as one message
// of the whole vector, exchange_base.hpp "slices"), framed with the metadata
// words, and sent around the ring as soon as it is encoded (inside start());
// receivers post slots of the largest size a piece can have, forward each
// piece as it arrives, check its frame, and decode slice j (all K messages,
// in rank order) as soon as piece j of every rank is in, while later pieces
// are still on the wire (detail/p2p.hpp PieceAllgather). Element i's sum is
// the same whatever the pieces, so the bits equal the library transport's.
// A rank's own term comes from the levels it quantized (accumulate_levels:
// the float operations of decode_accumulate) rather than from decoding its
// own pieces, where the codec keeps levels (not the fixed-width code, which
// quantizes while packing and stores none).
// Transport library: one message per rank; the metadata are allgathered
// first (MPI_Iallgather), then the messages (MPI_Iallgatherv).
// Cost per rank: one encode of n, K decodes of n; receives the other K-1
// messages: wire_bytes = sum_{r != me} bytes_r + 32 (K-1) per piece.

#include "detail/exchange_base.hpp"

namespace qsgd::comm::detail {
namespace {

template <class E>
class Allgather final : public ExchangeBase<E> {
  using B = ExchangeBase<E>;
  using typename B::OpT;
  // Where an operation stands (op.phase).
  enum Phase : int {
    sizes_in = 1,   // library: every message's size is in, post the allgatherv
    messages_in,    // library: every message is in, decode them
    pieces_decoded  // ring: every piece is in and decoded
  };

 public:
  using B::B;

 protected:
  void begin(OpT& op) override {
    if (this->ring() && !this->local()) {
      start_pieces(op);
      return;
    }
    const int K = this->ranks();
    const std::uint64_t maxw = this->max_words(op.n);
    op.send.reserve(maxw);
    op.recv.reserve(maxw * static_cast<std::uint64_t>(K));  // upper bound: no growth in steady state
    op.meta_send.resize(meta_words);
    op.meta_recv.resize(static_cast<std::size_t>(meta_words) * K);
    op.counts.resize(K);
    op.displs.resize(K);
    const std::size_t bytes = this->encode(op, op.grad, op.n, this->key(op, static_cast<std::uint32_t>(this->rank())),
                                           op.send.span(0, maxw));
    const std::uint64_t words = words_of(bytes);
    this->maybe_inject(op, FaultInjection::first_stage, op.send, 0, words);
    op.stats.encoded_bytes = bytes;
    op.phase = sizes_in;
    this->set_meta(op, op.meta_send.data(), words, FaultInjection::first_stage);
    this->post_allgather(op, op.meta_send.data(), meta_words, op.meta_recv.data());
  }

  // Ring transport: pieces of segment_bytes of fp32 input, whole buckets,
  // at most PieceAllgather::max_pieces of them. op.bounds: piece j is
  // [bounds[j], bounds[j + 1]).
  std::size_t cut(OpT& op) const {
    const std::uint64_t align = this->slice_align(op.n);
    const std::uint64_t max_p = PieceAllgather::max_pieces(this->ranks());
    std::uint64_t per = std::max<std::uint64_t>(1, this->cfg_.segment_bytes / sizeof(float)) / align * align;
    per = std::max(per, align);
    if ((op.n + per - 1) / per > max_p) per = ((op.n + max_p - 1) / max_p + align - 1) / align * align;
    const std::uint64_t pieces = std::max<std::uint64_t>(1, (op.n + per - 1) / per);
    op.bounds.resize(pieces + 1);
    for (std::uint64_t j = 0; j <= pieces; ++j) op.bounds[j] = std::min(op.n, j * per);
    return static_cast<std::size_t>(pieces);
  }

  void start_pieces(OpT& op) {
    const int K = this->ranks(), me = this->rank();
    const std::size_t pieces = cut(op);
    const std::uint64_t maxw = this->max_words(op.bounds[1] - op.bounds[0]);  // the first piece is the longest
    const std::size_t slot_words = meta_words + maxw;
    op.send.reserve(slot_words * pieces);
    op.recv.reserve(slot_words * pieces * static_cast<std::uint64_t>(K));
    op.out_bytes.assign(pieces, 0);
    const RngKey k = this->key(op, static_cast<std::uint32_t>(me));
    this->prepare_slices(op, k, true);  // keeps this rank's levels: it adds them without decoding its pieces
    op.phase = pieces_decoded;
    auto encode = [this, &op, slot_words, k](std::size_t j) {
      const std::uint64_t lo = op.bounds[j], len = op.bounds[j + 1] - lo;
      const std::size_t off = j * slot_words;
      const std::size_t bytes = this->encode_slice(op, lo, len, k, op.send.span(off + meta_words, this->max_words(len)));
      const std::uint64_t words = words_of(bytes);
      if (j == 0) this->maybe_inject(op, FaultInjection::first_stage, op.send, off + meta_words, words);
      this->write_meta(op, op.send, off, words, j == 0 ? FaultInjection::first_stage : 0);
      op.send.to_mpi(off, meta_words + words);
      op.stats.encoded_bytes += bytes;
      op.out_bytes[j] = (meta_words + words) * 8;
      return op.out_bytes[j];
    };
    auto decode = [this, &op, slot_words, pieces](std::size_t j) { decode_piece(op, j, pieces, slot_words); };
    this->start_schedule(op, op.piece_gather, [&](ScheduleTimes& t) {
      op.piece_gather.start(op.comm.get(), me, K, pieces, reinterpret_cast<char*>(op.send.mpi()),
                            reinterpret_cast<char*>(op.recv.mpi()), slot_words * 8, encode, decode, t);
    });
  }

  // Slice j of out from piece j of every rank, in rank order.
  void decode_piece(OpT& op, std::size_t j, std::size_t pieces, std::size_t slot_words) {
    const int K = this->ranks(), me = this->rank();
    const std::uint64_t lo = op.bounds[j], len = op.bounds[j + 1] - lo, maxw = this->max_words(len);
    const auto& sizes = op.piece_gather.sizes();
    const auto out = Kokkos::subview(op.out, Kokkos::make_pair(lo, lo + len));
    this->zero(op, out, len);
    for (int r = 0; r < K; ++r) {
      const std::size_t off = (static_cast<std::size_t>(r) * pieces + j) * slot_words;
      std::uint64_t words;
      if (r == me && op.own_levels) {  // the bits its message decodes to, from the levels it holds
        const auto t0 = Clock::now();
        accumulate_levels(this->exec_, this->slice_levels(op, lo, len), this->weight(), out);
        this->exec_.fence();
        op.stats.decode_s += seconds_since(t0);
        continue;
      }
      if (r == me) {
        words = op.out_bytes[j] / 8 - meta_words;
        this->decode_accumulate(op, r, op.send.span(j * slot_words + meta_words, words), words * 8,
                                this->weight(), out, len);
        continue;
      }
      const std::size_t bytes = sizes[static_cast<std::size_t>(r) * pieces + j];
      this->from_mpi(op, op.recv, off, bytes / 8);
      words = this->check_framed(op, r, op.recv, off, bytes, maxw);
      this->decode_accumulate(op, r, op.recv.span(off + meta_words, words), words * 8, this->weight(), out, len);
    }
  }

  bool next(OpT& op) override {
    const int K = this->ranks(), me = this->rank();
    const float w = this->weight();
    if (op.phase == pieces_decoded) {  // ring: every piece is in and decoded
      const auto& sizes = op.piece_gather.sizes();
      const std::size_t pieces = op.bounds.size() - 1;
      std::uint64_t wire = 0;
      for (std::size_t i = 0; i < sizes.size(); ++i)
        if (i / pieces != static_cast<std::size_t>(me)) wire += sizes[i];
      op.stats.wire_bytes = wire;
      return true;
    }
    if (op.phase == sizes_in) {
      op.stats.wire_bytes = this->layout_from_meta(op, me, this->max_words(op.n), "allgather");
      this->post_allgatherv(op, op.send, op.counts[me], op.recv, op.counts, op.displs);
      op.phase = messages_in;
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
