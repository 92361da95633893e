// Bucketed, overlapped exchange: see bucketer.hpp.

#include "qsgd/comm/bucketer.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include "detail/exchange_base.hpp"

namespace qsgd::comm {

// The progress thread and the lock it shares with the caller. The thread
// sleeps on `wake` while no bucket is in flight, so it costs the forward pass
// and the first layers of backward nothing.
struct PollThread {
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;        // under mutex
  std::uint64_t calls = 0;  // public calls of the caller so far (under mutex): each may post network work
  std::uint64_t polls = 0;  // rounds of Exchange::poll() (under mutex)
  std::thread thread;
};

namespace {
// Holds the poller's mutex for the scope of a public call (no-op without a
// poller). At the end of the call, which may have started an operation or
// posted a phase, it counts the call and wakes the poller.
class CallGuard {
 public:
  explicit CallGuard(const std::unique_ptr<PollThread>& p)
      : p_(p.get()), lock_(p ? std::unique_lock<std::mutex>(p->mutex) : std::unique_lock<std::mutex>()) {}
  ~CallGuard() {
    if (!p_) return;
    ++p_->calls;
    lock_.unlock();
    p_->wake.notify_one();
  }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;

 private:
  PollThread* p_;
  std::unique_lock<std::mutex> lock_;
};

CallGuard guard(const std::unique_ptr<PollThread>& p) { return CallGuard(p); }
}  // namespace

template <class E>
Bucketer<E>::Bucketer(Exchange<E>& compressed, Exchange<E>& dense, const BucketerConfig& cfg)
    : compressed_(compressed), dense_(dense), cfg_(cfg) {
  if (compressed.communicator().size() != dense.communicator().size())
    throw Error(Errc::invalid_argument, "Bucketer: the two exchanges run over communicators of different sizes");
  if (cfg.fusion_bytes < sizeof(float)) throw Error(Errc::invalid_argument, "Bucketer: fusion_bytes below one float");
  const Communicator& comm = compressed.communicator();
  if (cfg.progress_thread && !comm.is_serial() && comm.size() > 1) {
    int level = MPI_THREAD_SINGLE;
    comm.check(MPI_Query_thread(&level), "MPI_Query_thread", {"progress thread setup", "bucketer"});
    if (level != MPI_THREAD_MULTIPLE)
      throw Error(Errc::invalid_argument,
                  "Bucketer: a progress thread needs MPI initialized with MPI_THREAD_MULTIPLE (MPI_Init_thread)");
    poller_ = std::make_unique<PollThread>();
    poller_->thread = std::thread([this] { poll_loop(); });
  }
  // While wait() waits for one bucket, every other bucket in flight (of both
  // exchanges) keeps moving: without this, a bucket's next ring step waited
  // for the completion of whichever bucket the caller waited for first.
  if (!comm.is_serial() && comm.size() > 1) {
    auto idle = [this] {
      double kernels = compressed_.progress();
      if (&dense_ != &compressed_) kernels += dense_.progress();
      return kernels;
    };
    compressed_.set_wait_idle(idle);
    if (&dense_ != &compressed_) dense_.set_wait_idle(idle);
    hooked_ = true;
  }
}

template <class E>
Bucketer<E>::~Bucketer() {
  if (hooked_) {
    compressed_.set_wait_idle({});
    dense_.set_wait_idle({});
  }
  if (!poller_) return;
  {
    std::lock_guard<std::mutex> lock(poller_->mutex);
    poller_->stop = true;
  }
  poller_->wake.notify_one();
  poller_->thread.join();
}

// Polls every poll_us while some operation has network work that poll() can
// advance. Once none has (every phase posted so far is complete and the next
// one waits for the caller's kernels, or nothing is in flight), it sleeps
// until the caller's next public call, which may have posted more: a bucket
// whose transfer is over costs the backward pass nothing while it waits for
// its wait().
template <class E>
void Bucketer<E>::poll_loop() {
  const auto period = std::chrono::microseconds(cfg_.poll_us);
  std::unique_lock<std::mutex> lock(poller_->mutex);
  bool idle = false;
  std::uint64_t seen = 0;  // the caller's call count when the poller went idle
  for (;;) {
    poller_->wake.wait(lock, [&] {
      return poller_->stop || (any_in_flight() && (!idle || poller_->calls != seen));
    });
    if (poller_->stop) return;
    seen = poller_->calls;
    bool pending = compressed_.poll();
    if (&dense_ != &compressed_) pending = dense_.poll() || pending;
    ++poller_->polls;
    idle = !pending;
    if (idle) continue;
    lock.unlock();
    std::this_thread::sleep_for(period);
    lock.lock();
  }
}

template <class E>
std::uint64_t Bucketer<E>::polls() const {
  if (!poller_) return 0;
  std::lock_guard<std::mutex> lock(poller_->mutex);
  return poller_->polls;
}

template <class E>
bool Bucketer<E>::any_in_flight() const {
  for (const Bucket& b : buckets_)
    if (b.started && !b.done) return true;
  return false;
}

template <class E>
std::uint32_t Bucketer<E>::add(std::uint64_t n, std::uint64_t rows) {
  if (planned_) throw Error(Errc::invalid_argument, "Bucketer: add() after plan()");
  if (rows > 1 && n % rows != 0)
    throw Error(Errc::invalid_argument, "Bucketer: a tensor of " + std::to_string(n) + " elements is not a matrix of " +
                                            std::to_string(rows) + " rows");
  sizes_.push_back(n);
  rows_.push_back(rows > 1 ? rows : 0);
  return static_cast<std::uint32_t>(sizes_.size() - 1);
}

template <class E>
void Bucketer<E>::plan() {
  if (planned_) throw Error(Errc::invalid_argument, "Bucketer: plan() called twice");
  const Communicator& comm = compressed_.communicator();
  // Every rank must have registered the same tensors with the same thresholds
  // and exchanges.
  std::uint64_t h = fnv1a(sizes_.data(), sizes_.size() * sizeof(std::uint64_t));
  h = fnv1a(rows_.data(), rows_.size() * sizeof(std::uint64_t), h);  // the matrix layouts
  const std::uint64_t extra[] = {cfg_.fusion_bytes, cfg_.layer_filter, sizes_.size(),
                                 config_hash(compressed_.config(), comm.size()),
                                 config_hash(dense_.config(), comm.size())};
  h = fnv1a(extra, sizeof(extra), h);
  std::uint64_t total = 0;
  for (std::uint64_t n : sizes_) total += n;
  std::ostringstream desc;
  desc << sizes_.size() << " tensors, " << total << " elements, fusion " << cfg_.fusion_bytes << " bytes, layer filter "
       << cfg_.layer_filter;
  const std::string bad = comm.mismatch(h, "bucketer plan (tensor sizes, thresholds)", desc.str());
  if (!bad.empty())
    raise_error(compressed_.config().on_error, comm, Errc::invalid_argument, exit_config_mismatch, bad, true);

  auto align_of = [](const Exchange<E>& ex) -> std::uint64_t {
    const CodecConfig c = effective_codec(ex.config());
    return is_quantized(c.codec) && c.d > 0 ? c.d : 1;
  };
  const std::uint64_t align_c = align_of(compressed_), align_d = align_of(dense_);
  const std::uint64_t cap = cfg_.fusion_bytes / sizeof(float);
  // Tensors in registration (backward) order. Two buckets are open at a
  // time, one per kind (dense for tensors under the layer filter, compressed
  // for the rest), so a small tensor between two large ones does not split
  // their bucket. A tensor joins the open bucket of its kind unless that
  // bucket already holds something and the tensor's padded length would take
  // it past the fusion cap: then it opens a new one. So a tensor larger than
  // the cap gets a bucket of its own, and a bucket is never empty.
  int open_c = -1, open_d = -1;
  bucket_of_.assign(sizes_.size(), 0);
  index_in_bucket_.assign(sizes_.size(), 0);
  for (std::size_t t = 0; t < sizes_.size(); ++t) {
    const bool small = sizes_[t] < cfg_.layer_filter;
    const std::uint64_t a = small ? align_d : align_c;
    const std::uint64_t padded = (sizes_[t] + a - 1) / a * a;
    int& open = small ? open_d : open_c;
    if (open < 0 || (buckets_[static_cast<std::size_t>(open)].length > 0 &&
                     buckets_[static_cast<std::size_t>(open)].length + padded > cap)) {
      buckets_.emplace_back();
      buckets_.back().compressed = !small;
      open = static_cast<int>(buckets_.size() - 1);
    }
    Bucket& b = buckets_[static_cast<std::size_t>(open)];
    bucket_of_[t] = static_cast<std::uint32_t>(open);
    index_in_bucket_[t] = static_cast<std::uint32_t>(b.tensors.size());
    b.tensors.push_back(static_cast<std::uint32_t>(t));
    b.offsets.push_back(b.length);
    b.length += padded;
  }
  for (Bucket& b : buckets_) {
    b.buffer = values_view("qsgd::comm::fusion", b.length);  // zeroed: padding stays 0
    if (cfg_.report_sent && b.compressed) b.sent = values_view("qsgd::comm::sent", b.length);
    if (!b.compressed) continue;
    // The matrices of the bucket's vector (its operations' tensor id is its first tensor's).
    std::vector<MatrixBlock> blocks;
    for (std::size_t i = 0; i < b.tensors.size(); ++i) {
      const std::uint32_t t = b.tensors[i];
      if (rows_[t] > 1) blocks.push_back(MatrixBlock{b.offsets[i], rows_[t], sizes_[t] / rows_[t]});
    }
    compressed_.set_layout(b.tensors.front(), blocks);
  }
  pushed_.assign(sizes_.size(), 0);
  planned_ = true;
}

template <class E>
void Bucketer<E>::begin_step(std::uint64_t step) {
  auto lock = guard(poller_);
  if (!planned_) throw Error(Errc::invalid_argument, "Bucketer: begin_step() before plan()");
  for (Bucket& b : buckets_) {
    if (b.started && !b.done)
      throw Error(Errc::invalid_argument, "Bucketer: begin_step() with a bucket still in flight (call wait_all())");
    b.pushed = 0;
    b.started = b.done = false;
  }
  std::fill(pushed_.begin(), pushed_.end(), 0);
  step_ = step;
  totals_ = StepTotals{};
  intervals_.clear();
}

template <class E>
void Bucketer<E>::push(std::uint32_t tensor, const const_values_view& grad) {
  auto lock = guard(poller_);
  copy_in(check_push(tensor, grad.extent(0)), tensor, grad);
}

template <class E>
void Bucketer<E>::push_inplace(std::uint32_t tensor, const values_view& grad) {
  auto lock = guard(poller_);
  Bucket& b = check_push(tensor, grad.extent(0));
  if (b.tensors.size() == 1 && b.length == sizes_[tensor]) {  // the tensor is the bucket: no fusion copy
    b.pushed = 1;
    start_bucket(b, grad);
  } else {
    copy_in(b, tensor, grad);
  }
}

template <class E>
void Bucketer<E>::copy_in(Bucket& b, std::uint32_t tensor, const const_values_view& grad) {
  const std::uint64_t off = b.offsets[index_in_bucket_[tensor]];
  Kokkos::deep_copy(Kokkos::subview(b.buffer, Kokkos::make_pair(off, off + sizes_[tensor])), grad);
  if (++b.pushed == b.tensors.size()) start_bucket(b, b.buffer);
}

template <class E>
typename Bucketer<E>::Bucket& Bucketer<E>::check_push(std::uint32_t tensor, std::uint64_t n) {
  if (!planned_) throw Error(Errc::invalid_argument, "Bucketer: push() before plan()");
  if (tensor >= sizes_.size())
    throw Error(Errc::invalid_argument, "Bucketer: unknown tensor " + std::to_string(tensor));
  if (n != sizes_[tensor])
    throw Error(Errc::invalid_argument, "Bucketer: tensor " + std::to_string(tensor) + " registered with " +
                                            std::to_string(sizes_[tensor]) + " elements, pushed with " +
                                            std::to_string(n));
  if (pushed_[tensor])
    throw Error(Errc::invalid_argument, "Bucketer: tensor " + std::to_string(tensor) + " pushed twice");
  pushed_[tensor] = 1;
  return buckets_[bucket_of_[tensor]];
}

template <class E>
void Bucketer<E>::start_bucket(Bucket& b, const values_view& data) {
  b.data = data;
  b.t_start = detail::clock_seconds();
  b.handle = exchange_for(b).start(data, data, b.tensors.front(), step_, b.sent);
  b.started = true;
  if (poller_) poller_->wake.notify_one();
}

template <class E>
void Bucketer<E>::progress() {
  auto lock = guard(poller_);
  compressed_.progress();
  if (&dense_ != &compressed_) dense_.progress();
}

template <class E>
void Bucketer<E>::finish(Bucket& b) {
  if (b.done) return;
  Exchange<E>& ex = exchange_for(b);
  ex.wait(b.handle);
  b.done = true;
  const OpStats& st = ex.last_stats();
  totals_.quantize_s += st.quantize_s;
  totals_.encode_s += st.encode_s;
  totals_.requantize_s += st.requantize_s;
  totals_.comm_s += st.comm_s;
  totals_.blocked_s += st.blocked_s;
  totals_.decode_s += st.decode_s;
  totals_.total_s += st.total_s;
  totals_.encoded_bytes += st.encoded_bytes;
  totals_.wire_bytes += st.wire_bytes;
  totals_.elements += st.n;
  ++totals_.operations;
  b.t_posted = st.intervals > 0 ? st.net_begin[0] : NAN;
  b.t_done = st.intervals > 0 ? st.net_end[st.intervals - 1] : NAN;
  for (int i = 0; i < st.intervals; ++i) intervals_.emplace_back(st.net_begin[i], st.net_end[i]);
  // Union of the step's intervals so far (a handful: sort and sweep).
  std::sort(intervals_.begin(), intervals_.end());
  double busy = 0, lo = 0, hi = -1;
  for (const auto& [a, z] : intervals_) {
    if (a > hi) {
      busy += hi > lo ? hi - lo : 0;
      lo = a;
      hi = z;
    } else {
      hi = std::max(hi, z);
    }
  }
  busy += hi > lo ? hi - lo : 0;
  totals_.network_s = busy;
}

template <class E>
void Bucketer<E>::wait(std::uint32_t tensor, const values_view& out) {
  finish_tensor(tensor, out, false);
}

template <class E>
typename Bucketer<E>::values_view Bucketer<E>::wait_sent(std::uint32_t tensor, const values_view& out) {
  return finish_tensor(tensor, out, true);
}

template <class E>
typename Bucketer<E>::values_view Bucketer<E>::finish_tensor(std::uint32_t tensor, const values_view& out,
                                                             bool want_sent) {
  auto lock = guard(poller_);
  if (tensor >= sizes_.size())
    throw Error(Errc::invalid_argument, "Bucketer: unknown tensor " + std::to_string(tensor));
  Bucket& b = buckets_[bucket_of_[tensor]];
  if (!b.started)
    throw Error(Errc::invalid_argument, "Bucketer: the bucket of tensor " + std::to_string(tensor) +
                                            " has not started (a tensor of it was not pushed this step)");
  if (want_sent && b.sent.extent(0) == 0)
    throw Error(Errc::invalid_argument, "Bucketer: tensor " + std::to_string(tensor) +
                                            " has no sent values (a dense tensor, or report_sent is off)");
  finish(b);
  const std::uint64_t off = b.offsets[index_in_bucket_[tensor]];
  const auto mine = Kokkos::make_pair(off, off + sizes_[tensor]);
  if (b.data.data() != out.data() || off != 0)  // else averaged in place (push_inplace)
    Kokkos::deep_copy(Kokkos::subview(out, Kokkos::make_pair<std::uint64_t>(0, sizes_[tensor])),
                      Kokkos::subview(b.data, mine));
  return want_sent ? values_view(Kokkos::subview(b.sent, mine)) : values_view();
}

template <class E>
void Bucketer<E>::wait_all() {
  auto lock = guard(poller_);
  for (Bucket& b : buckets_)
    if (b.started) finish(b);
}

template class Bucketer<Kokkos::DefaultExecutionSpace>;
#if defined(QSGD_COMM_HOST_INSTANCE) && QSGD_COMM_HOST_INSTANCE
template class Bucketer<Kokkos::DefaultHostExecutionSpace>;
#endif

}  // namespace qsgd::comm
