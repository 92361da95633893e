// PowerSGD (Vogels, Karimireddy, Jaggi, NeurIPS 2019): rank-r compression of
// every matrix in the operation's layout (Exchange::set_layout), one step of
// subspace iteration per exchange, warm-started from the previous step's Q.
//
// Per matrix M (rows x cols, row-major in the vector) with its Q (cols x r):
//   P = M Q                                  this rank's, rows x r
//   P <- average over ranks of P             allreduce 1 (with the rest)
//   P <- orthonormal columns of P            modified Gram-Schmidt
//   Q = M^T P                                this rank's, cols x r
//   Q <- average over ranks of Q             allreduce 2
//   out = P Q^T                              = P P^T (mean M): the mean
//                                            projected on span(P)
// and Q is kept for the next step of the same tensor. A matrix is compressed
// only when it pays at least 2x, rows x cols >= 2 r (rows + cols) (the
// min_compression_rate of PyTorch's PowerSGD hook); every other element of
// the vector (vectors, small matrices, padding) is averaged exactly, in
// allreduce 1 beside the P factors. Both allreduces run through the
// transport of the configuration (the suite's ring, or MPI_Iallreduce), in
// fp32, with the ring's x (1/K) on each block's owner: every rank holds the
// same P, Q and out bits. Orthonormalization sums every dot and norm
// sequentially (double accumulators; a team per matrix on a device shares
// only the element-wise updates), so it gives the same bits on every rank
// and backend (detail/powersgd_kernels.hpp). A column that depends on the
// ones before it becomes 0.
//
// Q starts from a deterministic pseudo-random matrix (uniform in [-1, 1),
// from the seed, the tensor and the element's index), the same on every
// rank; state() and load_state() carry the Qs across a checkpoint.
// Error feedback (start()'s `sent`): in the compressed matrices, the shared
// low-rank approximation itself, out (the paper's error e = M - P Q^T);
// elsewhere this rank's gradient (averaged exactly: nothing is left over).
//
// wire_bytes = 2 (K-1)/K 4 (sum of rows r + the rest) + 2 (K-1)/K 4 (sum of
// cols r): two ring allreduces.

#include <map>

#include "detail/exchange_base.hpp"
#include "detail/powersgd_kernels.hpp"
#include "qsgd/kernels/detail/arith.hpp"

namespace qsgd::comm::detail {

// ---- kernels (free functions: CUDA lambdas may not sit in private members) --

// q[i] in [-1, 1): a splitmix64 draw of (seed, tensor, i).
template <class E, class V>
void psgd_init(const E& exec, const V& q, std::uint64_t seed, std::uint32_t tensor) {
  const std::uint64_t base = seed ^ (0x9E3779B97F4A7C15ull * (std::uint64_t(tensor) + 1));
  Kokkos::parallel_for(
      "qsgd::comm::powersgd::init", Kokkos::RangePolicy<E>(exec, 0, q.extent(0)), KOKKOS_LAMBDA(std::uint64_t i) {
        std::uint64_t z = base + 0x9E3779B97F4A7C15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        q(i) = static_cast<float>(static_cast<double>(z >> 40) * (1.0 / 8388608.0) - 1.0);
      });
}

namespace {

template <class E>
class PowerSgd final : public ExchangeBase<E> {
  using B = ExchangeBase<E>;
  using Mem = typename E::memory_space;
  using View = Kokkos::View<float*, Mem>;
  using typename B::OpT;
  enum Phase : int { p_summed = 1, q_summed };

  // A tensor's compressed matrices and their Qs (Σ cols r floats, in layout
  // order), and the parts of the vector averaged exactly.
  struct Layout {
    std::vector<MatrixBlock> blocks;  // the compressed ones
    std::uint64_t p_size = 0, q_size = 0, covered_end = 0;
    View q;
  };

 public:
  PowerSgd(const ExchangeConfig& cfg, const Communicator& comm, const E& exec) : B(cfg, comm, exec), r_(cfg.powersgd_rank) {}

  void set_layout(std::uint32_t tensor, const std::vector<MatrixBlock>& blocks) override {
    Layout l;
    std::uint64_t end = 0;
    for (const MatrixBlock& b : blocks) {
      if (b.offset < end || b.rows == 0 || b.cols == 0 || b.rows > (std::uint64_t(1) << 32) || b.cols > (std::uint64_t(1) << 32))
        throw Error(Errc::invalid_argument, "powersgd: the layout of tensor " + std::to_string(tensor) +
                                                " has an empty, overlapping or unsorted matrix at offset " +
                                                std::to_string(b.offset));
      end = b.offset + b.rows * b.cols;
      if (b.rows * b.cols < 2 * std::uint64_t(r_) * (b.rows + b.cols)) continue;  // pays less than 2x: exact
      l.blocks.push_back(b);
      l.p_size += b.rows * r_;
      l.q_size += b.cols * r_;
    }
    l.covered_end = end;
    l.q = View(Kokkos::ViewAllocateWithoutInitializing("qsgd::comm::powersgd::q"), l.q_size);
    psgd_init(this->exec_, l.q, this->cfg_.seed, tensor);
    this->exec_.fence();
    layouts_[tensor] = std::move(l);
  }

