// Point-to-point schedules of the ring transport: see detail/p2p.hpp.

#include "detail/p2p.hpp"

#include <climits>
#include <thread>

#include "qsgd/kernels/crc32c.hpp"

namespace qsgd::comm::detail {

namespace {
constexpr std::uint64_t recv_bit = std::uint64_t(1) << 63;
constexpr std::uint64_t crc_bit = std::uint64_t(1) << 62;  // RingReduce: a segment's CRC message
constexpr int max_tag = 32767;  // the smallest MPI_TAG_UB the standard allows

int as_int_bytes(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(INT_MAX))
    throw std::length_error("point-to-point message of " + std::to_string(bytes) + " bytes exceeds INT_MAX");
  return static_cast<int>(bytes);
}
}  // namespace

// ---- Schedule ---------------------------------------------------------------

void Schedule::reset_requests(MPI_Comm comm) {
  comm_ = comm;
  // Requests still in flight belong to an operation that failed under
  // ErrorPolicy::throw_error: they are abandoned, as the library transport's are.
  pending_ = 0;
  completions_ = 0;
  free_.clear();
  for (std::uint32_t i = static_cast<std::uint32_t>(reqs_.size()); i-- > 0;) {
    reqs_[i] = MPI_REQUEST_NULL;
    free_.push_back(i);
  }
}

std::uint32_t Schedule::slot() {
  if (free_.empty()) {
    reqs_.push_back(MPI_REQUEST_NULL);
    ids_.push_back(0);
    index_.resize(reqs_.size());
    status_.resize(reqs_.size());
    return static_cast<std::uint32_t>(reqs_.size() - 1);
  }
  const std::uint32_t s = free_.back();
  free_.pop_back();
  return s;
}

void Schedule::post_send(const void* buf, std::size_t bytes, int dest, int tag, std::uint64_t id) {
  const std::uint32_t s = slot();
  const auto t0 = Clock::now();
  check_mpi(MPI_Isend(buf, as_int_bytes(bytes), MPI_BYTE, dest, tag, comm_, &reqs_[s]), "MPI_Isend", comm_, site_);
  times_->call += since(t0);
  ids_[s] = id;
  ++pending_;
}

void Schedule::post_recv(void* buf, std::size_t bytes, int source, int tag, std::uint64_t id) {
  const std::uint32_t s = slot();
  const auto t0 = Clock::now();
  check_mpi(MPI_Irecv(buf, as_int_bytes(bytes), MPI_BYTE, source, tag, comm_, &reqs_[s]), "MPI_Irecv", comm_, site_);
  times_->call += since(t0);
  ids_[s] = id | recv_bit;
  ++pending_;
}

bool Schedule::advance(bool block, ScheduleTimes& t, bool work_ok) {
  times_ = &t;
  // A blocking advance tests in a loop instead of blocking in MPI_Waitsome:
  // a dead peer's requests never complete and return no error (Open MPI 4.1
  // over TCP or shared memory), and only a loop can notice that.
  PeerWatch watch(block ? limit_s_ : 0, comm_, site_, "MPI_Testsome");
  // One item of local work, timed; true if there was one.
  const auto work_item = [&] {
    const auto t0 = Clock::now();
    const bool did = work();
    t.work += since(t0);
    if (did) {
      ++completions_;
      watch.progress();
    }
    return did;
  };
  while (!finished()) {
    if (pending_ == 0) {  // only local work is left
      if (!work_ok) return false;
      if (!work_item()) throw std::logic_error("point-to-point schedule stalled: nothing in flight, not finished");
      if (!block) return finished();
      continue;
    }
    int count = 0;
    const auto t0 = Clock::now();
    const int n = static_cast<int>(reqs_.size());
    const int rc = MPI_Testsome(n, reqs_.data(), &count, index_.data(), status_.data());
    check_mpi(rc, "MPI_Testsome", comm_, site_, status_.data(), rc == MPI_ERR_IN_STATUS ? count : 0);
    if (count == MPI_UNDEFINED) throw std::logic_error("point-to-point schedule: no active request");
    if (count == 0) {
      if (work_ok) {
        const double tested = since(t0);
        if (work_item()) {
          t.call += tested;
          if (!block) return finished();
          continue;
        }
      }
      if (!block) {
        t.call += since(t0);
        return false;
      }
      watch.check();
      watch.pause();
      t.blocked += since(t0);
      continue;
    }
    (block ? t.blocked : t.call) += since(t0);
    watch.progress();
    completions_ += static_cast<std::uint64_t>(count);
    for (int k = 0; k < count; ++k) {
      const auto s = static_cast<std::uint32_t>(index_[static_cast<std::size_t>(k)]);
      const std::uint64_t id = ids_[s];
      --pending_;
      free_.push_back(s);
      if (id & recv_bit) {
        int bytes = 0;
        check_mpi(MPI_Get_count(&status_[static_cast<std::size_t>(k)], MPI_BYTE, &bytes), "MPI_Get_count", comm_,
                  site_);
        on_recv(id & ~recv_bit, static_cast<std::size_t>(bytes));
      } else {
        on_send(id);
      }
    }
  }
  return true;
}

