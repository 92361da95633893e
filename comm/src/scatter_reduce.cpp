// Scatter-reduce-allgather with requantization (spec section 4).
//
// Algorithm: the vector is split into K chunks whose boundaries are multiples
// of the bucket size d (partition.hpp), so every chunk holds whole buckets.
// Each rank quantizes its gradient with key (seed, step, r, tensor), the
// draw of coordinate i indexed by i, exactly as allgather does, and encodes
// chunk j as a message of its own (own header, own checksum): chunk by chunk
// with the chunk's offset as draw index base (the same levels; the
// fixed-width code then quantizes while packing), or, with one bucket over
// the whole vector, by one quantization whose chunks are views. Metadata go by
// MPI_Ialltoall, the chunk messages by MPI_Ialltoallv: rank j receives chunk
// j of every rank. Rank j decodes and accumulates them in rank order with
// weight 1/K (so its partial average is bitwise the allgather average on
// that chunk), requantizes it with key (seed, step, j | 2^31, tensor), and
// the reduced chunks are allgathered (metadata, then MPI_Iallgatherv). Every
// rank decodes all K reduced chunks, its own included, into out: identical
// bits everywhere.
// Transport ring (default): no metadata collectives. Each chunk message goes
// out framed (metadata words in front) by point-to-point sends inside
// start() (detail/p2p.hpp PairwiseExchange), the reduced chunks travel by a
// ring allgather of framed messages; receivers check each frame before
// decoding. Transport library: MPI_Ialltoall of metadata, MPI_Ialltoallv,
// MPI_Iallgather of metadata, MPI_Iallgatherv.
// Cost per rank: one quantize of n, K chunk encodes; K decodes and one encode
// of n/K; K decodes of n/K. Wire per rank ~ 2 messages, independent of K:
// wire_bytes = sum_{r != me} bytes(chunk me of r) + sum_{j != me}
// bytes(reduced chunk j) + 64 (K-1).
//
// Shared scale (StrategyKind::shared_scale; spec section 4, docs/exchange.md):
// one quantization error instead of two. Each rank computes its bucket scales
// and the ranks agree on the largest of each (MPI_Iallreduce with MPI_MAX of
// n/d floats, in both transports: 1/d of the vector). Every rank quantizes
// against the agreed scales (key (seed, step, r, tensor), as above), so the
// chunk messages of every rank carry the same scales; rank j decodes them to
// integer levels, checks their scales, and sums the levels. Sums of K levels
// in [-s, s] are a quantized vector with K s levels and the same scales,
// whose value is scale * sum / (K s), exactly the average of the K ranks'
// quantized values: the reduced chunk is encoded as such (no draw, no second
// error), with about log2(K) more bits per coordinate, and allgathered as in
// scatter-reduce. Wire per rank: scatter-reduce's plus the scale allreduce,
// 2 (K-1)/K x 4 n/d bytes.

#include <stdexcept>
#include <string>

#include "detail/exchange_base.hpp"
#include "qsgd/comm/partition.hpp"

namespace qsgd::comm::detail {
namespace {

template <class E>
class ScatterReduce final : public ExchangeBase<E> {
  using B = ExchangeBase<E>;
  using typename B::OpT;
  using Mem = typename B::memory_space;
  using typename B::words_view;
  // Where an operation stands (op.phase); the library transport runs
  // sizes_in .. reduced_in, the ring transport ring_chunks_in, ring_reduced_in;
  // shared-scale starts both with scales_in.
  enum Phase : int {
    scales_in = 1,     // shared-scale: the agreed scales are in; quantize and send the chunks
    sizes_in,          // every chunk's size is in: post the alltoallv of chunks
    chunks_in,       // this rank's chunk from every rank: reduce, requantize, announce its size
    reduced_sizes_in,  // every reduced chunk's size: post their allgatherv
    reduced_in,      // every reduced chunk: decode them into out
    ring_chunks_in,  // ring: pairwise exchange done, reduce and start the ring allgather
    ring_reduced_in  // ring: every reduced chunk is in
  };

 public:
  using B::B;

 protected:
  std::uint64_t chunk_len(const OpT& op, int j) const { return op.bounds[j + 1] - op.bounds[j]; }

  bool shared() const { return this->cfg_.strategy == StrategyKind::shared_scale; }

