#include "qsgd/algorithms/async_server.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "push.hpp"
#include "qsgd/algorithms/data_parallel.hpp"

namespace qsgd::algorithms {

namespace {

constexpr int tag_grad = 101;
constexpr int tag_params = 102;
constexpr int tag_stop = 103;
constexpr int tag_done = 104;
constexpr int header_words = detail::push_header_words;  // version, worker step, message bytes (push.hpp)
constexpr int server = 0;

// The parameter server's MPI calls, each checked (qsgd::comm::check_mpi: a
// failure prints one line naming the rank, the call and the operation, and
// ends the job with exit_mpi_error) and every wait a test loop under the
// communicator's peer timeout (qsgd::comm::PeerWatch), so that a dead server
// or worker ends the others within that time instead of leaving them
// blocked (docs/reliability.md).
struct Mpi {
  MPI_Comm comm;
  double timeout_s;

  static qsgd::comm::MpiSite site(const char* what) { return {what, "asynchronous parameter server"}; }
  void ok(int rc, const char* call, const char* what) const { qsgd::comm::check_mpi(rc, call, comm, site(what)); }
  // Waits for *req, watched; its status to *st.
  void wait(MPI_Request* req, MPI_Status* st, const char* what) const {
    qsgd::comm::PeerWatch watch(timeout_s, comm, site(what), "MPI_Test");
    for (;;) {
      int done = 0;
      ok(MPI_Test(req, &done, st), "MPI_Test", what);
      if (done) return;
      watch.check();
      watch.pause();
    }
  }
  // Waits for a message from anyone, watched (MPI_Iprobe in a loop).
  void probe(MPI_Status* st, const char* what) const {
    qsgd::comm::PeerWatch watch(timeout_s, comm, site(what), "MPI_Iprobe");
    for (;;) {
      int flag = 0;
      ok(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, st), "MPI_Iprobe", what);
      if (flag) return;
      watch.check();
      watch.pause();
    }
  }
  int count(const MPI_Status& st, const char* what) const {
    int c = 0;
    ok(MPI_Get_count(&st, MPI_UINT64_T, &c), "MPI_Get_count", what);
    return c;
  }
  // A message that a probe found: it has arrived, so the receive does not block.
  void recv(void* buf, int n, MPI_Datatype type, int src, int tag, const char* what) const {
    ok(MPI_Recv(buf, n, type, src, tag, comm, MPI_STATUS_IGNORE), "MPI_Recv", what);
  }
  void bcast(void* buf, int n, MPI_Datatype type, const char* what) const {
    MPI_Request req = MPI_REQUEST_NULL;
    ok(MPI_Ibcast(buf, n, type, server, comm, &req), "MPI_Ibcast", what);
    wait(&req, MPI_STATUS_IGNORE, what);
  }
  void barrier(const char* what) const {
    MPI_Request req = MPI_REQUEST_NULL;
    ok(MPI_Ibarrier(comm, &req), "MPI_Ibarrier", what);
    wait(&req, MPI_STATUS_IGNORE, what);
  }
};

// Send buffers in flight, recycled once their requests complete. A buffer's
// storage never moves while its send is pending (moving a std::vector keeps
// its heap block).
template <class T>
class SendQueue {
 public:
  explicit SendQueue(const Mpi& mpi) : mpi_(&mpi) {}
  // A buffer for the next send; post it with request().
  std::vector<T>& next() {
    progress();
    if (!free_.empty()) {
      pending_.push_back(std::move(free_.back()));
      free_.pop_back();
    } else {
      pending_.emplace_back();
    }
    pending_.back().req = MPI_REQUEST_NULL;
    return pending_.back().buf;
  }
  MPI_Request* request() { return &pending_.back().req; }
  void progress() {
    while (!pending_.empty()) {
      int done = 0;
      mpi_->ok(MPI_Test(&pending_.front().req, &done, MPI_STATUS_IGNORE), "MPI_Test", "send queue");
      if (!done) break;
      free_.push_back(std::move(pending_.front()));
      pending_.pop_front();
    }
  }
  void wait_all() {
    for (Item& it : pending_) mpi_->wait(&it.req, MPI_STATUS_IGNORE, "send queue drain");
    pending_.clear();
  }

