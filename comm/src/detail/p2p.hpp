#pragma once
// Point-to-point schedules: the "ring" transport of the exchange strategies
// (docs/exchange.md, "Transports").
//
// Open MPI's allreduce over TCP ran at 0.3 of the link here (its non-blocking
// form, libnbc, is not governed by the coll_tuned algorithm choice at all),
// while a ring of point-to-point messages runs at the link's rate. These
// schedules are that ring, written once and driven by the phase machine of
// exchange_base.hpp:
//
//   RingReduce     bandwidth-optimal allreduce of a host buffer: a ring
//                  reduce-scatter then a ring allgather, each block cut into
//                  segments that are pipelined (a segment is forwarded as soon
//                  as it is reduced; `window` receives in flight).
//   RingAllgather  every rank's variable-length message to every rank: K-1
//                  steps, each rank forwards the message it received in the
//                  step before. Receivers post buffers of the largest size a
//                  message may have and learn the true size from the status,
//                  so no size round trip precedes the data.
//   Exchange       pairwise: rank j receives slot j of every rank (the
//                  scatter stage of scatter-reduce), all messages posted at
//                  once.
//   PieceAllgather RingAllgather of messages cut into pieces: every rank's
//                  message is P independent messages (one per slice of the
//                  vector), sent as each is encoded and forwarded as each
//                  arrives; a slice is decoded as soon as its K messages are
//                  in, while later pieces are still on the wire, so coding
//                  overlaps the network inside one operation.
//
// All four run on host memory (the caller stages device data), post
// everything they can without blocking, and are advanced by advance(): it
// tests (or, with block, waits for) completed requests and posts what their
// completion enables; between tests, a schedule with local work to do (a
// PieceAllgather's decodes) does one item of it instead of waiting. Time inside a blocking wait is `blocked` time; the
// rest of the MPI calls' time is `call` time; reductions are `reduce` time.
// Each operation runs on its own communicator (exchange_base.hpp), so the
// tags only have to be unique within a schedule. Every MPI call's result goes
// through check_mpi, and a blocking advance is a test loop watched by a
// PeerWatch (communicator.hpp), both naming the operation set by watch().

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <climits>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "qsgd/comm/communicator.hpp"

namespace qsgd::comm::detail {

// Times a schedule accumulates, in seconds.
struct ScheduleTimes {
  double blocked = 0;  // in a blocking advance's test loop: waiting for the network
  double call = 0;     // inside the other MPI calls (posting, testing)
  double reduce = 0;   // applying the reduction to received segments
  double work = 0;     // local work items (kernels that book their own time)
};

// Requests of one schedule and what each one was for.
class Schedule {
 public:
  virtual ~Schedule() = default;
  // The operation this schedule runs for, named by MPI errors and by the
  // watchdog, and the peer timeout of a blocking advance. Set before start().
  void watch(const MpiSite& site, double limit_s) {
    site_ = site;
    limit_s_ = limit_s;
  }
  // "ring allreduce", "ring allgather", "pairwise exchange"
  virtual const char* name() const = 0;
  // Advances; with `block`, until the schedule is finished (a watched test
  // loop: after the peer timeout without a completed request or work item
  // the job ends). With `work`, a test that finds nothing completed is
  // followed by one item of the schedule's local work, if it has any ready
  // (a non-blocking advance does at most one item); without it (a progress
  // thread's poll) only the network moves. True when finished.
  bool advance(bool block, ScheduleTimes& t, bool work = true);
  bool finished() const { return pending_ == 0 && done(); }
  // Requests posted and not yet completed: only then can a network-only
  // advance (a progress thread's poll) move anything; with none, what is left
  // is the caller's local work (decoding pieces) or nothing.
  bool requests_in_flight() const { return pending_ > 0; }
  // Requests completed and work items done since start(): progress seen by a
  // caller's own loop.
  std::uint64_t completions() const { return completions_; }

 protected:
  using Clock = std::chrono::steady_clock;
  static double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

  void reset_requests(MPI_Comm comm);
  void post_send(const void* buf, std::size_t bytes, int dest, int tag, std::uint64_t id);
  void post_recv(void* buf, std::size_t bytes, int source, int tag, std::uint64_t id);
  // A request completed; `bytes` received (0 for sends).
  virtual void on_send(std::uint64_t id) = 0;
  virtual void on_recv(std::uint64_t id, std::size_t bytes) = 0;
  virtual bool done() const = 0;
  // Does one item of local work if one is ready; true if it did.
  virtual bool work() { return false; }

  MPI_Comm comm_ = MPI_COMM_NULL;
  ScheduleTimes* times_ = nullptr;  // valid inside advance() and the posting calls of start()
  MpiSite site_;

