#pragma once
// qsgd::comm::Exchange: "average these gradients across ranks" (spec sections
// 3 and 4), one small interface with one implementation per strategy:
//
//   allreduce       fp32 MPI_Allreduce, then x (1/K)           allreduce.cpp
//   allreduce16     16-bit (bf16 or fp16) MPI_Allreduce with a
//                   rounding sum operator                      allreduce16.cpp
//   allgather       each rank's message to all; every rank
//                   decodes and accumulates K messages          allgather.cpp
//   param_server    messages to a server rank, which decodes,
//                   averages, requantizes and broadcasts        param_server.cpp
//   scatter_reduce  chunk j of every rank to rank j (alltoallv);
//                   rank j decodes-accumulates, requantizes,
//                   all ranks allgatherv the reduced chunks     scatter_reduce.cpp
//   shared_scale    scatter-reduce with one quantization: ranks
//                   agree on every bucket's scale (allreduce of
//                   the maxima), sum integer levels in the
//                   reduce stage, allgather the sums            scatter_reduce.cpp
//   powersgd        rank-r PowerSGD (Vogels et al. 2019): per
//                   matrix P = M Q, allreduce P, orthonormalize,
//                   Q = M^T P, allreduce Q, M ~ P Q^T; Q is kept
//                   as the next step's start (warm start); the
//                   rest of the vector is averaged in fp32      powersgd.cpp
//
// Every strategy runs on a serial Communicator (one rank, no MPI calls;
// serial.cpp) as well as on MPI.
//
// Guarantees (docs/exchange.md has the arguments):
// - every rank ends with the bitwise identical averaged vector;
// - no allocation per call in steady state: each operation slot keeps its
//   buffers, sized for the largest message of its size;
// - a message that fails its checksum or validation stops the job with
//   "qsgd: rank R: corrupt message from rank S at step T, tensor X: ..." and
//   exit code 3 (MPI_Abort), never a crash or a silent wrong sum;
// - at construction a hash of the configuration is compared across ranks; a
//   mismatch names the ranks and ends the job with exit code 4;
// - an MPI call that fails, or a wait that sees no progress for the peer
//   timeout (a peer died), ends the job with one line naming the rank, the
//   operation, step and tensor, and exit code 7 (communicator.hpp); no rank
//   stays blocked inside MPI.
//
// Non-blocking use and progress: start() does the local encoding and posts
// the first non-blocking collective; the rest happens inside test(),
// progress() and wait(), which advance every phase whose communication has
// completed (MPI makes progress only inside MPI calls: call progress() between
// layers to keep a bucket moving). All ranks must call start() and wait() in
// the same order; between start() and the end of wait() the caller must not
// touch the gradient or output View.

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "qsgd/comm/communicator.hpp"
#include "qsgd/kernels/config.hpp"
#include "qsgd/kernels/error.hpp"

namespace qsgd::comm {

// Numeric values enter the configuration hash: never renumber.
enum class StrategyKind : std::uint8_t {
  allreduce = 0,
  allreduce16 = 1,
  allgather = 2,
  param_server = 3,
  scatter_reduce = 4,
  shared_scale = 5,
  powersgd = 6,
};

// "allreduce", "allreduce16", "allgather", "param-server", "scatter-reduce", "shared-scale", "powersgd"
std::string to_string(StrategyKind k);
StrategyKind parse_strategy(const std::string& name);  // throws qsgd::Error(invalid_argument)

// How the strategies move their bytes (docs/exchange.md, "Transports").
// Numeric values enter the configuration hash: never renumber.
enum class Transport : std::uint8_t {
  ring = 0,     // the suite's point-to-point schedules: pipelined ring allreduce
                // (allreduce, allreduce16), ring allgather of variable-length
                // messages (allgather, scatter-reduce's second stage), pairwise
                // exchange (scatter-reduce's first stage); data are posted by
                // start(), with no size round trip before them
  library = 1,  // the MPI library's non-blocking collectives (MPI_Iallreduce,
                // MPI_Iallgatherv, ...), after a metadata collective
};
std::string to_string(Transport t);                // "ring", "library"
Transport parse_transport(const std::string& name);  // throws qsgd::Error(invalid_argument)

// What an exchange does when it meets an error (corrupt message, non-finite
// gradient, ranks that disagree on sizes). MPI errors and dead peers always
// end the job (exit code 7), whatever the policy.
enum class ErrorPolicy : std::uint8_t {
  automatic,    // abort under MPI, throw when serial
  abort,        // print one line naming rank, step and tensor; MPI_Abort / std::exit
  throw_error,  // throw ExchangeError. Under MPI only safe where every rank
                // detects the error (it leaves peers in collectives otherwise).
};

// Test hook: flip one bit of one message this rank sends, or of the
// metadata announcing it.
//   QSGD_FAULT_INJECT="rank=1,step=3,tensor=0[,stage=2][,part=meta][,word=W][,bit=B]"
// stage 1: the rank's own message (its gradient, or for scatter-reduce the
// chunk it sends to rank+1); stage 2: the requantized message it sends as
// parameter server or chunk owner. part=message (default): bit B (default 0)
// of the message's word W (default its last; past the end means the last).
// part=meta: bit B of metadata word W (default 0; taken modulo the 4 words:
// size, n, tensor and CRC, step) after its CRC was computed; strategies that
// send metadata only (allgather, scatter-reduce, shared-scale, param-server).
struct FaultInjection {
  bool enabled = false;
  int rank = 0;
  std::uint64_t step = 0;
  std::uint32_t tensor = 0;
  // Which message is corrupted: the first stage's (every strategy), or the
  // one sent back out in a second stage (scatter-reduce's allgather, the
  // parameter server's broadcast).
  static constexpr int first_stage = 1, back_stage = 2;
  int stage = first_stage;
  enum class Part : std::uint8_t { message, meta };
  Part part = Part::message;
  std::int64_t word = -1;  // -1: the message's last word (part=message), word 0 (part=meta)
  int bit = 0;             // 0..63