  std::vector<float> state() const override {
    std::vector<float> out;
    for (const auto& [t, l] : layouts_) {
      const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), l.q);
      out.insert(out.end(), h.data(), h.data() + h.extent(0));
    }
    return out;
  }

  void load_state(const std::vector<float>& s) override {
    std::uint64_t want = 0;
    for (const auto& [t, l] : layouts_) want += l.q_size;
    if (s.size() != want)
      throw Error(Errc::invalid_argument, "powersgd: a state of " + std::to_string(s.size()) +
                                              " values does not fit these layouts' " + std::to_string(want) + " Q values");
    std::uint64_t at = 0;
    for (auto& [t, l] : layouts_) {
      Kokkos::deep_copy(this->exec_, l.q,
                        Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(s.data() + at, l.q_size));
      at += l.q_size;
    }
    this->exec_.fence();
  }

 protected:
  void begin(OpT& op) override {
    Layout& l = layout(op);
    const std::uint64_t rest = op.n - compressed_elements(l);
    reserve(op.acc, l.p_size + rest);
    reserve(op.factors, l.q_size);
    const int K = this->ranks();
    op.stats.encoded_bytes = 4 * (l.p_size + rest + l.q_size);
    op.stats.wire_bytes = 2 * static_cast<std::uint64_t>(K - 1) * 4 * (l.p_size + rest + l.q_size) / static_cast<std::uint64_t>(K);
    const auto t0 = Clock::now();
    // Error feedback: this rank's gradient, exact outside the matrices (kept
    // now: out may be grad, overwritten by the average).
    if (op.sent.extent(0) != 0)
      Kokkos::deep_copy(this->exec_, Kokkos::subview(op.sent, Kokkos::make_pair<std::uint64_t>(0, op.n)),
                        Kokkos::subview(op.grad, Kokkos::make_pair<std::uint64_t>(0, op.n)));
    std::uint64_t p_off = 0, q_off = 0;
    for (const MatrixBlock& b : l.blocks) {
      psgd_project(this->exec_, op.grad, b.offset, b.rows, b.cols, l.q, q_off, r_, op.acc, p_off);
      p_off += b.rows * r_;
      q_off += b.cols * r_;
    }
    move_rest(op, l, /*to_buffer=*/true);
    this->exec_.fence();
    op.stats.encode_s += seconds_since(t0);
    op.phase = p_summed;
    post_sum(op, op.acc, l.p_size + rest);
  }

  bool next(OpT& op) override {
    Layout& l = layout(op);
    const std::uint64_t rest = op.n - compressed_elements(l);
    if (op.phase == p_summed) {
      finish_sum(op, op.acc, l.p_size + rest);
      const auto t0 = Clock::now();
      move_rest(op, l, /*to_buffer=*/false);
      std::uint64_t p_off = 0, q_off = 0;
      for (const MatrixBlock& b : l.blocks) {
        psgd_orthonormalize(this->exec_, op.acc, p_off, b.rows, r_);
        psgd_back(this->exec_, op.grad, b.offset, b.rows, b.cols, op.acc, p_off, r_, op.factors, q_off);
        p_off += b.rows * r_;
        q_off += b.cols * r_;
      }
      this->exec_.fence();
      op.stats.encode_s += seconds_since(t0);
      op.phase = q_summed;
      post_sum(op, op.factors, l.q_size);
      return false;
    }
    finish_sum(op, op.factors, l.q_size);
    const auto t0 = Clock::now();
    std::uint64_t p_off = 0, q_off = 0;
    for (const MatrixBlock& b : l.blocks) {
      psgd_expand(this->exec_, op.acc, p_off, op.factors, q_off, b.rows, b.cols, r_, op.out, b.offset);
      p_off += b.rows * r_;
      q_off += b.cols * r_;
    }
    // The averaged Q starts the next step of this tensor (warm start).
    Kokkos::deep_copy(this->exec_, l.q, Kokkos::subview(op.factors, Kokkos::make_pair<std::uint64_t>(0, l.q_size)));
    if (op.sent.extent(0) != 0) {  // error feedback: the approximation where there is one (begin() put grad)
      for (const MatrixBlock& b : l.blocks) {
        const auto m = Kokkos::make_pair(b.offset, b.offset + b.rows * b.cols);
        Kokkos::deep_copy(this->exec_, Kokkos::subview(op.sent, m), Kokkos::subview(op.out, m));
      }
    }
    this->exec_.fence();
    op.stats.decode_s += seconds_since(t0);
    return true;
  }