  // Largest reduced message of a chunk of len coordinates: the codec's bound,
  // for K s levels with a shared scale.
  std::uint64_t back_max_words(std::uint64_t len) const {
    if (!shared()) return this->max_words(len);
    CodecConfig c = this->codec_.config();
    c.s *= static_cast<std::uint32_t>(this->ranks());
    return max_message_bytes(c, len) / 8;
  }

  void begin(OpT& op) override {
    const int K = this->ranks(), me = this->rank();
    partition(op.n, K, this->slice_align(op.n), op.bounds);
    const bool ring = this->ring() && !this->local();
    const std::size_t head = ring ? meta_words : 0;  // ring messages travel framed
    // Send buffer: K chunk messages back to back, each within its own bound.
    std::uint64_t cap = 0, cap_back = 0;
    for (int j = 0; j < K; ++j) {
      cap += head + this->max_words(chunk_len(op, j));
      cap_back += head + back_max_words(chunk_len(op, j));
    }
    op.send.reserve(cap);
    const std::uint64_t my_len = chunk_len(op, me), my_max = this->max_words(my_len);
    op.recv.reserve((head + my_max) * static_cast<std::uint64_t>(K));
    op.send_back.reserve(head + back_max_words(my_len));
    op.recv_back.reserve(cap_back);
    if (!shared() && op.acc.extent(0) < my_len)  // shared-scale sums integers (op.sums)
      op.acc =
          Kokkos::View<float*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::comm::sra_acc"), my_len);
    op.meta_send.resize(static_cast<std::size_t>(meta_words) * K);
    op.meta_recv.resize(static_cast<std::size_t>(meta_words) * K);
    op.meta_back_send.resize(meta_words);
    op.meta_back_recv.resize(static_cast<std::size_t>(meta_words) * K);
    op.scounts.resize(K);
    op.sdispls.resize(K);
    op.counts.resize(K);
    op.displs.resize(K);
    op.counts_back.resize(K);
    op.displs_back.resize(K);
    if (shared()) {
      agree_scales(op);
      return;
    }
    send_chunks(op);
  }

  // shared-scale: this rank's bucket scales, then the allreduce of their maxima.
  void agree_scales(OpT& op) {
    const CodecConfig& cc = this->codec_.config();
    const auto d = static_cast<std::uint32_t>(effective_bucket(cc, op.n));
    op.own.reshape(op.n, d, cc.s, cc.norm, QuantizerKind::stochastic);
    op.whole = this->one_bucket(op.n);  // chunks are views of one quantization
    const std::uint64_t nb = op.own.buckets();
    if (op.scales.extent(0) < nb)
      op.scales = Kokkos::View<float*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::comm::scales"), nb);
    const auto t0 = Clock::now();
    compute_scales(this->exec_, op.grad, op.n, d, cc.norm, op.scales, "shared-scale");  // throws on NaN/Inf
    op.scales_host.resize(nb);
    Kokkos::deep_copy(this->exec_,
                      Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(op.scales_host.data(), nb),
                      Kokkos::subview(op.scales, Kokkos::make_pair<std::uint64_t>(0, nb)));
    this->exec_.fence();
    op.stats.quantize_s += seconds_since(t0);
    this->post_allreduce_max(op, op.scales_host.data(), this->as_count(nb, "shared-scale"));
    if (!this->local())  // a ring allreduce's bytes in: 2 (K-1)/K of the scales
      op.stats.wire_bytes += 2 * (static_cast<std::uint64_t>(this->ranks()) - 1) * 4 * nb / this->ranks();
    op.phase = scales_in;
  }

  // shared-scale: the agreed scales into Mem; with one bucket over the whole
  // vector, this rank's quantization against them, kept in op.own for the
  // chunk messages (which are views of it).
  void quantize_shared(OpT& op) {
    const std::uint64_t nb = op.own.buckets();
    const auto t0 = Clock::now();
    Kokkos::deep_copy(this->exec_, Kokkos::subview(op.scales, Kokkos::make_pair<std::uint64_t>(0, nb)),
                      Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(op.scales_host.data(), nb));
    if (op.whole)
      quantize_with_scales(this->exec_, this->codec_.config(), op.grad, op.n, op.scales,
                           this->key(op, static_cast<std::uint32_t>(this->rank())), op.own);
    this->exec_.fence();
    op.stats.quantize_s += seconds_since(t0);
  }