// ---- RingReduce --------------------------------------------------------------
// Message m = step * segs + j carries segment j of one block. Steps 0..K-2
// reduce-scatter: rank r sends block r - s and receives block r - s - 1,
// which it adds into its own copy; after them rank r holds the total of
// block r + 1. Steps K-1..2K-3 allgather (t = s - K + 1): rank r sends block
// r + 1 - t and receives block r - t, straight into the buffer. A segment
// received at step s is the one sent at step s + 1, so it is forwarded as
// soon as it is in (and reduced). Receives are posted in message order, at
// most `window` at a time; a reduce-scatter receive lands in a staging slot;
// an allgather receive overwrites the region this rank sent at step t, so it
// is posted only once that send has completed.

void RingReduce::start(MPI_Comm comm, int rank, int ranks, const void* own, void* buf, std::size_t n,
                       std::size_t elem_size, ReduceFn fn, FinishFn finish, float finish_arg,
                       std::size_t segment_bytes, std::size_t window, ScheduleTimes& t, bool checksums, int inject) {
  reset_requests(comm);
  times_ = &t;
  rank_ = rank;
  ranks_ = ranks;
  own_ = static_cast<const char*>(own);
  buf_ = static_cast<char*>(buf);
  n_ = n;
  elem_ = elem_size;
  fn_ = fn;
  finish_ = finish;
  finish_arg_ = finish_arg;
  window_ = std::max<std::size_t>(window, 1);
  crc_ = checksums;
  lo_.resize(static_cast<std::size_t>(ranks) + 1);
  for (int b = 0; b <= ranks; ++b)
    lo_[static_cast<std::size_t>(b)] = n / static_cast<std::size_t>(ranks) * static_cast<std::size_t>(b) +
                                       n % static_cast<std::size_t>(ranks) * static_cast<std::size_t>(b) /
                                           static_cast<std::size_t>(ranks);
  const std::size_t steps = 2 * static_cast<std::size_t>(ranks - 1);
  std::size_t max_len = 0;
  for (int b = 0; b < ranks; ++b)
    max_len = std::max(max_len, lo_[static_cast<std::size_t>(b) + 1] - lo_[static_cast<std::size_t>(b)]);
  const std::size_t seg = std::max<std::size_t>(segment_bytes, 1);
  segs_ = std::max<std::size_t>(1, (max_len * elem_ + seg - 1) / seg);
  // Tags: message m is tag m, its CRC tag total + m, all below 32768.
  const std::size_t tags = max_tag / (crc_ ? 2 : 1);
  if (steps > 0) segs_ = std::min(segs_, std::max<std::size_t>(1, tags / steps));
  total_ = steps * segs_;
  seg_cap_ = (max_len + segs_ - 1) / segs_ * elem_;
  if (staging_.size() < window_ * seg_cap_) staging_.resize(window_ * seg_cap_);
  sent_.assign(total_, 0);
  slot_of_.assign(total_, 0);
  free_slots_.clear();
  for (std::size_t s = window_; s-- > 0;) free_slots_.push_back(s);
  next_recv_ = recvs_in_flight_ = sends_done_ = recvs_done_ = crc_sends_done_ = 0;
  if (crc_) {
    crc_out_.assign(total_, 0);
    crc_in_.assign(total_, 0);
    have_data_.assign(total_, 0);
    have_crc_.assign(total_, 0);
    crc_known_.assign(total_, 0);
  }
  inject_ = SIZE_MAX;
  if (inject == 1 && total_ > 0) inject_ = 0;
  if (inject == 2 && total_ > 0) inject_ = static_cast<std::size_t>(ranks - 1) * segs_;
  if (total_ == 0) return;
  for (std::size_t j = 0; j < segs_; ++j) send(j);
  post_receives();
}