 private:
  double limit_s_ = 0;
  std::uint64_t completions_ = 0;
  std::uint32_t slot();
  std::vector<MPI_Request> reqs_;
  std::vector<std::uint64_t> ids_;    // id of each slot's request; bit 63: receive
  std::vector<std::uint32_t> free_;   // free slots
  std::vector<int> index_;
  std::vector<MPI_Status> status_;
  std::size_t pending_ = 0;
};

// A segment whose bytes do not match the CRC32C its sender sent with it
// (RingReduce with checksums): the exchange ends the job as for any corrupt
// message, naming `source`.
struct CorruptSegment : std::runtime_error {
  int source;
  CorruptSegment(int src, const std::string& what) : std::runtime_error(what), source(src) {}
};

// Sum of `count` elements: out[i] = in[i] + own[i] (own may equal out).
using ReduceFn = void (*)(const void* in, const void* own, void* out, std::size_t count);
// Applied in place to a fully reduced segment before it is sent around, with
// the argument given to start() (the final x 1/K), or nullptr.
using FinishFn = void (*)(void* data, std::size_t count, float arg);

// Pipelined ring allreduce (reduce-scatter + allgather) over host buffers.
// The sum of element i is formed on one rank, in ring order starting at the
// rank that owns block i's first send, finished there (FinishFn) and copied
// to the others: identical bits on every rank, and the same bits whatever the
// segment size. `own` (this rank's contribution) is read, never written, and
// may be `buf` (in place); every element of `buf` is written. With a
// separate `own`, no copy into `buf` and no final pass over it are needed.
//
// Integrity (`checksums`): every segment is followed by the CRC32C of its
// bytes, in a 4-byte message of its own, and a received segment is checked
// before it is reduced, kept or forwarded; a mismatch throws CorruptSegment
// naming the sender. A forwarded allgather segment reuses the CRC it came
// with (checked equal), so the cost is one CRC pass per segment sent in the
// reduce-scatter and one per segment received. Test hook: `inject` (1: the
// first reduce-scatter message, 2: the first allgather message) sends that
// message with bit 0 of its last byte flipped after its CRC was taken.
class RingReduce final : public Schedule {
 public:
  const char* name() const override { return "ring allreduce"; }
  // Posts the first segments. own and buf hold n elements of elem_size bytes.
  void start(MPI_Comm comm, int rank, int ranks, const void* own, void* buf, std::size_t n, std::size_t elem_size,
             ReduceFn fn, FinishFn finish, float finish_arg, std::size_t segment_bytes, std::size_t window,
             ScheduleTimes& t, bool checksums = true, int inject = 0);
  // Bytes of checksums this rank receives (4 per segment; 0 without).
  std::size_t checksum_bytes() const { return crc_ ? total_ * 4 : 0; }

 private:
  void on_send(std::uint64_t id) override;
  void on_recv(std::uint64_t id, std::size_t bytes) override;
  bool done() const override {
    return sends_done_ == total_ && recvs_done_ == total_ && (!crc_ || crc_sends_done_ == total_);
  }
  void received(std::size_t m);  // segment m and (with checksums) its CRC are in

  int block_sent(std::size_t step) const;
  int block_received(std::size_t step) const;
  std::pair<std::size_t, std::size_t> segment(int block, std::size_t j) const;  // element offset, count
  void send(std::size_t m);
  void post_receives();

  int rank_ = 0, ranks_ = 1;
  const char* own_ = nullptr;
  char* buf_ = nullptr;
  std::size_t n_ = 0, elem_ = 4, segs_ = 1, total_ = 0, window_ = 1, seg_cap_ = 0;
  ReduceFn fn_ = nullptr;
  FinishFn finish_ = nullptr;
  float finish_arg_ = 1.0f;
  std::vector<std::size_t> lo_;       // block b is elements [lo_[b], lo_[b + 1])
  std::vector<char> sent_;            // per message: its send completed
  std::vector<std::size_t> slot_of_;  // per reduce-scatter message in flight: its staging slot
  std::vector<std::size_t> free_slots_;
  std::vector<char> staging_;         // window_ segments of seg_cap_ bytes
  std::size_t next_recv_ = 0, recvs_in_flight_ = 0, sends_done_ = 0, recvs_done_ = 0;
  // Checksums: per message, the CRC sent and received, what has arrived,
  // and a CRC known before the send (a forwarded segment's).
  bool crc_ = false;
  std::vector<std::uint32_t> crc_out_, crc_in_;
  std::vector<char> have_data_, have_crc_, crc_known_;
  std::size_t crc_sends_done_ = 0, inject_ = SIZE_MAX;
  std::vector<char> inject_buf_;
};

// Ring allgather of variable-length messages. Slot r of `recv` (offset
// offsets[r], capacity caps[r] bytes) receives rank r's message; this rank's
// own message is read from `own` and not copied into its slot. sizes()[r] is
// the received length (own: own_bytes).
class RingAllgather final : public Schedule {
 public:
  const char* name() const override { return "ring allgather"; }
  void start(MPI_Comm comm, int rank, int ranks, const void* own, std::size_t own_bytes, void* recv,
             const std::vector<std::size_t>& offsets, const std::vector<std::size_t>& caps, ScheduleTimes& t);
  const std::vector<std::size_t>& sizes() const { return sizes_; }