  // Encodes chunk [lo, lo + len) of this rank's gradient into out; returns bytes.
  // shared-scale: quantized against the agreed scales of its buckets (the
  // fixed-width code quantizes while packing), or a view of op.own.
  std::size_t encode_chunk(OpT& op, std::uint64_t lo, std::uint64_t len, const RngKey& k, const words_view& out) {
    if (!shared()) return this->encode_slice(op, lo, len, k, out);
    const auto t0 = Clock::now();
    std::size_t bytes;
    if (op.whole) {
      bytes = this->codec_.encode(this->slice_levels(op, lo, len), out);
    } else {
      const std::uint64_t b0 = lo / op.own.d, nb = (len + op.own.d - 1) / op.own.d;
      bytes = this->codec_.encode_with_scales(Kokkos::subview(op.grad, Kokkos::make_pair(lo, lo + len)), len,
                                              Kokkos::subview(op.scales, Kokkos::make_pair(b0, b0 + nb)), k, out, lo);
      if (this->codec_.config().codec == CodecKind::fixed) op.stats.fused_quantize = true;
    }
    op.stats.encode_s += seconds_since(t0);
    this->record_sent(op, lo, len, out, bytes);
    return bytes;
  }

  // Encodes the K chunk messages and sends them (pairwise exchange, or the
  // metadata alltoall of the library transport).
  void send_chunks(OpT& op) {
    const int K = this->ranks(), me = this->rank();
    const bool ring = this->ring() && !this->local();
    const std::size_t head = ring ? meta_words : 0;
    const std::uint64_t my_max = this->max_words(chunk_len(op, me));
    const RngKey k = this->key(op, static_cast<std::uint32_t>(me));
    if (shared())
      quantize_shared(op);
    else
      this->prepare_slices(op, k);  // chunks are slices of one quantization (exchange_base.hpp)
    std::uint64_t off = 0, total_bytes = 0;
    op.out_off.resize(K);
    op.out_bytes.resize(K);
    for (int j = 0; j < K; ++j) {
      const std::uint64_t lo = op.bounds[j], len = chunk_len(op, j), maxw = this->max_words(len);
      op.out_off[j] = off * 8;
      off += head;
      const std::size_t bytes = encode_chunk(op, lo, len, k, op.send.span(off, maxw));
      const std::uint64_t words = words_of(bytes);
      const int stage = j == (me + 1) % K ? FaultInjection::first_stage : 0;  // the chunk sent to rank + 1
      this->maybe_inject(op, stage, op.send, off, words);
      if (ring) this->write_meta(op, op.send, off - head, words, stage);
      op.out_bytes[j] = (head + words) * 8;
      op.scounts[j] = static_cast<int>(words);
      op.sdispls[j] = this->as_count(off, "scatter_reduce");
      this->set_meta(op, &op.meta_send[static_cast<std::size_t>(j) * meta_words], words, stage);
      off += words;
      total_bytes += bytes;
    }
    this->as_count(off, "scatter_reduce");
    op.stats.encoded_bytes = total_bytes;
    if (ring) {
      op.send.to_mpi(0, off);
      const std::size_t slot = (meta_words + my_max) * 8;
      op.in_off.resize(K);
      op.in_cap.assign(K, slot);
      for (int r = 0; r < K; ++r) op.in_off[r] = slot * static_cast<std::size_t>(r);
      this->start_schedule(op, op.pairwise, [&](ScheduleTimes& t) {
        op.pairwise.start(op.comm.get(), me, K, op.send.mpi(), op.out_off, op.out_bytes, op.recv.mpi(), op.in_off,
                          op.in_cap, t);
      });
      op.phase = ring_chunks_in;
      return;
    }
    this->post_alltoall(op, op.meta_send.data(), meta_words, op.meta_recv.data());
    op.phase = sizes_in;
  }