 private:
  const Mpi* mpi_;
  struct Item {
    std::vector<T> buf;
    MPI_Request req = MPI_REQUEST_NULL;
  };
  std::deque<Item> pending_;
  std::vector<Item> free_;
};

void run_server(const Problem& p, const AsyncConfig& cfg, const Mpi& mpi, int workers,
                const qsgd::comm::Communicator& world, AsyncResult& r, Vec& x) {
  const MPI_Comm comm = mpi.comm;
  const std::size_t n = p.dim();
  Channel ch(cfg.wire, n);
  const std::size_t max_words = header_words + ch.buffer_words();
  std::vector<std::uint64_t> in(max_words);
  std::vector<SendQueue<double>> replies(static_cast<std::size_t>(workers), SendQueue<double>(mpi));
  Vec g(n);
  std::uint64_t v = 0;
  r.applied_per_worker.assign(static_cast<std::size_t>(workers), 0);
  r.curve.push_back(evaluate(p, x, 0, 0, cfg.eval));

  auto fail = [&](int src, const std::string& what) {
    world.abort(qsgd::comm::exit_corrupt_message, "corrupt push from rank " + std::to_string(src) + ": " + what);
  };

  // A watch per worker on its pushes: a live worker pushes without pause
  // (the server answers every push at once, so its window never stays full),
  // so one worker's silence for the peer timeout means that worker is dead
  // or hangs, even while the others keep the server busy (a single watch on
  // all pushes would notice a dead worker only at the shutdown drain, after
  // the whole run). When every worker is silent, each watch fires.
  std::vector<std::string> worker_sites;
  for (int w = 1; w <= workers; ++w) worker_sites.push_back("receive of pushes from rank " + std::to_string(w));
  std::vector<qsgd::comm::PeerWatch> from_worker;
  for (const std::string& s : worker_sites)
    from_worker.emplace_back(mpi.timeout_s, comm, Mpi::site(s.c_str()), "MPI_Iprobe");
  auto check_workers = [&] {
    for (const auto& wch : from_worker) wch.check();
  };
  while (v < cfg.updates) {
    int flag = 0;
    MPI_Status st;
    mpi.ok(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &st), "MPI_Iprobe", "receive of pushes");
    if (!flag) {
      for (auto& q : replies) q.progress();
      check_workers();
      std::this_thread::yield();  // ranks may outnumber cores: let the workers run
      continue;
    }
    const int src = st.MPI_SOURCE;
    if (src >= 1 && src <= workers) from_worker[static_cast<std::size_t>(src - 1)].progress();
    check_workers();
    const int count = mpi.count(st, "receive of pushes");
    if (st.MPI_TAG != tag_grad) fail(src, "unexpected tag " + std::to_string(st.MPI_TAG));
    if (count < 0) fail(src, "negative count");
    const std::string size_fault = detail::push_size_fault(static_cast<std::size_t>(count), ch.buffer_words());
    if (!size_fault.empty()) fail(src, size_fault);
    mpi.recv(in.data(), count, MPI_UINT64_T, src, tag_grad, "receive of pushes");
    ++r.pushes;
    std::uint64_t vw = 0, bytes = 0;
    std::fill(g.begin(), g.end(), 0.0);
    try {
      const detail::PushHeader h = detail::parse_push(in.data(), static_cast<std::size_t>(count), v);
      vw = h.version;
      bytes = h.bytes;
      std::copy(in.begin() + header_words, in.begin() + count, ch.buffer());
      ch.accumulate(static_cast<std::size_t>(bytes), 1.0, g);
    } catch (const std::exception& e) {
      fail(src, e.what());
    }
    r.grad_bits += 8 * bytes;
    const std::uint64_t stale = v - vw;
    auto bump = [](std::vector<std::uint64_t>& h, std::uint64_t k) {
      if (h.size() <= k) h.resize(k + 1, 0);
      ++h[k];
    };
    if (cfg.tau >= 0 && stale > static_cast<std::uint64_t>(cfg.tau)) {
      ++r.rejected;
      bump(r.rejected_hist, stale);
    } else {
      axpy(-cfg.step.at(v), g, x);
      ++v;
      ++r.applied;
      bump(r.staleness_hist, stale);
      r.staleness.push_back(static_cast<std::uint32_t>(stale));
      r.max_staleness = std::max(r.max_staleness, stale);
      ++r.applied_per_worker[static_cast<std::size_t>(src - 1)];
      if (v % cfg.eval.every == 0 || v == cfg.updates) r.curve.push_back(evaluate(p, x, v, r.grad_bits, cfg.eval));
    }
    // Answer every push with the current parameters (the worker's pull).
    auto& q = replies[static_cast<std::size_t>(src - 1)];
    std::vector<double>& out = q.next();
    out.resize(n + 1);
    out[0] = static_cast<double>(v);
    std::copy(x.begin(), x.end(), out.begin() + 1);
    mpi.ok(MPI_Isend(out.data(), static_cast<int>(n + 1), MPI_DOUBLE, src, tag_params, comm, q.request()),
           "MPI_Isend", "reply with the parameters");
  }