  static FaultInjection parse(const std::string& spec);  // throws qsgd::Error(invalid_argument)
  static FaultInjection from_env();                      // disabled when QSGD_FAULT_INJECT is unset
};

struct ExchangeConfig {
  StrategyKind strategy = StrategyKind::allgather;
  // Wire code. allreduce: ignored (fp32). allreduce16: codec fp16 or bf16
  // (anything else means bf16). Other strategies: any codec; fp32 makes them
  // exact, deterministic-order averages.
  CodecConfig codec{};
  std::uint64_t seed = 0;  // RngKey.seed of every quantization
  int server = 0;          // param_server: the server's rank (it is also a worker)
  ErrorPolicy on_error = ErrorPolicy::automatic;
  FaultInjection fault = {};  // make_exchange() also reads QSGD_FAULT_INJECT when this is disabled
  // Transport. param-server always uses the library's collectives.
  Transport transport = Transport::ring;
  // Ring allreduce: segment size of the pipeline (all ranks must agree) and
  // receives in flight per operation. Neither changes the result's bits.
  // 4 MiB x 8 keeps 32 MiB in flight: enough to fill a shaped 1 Gbit/s link
  // whose queue holds up to 100 ms (docs/exchange.md, "Transports").
  std::uint64_t segment_bytes = std::uint64_t(4) << 20;
  std::uint32_t window = 8;
  // Ring allreduce of the raw-value strategies (allreduce, allreduce16,
  // powersgd): every segment travels with its CRC32C and is checked before it
  // is used (detail/p2p.hpp, RingReduce); all ranks must agree. Off only to
  // measure what the check costs (qsgd-bench-exchange --ring-checksums off).
  bool ring_checksums = true;
  // powersgd: the rank r of the low-rank approximation (at least 1).
  std::uint32_t powersgd_rank = 4;
};

// A row-major matrix inside an exchanged vector: elements [offset, offset +
// rows x cols). PowerSGD compresses the matrices of an operation's layout
// (Exchange::set_layout) and averages every other element exactly.
struct MatrixBlock {
  std::uint64_t offset = 0, rows = 0, cols = 0;
};

// What an error does under `policy` on `comm`, the one place for the rule
// (automatic: end the job under MPI, throw when serial): ends the job with
// `exit_code` after printing "qsgd: rank R: <what>" (Communicator::abort;
// collective: every rank reaches this call and they leave together), or
// throws ExchangeError(code, exit_code, "qsgd: rank R: <what>").
[[noreturn]] void raise_error(ErrorPolicy policy, const Communicator& comm, Errc code, int exit_code,
                              const std::string& what, bool collective = false);
// Whether raise_error throws (true) or ends the job under `policy` on `comm`.
bool error_throws(ErrorPolicy policy, const Communicator& comm);

// The codec a strategy really uses, the one place for the rule: allreduce
// moves fp32 whatever cfg.codec says; allreduce16 moves fp16 when asked for
// it and bf16 otherwise; the fields a codec does not use are zeroed (s, d
// and norm of an unquantized codec, chunk of a fixed-length one), so that
// configurations that behave the same describe and hash the same.
CodecConfig effective_codec(const ExchangeConfig& cfg);

// Throws qsgd::Error(invalid_argument) naming the cause when shared-scale
// cannot run `codec` at `ranks` ranks: it needs a quantized codec whose code
// holds K s levels (the sums of the reduce stage).
void check_shared_scale(const CodecConfig& codec, int ranks);

// Hash of everything in `cfg` that all ranks must agree on, plus the rank count.
std::uint64_t config_hash(const ExchangeConfig& cfg, int ranks);
std::string describe(const ExchangeConfig& cfg);

// Time and bytes of one completed operation on this rank.
//   wire_bytes: bytes this rank receives in one operation when every
//   collective runs its bandwidth-optimal schedule (ring allreduce: each rank
//   receives 2(K-1)/K of the vector; allgatherv / alltoallv / gatherv /
//   bcast: what is addressed to this rank from other ranks), including the
//   8-byte size words. Formulas per strategy: docs/exchange.md.
//
// Times (docs/traces.md has how the trainer combines them):
//   blocked_s: inside wait()'s waits for MPI requests (a test loop watched
//     for dead peers, communicator.hpp), i.e. waiting for the network. Only
//     wait() blocks, so this is the operation's exposed communication. It is
//     exactly 0 when nothing is communicated (one rank). With a wait hook
//     (set_wait_idle), wait() spins instead of blocking: its wall time, less
//     the kernels it and the hook ran, is blocked time.
//   comm_s: every other MPI call (posting, testing) and host staging copies
//     (the tests a wait hook runs for other operations are counted here and
//     inside the waiting operation's blocked_s).
//   network intervals: from each phase's first post to the moment its
//     completion was observed (by test(), progress() or wait()): when bytes
//     of this operation could be on the wire.
struct OpStats {
  static constexpr int max_intervals = 4;
  std::uint64_t n = 0;
  std::uint64_t step = 0;
  std::uint32_t tensor = 0;
  double quantize_s = 0;                // stochastic rounding (0 where the codec fuses it into encode_s)
  double encode_s = 0;                  // wire code and checksum; 16-bit: conversion
  double requantize_s = 0;              // second-stage quantize + encode (server, chunk owner)
  double comm_s = 0;                    // MPI calls that do not block, host staging
  double blocked_s = 0;                 // blocking MPI waits: exposed communication
  double decode_s = 0;                  // checksum, decode, accumulate (ring additions included), final scaling
  double total_s = 0;                   // start() to the end of wait()
  int intervals = 0;                    // network intervals, steady-clock seconds (time_since_epoch)
  double net_begin[max_intervals] = {};
  double net_end[max_intervals] = {};
  bool fused_quantize = false;          // quantize_s is inside encode_s
  std::uint64_t encoded_bytes = 0;      // bytes this rank's first-stage messages take (all its chunks)
  std::uint64_t requantized_bytes = 0;  // bytes of the requantized message this rank made (server, chunk owner)
  std::uint64_t wire_bytes = 0;         // see above
};

// An operation in flight. Valid from start() until the wait() that ends it.
struct Handle {
  std::uint32_t slot = ~0u;
  std::uint32_t generation = 0;
  bool valid() const { return slot != ~0u; }
};

// What the exchange throws under ErrorPolicy::throw_error.
class ExchangeError : public std::runtime_error {
 public:
  ExchangeError(Errc code, int exit_code, const std::string& what)
      : std::runtime_error(what), code_(code), exit_code_(exit_code) {}
  Errc code() const noexcept { return code_; }
  int exit_code() const noexcept { return exit_code_; }