int RingReduce::block_sent(std::size_t step) const {
  const int k = ranks_, s = static_cast<int>(step);
  const int b = s < k - 1 ? rank_ - s : rank_ + 1 - (s - (k - 1));
  return ((b % k) + k) % k;
}

int RingReduce::block_received(std::size_t step) const {
  const int k = ranks_, s = static_cast<int>(step);
  const int b = s < k - 1 ? rank_ - s - 1 : rank_ - (s - (k - 1));
  return ((b % k) + k) % k;
}

std::pair<std::size_t, std::size_t> RingReduce::segment(int block, std::size_t j) const {
  const std::size_t lo = lo_[static_cast<std::size_t>(block)], len = lo_[static_cast<std::size_t>(block) + 1] - lo;
  const std::size_t a = lo + len * j / segs_, b = lo + len * (j + 1) / segs_;
  return {a, b - a};
}

void RingReduce::send(std::size_t m) {
  const std::size_t step = m / segs_, j = m % segs_;
  const auto [off, cnt] = segment(block_sent(step), j);
  const char* src = (step == 0 ? own_ : buf_) + off * elem_;  // step 0 sends this rank's own block, unreduced
  const int next = (rank_ + 1) % ranks_;
  if (crc_) {
    if (!crc_known_[m]) {
      const auto t0 = Clock::now();
      crc_out_[m] = qsgd::detail::crc32c_bytes_host(reinterpret_cast<const unsigned char*>(src), cnt * elem_);
      times_->reduce += since(t0);
    }
    post_send(&crc_out_[m], 4, next, static_cast<int>(total_ + m), m | crc_bit);
  }
  if (m == inject_ && cnt > 0) {  // test hook: the bytes differ from their CRC
    inject_buf_.assign(src, src + cnt * elem_);
    inject_buf_.back() = static_cast<char>(inject_buf_.back() ^ 1);
    src = inject_buf_.data();
  }
  post_send(src, cnt * elem_, next, static_cast<int>(m), m);
}

void RingReduce::post_receives() {
  const std::size_t rs_steps = static_cast<std::size_t>(ranks_ - 1);
  const int prev = (rank_ - 1 + ranks_) % ranks_;
  while (next_recv_ < total_ && recvs_in_flight_ < window_) {
    const std::size_t m = next_recv_, step = m / segs_, j = m % segs_;
    const auto [off, cnt] = segment(block_received(step), j);
    void* dst;
    if (step < rs_steps) {
      if (free_slots_.empty()) break;
      slot_of_[m] = free_slots_.back();
      free_slots_.pop_back();
      dst = staging_.data() + slot_of_[m] * seg_cap_;
    } else {
      if (!sent_[(step - rs_steps) * segs_ + j]) break;  // that region is still being sent
      dst = buf_ + off * elem_;
    }
    post_recv(dst, cnt * elem_, prev, static_cast<int>(m), m);
    if (crc_) post_recv(&crc_in_[m], 4, prev, static_cast<int>(total_ + m), m | crc_bit);
    ++next_recv_;
    ++recvs_in_flight_;
  }
}

void RingReduce::on_send(std::uint64_t id) {
  if (id & crc_bit) {
    ++crc_sends_done_;
    return;
  }
  sent_[id] = 1;
  ++sends_done_;
  post_receives();
}

void RingReduce::on_recv(std::uint64_t id, std::size_t bytes) {
  if (id & crc_bit) {
    const std::size_t m = id & ~crc_bit;
    if (bytes != 4)
      throw std::runtime_error("ring allreduce: received a checksum of " + std::to_string(bytes) +
                               " bytes (ranks disagree on checksums)");
    have_crc_[m] = 1;
    if (have_data_[m]) received(m);
    return;
  }
  const std::size_t m = id, step = m / segs_, j = m % segs_;
  const std::size_t cnt = segment(block_received(step), j).second;
  if (bytes != cnt * elem_)
    throw std::runtime_error("ring allreduce: received " + std::to_string(bytes) + " bytes for a segment of " +
                             std::to_string(cnt * elem_) + " (ranks disagree on the vector's size)");
  if (!crc_) {
    received(m);
    return;
  }
  have_data_[m] = 1;
  if (have_crc_[m]) received(m);
}