  // Shutdown: STOP to every worker, then drain until each has sent DONE.
  std::vector<MPI_Request> stops(static_cast<std::size_t>(workers));
  for (int w = 1; w <= workers; ++w)
    mpi.ok(MPI_Isend(nullptr, 0, MPI_DOUBLE, w, tag_stop, comm, &stops[w - 1]), "MPI_Isend", "shutdown");
  int done = 0;
  while (done < workers) {
    MPI_Status st;
    mpi.probe(&st, "shutdown drain");
    const int count = mpi.count(st, "shutdown drain");
    if (st.MPI_TAG == tag_done) {
      std::uint64_t sent = 0;
      mpi.recv(&sent, 1, MPI_UINT64_T, st.MPI_SOURCE, tag_done, "shutdown drain");
      r.sent += sent;
      ++done;
    } else if (st.MPI_TAG == tag_grad && count >= 0 &&
               detail::push_size_fault(static_cast<std::size_t>(count), ch.buffer_words()).empty()) {
      mpi.recv(in.data(), count, MPI_UINT64_T, st.MPI_SOURCE, tag_grad, "shutdown drain");
      ++r.discarded;
    } else {
      fail(st.MPI_SOURCE, "unexpected message during shutdown (tag " + std::to_string(st.MPI_TAG) + ")");
    }
  }
  for (MPI_Request& req : stops) mpi.wait(&req, MPI_STATUS_IGNORE, "shutdown");
  for (auto& q : replies) q.wait_all();
}

void run_worker(const Problem& p, const AsyncConfig& cfg, const Mpi& mpi, int rank, int workers) {
  const MPI_Comm comm = mpi.comm;
  const std::size_t n = p.dim();
  const int w = rank - 1;
  const Shard shard = cfg.sharded ? p.shard(w, workers) : Shard{0, p.samples()};
  Channel ch(cfg.wire, n);
  Vec x = p.initial_point(), g(n);
  std::uint64_t version = 0, step = 0, in_flight = 0;
  std::vector<double> rbuf(n + 1);
  MPI_Request rreq = MPI_REQUEST_NULL;
  auto post_receive = [&] {
    mpi.ok(MPI_Irecv(rbuf.data(), static_cast<int>(n + 1), MPI_DOUBLE, server, MPI_ANY_TAG, comm, &rreq), "MPI_Irecv",
           "receive of the parameters");
  };
  post_receive();
  SendQueue<std::uint64_t> sends(mpi);
  bool stopped = false;
  // A message from the server has arrived in rbuf: take it, re-post the receive.
  auto handle = [&](const MPI_Status& st) {
    if (st.MPI_TAG == tag_stop) {
      stopped = true;
      return;
    }
    const auto v = static_cast<std::uint64_t>(rbuf[0]);
    if (v >= version) {
      version = v;
      std::copy(rbuf.begin() + 1, rbuf.end(), x.begin());
    }
    if (in_flight > 0) --in_flight;
    post_receive();
  };
  auto drain = [&] {
    while (!stopped) {
      int flag = 0;
      MPI_Status st;
      mpi.ok(MPI_Test(&rreq, &flag, &st), "MPI_Test", "receive of the parameters");
      if (!flag) break;
      handle(st);
    }
  };
  const double inv_b = 1.0 / cfg.batch;
  while (!stopped) {
    if (!cfg.lazy_pull) drain();
    if (stopped) break;
    if (in_flight >= static_cast<std::uint64_t>(cfg.window)) {
      MPI_Status st;
      mpi.wait(&rreq, &st, "receive of the parameters (window full)");
      handle(st);
      drain();
      continue;
    }
    std::fill(g.begin(), g.end(), 0.0);
    for (int k = 0; k < cfg.batch; ++k) p.add_sample_gradient(sample_index(shard, cfg.seed, step, w, k), x, inv_b, g);
    if (cfg.worker_delay_us > 0 && rank > 1)
      std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(cfg.worker_delay_us * (rank - 1)));
    const std::size_t bytes = ch.encode(g, RngKey{cfg.seed, step, static_cast<std::uint32_t>(rank), 0});
    std::vector<std::uint64_t>& out = sends.next();
    const std::size_t words = (bytes + 7) / 8;
    out.resize(header_words + words);
    out[0] = version;
    out[1] = step;
    out[2] = bytes;
    std::copy(ch.buffer(), ch.buffer() + words, out.begin() + header_words);
    mpi.ok(MPI_Isend(out.data(), static_cast<int>(out.size()), MPI_UINT64_T, server, tag_grad, comm, sends.request()),
           "MPI_Isend", "push");
    ++in_flight;
    ++step;
    sends.progress();
  }
  std::uint64_t pushes = step;
  MPI_Request done = MPI_REQUEST_NULL;
  mpi.ok(MPI_Isend(&pushes, 1, MPI_UINT64_T, server, tag_done, comm, &done), "MPI_Isend", "shutdown");
  mpi.wait(&done, MPI_STATUS_IGNORE, "shutdown");
  sends.wait_all();
}