  // This rank's chunk of every rank's message (msg_of(r)) reduced into `out`:
  // decoded, averaged and requantized, or (shared-scale) decoded to levels
  // and summed. Returns the reduced message's bytes.
  template <class MsgOf>
  std::size_t reduce_chunk(OpT& op, MsgOf&& msg_of, const words_view& out) {
    const int K = this->ranks(), me = this->rank();
    const std::uint64_t len = chunk_len(op, me);
    if (!shared()) {
      this->zero(op, op.acc, len);
      for (int r = 0; r < K; ++r) {
        const words_view msg = msg_of(r);
        this->decode_accumulate(op, r, msg, msg.extent(0) * 8, this->weight(), op.acc, len);
      }
      return this->encode(op, op.acc, len, this->key(op, static_cast<std::uint32_t>(me) | requant_flag), out);
    }
    const CodecConfig& cc = this->codec_.config();
    const std::uint32_t d = op.own.d;
    op.sums.reshape(len, d, cc.s * static_cast<std::uint32_t>(K), cc.norm, QuantizerKind::stochastic);
    const std::uint64_t b0 = op.bounds[me] / d, nb = op.sums.buckets();
    const auto agreed = Kokkos::subview(op.scales, Kokkos::make_pair(b0, b0 + nb));
    auto t0 = Clock::now();
    Kokkos::deep_copy(this->exec_, Kokkos::subview(op.sums.scales, Kokkos::make_pair<std::uint64_t>(0, nb)), agreed);
    Kokkos::deep_copy(this->exec_, Kokkos::subview(op.sums.levels, Kokkos::make_pair<std::uint64_t>(0, len)), 0);
    Expect e;
    e.n = len;
    for (int r = 0; r < K; ++r) {
      const words_view msg = msg_of(r);
      try {
        this->codec_.decode_add_levels(msg, msg.extent(0) * 8, cc.s, d, cc.norm, agreed, op.sums.levels, e);
      } catch (const Error& err) {
        this->fail(op, r, err);
      }
    }
    this->exec_.fence();
    op.stats.decode_s += seconds_since(t0);
    t0 = Clock::now();
    const std::size_t bytes = this->codec_.encode(op.sums, out);
    op.stats.requantize_s += seconds_since(t0);
    return bytes;
  }

  // Ring transport, after the pairwise exchange: reduce this rank's chunk,
  // requantize it (shared-scale: sum its levels), start the ring allgather of
  // the reduced chunks.
  void reduce_ring(OpT& op) {
    const int K = this->ranks(), me = this->rank();
    const std::uint64_t len = chunk_len(op, me), maxw = this->max_words(len);
    const std::size_t slot_words = meta_words + maxw;
    const auto& sizes = op.pairwise.sizes();
    for (int r = 0; r < K; ++r) {
      if (r == me) continue;
      this->from_mpi(op, op.recv, slot_words * r, sizes[r] / 8);
      op.counts[r] = static_cast<int>(this->check_framed(op, r, op.recv, slot_words * r, sizes[r], maxw));
      op.stats.wire_bytes += sizes[r];
    }
    const std::size_t bytes = reduce_chunk(
        op,
        [&](int r) {
          return r == me ? op.send.span(op.out_off[me] / 8 + meta_words, op.scounts[me])
                         : op.recv.span(slot_words * r + meta_words, op.counts[r]);
        },
        op.send_back.span(meta_words, back_max_words(len)));
    const std::uint64_t words = words_of(bytes);
    this->maybe_inject(op, FaultInjection::back_stage, op.send_back, meta_words, words);
    op.stats.requantized_bytes = bytes;
    op.counts_back[me] = static_cast<int>(words);
    this->write_meta(op, op.send_back, 0, words, FaultInjection::back_stage);
    op.send_back.to_mpi(0, meta_words + words);
    op.in_off_back.resize(K);
    op.in_cap_back.resize(K);
    std::size_t off = 0;
    for (int j = 0; j < K; ++j) {
      op.in_off_back[j] = off;
      op.in_cap_back[j] = (meta_words + back_max_words(chunk_len(op, j))) * 8;
      off += op.in_cap_back[j];
    }
    this->start_schedule(op, op.ring_gather, [&](ScheduleTimes& t) {
      op.ring_gather.start(op.comm.get(), me, K, op.send_back.mpi(), (meta_words + words) * 8, op.recv_back.mpi(), op.in_off_back,
                           op.in_cap_back, t);
    });
  }