 private:
  void on_send(std::uint64_t) override { ++sends_done_; }
  void on_recv(std::uint64_t id, std::size_t bytes) override;
  bool done() const override { return sends_done_ + 1 == static_cast<std::size_t>(ranks_) && recvs_done_ + 1 == static_cast<std::size_t>(ranks_); }
  int origin(std::size_t step) const { return ((rank_ - static_cast<int>(step) - 1) % ranks_ + ranks_) % ranks_; }

  int rank_ = 0, ranks_ = 1;
  char* recv_ = nullptr;
  const std::vector<std::size_t>* offsets_ = nullptr;
  std::vector<std::size_t> sizes_;
  std::size_t sends_done_ = 0, recvs_done_ = 0;
};

// Pairwise exchange: this rank sends send[offsets_out[j], +bytes_out[j]) to
// rank j and receives rank j's message into recv slot j (offset offsets_in[j],
// capacity caps_in[j]), for every j != rank. sizes()[j] is the received length.
class PairwiseExchange final : public Schedule {
 public:
  const char* name() const override { return "pairwise exchange"; }
  void start(MPI_Comm comm, int rank, int ranks, const void* send, const std::vector<std::size_t>& offsets_out,
             const std::vector<std::size_t>& bytes_out, void* recv, const std::vector<std::size_t>& offsets_in,
             const std::vector<std::size_t>& caps_in, ScheduleTimes& t);
  const std::vector<std::size_t>& sizes() const { return sizes_; }

 private:
  void on_send(std::uint64_t) override { ++sends_done_; }
  void on_recv(std::uint64_t id, std::size_t bytes) override {
    sizes_[id] = bytes;
    ++recvs_done_;
  }
  bool done() const override { return sends_done_ + 1 == static_cast<std::size_t>(ranks_) && recvs_done_ + 1 == static_cast<std::size_t>(ranks_); }

  int ranks_ = 1;
  std::vector<std::size_t> sizes_;
  std::size_t sends_done_ = 0, recvs_done_ = 0;
};

// Ring allgather of every rank's message cut into `pieces` messages. Own
// piece j is made by encode(j), which writes it (framed, ready for MPI) at
// send + j * slot and returns its bytes; start() encodes the pieces in order
// and posts each one's send at once, testing in between so that pieces
// received meanwhile are forwarded. Rank o's piece j lands in recv slot
// o * pieces + j (slot bytes each) and is forwarded to the next rank as soon
// as it is in (step t of piece j: tag t * pieces + j). decode(j) runs, as
// work of advance(), once piece j of every other rank is in, for j = 0, 1,
// ... in order. sizes()[o * pieces + j] is the received length.
class PieceAllgather final : public Schedule {
 public:
  using EncodeFn = std::function<std::size_t(std::size_t piece)>;
  using DecodeFn = std::function<void(std::size_t piece)>;
  const char* name() const override { return "ring allgather"; }
  // Throws std::length_error when pieces * (ranks - 1) tags do not fit.
  void start(MPI_Comm comm, int rank, int ranks, std::size_t pieces, char* send, char* recv, std::size_t slot,
             EncodeFn encode, DecodeFn decode, ScheduleTimes& t);
  const std::vector<std::size_t>& sizes() const { return sizes_; }
  // The most pieces a schedule of `ranks` ranks can carry (tags < 32768).
  static std::size_t max_pieces(int ranks);

 private:
  void on_send(std::uint64_t) override { ++sends_done_; }
  void on_recv(std::uint64_t id, std::size_t bytes) override;
  bool done() const override {
    const std::size_t total = pieces_ * static_cast<std::size_t>(ranks_ - 1);
    return sends_done_ == total && recvs_done_ == total && decoded_ == pieces_;
  }
  bool work() override;
  int origin(std::size_t step) const { return ((rank_ - static_cast<int>(step) - 1) % ranks_ + ranks_) % ranks_; }

  int rank_ = 0, ranks_ = 1;
  std::size_t pieces_ = 0, slot_ = 0, decoded_ = 0;
  char* recv_ = nullptr;
  DecodeFn decode_;
  std::vector<std::size_t> sizes_;
  std::vector<std::uint32_t> arrived_;  // per piece: messages of other ranks in
  std::size_t sends_done_ = 0, recvs_done_ = 0;
};

}  // namespace qsgd::comm::detail