 private:
  Errc code_;
  int exit_code_;
};

// Host memory that staged messages and reductions pass through: page-locked
// where the backend has it (CUDA, HIP), so that the copies between device
// and host run by DMA at the bus's rate instead of through a bounce buffer,
// ordinary host memory otherwise (docs/exchange.md, "Memory spaces, staging,
// buffers").
#if defined(KOKKOS_ENABLE_CUDA)
using StagingSpace = Kokkos::CudaHostPinnedSpace;
inline constexpr const char* staging_memory = "page-locked host buffers";
#elif defined(KOKKOS_ENABLE_HIP)
using StagingSpace = Kokkos::Experimental::HIPHostPinnedSpace;
inline constexpr const char* staging_memory = "page-locked host buffers";
#else
using StagingSpace = Kokkos::HostSpace;
inline constexpr const char* staging_memory = "host buffers";
#endif

// Whether an exchange on c stages its messages through host buffers: the
// memory is not host-accessible and MPI does not take device pointers
// (docs/exchange.md, "Memory spaces, staging, buffers"). Reductions are
// staged whenever the memory is not host-accessible.
template <class MemorySpace>
bool stages_messages(const Communicator& c) {
  return !c.is_serial() && !Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible && !c.gpu_aware();
}

// The same rule in words, for provenance (the trainer's trace attribute
// message_path).
template <class MemorySpace>
std::string message_path(const Communicator& c) {
  if (c.is_serial()) return "one rank: nothing moves";
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible)
    return "host memory: MPI reads and writes the buffers";
  if (!stages_messages<MemorySpace>(c))
    return std::string("device memory: GPU-aware MPI takes device pointers (reductions staged through ") +
           staging_memory + ")";
  return std::string("device memory: staged through ") + staging_memory + " (MPI not GPU-aware)";
}