// Every rank gets the server's result.
void broadcast(AsyncResult& r, Vec& x, const Mpi& mpi) {
  auto bcast_u64 = [&](std::vector<std::uint64_t>& v) {
    std::uint64_t size = v.size();
    mpi.bcast(&size, 1, MPI_UINT64_T, "broadcast of the result");
    v.resize(size);
    if (size) mpi.bcast(v.data(), static_cast<int>(size), MPI_UINT64_T, "broadcast of the result");
  };
  std::vector<std::uint64_t> scalars = {r.applied,   r.rejected, r.discarded, r.max_staleness,
                                        r.grad_bits, r.pushes,   r.sent};
  bcast_u64(scalars);
  r.applied = scalars[0];
  r.rejected = scalars[1];
  r.discarded = scalars[2];
  r.max_staleness = scalars[3];
  r.grad_bits = scalars[4];
  r.pushes = scalars[5];
  r.sent = scalars[6];
  bcast_u64(r.staleness_hist);
  bcast_u64(r.rejected_hist);
  bcast_u64(r.applied_per_worker);
  std::vector<std::uint64_t> st(r.staleness.begin(), r.staleness.end());
  bcast_u64(st);
  r.staleness.assign(st.begin(), st.end());
  mpi.bcast(x.data(), static_cast<int>(x.size()), MPI_DOUBLE, "broadcast of the result");
  // The curve: iteration and bits as integers, the three measures as doubles.
  std::vector<std::uint64_t> it;
  std::vector<double> vals;
  for (const CurvePoint& tp : r.curve) {
    it.push_back(tp.iteration);
    it.push_back(tp.bits);
    vals.insert(vals.end(), {tp.suboptimality, tp.loss, tp.grad_norm2});
  }
  bcast_u64(it);
  vals.resize(it.size() / 2 * 3);
  if (!vals.empty()) mpi.bcast(vals.data(), static_cast<int>(vals.size()), MPI_DOUBLE, "broadcast of the result");
  r.curve.resize(it.size() / 2);
  for (std::size_t i = 0; i < r.curve.size(); ++i)
    r.curve[i] = CurvePoint{it[2 * i], vals[3 * i], vals[3 * i + 1], vals[3 * i + 2], it[2 * i + 1]};
}

}  // namespace

AsyncResult run_async(const Problem& p, const AsyncConfig& cfg, const qsgd::comm::Communicator& comm) {
  if (comm.is_serial() || comm.size() < 2)
    throw std::invalid_argument("run_async: needs an MPI communicator of at least 2 ranks (a server and a worker)");
  if (cfg.window < 1 || cfg.batch < 1 || cfg.eval.every < 1)
    throw std::invalid_argument("run_async: window, batch and eval.every must be >= 1");
  const auto t0 = std::chrono::steady_clock::now();
  qsgd::comm::OwnedComm own(comm);  // a duplicate with MPI_ERRORS_RETURN
  const Mpi mpi{own.get(), comm.peer_timeout()};
  const int workers = comm.size() - 1;
  AsyncResult r;
  r.workers = workers;
  Vec x = p.initial_point();
  mpi.barrier("start");
  if (comm.rank() == server)
    run_server(p, cfg, mpi, workers, comm, r, x);
  else
    run_worker(p, cfg, mpi, comm.rank(), workers);
  broadcast(r, x, mpi);
  r.x = x;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  mpi.bcast(&secs, 1, MPI_DOUBLE, "broadcast of the result");
  r.seconds = secs;
  return r;
}

}  // namespace qsgd::algorithms