 private:
  // The tensor's layout (none given: every element is averaged exactly); its
  // matrices must lie inside the vector.
  Layout& layout(OpT& op) {
    Layout& l = layouts_[op.tensor];
    if (l.covered_end > op.n)
      throw Error(Errc::invalid_argument, "powersgd: the layout of tensor " + std::to_string(op.tensor) +
                                              " reaches element " + std::to_string(l.covered_end) + ", the vector has " +
                                              std::to_string(op.n));
    return l;
  }
  static std::uint64_t compressed_elements(const Layout& l) {
    std::uint64_t e = 0;
    for (const MatrixBlock& b : l.blocks) e += b.rows * b.cols;
    return e;
  }
  static void reserve(View& v, std::uint64_t n) {
    if (v.extent(0) < n) v = View(Kokkos::ViewAllocateWithoutInitializing("qsgd::comm::powersgd::buffer"), n);
  }

  // The exactly averaged elements (outside the compressed matrices): from
  // grad into the buffer after the P factors, or from there into out.
  void move_rest(OpT& op, const Layout& l, bool to_buffer) {
    std::uint64_t at = l.p_size, lo = 0;
    auto move = [&](std::uint64_t a, std::uint64_t b) {
      if (b <= a) return;
      const auto buf = Kokkos::subview(op.acc, Kokkos::make_pair(at, at + (b - a)));
      if (to_buffer)
        Kokkos::deep_copy(this->exec_, buf, Kokkos::subview(op.grad, Kokkos::make_pair(a, b)));
      else
        Kokkos::deep_copy(this->exec_, Kokkos::subview(op.out, Kokkos::make_pair(a, b)), buf);
      at += b - a;
    };
    for (const MatrixBlock& b : l.blocks) {
      move(lo, b.offset);
      lo = b.offset + b.rows * b.cols;
    }
    move(lo, op.n);
  }

  // Starts the average of buf[0, n) over the ranks, in place: the ring
  // (scaled by each block's owner) or MPI_Iallreduce (scaled by
  // finish_sum), through a host buffer when MPI cannot reach the memory.
  void post_sum(OpT& op, const View& buf, std::uint64_t n) {
    if (this->local() || n == 0) return;
    const auto t0 = Clock::now();
    float* ptr = buf.data();
    if (this->stage_reductions_) {
      op.send.set_staged(true);
      op.send.reserve(words_of(n * 4));
      ptr = reinterpret_cast<float*>(op.send.mpi());
      Kokkos::deep_copy(Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ptr, n),
                        Kokkos::subview(buf, Kokkos::make_pair<std::uint64_t>(0, n)));
    }
    op.stats.comm_s += seconds_since(t0);
    const int K = this->ranks();
    if (this->ring()) {
      this->start_schedule(op, op.ring, [&](ScheduleTimes& t) {
        op.ring.start(op.comm.get(), this->rank(), K, ptr, ptr, n, sizeof(float), &ring_sum_f32, &ring_scale_f32,
                      this->weight(), this->cfg_.segment_bytes, this->cfg_.window, t,
                      this->cfg_.ring_checksums, this->ring_inject(op));
        op.stats.wire_bytes += op.ring.checksum_bytes();  // a CRC32C per segment received
      });
      return;
    }
    const int count = this->as_count(n, "powersgd");
    const auto t1 = Clock::now();
    this->check(op,
                MPI_Iallreduce(MPI_IN_PLACE, ptr, count, MPI_FLOAT, MPI_SUM, op.comm.get(),
                               this->new_request(op, "powersgd allreduce")),
                "MPI_Iallreduce", "powersgd allreduce");
    op.stats.comm_s += seconds_since(t1);
  }

  void finish_sum(OpT& op, const View& buf, std::uint64_t n) {
    if (this->local() || n == 0) return;
    if (this->stage_reductions_) {
      const auto t0 = Clock::now();
      Kokkos::deep_copy(Kokkos::subview(buf, Kokkos::make_pair<std::uint64_t>(0, n)),
                        Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                            reinterpret_cast<const float*>(op.send.mpi()), n));
      op.stats.comm_s += seconds_since(t0);
    }
    if (!this->ring()) {  // the ring's owners scaled already
      const auto t0 = Clock::now();
      scale(this->exec_, buf, n, this->weight());
      this->exec_.fence();
      op.stats.decode_s += seconds_since(t0);
    }
  }

  std::uint32_t r_;
  std::map<std::uint32_t, Layout> layouts_;
};

}  // namespace

template <class E>
std::unique_ptr<Exchange<E>> make_powersgd(const ExchangeConfig& cfg, const Communicator& comm, const E& exec) {
  return std::make_unique<PowerSgd<E>>(cfg, comm, exec);
}

QSGD_COMM_INSTANTIATE_FACTORY(make_powersgd)

}  // namespace qsgd::comm::detail