template <class ExecSpace = Kokkos::DefaultExecutionSpace>
class Exchange {
 public:
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  using values_view = Kokkos::View<float*, memory_space>;
  using const_values_view = Kokkos::View<const float*, memory_space>;

  virtual ~Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // Starts averaging grad[0, n) over all ranks into out[0, n), n =
  // grad.extent(0); out may be the same View as grad. `tensor` and `step`
  // key the random rounding and name the operation in error messages.
  // Error feedback: when `sent` is not empty (at least n elements, not
  // aliasing grad or out), the operation also writes there what this rank's
  // own contribution decodes to, C(grad): the decoded first-stage message(s)
  // (every quantized or float codec; the second stage's requantization is not
  // this rank's and is not included), grad itself for the exact fp32
  // allreduce. allreduce16 has no per-rank contribution (its sums round on
  // the way) and refuses a `sent` (Errc::invalid_argument).
  virtual Handle start(const const_values_view& grad, const values_view& out, std::uint32_t tensor,
                       std::uint64_t step, const values_view& sent = values_view()) = 0;
  // Advances the operation; true once its result is in `out` (then call wait()).
  virtual bool test(Handle h) = 0;
  // Completes the operation and releases its handle.
  virtual void wait(Handle h) = 0;
  // Advances every operation in flight without blocking (network, and the
  // kernels of the phases whose data arrived). Returns the seconds spent in
  // kernels.
  virtual double progress() = 0;
  // Advances only the network side of the operations in flight (tests
  // requests, runs the ring's additions; never another kernel, never a new
  // phase): what a progress thread may call while the caller computes. Not
  // thread-safe against the other members: serialize the calls. Returns
  // whether any operation still has network work that poll() can advance;
  // false means that nothing moves until the caller starts an operation or
  // runs a phase (start, test, progress, wait), so a progress thread may
  // sleep until then.
  virtual bool poll() = 0;
  // Wait hook. When set, wait() does not block inside MPI: it tests its
  // operation and calls `idle` in turn until the network side is done, so a
  // caller with several operations in flight, possibly of several exchanges
  // (the Bucketer), advances all of them while it waits for one, and no
  // operation's next step waits behind another's completion. `idle` may call
  // progress() and poll() of any exchange (they skip the operation being
  // waited for) and nothing else of this one (test() of the waited operation
  // returns false; a wait() inside the hook throws). It returns the seconds
  // it spent in kernels (progress()'s return value), which are not counted
  // as blocked time; the other operations' MPI tests and posts made while
  // waiting are (the caller was waiting for the network). What `idle`
  // throws leaves wait() unchanged. An empty function restores blocking.
  using IdleFn = std::function<double()>;
  virtual void set_wait_idle(IdleFn idle) = 0;
  // Blocking form: start + wait.
  void average(const const_values_view& grad, const values_view& out, std::uint32_t tensor, std::uint64_t step) {
    wait(start(grad, out, tensor, step));
  }

  // The matrices inside the vectors of `tensor` (sorted by offset, not
  // overlapping; Errc::invalid_argument otherwise), for strategies that
  // treat them as matrices (powersgd); the element-wise strategies ignore
  // it. Set before the tensor's first start(), the same on every rank.
  virtual void set_layout(std::uint32_t tensor, const std::vector<MatrixBlock>& blocks) = 0;
  // State a strategy carries from one step to the next (powersgd: every
  // tensor's Q, the warm start), the same on every rank, as floats in a
  // fixed order; empty for the others. load_state() takes what state()
  // gave (a checkpoint), after set_layout() of every tensor; a size that
  // does not fit is Errc::invalid_argument.
  virtual std::vector<float> state() const = 0;
  virtual void load_state(const std::vector<float>& state) = 0;

  // Statistics of the most recently completed operation.
  virtual const OpStats& last_stats() const = 0;
  virtual const ExchangeConfig& config() const = 0;
  virtual const Communicator& communicator() const = 0;
  virtual std::size_t in_flight() const = 0;

 protected:
  Exchange() = default;
};

// Collective over `comm`: checks that every rank passes the same
// configuration (config_hash) and returns the strategy's implementation.
template <class ExecSpace = Kokkos::DefaultExecutionSpace>
std::unique_ptr<Exchange<ExecSpace>> make_exchange(const ExchangeConfig& cfg, const Communicator& comm,
                                                   const ExecSpace& exec = ExecSpace());

inline std::unique_ptr<Exchange<>> make_exchange(StrategyKind kind, const CodecConfig& codec,
                                                 const Communicator& comm) {
  ExchangeConfig cfg;
  cfg.strategy = kind;
  cfg.codec = codec;
  return make_exchange(cfg, comm);
}

}  // namespace qsgd::comm
