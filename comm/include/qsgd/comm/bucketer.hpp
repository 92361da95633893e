#pragma once
// qsgd::comm::Bucketer: bucketed, overlapped gradient exchange (spec section 4,
// "Overlap"). A trainer registers its tensors once, in the order backward
// produces their gradients; each step it pushes each gradient as soon as it
// is computed, and the bucket that gradient completes starts exchanging while
// backward goes on.
//
// Layer filter: tensors with fewer than `layer_filter` elements (biases,
// norms; the paper quantizes only tensors above 10,000 elements) go to the
// `dense` exchange, typically fp32; the others to the `compressed` one.
// Fusion: tensors of the same kind, in registration order, share one bucket
// up to `fusion_bytes` (a larger tensor gets a bucket of its own); one bucket
// of each kind is open at a time, so a dense tensor between two compressed
// ones does not split theirs (Bucketer::plan in bucketer.cpp). Inside a
// compressed bucket every tensor starts at a multiple of the quantization
// bucket size d, so no quantization bucket mixes two tensors (a layer with
// small gradients is never scaled by a neighbour's large ones); the padding
// is zero and stays zero (Q(0) = 0 for every codec and strategy).
//
// The random-rounding key of a bucket is (seed, step, rank, first tensor id
// of the bucket); error messages name that tensor id.
//
// Progress: MPI moves bytes only inside MPI calls (Open MPI has no
// asynchronous progress for TCP or shared memory). With
// BucketerConfig::progress_thread, a background thread polls the network
// side of every operation in flight (MPI_Testsome / MPI_Testall, the ring's
// additions) every `poll_us` microseconds while an operation has network
// work it can advance (it sleeps otherwise, until the caller's next call),
// so transfers advance while backward computes; phases that run kernels (decode, requantize) stay on
// the calling thread, in progress() and wait(). Needs MPI_THREAD_MULTIPLE;
// the thread and the caller serialize on one mutex. Without it, progress is
// made only in push(), progress() and wait() (call progress() from every
// layer hook). Either way, wait() does not block on its bucket alone: with
// K > 1 the constructor installs a wait hook on both exchanges
// (Exchange::set_wait_idle; removed by the destructor, so direct waits on
// those exchanges advance the Bucketer's buckets meanwhile), and a wait
// advances every bucket in flight while it waits for one.
//
// Collective discipline: plan() is collective (it checks that every rank
// registered the same sizes), and all ranks must push tensors in the same
// order, so that buckets start in the same order everywhere. Once every
// bucket of the step has started, ranks may wait for them in any order; a
// push after a wait must come after the same waits on every rank (an
// operation's slot, and with it its communicator, is the lowest free one).

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "qsgd/comm/exchange.hpp"

namespace qsgd::comm {

struct BucketerConfig {
  std::size_t fusion_bytes = std::size_t(8) << 20;   // largest bucket in fp32 bytes, padding included
  std::uint64_t layer_filter = 10000;                // fewer elements than this: dense exchange
  bool progress_thread = false;                      // see "Progress" above
  unsigned poll_us = 100;                            // polling period of the progress thread
  // Error feedback: compressed buckets also keep what this rank's own
  // contribution decoded to (Exchange::start's `sent`), for wait(t, out, sent).
  bool report_sent = false;
};

// Sums over the operations a step completed (both exchanges), for traces.
//   blocked_s: time blocked in MPI waits (exposed communication);
//   network_s: length of the union of the operations' network intervals
//     (OpStats): time during which some bytes of the step could be moving.
//   network_s - blocked_s is time in flight outside waits: transfers, and
//     the coding, reductions and waiting for peers inside the intervals (an
//     upper bound on link time hidden under other work; docs/metrics.md).
struct StepTotals {
  double quantize_s = 0, encode_s = 0, requantize_s = 0, comm_s = 0, blocked_s = 0, decode_s = 0, total_s = 0;
  double network_s = 0;
  std::uint64_t encoded_bytes = 0;  // this rank's first-stage messages (fp32 bytes for dense buckets)
  std::uint64_t wire_bytes = 0;     // as OpStats::wire_bytes, summed
  std::uint64_t elements = 0;       // elements exchanged, bucket padding included
  std::uint32_t operations = 0;
};

struct PollThread;  // bucketer.cpp

template <class ExecSpace = Kokkos::DefaultExecutionSpace>
class Bucketer {
 public:
  using memory_space = typename ExecSpace::memory_space;
  using values_view = Kokkos::View<float*, memory_space>;
  using const_values_view = Kokkos::View<const float*, memory_space>;

