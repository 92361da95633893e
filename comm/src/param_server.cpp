// Parameter server (spec section 4), synchronous.
//
// Algorithm: every rank, the server included, is a worker: it encodes Q(g_r)
// with key (seed, step, r, tensor). The server S gathers the metadata and
// then the messages (MPI_Igather, MPI_Igatherv), decodes and accumulates them
// in rank order with weight 1/K into a zeroed accumulator a, requantizes a
// with key (seed, step, S | 2^31, tensor), and broadcasts the metadata and
// then the message (MPI_Ibcast x 2). Every rank, the server included,
// decodes that one broadcast message into out: identical bits everywhere.
// Workers post their gather and the metadata broadcast at once, so they need
// no progress call between them.
// Two quantization errors: out = Q2(a), a = (1/K) sum_r Q(g_r), and
// E||out - avg||^2 = E||a - avg||^2 + E||Q2(a) - a||^2 (Q2 is unbiased given a).
// Cost: the server decodes K messages and encodes one; workers decode one.
// wire_bytes: server sum_{r != S} bytes_r + 32 (K-1); worker 32 + bytes of
// the broadcast message.

#include <stdexcept>
#include <string>

#include "detail/exchange_base.hpp"

namespace qsgd::comm::detail {
namespace {

template <class E>
class ParamServer final : public ExchangeBase<E> {
  using B = ExchangeBase<E>;
  using typename B::OpT;
  // Where an operation stands (op.phase).
  enum Phase : int {
    server_sizes_in = 1,  // server: every message's size is in, post the gatherv
    server_messages_in,   // server: every message: average, requantize, broadcast
    worker_size_known,    // worker: the broadcast's size is in, receive the message
    worker_result_in,     // worker: the averaged message is in, decode it
    server_broadcast_sent  // server: decode its own broadcast
  };

 public:
  ParamServer(const ExchangeConfig& cfg, const Communicator& comm, const E& exec) : B(cfg, comm, exec) {
    if (cfg.server < 0 || cfg.server >= comm.size())
      throw Error(Errc::invalid_argument, "param_server: server rank " + std::to_string(cfg.server) +
                                              " is outside 0.." + std::to_string(comm.size() - 1));
  }

 protected:
  bool is_server() const { return this->rank() == this->cfg_.server; }

  void begin(OpT& op) override {
    const int K = this->ranks(), S = this->cfg_.server;
    const std::uint64_t maxw = this->max_words(op.n);
    op.send.reserve(maxw);
    op.meta_send.resize(meta_words);
    op.meta_back_recv.resize(meta_words);
    op.counts.resize(K);
    op.displs.resize(K);
    if (is_server()) {
      op.recv.reserve(maxw * static_cast<std::uint64_t>(K));
      op.send_back.reserve(maxw);
      op.meta_recv.resize(static_cast<std::size_t>(meta_words) * K);
      if (op.acc.extent(0) < op.n)
        op.acc = Kokkos::View<float*, typename B::memory_space>(
            Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::comm::ps_acc"), op.n);
    } else {
      op.recv_back.reserve(maxw);
    }
    const std::size_t bytes =
        this->encode(op, op.grad, op.n, this->key(op, static_cast<std::uint32_t>(this->rank())), op.send.span(0, maxw));
    const std::uint64_t words = words_of(bytes);
    this->maybe_inject(op, FaultInjection::first_stage, op.send, 0, words);
    op.stats.encoded_bytes = bytes;
    this->set_meta(op, op.meta_send.data(), words, FaultInjection::first_stage);
    this->post_gather(op, op.meta_send.data(), meta_words, op.meta_recv.data(), S);
    if (is_server()) {
      op.phase = server_sizes_in;
    } else {
      this->post_gatherv(op, op.send, static_cast<int>(words), op.recv, op.counts, op.displs, S);
      this->post_bcast(op, op.meta_back_recv.data(), meta_words, S);
      op.posted = "metadata gather, message gatherv and metadata broadcast";  // waited for together
      op.phase = worker_size_known;
    }
  }

  bool next(OpT& op) override {
    const int K = this->ranks(), S = this->cfg_.server;
    switch (op.phase) {
      case server_sizes_in: {  // server: metadata in, post the message gather
        op.stats.wire_bytes = this->layout_from_meta(op, S, this->max_words(op.n), "param_server");
        this->post_gatherv(op, op.send, op.counts[S], op.recv, op.counts, op.displs, S);
        op.phase = server_messages_in;
        return false;
      }
      case server_messages_in: {  // server: average, requantize, broadcast
        const std::uint64_t total = static_cast<std::uint64_t>(op.displs[K - 1]) + op.counts[K - 1];
        this->from_mpi(op, op.recv, 0, total);
        this->zero(op, op.acc, op.n);
        const float w = this->weight();
        for (int r = 0; r < K; ++r)
          this->decode_accumulate(op, r, op.recv.span(op.displs[r], op.counts[r]), std::size_t(op.counts[r]) * 8, w,
                                  op.acc, op.n);
        const std::uint64_t maxw = this->max_words(op.n);
        const std::size_t bytes = this->encode(
            op, op.acc, op.n, this->key(op, static_cast<std::uint32_t>(S) | requant_flag), op.send_back.span(0, maxw));
        const std::uint64_t words = words_of(bytes);
        this->maybe_inject(op, FaultInjection::back_stage, op.send_back, 0, words);
        op.stats.requantized_bytes = bytes;
        op.meta_back_send.resize(meta_words);
        this->set_meta(op, op.meta_back_send.data(), words, FaultInjection::back_stage);
        std::copy(op.meta_back_send.begin(), op.meta_back_send.end(), op.meta_back_recv.begin());
        this->post_bcast(op, op.meta_back_recv.data(), meta_words, S);
        this->post_bcast(op, op.send_back, static_cast<int>(words), S);
        op.posted = "metadata and message broadcasts";
        op.phase = server_broadcast_sent;
        return false;
      }
      case worker_size_known: {  // worker: the broadcast's size is known; receive the message
        this->check_meta(op, S, op.meta_back_recv.data(), this->max_words(op.n));
        op.stats.wire_bytes = op.meta_back_recv[0] * 8 + meta_words * 8;
        this->post_bcast(op, op.recv_back, static_cast<int>(op.meta_back_recv[0]), S);
        op.phase = worker_result_in;
        return false;
      }
      case worker_result_in: {  // worker: decode the average
        const std::uint64_t words = op.meta_back_recv[0];
        this->from_mpi(op, op.recv_back, 0, words);
        this->decode_values(op, S, op.recv_back.span(0, words), words * 8, op.out, op.n);
        return true;
      }
      case server_broadcast_sent: {  // server: decode its own broadcast, the same bytes every worker decodes
        const std::uint64_t words = words_of(op.stats.requantized_bytes);  // not the metadata sent (a test may corrupt it)
        this->decode_values(op, S, op.send_back.span(0, words), words * 8, op.out, op.n);
        return true;
      }
    }
    throw std::logic_error("param_server: operation in unknown phase " + std::to_string(op.phase));
  }
};

}  // namespace

template <class E>
std::unique_ptr<Exchange<E>> make_param_server(const ExchangeConfig& cfg, const Communicator& comm, const E& exec) {
  return std::make_unique<ParamServer<E>>(cfg, comm, exec);
}

QSGD_COMM_INSTANTIATE_FACTORY(make_param_server)

}  // namespace qsgd::comm::detail