void RingReduce::received(std::size_t m) {
  const std::size_t step = m / segs_, j = m % segs_;
  const auto [off, cnt] = segment(block_received(step), j);
  const bool reducing = step < static_cast<std::size_t>(ranks_ - 1);
  const char* in = reducing ? staging_.data() + slot_of_[m] * seg_cap_ : buf_ + off * elem_;
  if (crc_) {
    const auto t0 = Clock::now();
    const std::uint32_t crc = qsgd::detail::crc32c_bytes_host(reinterpret_cast<const unsigned char*>(in), cnt * elem_);
    times_->reduce += since(t0);
    if (crc != crc_in_[m]) {
      const int prev = (rank_ - 1 + ranks_) % ranks_;
      throw CorruptSegment(prev, "ring allreduce segment " + std::to_string(m) + " (" + std::to_string(cnt * elem_) +
                                     " bytes) fails its CRC32C: computed " + std::to_string(crc) + ", sent " +
                                     std::to_string(crc_in_[m]));
    }
    // An allgather segment goes on unchanged: its CRC is the one it came with.
    if (!reducing && m + segs_ < total_) {
      crc_out_[m + segs_] = crc;
      crc_known_[m + segs_] = 1;
    }
  }
  --recvs_in_flight_;
  ++recvs_done_;
  if (reducing) {
    const auto t0 = Clock::now();
    fn_(in, own_ + off * elem_, buf_ + off * elem_, cnt);
    if (finish_ != nullptr && step + 2 == static_cast<std::size_t>(ranks_)) finish_(buf_ + off * elem_, cnt, finish_arg_);
    times_->reduce += since(t0);
    free_slots_.push_back(slot_of_[m]);
  }
  if (step + 1 < 2 * static_cast<std::size_t>(ranks_ - 1)) send(m + segs_);
  post_receives();
}

// ---- RingAllgather -----------------------------------------------------------
// Step t: rank r sends the message of rank r - t (its own at t = 0) to r + 1
// and receives the message of rank r - t - 1 from r - 1 (tag t).

void RingAllgather::start(MPI_Comm comm, int rank, int ranks, const void* own, std::size_t own_bytes, void* recv,
                          const std::vector<std::size_t>& offsets, const std::vector<std::size_t>& caps,
                          ScheduleTimes& t) {
  reset_requests(comm);
  times_ = &t;
  rank_ = rank;
  ranks_ = ranks;
  recv_ = static_cast<char*>(recv);
  offsets_ = &offsets;
  sizes_.assign(static_cast<std::size_t>(ranks), 0);
  sizes_[static_cast<std::size_t>(rank)] = own_bytes;
  sends_done_ = recvs_done_ = 0;
  if (ranks == 1) return;
  const int prev = (rank - 1 + ranks) % ranks;
  for (std::size_t step = 0; step + 1 < static_cast<std::size_t>(ranks); ++step) {
    const auto o = static_cast<std::size_t>(origin(step));
    post_recv(recv_ + offsets[o], caps[o], prev, static_cast<int>(step), step);
  }
  post_send(own, own_bytes, (rank + 1) % ranks, 0, 0);
}

void RingAllgather::on_recv(std::uint64_t id, std::size_t bytes) {
  const std::size_t step = id;
  const auto o = static_cast<std::size_t>(origin(step));
  sizes_[o] = bytes;
  ++recvs_done_;
  if (step + 2 < static_cast<std::size_t>(ranks_))
    post_send(recv_ + (*offsets_)[o], bytes, (rank_ + 1) % ranks_, static_cast<int>(step + 1), step + 1);
}

// ---- PieceAllgather ------------------------------------------------------------
// Piece j's message from rank r - t - 1 arrives at step t (tag t * P + j)
// and, unless it has gone round, leaves for r + 1 at step t + 1. All
// receives are posted first: every slot has its own buffer, so no receive
// waits for a send.