  // Ring transport, after the allgather: every reduced chunk into out.
  void finish_ring(OpT& op) {
    const int K = this->ranks(), me = this->rank();
    const auto& sizes = op.ring_gather.sizes();
    for (int j = 0; j < K; ++j) {
      const std::uint64_t lo = op.bounds[j], len = chunk_len(op, j);
      const std::size_t at = op.in_off_back[j] / 8;
      std::uint64_t words = static_cast<std::uint64_t>(op.counts_back[me]);
      if (j != me) {
        this->from_mpi(op, op.recv_back, at, sizes[j] / 8);
        words = this->check_framed(op, j, op.recv_back, at, sizes[j], back_max_words(len));
        op.stats.wire_bytes += sizes[j];
      }
      const auto msg = j == me ? op.send_back.span(meta_words, words) : op.recv_back.span(at + meta_words, words);
      this->decode_values(op, j, msg, words * 8, Kokkos::subview(op.out, Kokkos::make_pair(lo, lo + len)), len);
    }
  }

  bool next(OpT& op) override {
    const int K = this->ranks(), me = this->rank();
    switch (op.phase) {
      case scales_in:  // shared-scale: the agreed scales are in
        send_chunks(op);
        return false;
      case ring_chunks_in:  // ring: chunks in
        reduce_ring(op);
        op.phase = ring_reduced_in;
        return false;
      case ring_reduced_in:  // ring: reduced chunks in
        finish_ring(op);
        return true;
      case sizes_in: {  // chunk sizes in: post the alltoallv
        op.stats.wire_bytes += this->layout_from_meta(op, me, this->max_words(chunk_len(op, me)), "scatter_reduce");
        this->post_alltoallv(op, op.send, op.scounts, op.sdispls, op.recv, op.counts, op.displs);
        op.phase = chunks_in;
        return false;
      }
      case chunks_in: {  // reduce this rank's chunk, requantize, announce its size
        const std::uint64_t len = chunk_len(op, me);
        const std::uint64_t total = static_cast<std::uint64_t>(op.displs[K - 1]) + op.counts[K - 1];
        this->from_mpi(op, op.recv, 0, total);
        const std::size_t bytes = reduce_chunk(
            op, [&](int r) { return op.recv.span(op.displs[r], op.counts[r]); },
            op.send_back.span(0, back_max_words(len)));
        const std::uint64_t words = words_of(bytes);
        this->maybe_inject(op, FaultInjection::back_stage, op.send_back, 0, words);
        op.stats.requantized_bytes = bytes;
        this->set_meta(op, op.meta_back_send.data(), words, FaultInjection::back_stage);
        this->post_allgather(op, op.meta_back_send.data(), meta_words, op.meta_back_recv.data());
        op.phase = reduced_sizes_in;
        return false;
      }
      case reduced_sizes_in: {  // reduced sizes in: allgather the reduced chunks
        std::uint64_t total = 0;
        for (int j = 0; j < K; ++j) {
          const std::uint64_t* m = &op.meta_back_recv[static_cast<std::size_t>(j) * meta_words];
          this->check_meta(op, j, m, back_max_words(chunk_len(op, j)));
          op.counts_back[j] = static_cast<int>(m[0]);
          op.displs_back[j] = this->as_count(total, "scatter_reduce");
          total += m[0];
          if (j != me) op.stats.wire_bytes += m[0] * 8 + meta_words * 8;
        }
        this->as_count(total, "scatter_reduce");
        this->post_allgatherv(op, op.send_back, op.counts_back[me], op.recv_back, op.counts_back, op.displs_back);
        op.phase = reduced_in;
        return false;
      }
      case reduced_in: {  // every reduced chunk into out
        const std::uint64_t total = static_cast<std::uint64_t>(op.displs_back[K - 1]) + op.counts_back[K - 1];
        this->from_mpi(op, op.recv_back, 0, total);
        for (int j = 0; j < K; ++j) {
          const std::uint64_t lo = op.bounds[j], len = chunk_len(op, j);
          this->decode_values(op, j, op.recv_back.span(op.displs_back[j], op.counts_back[j]), std::size_t(op.counts_back[j]) * 8,
                              Kokkos::subview(op.out, Kokkos::make_pair(lo, lo + len)), len);
        }
        return true;
      }
    }
    throw std::logic_error("scatter_reduce: operation in unknown phase " + std::to_string(op.phase));
  }
};

}  // namespace

template <class E>
std::unique_ptr<Exchange<E>> make_scatter_reduce(const ExchangeConfig& cfg, const Communicator& comm, const E& exec) {
  return std::make_unique<ScatterReduce<E>>(cfg, comm, exec);
}

QSGD_COMM_INSTANTIATE_FACTORY(make_scatter_reduce)

}  // namespace qsgd::comm::detail
