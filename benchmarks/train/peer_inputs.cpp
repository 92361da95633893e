// qsgd-peer-inputs: what qsgd-train's MLP starts from on Fashion-MNIST, for a
// peer in another framework to start from the same (benchmarks/scaling/
// ddp-yardstick loads it): the initial parameters of --mlp-widths and --seed,
// the standardization constants, and every epoch's sample order with the
// sharding rule. Each value comes from the code qsgd-train runs (qsgd::models
// Mlp, epoch_permutation, shard_range), not from a second implementation.
//
// File (schema qsgd.peer-inputs/1): one line of JSON (the header, ending in
// '\n'), then P float32 parameters in the model's layout (the header's
// "tensors": name, shape, offset in elements), then for each epoch e < epochs
// the n-element permutation of the training set as uint32, little-endian as
// the machine writes it (the header says "little"). Rank r of K takes
// positions [r q, (r + 1) q) of an epoch's permutation, q = n / K (the rest
// dropped), and batch b of its shard is positions [b B, (b + 1) B).
// Written to FILE.tmp and renamed over FILE.
#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_build_info.hpp"
#include "cli.hpp"
#include "json.hpp"
#include "qsgd/models/data/fashion_mnist.hpp"
#include "qsgd/models/data/sampler.hpp"
#include "qsgd/models/mlp.hpp"
#include "qsgd/support/durable_file.hpp"
#include "qsgd/support/option_values.hpp"

namespace qm = qsgd::models;
namespace qs = qsgd::support;

namespace {

constexpr const char* program = "qsgd-peer-inputs";

void usage(std::FILE* f) {
  std::fputs(
      "usage: qsgd-peer-inputs --out FILE [options]\n"
      "Writes what qsgd-train's MLP starts from on Fashion-MNIST (initial parameters, standardization,\n"
      "every epoch's sample order and the sharding rule), so that a peer in another framework trains\n"
      "on the same inputs from the same start (benchmarks/scaling/ddp-yardstick --inputs FILE).\n"
      "\n"
      "  --out FILE         output file (required; written to FILE.tmp, then renamed)\n"
      "  --mlp-widths LIST  MLP widths, as qsgd-train's (784,4096,4096,10)\n"
      "  --seed N           qsgd-train's --seed: initial parameters and sample order (1)\n"
      "  --epochs N         epochs of sample order to write (1)\n"
      "  --data-dir DIR     Fashion-MNIST directory (as qsgd-train's; default $QSGD_FASHION_MNIST_DIR,\n"
      "                     else /usr/share/datasets/fashion-mnist)\n"
      "\n"
      "Format (schema qsgd.peer-inputs/1): one JSON line, then the float32 parameters, then epochs x n\n"
      "uint32 permutations (benchmarks/train/peer_inputs.cpp has the layout).\n",
      f);
}

struct Args {
  std::string out, data_dir;
  std::vector<std::uint64_t> widths{784, 4096, 4096, 10};
  std::uint64_t seed = 1, epochs = 1;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) throw qs::UsageError(o + " needs a value");
      return argv[++i];
    };
    if (o == "--out") a.out = val();
    else if (o == "--mlp-widths") a.widths = qs::parse_count_list(o, val(), 2, 1, 1u << 24);
    else if (o == "--seed") a.seed = qs::parse_count(o, val());
    else if (o == "--epochs") a.epochs = qs::parse_count(o, val(), 1, 1000);
    else if (o == "--data-dir") a.data_dir = val();
    else throw qs::UsageError("unknown option '" + o + "' (see --help)");
  }
  if (a.out.empty()) throw qs::UsageError("--out FILE is required");
  return a;
}

void write_all(std::ofstream& f, const void* p, std::size_t bytes, const std::string& path) {
  f.write(static_cast<const char*>(p), static_cast<std::streamsize>(bytes));
  if (!f) throw std::runtime_error("cannot write " + path);
}

int run(const Args& a) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the file says little-endian");
  const std::string dir = a.data_dir.empty() ? qm::default_fashion_mnist_dir() : a.data_dir;
  const std::size_t n = qm::load_fashion_mnist(dir, qm::Split::train).size();
  if (a.widths.front() != 784 || a.widths.back() != 10)
    throw qs::UsageError("--mlp-widths must start with 784 and end with 10 (Fashion-MNIST)");
  qm::MlpConfig c;
  c.widths.assign(a.widths.begin(), a.widths.end());
  const qm::Mlp model(c, a.seed);
  auto params = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.store().params());

  nlohmann::ordered_json h;
  h["schema"] = "qsgd.peer-inputs/1";
  h["program"] = program;
  h["qsgd_git_hash"] = qsgd::bench::build::git_hash;
  h["model"] = "mlp";
  h["widths"] = a.widths;
  h["seed"] = a.seed;
  h["dataset"] = "fashion-mnist";
  h["samples"] = n;
  h["features"] = "(pixel / 255 - mean) / stddev, float32";
  h["mean"] = qm::fashion_mnist_mean;
  h["stddev"] = qm::fashion_mnist_stddev;
  h["shard_policy"] = "drop_remainder";  // rank r of K: positions [r q, (r + 1) q), q = n / K
  h["epochs"] = a.epochs;
  h["byte_order"] = "little";
  h["parameters"] = model.num_parameters();
  auto& tensors = h["tensors"] = nlohmann::ordered_json::array();
  for (const auto& t : model.tensors())
    tensors.push_back({{"name", t.name}, {"shape", t.shape}, {"offset", t.offset}, {"size", t.size}});

  const std::string tmp = qsgd::support::temporary_name(a.out);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot create " + tmp);
    const std::string head = h.dump() + "\n";
    write_all(f, head.data(), head.size(), tmp);
    write_all(f, params.data(), 4 * model.num_parameters(), tmp);
    std::vector<std::size_t> perm;
    std::vector<std::uint32_t> out(n);
    for (std::uint64_t e = 0; e < a.epochs; ++e) {
      qm::epoch_permutation(n, a.seed, e, perm);
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint32_t>(perm[i]);
      write_all(f, out.data(), 4 * n, tmp);
    }
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      throw std::runtime_error("cannot write " + tmp);
    }
  }
  qsgd::support::durable_rename(tmp, a.out);
  std::cerr << program << ": " << a.out << ": mlp " << h["widths"].dump() << " seed " << a.seed << ", "
            << model.num_parameters() << " parameters, " << a.epochs << " epoch(s) of order over " << n
            << " samples\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto code = qsgd::bench::early_options(argc, argv, program, usage)) return *code;
  try {
    const Args a = parse(argc, argv);
    Kokkos::ScopeGuard guard;
    return run(a);
  } catch (const qs::UsageError& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
}