std::size_t PieceAllgather::max_pieces(int ranks) {
  return ranks <= 1 ? std::size_t(max_tag) + 1 : (std::size_t(max_tag) + 1) / static_cast<std::size_t>(ranks - 1);
}

void PieceAllgather::start(MPI_Comm comm, int rank, int ranks, std::size_t pieces, char* send, char* recv,
                           std::size_t slot, EncodeFn encode, DecodeFn decode, ScheduleTimes& t) {
  if (ranks < 2) throw std::logic_error("piece allgather needs at least two ranks");
  if (pieces == 0 || pieces > max_pieces(ranks))
    throw std::length_error("piece allgather: " + std::to_string(pieces) + " pieces at " + std::to_string(ranks) +
                            " ranks exceed the tag space");
  reset_requests(comm);
  times_ = &t;
  rank_ = rank;
  ranks_ = ranks;
  pieces_ = pieces;
  slot_ = slot;
  recv_ = recv;
  decode_ = std::move(decode);
  decoded_ = sends_done_ = recvs_done_ = 0;
  sizes_.assign(pieces * static_cast<std::size_t>(ranks), 0);
  arrived_.assign(pieces, 0);
  const int prev = (rank - 1 + ranks) % ranks, next = (rank + 1) % ranks;
  for (std::size_t step = 0; step + 1 < static_cast<std::size_t>(ranks); ++step) {
    const auto o = static_cast<std::size_t>(origin(step));
    for (std::size_t j = 0; j < pieces; ++j) {
      const std::size_t m = step * pieces + j;
      post_recv(recv_ + (o * pieces + j) * slot, slot, prev, static_cast<int>(m), m);
    }
  }
  for (std::size_t j = 0; j < pieces; ++j) {
    const std::size_t bytes = encode(j);  // books its own time
    sizes_[static_cast<std::size_t>(rank) * pieces + j] = bytes;
    post_send(send + j * slot, bytes, next, static_cast<int>(j), j);
    if (j + 1 < pieces) advance(false, t, false);  // forward what arrived meanwhile
  }
}

void PieceAllgather::on_recv(std::uint64_t id, std::size_t bytes) {
  const std::size_t step = id / pieces_, j = id % pieces_;
  const auto o = static_cast<std::size_t>(origin(step));
  const std::size_t s = o * pieces_ + j;
  sizes_[s] = bytes;
  ++recvs_done_;
  ++arrived_[j];
  if (step + 2 < static_cast<std::size_t>(ranks_)) {
    const std::size_t m = id + pieces_;
    post_send(recv_ + s * slot_, bytes, (rank_ + 1) % ranks_, static_cast<int>(m), m);
  }
}

bool PieceAllgather::work() {
  if (decoded_ == pieces_ || arrived_[decoded_] + 1 < static_cast<std::uint32_t>(ranks_)) return false;
  decode_(decoded_);
  ++decoded_;
  return true;
}

// ---- PairwiseExchange ----------------------------------------------------------

void PairwiseExchange::start(MPI_Comm comm, int rank, int ranks, const void* send,
                             const std::vector<std::size_t>& offsets_out, const std::vector<std::size_t>& bytes_out,
                             void* recv, const std::vector<std::size_t>& offsets_in,
                             const std::vector<std::size_t>& caps_in, ScheduleTimes& t) {
  reset_requests(comm);
  times_ = &t;
  ranks_ = ranks;
  sizes_.assign(static_cast<std::size_t>(ranks), 0);
  sends_done_ = recvs_done_ = 0;
  auto* in = static_cast<char*>(recv);
  const auto* out = static_cast<const char*>(send);
  // Receives first, then sends to rank + 1, rank + 2, ...: every link busy.
  for (int d = 1; d < ranks; ++d) {
    const auto src = static_cast<std::size_t>((rank - d + ranks) % ranks);
    post_recv(in + offsets_in[src], caps_in[src], static_cast<int>(src), 0, src);
  }
  for (int d = 1; d < ranks; ++d) {
    const auto dst = static_cast<std::size_t>((rank + d) % ranks);
    post_send(out + offsets_out[dst], bytes_out[dst], static_cast<int>(dst), 0, dst);
  }
}

}  // namespace qsgd::comm::detail
