#pragma once
// Private machinery shared by the exchange strategies: operation slots, the
// phase driver, timed encode/decode with the error reporting of exchange.hpp;
// MPI buffers with host staging are in wire_buffer.hpp, the collective
// wrappers that degrade to local copies on the serial communicator in
// collectives.hpp. Every MPI call's result goes
// through check() (check_mpi, naming the strategy, step and tensor), and every
// wait is a test loop watched by a PeerWatch (communicator.hpp): a dead peer
// ends the job with exit_mpi_error instead of leaving this rank blocked.

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <array>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives.hpp"
#include "framing.hpp"
#include "p2p.hpp"
#include "qsgd/comm/exchange.hpp"
#include "qsgd/comm/partition.hpp"
#include "qsgd/kernels/codec.hpp"
#include "qsgd/kernels/profiling.hpp"
#include "qsgd/kernels/quantize.hpp"

namespace qsgd::comm::detail {

// Each rank's per-operation metadata (meta_words, framing.hpp): message
// words, n, tensor and step under a CRC32C. Every receiver checks the CRC,
// then n, tensor and step against its own before it trusts the size, so
// corrupt metadata and ranks that disagree on an operation stop with a clear
// error.
constexpr std::uint32_t requant_flag = 0x80000000u;  // RngKey.rank of a requantization

inline std::uint64_t words_of(std::size_t bytes) { return (bytes + 7) / 8; }

// The fp32 ring allreduce's operators (RingReduce, p2p.hpp): the sum of a
// received segment and this rank's (out may alias own: in place, so no
// __restrict on them), and the final x w that each block's owner applies
// before the ring allgather.
inline void ring_sum_f32(const void* in, const void* own, void* out, std::size_t n) {
  const float* __restrict a = static_cast<const float*>(in);
  const float* b = static_cast<const float*>(own);
  float* o = static_cast<float*>(out);
  for (std::size_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
}
// x[i] <- x[i] * w, one rounding, on the device (the library allreduce's
// x (1/K)). A free function: CUDA lambdas may not sit in non-public member
// functions.
template <class E, class View>
void scale(const E& exec, const View& x, std::uint64_t n, float w) {
  Kokkos::parallel_for(
      "qsgd::comm::scale", Kokkos::RangePolicy<E>(exec, 0, n),
      KOKKOS_LAMBDA(std::uint64_t i) { x(i) = qsgd::detail::mul_rn(x(i), w); });
}
inline void ring_scale_f32(void* data, std::size_t n, float w) {
  float* x = static_cast<float*>(data);
  for (std::size_t i = 0; i < n; ++i) x[i] = qsgd::detail::mul_rn(x[i], w);
}

// The NVTX range comm/<strategy> of one operation: opened by start(), closed
// when wait() returns or the operation fails (start/end, not push/pop: the
// two ends are different calls, and operations overlap). Closed at most once.
// Its payload is the operation's tensor (the Bucketer's bucket index).
class OpRange {
 public:
  OpRange() = default;
  OpRange(const OpRange&) = delete;
  OpRange& operator=(const OpRange&) = delete;
  ~OpRange() { close(); }
  void open(const char* name, std::uint64_t payload) {
    close();
    id_ = prof::start(name, payload);
    open_ = true;
  }
  void close() {
    if (open_) prof::end(id_);
    open_ = false;
  }

 private:
  std::uint64_t id_ = 0;
  bool open_ = false;
};

// One operation in flight, and the buffers it keeps between operations.
template <class ExecSpace>
struct Op {
  using Mem = typename ExecSpace::memory_space;
  OwnedComm comm;
  bool active = false;
  bool finished = false;
  std::uint32_t generation = 0;
  int phase = 0;  // the strategy's own Phase enumerator (0: not started)

  Kokkos::View<const float*, Mem> grad;
  Kokkos::View<float*, Mem> out;
  Kokkos::View<float*, Mem> sent;  // error feedback: this rank's decoded contribution (empty: not asked for)
  std::uint64_t n = 0, step = 0;
  std::uint32_t tensor = 0;

  // Two-stage strategies (scatter-reduce, parameter server): the first stage
  // sends every rank's gradient in (send, recv, meta_*, counts, displs), the
  // second sends the reduced result back out to every rank (the *_back
  // fields: scatter-reduce's allgather, the server's broadcast).
  WireBuffer<Mem> send, recv, send_back, recv_back;
  Kokkos::View<float*, Mem> acc;
  Kokkos::View<float*, Mem> factors;  // powersgd: the Q factors of its second allreduce
  std::vector<std::uint64_t> meta_send, meta_recv, meta_back_send, meta_back_recv;
  std::vector<int> scounts, sdispls, counts, displs, counts_back, displs_back;
  std::vector<std::uint64_t> bounds;

  std::array<MPI_Request, 4> reqs{};
  int nreqs = 0;
  const char* posted = "";  // what the phase's first request is for (MPI errors, watchdog)

  // Ring transport: the schedule in flight (one of the four), if any.
  RingReduce ring;
  RingAllgather ring_gather;
  PieceAllgather piece_gather;
  PairwiseExchange pairwise;
  bool whole = false;     // slices are views of one quantization of the whole vector (prepare_slices)
  bool own_levels = false;  // own: the levels of this rank's quantization, kept until decoded (allgather)
  Quantized<Mem> own;
  // shared-scale: every bucket's agreed scale (on the host for the allreduce,
  // and in Mem), and the level sums of this rank's chunk.
  std::vector<float> scales_host;
  Kokkos::View<float*, Mem> scales;
  Quantized<Mem> sums;
  Schedule* schedule = nullptr;
  bool on_wire = false;     // a network interval is open
  std::string poll_error;  // what poll() met; raised by the next drive()
  int poll_corrupt_source = -1;  // the sender, where poll_error is a corrupt segment
  // Ring transport: byte offsets and capacities of the slots of each stage.
  std::vector<std::size_t> out_off, out_bytes, in_off, in_cap, in_off_back, in_cap_back;

  OpStats stats;
  Clock::time_point t_start;
  OpRange range;
};

template <class ExecSpace>
class ExchangeBase : public Exchange<ExecSpace>,
                     protected CollectivePosts<ExchangeBase<ExecSpace>, Op<ExecSpace>, typename ExecSpace::memory_space> {
  friend class CollectivePosts<ExchangeBase<ExecSpace>, Op<ExecSpace>, typename ExecSpace::memory_space>;
 public:
  using Base = Exchange<ExecSpace>;
  using typename Base::const_values_view;
  using typename Base::memory_space;
  using typename Base::values_view;
  using OpT = Op<ExecSpace>;
  using CodecT = Codec<ExecSpace>;
  using words_view = typename CodecT::words_view;

  ExchangeBase(const ExchangeConfig& cfg, const Communicator& comm, const ExecSpace& exec)
      : cfg_(cfg),
        comm_(comm),
        exec_(exec),
        codec_(effective_codec(cfg), exec),
        name_(to_string(cfg.strategy)),
        range_name_("comm/" + name_) {
    constexpr bool host_ok = Kokkos::SpaceAccessibility<Kokkos::HostSpace, memory_space>::accessible;
    stage_moves_ = stages_messages<memory_space>(comm);
    // Reductions are always staged when MPI cannot apply the operator where
    // the data lives: Open MPI's non-blocking reductions (libnbc) run the
    // operator on the host, and a user-defined operator always does.
    stage_reductions_ = !comm.is_serial() && !host_ok;
  }

  Handle start(const const_values_view& grad, const values_view& out, std::uint32_t tensor, std::uint64_t step,
               const values_view& sent = values_view()) override {
    const std::uint64_t n = grad.extent(0);
    if (out.extent(0) < n) {
      fail_plain(step, tensor, Errc::invalid_argument, exit_exchange_error,
                 "output View has " + std::to_string(out.extent(0)) + " elements, gradient has " + std::to_string(n));
    }
    if (sent.extent(0) != 0) {
      if (!reports_sent())
        fail_plain(step, tensor, Errc::invalid_argument, exit_exchange_error,
                   name_ + " has no per-rank contribution to report for error feedback (its sums round on the way)");
      if (sent.extent(0) < n || sent.data() == grad.data() || sent.data() == out.data())
        fail_plain(step, tensor, Errc::invalid_argument, exit_exchange_error,
                   "error feedback View has " + std::to_string(sent.extent(0)) + " elements (gradient " +
                       std::to_string(n) + ") or aliases the gradient or the output");
    }
    std::uint32_t slot = 0;
    while (slot < slots_.size() && slots_[slot]->active) ++slot;
    if (slot == slots_.size()) {
      slots_.push_back(std::make_unique<OpT>());
      if (!comm_.is_serial()) {  // collective, same order on all ranks
        const MpiSite dup{"communicator duplicate", name_.c_str(), static_cast<std::int64_t>(step),
                          static_cast<std::int64_t>(tensor)};
        slots_.back()->comm = OwnedComm(comm_, dup);
      }
    }
    OpT& op = *slots_[slot];
    op.active = true;
    op.finished = false;
    op.phase = 0;
    op.nreqs = 0;
    op.posted = "";
    op.schedule = nullptr;
    op.on_wire = false;
    op.poll_error.clear();
    op.poll_corrupt_source = -1;
    op.grad = grad;
    op.out = out;
    op.sent = sent;
    op.n = n;
    op.step = step;
    op.tensor = tensor;
    op.stats = OpStats{};
    op.stats.n = n;
    op.stats.step = step;
    op.stats.tensor = tensor;
    op.t_start = Clock::now();
    op.range.open(range_name_.c_str(), tensor);
    for (auto* b : {&op.send, &op.recv, &op.send_back, &op.recv_back}) b->set_staged(stage_moves_);
    guarded(op, [&] { begin(op); });
    return Handle{slot, op.generation};
  }

  bool test(Handle h) override { return drive(lookup(h), false); }

  void wait(Handle h) override {
    OpT& op = lookup(h);
    drive(op, true);
    op.stats.total_s = seconds_since(op.t_start);
    last_ = op.stats;
    release(op);
  }

  double progress() override {
    double kernels = 0;
    for (auto& s : slots_) {
      OpT& op = *s;
      if (!op.active || op.finished || &op == waiting_) continue;
      const double k0 = kernel_seconds(op.stats);
      drive(op, false);
      kernels += kernel_seconds(op.stats) - k0;
    }
    return kernels;
  }

  bool poll() override {
    bool pending = false;
    for (auto& s : slots_) {
      OpT& op = *s;
      if (!op.active || op.finished || !op.poll_error.empty() || &op == waiting_) continue;
      if (op.schedule != nullptr) {
        ScheduleTimes t;
        try {
          if (op.schedule->advance(false, t, false)) {  // network only: no kernel on this thread
            op.schedule = nullptr;
            this->close_wire(op);
          }
        } catch (const CorruptSegment& e) {  // raised on the caller's thread by its next drive()
          op.poll_error = e.what();
          op.poll_corrupt_source = e.source;
        } catch (const std::exception& e) {
          op.poll_error = e.what();
        }
        op.stats.comm_s += t.call;
        op.stats.decode_s += t.reduce;
        pending = pending || (op.schedule != nullptr && op.schedule->requests_in_flight() && op.poll_error.empty());
      } else if (op.nreqs > 0) {
        const auto t0 = Clock::now();
        const bool done = test_requests(op);
        op.stats.comm_s += seconds_since(t0);
        if (done) {
          op.nreqs = 0;
          this->close_wire(op);
        }
        pending = pending || !done;
      }
    }
    return pending;
  }

  void set_wait_idle(typename Base::IdleFn idle) override { idle_ = std::move(idle); }

  // Element-wise strategies: no layout, no state (powersgd overrides them).
  void set_layout(std::uint32_t, const std::vector<MatrixBlock>&) override {}
  std::vector<float> state() const override { return {}; }
  void load_state(const std::vector<float>& s) override {
    if (!s.empty())
      throw Error(Errc::invalid_argument, name_ + " keeps no state, but " + std::to_string(s.size()) +
                                              " values were given to load_state");
  }

  const OpStats& last_stats() const override { return last_; }
  const ExchangeConfig& config() const override { return cfg_; }
  const Communicator& communicator() const override { return comm_; }
  std::size_t in_flight() const override {
    std::size_t k = 0;
    for (const auto& s : slots_) k += s->active ? 1 : 0;
    return k;
  }

 protected:
  // Local work of the first phase; posts the first requests (or finishes).
  virtual void begin(OpT& op) = 0;
  // Whether the strategy can give start()'s `sent` (error feedback).
  virtual bool reports_sent() const { return true; }
  // Called once the op's requests have completed; runs the next phase and
  // posts its requests. Returns true when the result is in op.out.
  virtual bool next(OpT& op) = 0;

  int ranks() const { return comm_.size(); }
  // No peer to talk to: collectives are local copies and nothing is sent
  // (serial communicator, or an MPI communicator of one rank).
  bool local() const { return comm_.is_serial() || comm_.size() == 1; }
  bool ring() const { return cfg_.transport == Transport::ring; }
  int rank() const { return comm_.rank(); }
  float weight() const { return 1.0f / static_cast<float>(comm_.size()); }
  bool quantized() const { return is_quantized(codec_.config().codec); }

  RngKey key(const OpT& op, std::uint32_t rank_field) const {
    RngKey k;
    k.seed = cfg_.seed;
    k.step = op.step;
    k.rank = rank_field;
    k.tensor = op.tensor;
    return k;
  }

  std::uint64_t max_words(std::uint64_t n) const { return codec_.max_message_bytes(n) / 8; }

  // ---- MPI results and waits ------------------------------------------------

  // What MPI errors and the watchdog name: "<what> of <strategy> at step S, tensor X".
  MpiSite site(const OpT& op, const char* what) const {
    return {what, name_.c_str(), static_cast<std::int64_t>(op.step), static_cast<std::int64_t>(op.tensor)};
  }
  // check_mpi for a call on the operation's communicator.
  void check(const OpT& op, int rc, const char* call, const char* what) const {
    check_mpi(rc, call, op.comm.get(), site(op, what));
  }

  static int as_count(std::uint64_t words, const char* what) {
    if (words > static_cast<std::uint64_t>(INT_MAX))
      throw Error(Errc::invalid_argument,
                  std::string(what) + ": " + std::to_string(words) + " words exceed the MPI count limit (INT_MAX)");
    return static_cast<int>(words);
  }

  // ---- timed kernels ------------------------------------------------------

  // Quantizes (quantized codecs) and encodes v[0, n) into out; returns bytes.
  // The fixed-width code takes the codec's fused path, whose quantization
  // time is inside encode_s.
  // A second-stage key (requant_flag) books both times as requantize_s.
  // index_offset: coordinate i draws with index i + index_offset (a bucket-
  // aligned slice of a longer vector: see Codec::encode).
  std::size_t encode(OpT& op, const const_values_view& v, std::uint64_t n, const RngKey& k, const words_view& out,
                     std::uint64_t index_offset = 0) {
    const CodecKind c = codec_.config().codec;
    const bool requant = (k.rank & requant_flag) != 0;
    double& quantize_s = requant ? op.stats.requantize_s : op.stats.quantize_s;
    double& encode_s = requant ? op.stats.requantize_s : op.stats.encode_s;
    if (is_quantized(c) && c != CodecKind::fixed) {
      auto t0 = Clock::now();
      quantize(exec_, codec_.config(), v, n, k, q_, index_offset);
      exec_.fence();
      quantize_s += seconds_since(t0);
      t0 = Clock::now();
      const std::size_t bytes = codec_.encode(q_, out);
      encode_s += seconds_since(t0);
      if (!requant) record_sent(op, index_offset, n, out, bytes);
      return bytes;
    }
    const auto t0 = Clock::now();
    const std::size_t bytes = codec_.encode(v, n, k, out, index_offset);
    encode_s += seconds_since(t0);
    if (c == CodecKind::fixed) op.stats.fused_quantize = true;
    if (!requant) record_sent(op, index_offset, n, out, bytes);
    return bytes;
  }

  // Error feedback (start()'s `sent`): op.sent[lo, lo + len) = what this
  // rank's first-stage message of that slice decodes to. Decoding the message
  // itself is the one rule for every codec and strategy; its time is booked
  // as encode_s (docs/traces.md).
  void record_sent(OpT& op, std::uint64_t lo, std::uint64_t len, const words_view& msg, std::size_t bytes) {
    if (op.sent.extent(0) == 0) return;
    const auto t0 = Clock::now();
    Expect e;
    e.n = len;
    try {
      codec_.decode(msg, bytes, Kokkos::subview(op.sent, Kokkos::make_pair(lo, lo + len)), e);
    } catch (const Error& err) {
      fail(op, rank(), err);
    }
    exec_.fence();
    op.stats.encode_s += seconds_since(t0);
  }

  // ---- slices of one quantization -------------------------------------------
  // A slice [lo, lo + len) of the gradient is encoded as its own message that
  // holds the levels of the one quantization of the whole vector (key k):
  // scatter-reduce's chunks, allgather's pieces. With several buckets, slices
  // are made of whole buckets (slice_align) and each is quantized on its own
  // with its offset as the draw index base, which gives the same levels with
  // nothing stored (the fixed-width code quantizes while packing). With one
  // bucket over the whole vector (d = 0, or d >= n) the vector is quantized
  // once by prepare_slices() and the slices are views of it, each message
  // carrying the one scale.

  // Alignment of slice boundaries for an n-vector.
  std::uint64_t slice_align(std::uint64_t n) const {
    const CodecConfig& cc = codec_.config();
    return partition_align(is_quantized(cc.codec), effective_bucket(cc, n), n);
  }

  // Whether the codec quantizes an n-vector as one bucket (d = 0, or d >= n).
  bool one_bucket(std::uint64_t n) const { return effective_bucket(codec_.config(), n) >= n; }

  // Call once per operation before encode_slice(). With keep_levels (and a
  // quantized codec that does not fuse quantization into its encoder), every
  // slice's levels stay in op.own until the operation ends: slice_levels()
  // gives them to accumulate_levels().
  void prepare_slices(OpT& op, const RngKey& k, bool keep_levels = false) {
    const CodecConfig& cc = codec_.config();
    const bool quant = is_quantized(cc.codec);
    op.whole = quant && one_bucket(op.n);
    op.own_levels = keep_levels && quant && cc.codec != CodecKind::fixed;
    if (op.own_levels)
      op.own.reshape(op.n, static_cast<std::uint32_t>(effective_bucket(cc, op.n)), cc.s, cc.norm,
                     QuantizerKind::stochastic);
    if (!op.whole) return;
    const auto t0 = Clock::now();
    quantize(exec_, cc, op.grad, op.n, k, op.own);
    exec_.fence();
    op.stats.quantize_s += seconds_since(t0);
  }

  // Encodes slice [lo, lo + len) of op.grad into out; returns bytes.
  std::size_t encode_slice(OpT& op, std::uint64_t lo, std::uint64_t len, const RngKey& k, const words_view& out) {
    if (!op.whole && !op.own_levels)
      return encode(op, Kokkos::subview(op.grad, Kokkos::make_pair(lo, lo + len)), len, k, out, lo);
    Quantized<memory_space> qc = slice_levels(op, lo, len);
    if (!op.whole) {  // quantized on its own, into its place in op.own
      const auto t0 = Clock::now();
      quantize(exec_, codec_.config(), Kokkos::subview(op.grad, Kokkos::make_pair(lo, lo + len)), len, k, qc, lo);
      exec_.fence();
      op.stats.quantize_s += seconds_since(t0);
    }
    const auto t0 = Clock::now();
    const std::size_t bytes = codec_.encode(qc, out);
    op.stats.encode_s += seconds_since(t0);
    record_sent(op, lo, len, out, bytes);
    return bytes;
  }

  // The slice [lo, lo + len) of op.own (shares its storage; lo a multiple of
  // the bucket size, or the vector one bucket).
  static Quantized<memory_space> slice_levels(const OpT& op, std::uint64_t lo, std::uint64_t len) {
    Quantized<memory_space> qc = op.own;
    qc.n = len;
    const std::uint64_t b0 = lo / qc.d, nb = len == 0 ? 0 : (len + qc.d - 1) / qc.d;
    qc.levels = Kokkos::subview(op.own.levels, Kokkos::make_pair(lo, lo + len));
    qc.scales = Kokkos::subview(op.own.scales, Kokkos::make_pair(b0, b0 + nb));
    return qc;
  }

  // acc[0, h.n) += w * decode(msg); a failure names `source` as the sender.
  void decode_accumulate(OpT& op, int source, const words_view& msg, std::size_t bytes, float w, const values_view& acc,
                         std::uint64_t expect_n) {
    const auto t0 = Clock::now();
    Expect e;
    e.n = expect_n;
    try {
      codec_.decode_accumulate(msg, bytes, w, acc, e);
    } catch (const Error& err) {
      fail(op, source, err);
    }
    exec_.fence();
    op.stats.decode_s += seconds_since(t0);
  }

  void decode_values(OpT& op, int source, const words_view& msg, std::size_t bytes, const values_view& out,
                     std::uint64_t expect_n) {
    const auto t0 = Clock::now();
    Expect e;
    e.n = expect_n;
    try {
      codec_.decode(msg, bytes, out, e);
    } catch (const Error& err) {
      fail(op, source, err);
    }
    exec_.fence();
    op.stats.decode_s += seconds_since(t0);
  }

  void zero(OpT& op, const values_view& v, std::uint64_t n) {
    const auto t0 = Clock::now();
    Kokkos::deep_copy(exec_, Kokkos::subview(v, Kokkos::make_pair<std::uint64_t>(0, n)), 0.0f);
    exec_.fence();
    op.stats.decode_s += seconds_since(t0);
  }

  // A segment of a ring allreduce that fails its CRC (p2p.hpp): exit code 3,
  // naming the sender, as every corrupt message.
  [[noreturn]] void fail_corrupt(OpT& op, int source, const std::string& what) {
    fail_plain(op, Errc::corrupt_message, exit_corrupt_message,
               "corrupt message from rank " + std::to_string(source) + " at step " + std::to_string(op.step) +
                   ", tensor " + std::to_string(op.tensor) + ": " + what);
  }

  // The ring allreduce's test hook (RingReduce::start's `inject`): 1 or 2
  // where FaultInjection names this rank, step, tensor and stage, else 0.
  int ring_inject(const OpT& op) const {
    if (!fault_targets(op)) return 0;
    return cfg_.fault.stage == FaultInjection::first_stage ? 1 : 2;
  }

  // Whether FaultInjection names this rank, step and tensor.
  bool fault_targets(const OpT& op) const {
    const FaultInjection& f = cfg_.fault;
    return f.enabled && f.rank == rank() && f.step == op.step && f.tensor == op.tensor;
  }

  // Test hook (FaultInjection, part=message): flips bit `bit` of word `word`
  // of the message (default: bit 0 of its last word).
  void maybe_inject(OpT& op, int stage, WireBuffer<memory_space>& buf, std::size_t off, std::size_t words) {
    const FaultInjection& f = cfg_.fault;
    if (!fault_targets(op) || f.stage != stage || f.part != FaultInjection::Part::message || words == 0) return;
    const std::size_t w = f.word < 0 ? words - 1 : std::min<std::size_t>(static_cast<std::size_t>(f.word), words - 1);
    auto at = Kokkos::subview(buf.dev(), off + w);
    std::uint64_t x = 0;
    Kokkos::deep_copy(x, at);
    x ^= std::uint64_t{1} << f.bit;
    Kokkos::deep_copy(at, x);
  }

  // ---- metadata (framing.hpp) ----------------------------------------------

  OpId op_id(const OpT& op) const { return {op.n, op.tensor, op.step}; }

  // This rank's metadata for a message of `words` words. `stage`: the
  // FaultInjection stage this message belongs to (0: none), whose part=meta
  // fault flips a bit of it here, after its CRC was computed.
  void set_meta(const OpT& op, std::uint64_t* m, std::uint64_t words, int stage = 0) const {
    qsgd::comm::detail::set_meta(op_id(op), m, words);
    const FaultInjection& f = cfg_.fault;
    if (stage != 0 && f.part == FaultInjection::Part::meta && fault_targets(op) && f.stage == stage)
      m[f.word < 0 ? 0 : static_cast<std::size_t>(f.word) % meta_words] ^= std::uint64_t{1} << f.bit;
  }

  // Checks a peer's metadata (check_meta, framing.hpp): intact, the same
  // operation, a size the receiver can hold.
  void check_meta(OpT& op, int source, const std::uint64_t* m, std::uint64_t max_w) {
    if (FrameFault f = qsgd::comm::detail::check_meta(op_id(op), source, m, max_w))
      fail_plain(op, f.code, f.exit_code, f.what);
  }

  // After the metadata gather (op.meta_recv, meta_words per rank): checks
  // every rank's metadata (messages of at most max_w words) and lays their
  // messages out for the message exchange, op.counts[r] words at
  // op.displs[r]. Returns the bytes that come from ranks other than `self`
  // (their messages and metadata).
  std::uint64_t layout_from_meta(OpT& op, int self, std::uint64_t max_w, const char* owner) {
    std::uint64_t wire = 0;
    if (FrameFault f = layout_meta(op_id(op), op.meta_recv.data(), ranks(), self, max_w, owner, op.counts, op.displs,
                                   wire))
      fail_plain(op, f.code, f.exit_code, f.what);
    return wire;
  }

  // ---- framed messages (ring transport) -------------------------------------
  // A framed message is its metadata (meta_words) followed by the message, so
  // that a receiver checks the operation and the size before decoding, with
  // no separate metadata collective.

  void write_meta(OpT& op, WireBuffer<memory_space>& buf, std::size_t off, std::uint64_t words, int stage = 0) {
    std::uint64_t m[meta_words];
    set_meta(op, m, words, stage);
    Kokkos::deep_copy(buf.span(off, meta_words),
                      Kokkos::View<const std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(m, meta_words));
  }

  // Metadata of the framed message at word `off` of what MPI received.
  void read_meta(WireBuffer<memory_space>& buf, std::size_t off, std::uint64_t* m) {
    constexpr bool host_ok = Kokkos::SpaceAccessibility<Kokkos::HostSpace, memory_space>::accessible;
    if (buf.staged() || host_ok) {
      std::copy(buf.mpi(off), buf.mpi(off) + meta_words, m);
    } else {
      Kokkos::View<std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> h(m, meta_words);
      Kokkos::deep_copy(h, buf.span(off, meta_words));
    }
  }

  // Checks a received framed message of `bytes` bytes at word `off`; returns
  // its message words.
  std::uint64_t check_framed(OpT& op, int source, WireBuffer<memory_space>& buf, std::size_t off, std::size_t bytes,
                             std::uint64_t max_w) {
    const OpId id = op_id(op);
    if (FrameFault f = check_frame_bytes(id, source, bytes)) fail_plain(op, f.code, f.exit_code, f.what);
    std::uint64_t m[meta_words];
    read_meta(buf, off, m);
    check_meta(op, source, m, max_w);
    if (FrameFault f = check_frame_size(id, source, m, bytes)) fail_plain(op, f.code, f.exit_code, f.what);
    return m[0];
  }

  // ---- collectives: CollectivePosts (collectives.hpp) posts them --------

  // Starts a ring-transport schedule (its start() posts the first requests).
  template <class Start>
  void start_schedule(OpT& op, Schedule& sched, Start&& start) {
    this->open_wire(op);
    ScheduleTimes t;
    sched.watch(site(op, sched.name()), comm_.peer_timeout());
    start(t);
    op.stats.comm_s += t.call;
    op.stats.decode_s += t.reduce;  // checksums of the first segments
    op.schedule = &sched;
  }

  // ---- errors -------------------------------------------------------------

  [[noreturn]] void fail(OpT& op, int source, const Error& err) {
    if (err.code() == Errc::corrupt_message && source >= 0)
      fail_plain(op, err.code(), exit_corrupt_message,
                 "corrupt message from rank " + std::to_string(source) + " at step " + std::to_string(op.step) +
                     ", tensor " + std::to_string(op.tensor) + ": " + err.what());
    fail_plain(op, err.code(), exit_exchange_error,
               "exchange failed at step " + std::to_string(op.step) + ", tensor " + std::to_string(op.tensor) + ": " +
                   err.what());
  }

  [[noreturn]] void fail_plain(OpT& op, Errc code, int exit_code, const std::string& what) {
    // A point-to-point schedule that fails in a work item (a piece that does
    // not decode) may still have requests on the wire; when the error is
    // thrown, they complete first (network only, watched for dead peers), so
    // that the slot's communicator can be freed. Other collectives of a
    // failed slot are abandoned under throw_error.
    if (op.schedule != nullptr && error_throws(cfg_.on_error, comm_)) {
      ScheduleTimes t;
      try {
        op.schedule->advance(true, t, false);
      } catch (const std::exception&) {  // the error being raised is the one to report
      }
    }
    op.nreqs = 0;
    op.schedule = nullptr;
    release(op);
    raise(code, exit_code, what);
  }

  [[noreturn]] void fail_plain(std::uint64_t step, std::uint32_t tensor, Errc code, int exit_code,
                               const std::string& what) {
    raise(code, exit_code,
          "exchange failed at step " + std::to_string(step) + ", tensor " + std::to_string(tensor) + ": " + what);
  }

  [[noreturn]] void raise(Errc code, int exit_code, const std::string& what) {
    raise_error(cfg_.on_error, comm_, code, exit_code, what);
  }

  ExchangeConfig cfg_;
  Communicator comm_;
  ExecSpace exec_;
  CodecT codec_;
  std::string name_;  // the strategy's name, in error messages
  Quantized<memory_space> q_;
  bool stage_moves_ = false;
  bool stage_reductions_ = false;

 private:
  template <class F>
  void guarded(OpT& op, F&& f) {
    try {
      f();
    } catch (const ExchangeError&) {
      throw;
    } catch (const Error& err) {
      fail(op, -1, err);
    }
  }

  bool drive(OpT& op, bool block) {
    if (&op == waiting_) {  // test() of the operation being waited for, from inside the wait hook
      if (block) throw Error(Errc::invalid_argument, "exchange: wait() called from inside a wait hook");
      return false;
    }
    check_poll_error(op);
    while (!op.finished) {
      if (op.schedule != nullptr) {
        ScheduleTimes t;
        bool done = true;
        if (block && idle_) {
          ScheduleTimes mine;
          PeerWatch watch(comm_.peer_timeout(), op.comm.get(), site(op, op.schedule->name()), "MPI_Testsome");
          std::uint64_t seen = op.schedule->completions();
          const double waited = spin(op, watch, [&] {
            const bool over = advance(op, false, mine);
            if (!over && op.schedule->completions() != seen) {  // a segment or message arrived or left
              seen = op.schedule->completions();
              watch.progress();
            }
            return over;
          });
          t.reduce = mine.reduce;
          t.blocked = std::max(0.0, waited - mine.reduce - mine.work);
        } else {
          done = advance(op, block, t);
        }
        op.stats.blocked_s += t.blocked;
        op.stats.comm_s += t.call;
        op.stats.decode_s += t.reduce;
        if (!done) return false;
        op.schedule = nullptr;
        this->close_wire(op);
      } else if (op.nreqs > 0) {
        const auto t0 = Clock::now();
        if (block && idle_) {
          PeerWatch watch(comm_.peer_timeout(), op.comm.get(), site(op, op.posted), "MPI_Testall");
          op.stats.blocked_s += spin(op, watch, [&] { return test_requests(op); });
        } else if (block) {
          wait_all(op.nreqs, op.reqs.data(), op.comm.get(), comm_.peer_timeout(), site(op, op.posted));
          op.stats.blocked_s += seconds_since(t0);
        } else {
          const bool done = test_requests(op);
          op.stats.comm_s += seconds_since(t0);
          if (!done) return false;
        }
        op.nreqs = 0;
        this->close_wire(op);
      }
      guarded(op, [&] { op.finished = next(op); });
    }
    return true;
  }

  // Advances the op's schedule; a peer's message of the wrong size
  // (std::runtime_error from the schedule) becomes the op's error.
  bool advance(OpT& op, bool block, ScheduleTimes& t) {
    try {
      return op.schedule->advance(block, t);
    } catch (const ExchangeError&) {  // a work item's own failure, already reported
      throw;
    } catch (const CorruptSegment& e) {
      fail_corrupt(op, e.source, e.what());
    } catch (const std::runtime_error& e) {
      fail_plain(op, Errc::invalid_argument, exit_config_mismatch,
                 std::string(e.what()) + " at step " + std::to_string(op.step) + ", tensor " +
                     std::to_string(op.tensor));
    }
  }

  // MPI_Testall of the phase's requests; true when all have completed.
  bool test_requests(OpT& op) {
    int done = 0;
    std::array<MPI_Status, 4> st;
    const int rc = MPI_Testall(op.nreqs, op.reqs.data(), &done, st.data());
    check_mpi(rc, "MPI_Testall", op.comm.get(), site(op, op.posted), st.data(), op.nreqs);
    return done != 0;
  }

  // A blocking wait under a wait hook: `test()` (true once the op's network
  // side is done), the hook advancing the other operations (progress() and
  // poll() skip this one), yield, until done; `watch` ends the job when the
  // op sees no progress for the peer timeout. Returns the wall time less the
  // kernels the hook ran; what the hook throws passes through unchanged.
  template <class Test>
  double spin(OpT& op, const PeerWatch& watch, Test&& test) {
    const Waiting w(waiting_, op);
    const auto t0 = Clock::now();
    double kernels = 0;
    while (!test()) {
      watch.check();
      kernels += idle_();
      watch.pause();
    }
    return std::max(0.0, seconds_since(t0) - kernels);
  }

  // Marks the operation a blocking wait is spinning on, for its scope.
  struct Waiting {
    OpT*& slot;
    Waiting(OpT*& s, OpT& op) : slot(s) {
      if (slot != nullptr) throw Error(Errc::invalid_argument, "exchange: wait() called from inside a wait hook");
      slot = &op;
    }
    ~Waiting() { slot = nullptr; }
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;
  };

  static double kernel_seconds(const OpStats& s) { return s.quantize_s + s.encode_s + s.requantize_s + s.decode_s; }

  void check_poll_error(OpT& op) {
    if (!op.poll_error.empty() && op.poll_corrupt_source >= 0) fail_corrupt(op, op.poll_corrupt_source, op.poll_error);
    if (!op.poll_error.empty())
      fail_plain(op, Errc::invalid_argument, exit_config_mismatch,
                 op.poll_error + " at step " + std::to_string(op.step) + ", tensor " + std::to_string(op.tensor));
  }

  OpT& lookup(Handle h) {
    if (!h.valid() || h.slot >= slots_.size() || !slots_[h.slot]->active || slots_[h.slot]->generation != h.generation)
      throw Error(Errc::invalid_argument, "exchange: handle is not in flight (already waited, or never started)");
    return *slots_[h.slot];
  }

  void release(OpT& op) {
    op.range.close();
    op.active = false;
    ++op.generation;
    op.grad = {};
    op.out = {};
  }

  std::string range_name_;  // NVTX: comm/<strategy>, see docs/profiling.md
  std::vector<std::unique_ptr<OpT>> slots_;
  OpStats last_;
  typename Base::IdleFn idle_;  // wait hook (set_wait_idle)
  OpT* waiting_ = nullptr;      // the operation a blocking wait spins on
};

// Explicit instantiation of a strategy factory for every execution space the
// library supports: the default one, and the default host one when the
// default is a device.
#if defined(QSGD_COMM_HOST_INSTANCE) && QSGD_COMM_HOST_INSTANCE
#define QSGD_COMM_INSTANTIATE_FACTORY(name)                                                                          \
  template std::unique_ptr<Exchange<Kokkos::DefaultExecutionSpace>> name(const ExchangeConfig&, const Communicator&, \
                                                                         const Kokkos::DefaultExecutionSpace&);      \
  template std::unique_ptr<Exchange<Kokkos::DefaultHostExecutionSpace>> name(                                        \
      const ExchangeConfig&, const Communicator&, const Kokkos::DefaultHostExecutionSpace&);
#else
#define QSGD_COMM_INSTANTIATE_FACTORY(name)                                                                          \
  template std::unique_ptr<Exchange<Kokkos::DefaultExecutionSpace>> name(const ExchangeConfig&, const Communicator&, \
                                                                         const Kokkos::DefaultExecutionSpace&);
#endif

template <class E>
std::unique_ptr<Exchange<E>> make_allreduce(const ExchangeConfig&, const Communicator&, const E&);
template <class E>
std::unique_ptr<Exchange<E>> make_allreduce16(const ExchangeConfig&, const Communicator&, const E&);
template <class E>
std::unique_ptr<Exchange<E>> make_allgather(const ExchangeConfig&, const Communicator&, const E&);
template <class E>
std::unique_ptr<Exchange<E>> make_param_server(const ExchangeConfig&, const Communicator&, const E&);
template <class E>
std::unique_ptr<Exchange<E>> make_scatter_reduce(const ExchangeConfig&, const Communicator&, const E&);
template <class E>
std::unique_ptr<Exchange<E>> make_powersgd(const ExchangeConfig&, const Communicator&, const E&);

}  // namespace qsgd::comm::detail