  struct Bucket {
    bool compressed = false;
    std::vector<std::uint32_t> tensors;  // in registration order
    std::vector<std::uint64_t> offsets;  // element offset of each tensor in the fusion buffer
    std::uint64_t length = 0;            // elements, padding included
    values_view buffer;                  // fusion buffer; averaged in place
    values_view data;                    // this step's data: the buffer, or the tensor itself (push_inplace)
    values_view sent;                    // report_sent, compressed buckets: this rank's decoded contribution
    Handle handle;
    std::uint32_t pushed = 0;
    bool started = false;
    bool done = false;
    // This step's times (steady-clock seconds): start() called, first byte
    // posted, completion observed; posted/done are NaN when nothing was sent.
    double t_start = 0, t_posted = 0, t_done = 0;
  };

  Bucketer(Exchange<ExecSpace>& compressed, Exchange<ExecSpace>& dense, const BucketerConfig& cfg = {});
  ~Bucketer();
  Bucketer(const Bucketer&) = delete;
  Bucketer& operator=(const Bucketer&) = delete;

  // Registers the next tensor (backward order); returns its id (0, 1, ...).
  // rows > 1 (dividing n): the tensor is a row-major rows x (n / rows)
  // matrix, which plan() reports to the compressed exchange's set_layout
  // (PowerSGD compresses matrices; the element-wise strategies ignore it).
  std::uint32_t add(std::uint64_t n, std::uint64_t rows = 0);
  // Collective. Forms the buckets, allocates the fusion buffers and checks that
  // every rank registered the same sizes and thresholds (exit code 4 if not).
  void plan();

  void begin_step(std::uint64_t step);
  // Copies the gradient into its bucket; starts the bucket when it is complete.
  void push(std::uint32_t tensor, const const_values_view& grad);
  // The same, but a tensor that is a bucket by itself (alone, no padding) is
  // exchanged in place: no copy in, and wait(tensor, grad) copies nothing
  // out. The caller must not touch `grad` until that wait returns.
  void push_inplace(std::uint32_t tensor, const values_view& grad);
  // Advances every bucket in flight (call between layers).
  void progress();
  // Completes the tensor's bucket if needed and copies its average into out.
  void wait(std::uint32_t tensor, const values_view& out);
  // The same, and returns what this rank's contribution of the tensor
  // decoded to (error feedback; report_sent and a compressed tensor, else
  // Errc::invalid_argument): a view into the bucket's buffer, valid until
  // the bucket starts again.
  values_view wait_sent(std::uint32_t tensor, const values_view& out);
  // Completes every started bucket.
  void wait_all();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Statistics of the operations completed since begin_step().
  const StepTotals& step_totals() const { return totals_; }
  std::uint32_t bucket_of(std::uint32_t tensor) const { return bucket_of_.at(tensor); }
  // Rounds of polling the progress thread has made (0 without one).
  std::uint64_t polls() const;
  std::size_t tensors() const { return sizes_.size(); }

 private:
  Exchange<ExecSpace>& exchange_for(const Bucket& b) { return b.compressed ? compressed_ : dense_; }
  void finish(Bucket& b);
  values_view finish_tensor(std::uint32_t tensor, const values_view& out, bool want_sent);
  Bucket& check_push(std::uint32_t tensor, std::uint64_t n);
  void copy_in(Bucket& b, std::uint32_t tensor, const const_values_view& grad);
  void start_bucket(Bucket& b, const values_view& data);
  void poll_loop();
  bool any_in_flight() const;  // a bucket started and not finished (under the poller's mutex)

  Exchange<ExecSpace>& compressed_;
  Exchange<ExecSpace>& dense_;
  BucketerConfig cfg_;
  std::vector<std::uint64_t> sizes_;
  std::vector<std::uint64_t> rows_;  // per tensor: matrix rows (0: a vector)
  std::vector<std::uint32_t> bucket_of_;
  std::vector<std::uint32_t> index_in_bucket_;
  std::vector<Bucket> buckets_;
  std::vector<char> pushed_;  // per tensor, this step
  std::uint64_t step_ = 0;
  bool planned_ = false;
  StepTotals totals_;
  std::vector<std::pair<double, double>> intervals_;  // this step's network intervals
  bool hooked_ = false;  // this Bucketer installed the exchanges' wait hooks
  std::unique_ptr<PollThread> poller_;
};

}  // namespace qsgd::comm
