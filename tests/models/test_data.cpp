// Data: the IDX reader on good and malformed files (written to a temporary
// directory by the tests), Fashion-MNIST from the Debian package, the
// teacher dataset, sharding, shuffling, the text corpus and the loader.

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "qsgd/models/data/batch_loader.hpp"
#include "qsgd/models/data/fashion_mnist.hpp"
#include "qsgd/models/data/idx.hpp"
#include "qsgd/models/data/sampler.hpp"
#include "qsgd/models/data/teacher.hpp"
#include "qsgd/models/data/text_corpus.hpp"
#include "qsgd/models/error.hpp"
#include "child_rss.hpp"
#include "test_util.hpp"

namespace qsgd::models {
namespace {

using Bytes = std::vector<std::uint8_t>;

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "qsgd_models_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const auto& f : files_) std::remove(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string write(const std::string& name, const Bytes& b, bool gzip = false) {
    const std::string p = dir_ + "/" + name;
    files_.push_back(p);
    if (gzip) {
      gzFile f = gzopen(p.c_str(), "wb");
      EXPECT_NE(f, nullptr);
      EXPECT_EQ(gzwrite(f, b.data(), static_cast<unsigned>(b.size())), static_cast<int>(b.size()));
      gzclose(f);
    } else {
      std::ofstream f(p, std::ios::binary);
      f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    }
    return p;
  }
  // A gzip file of many members: `head` compressed, then `copies` members of
  // 1 MiB of zeros each (about 1 KB apiece): it inflates to head + copies MiB.
  std::string write_bomb(const std::string& name, const Bytes& head, int copies) {
    const std::string p = write(name, head, true);
    const std::string z = write(name + ".zeros", Bytes(std::size_t(1) << 20, 0), true);
    const Bytes member = read_raw(z);
    std::ofstream f(p, std::ios::binary | std::ios::app);
    for (int i = 0; i < copies; ++i)
      f.write(reinterpret_cast<const char*>(member.data()), static_cast<std::streamsize>(member.size()));
    return p;
  }
  static Bytes read_raw(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(f), {});
  }
  std::string dir_;
  std::vector<std::string> files_;
};

Bytes idx(std::vector<std::uint32_t> dims, const Bytes& data, std::uint8_t type = 0x08) {
  Bytes b = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (auto d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(d >> s));
  }
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// Expects a DataError whose message contains every fragment.
template <class F>
void expect_data_error(F f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& e) {
    const std::string w = e.what();
    for (const auto& s : fragments) EXPECT_NE(w.find(s), std::string::npos) << "'" << s << "' not in: " << w;
  }
}

using Idx = TempDir;

TEST_F(Idx, ReadsPlainAndGzippedFiles) {
  const Bytes data = {0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255};
  for (bool gz : {false, true}) {
    const auto p = write(gz ? "a.gz" : "a", idx({2, 2, 3}, data), gz);
    const IdxArray a = read_idx(p);
    EXPECT_EQ(a.dims, (std::vector<std::uint32_t>{2, 2, 3}));
    EXPECT_EQ(a.data, data);
  }
}

TEST_F(Idx, MissingFileNamesThePath) {
  const std::string p = dir_ + "/no-such-file-idx3-ubyte";
  expect_data_error([&] { read_idx(p); }, {p, "cannot open", "No such file"});
}

TEST_F(Idx, MalformedFilesAreClearErrors) {
  const Bytes ok = idx({2, 3}, Bytes(6, 7));
  const auto bad_magic = write("bad_magic", {1, 2, 8, 1, 0, 0, 0, 1, 9});
  expect_data_error([&] { read_idx(bad_magic); }, {bad_magic, "bad magic 0x01020801"});
  const auto bad_type = write("bad_type", idx({1}, Bytes(4, 0), 0x0D));
  expect_data_error([&] { read_idx(bad_type); }, {bad_type, "element type 0xd"});
  const auto short_header = write("short_header", {0, 0, 8, 3, 0, 0, 0, 2});
  expect_data_error([&] { read_idx(short_header); }, {short_header, "truncated", "header of 3 dimensions"});
  const auto tiny = write("tiny", {0, 0});
  expect_data_error([&] { read_idx(tiny); }, {tiny, "truncated"});
  Bytes cut = ok;
  cut.pop_back();
  const auto short_data = write("short_data", cut);
  expect_data_error([&] { read_idx(short_data); }, {short_data, "truncated", "need 6 data bytes, file has 5"});
  Bytes longer = ok;
  longer.push_back(1);
  const auto trailing = write("trailing", longer);
  expect_data_error([&] { read_idx(trailing); }, {trailing, "trailing data"});
  const auto zero_dim = write("zero_dim", idx({2, 0}, {}));
  expect_data_error([&] { read_idx(zero_dim); }, {zero_dim, "dimension 1 is zero"});
  const auto no_dims = write("no_dims", {0, 0, 8, 0});
  expect_data_error([&] { read_idx(no_dims); }, {no_dims, "zero dimensions"});
}

TEST_F(Idx, TruncatedGzipIsAnError) {
  const auto full = write("full.gz", idx({64, 64}, Bytes(64 * 64, 3)), true);
  Bytes gz = read_raw(full);
  ASSERT_GT(gz.size(), 20u);
  gz.resize(gz.size() - 10);  // cut into the deflate stream / trailer
  const auto cut = write("cut.gz", gz);
  expect_data_error([&] { read_idx(cut); }, {cut, "gzip"});
}

TEST_F(Idx, GzipBombsAreRejectedInBoundedMemory) {
  // About 10 MB of gzip inflating to 10 GiB. Two forms: a header announcing
  // the 10 GiB (rejected at the header, over the 1 GiB limit), and a header
  // announcing 1000 bytes followed by the 10 GiB (rejected as trailing data
  // after 1001 bytes). Either way the reader must not inflate the file.
  const std::string big = write_bomb("big.gz", idx({102400, 102400}, {}), 10240);
  const std::string trail = write_bomb("trail.gz", idx({1000}, Bytes(1000, 1)), 10240);
  struct stat st {};
  ASSERT_EQ(::stat(big.c_str(), &st), 0);
  EXPECT_GT(st.st_size, 5 << 20);  // it is the bomb it says
  for (const auto& [path, what] : {std::pair{big, std::string("more than the limit")}, std::pair{trail, std::string("trailing data")}}) {
    const auto [code, grew_mib] = qsgd_test::in_child([&, p = path, w = what] {
      try {
        read_idx(p);
      } catch (const DataError& e) {
        return std::string(e.what()).find(w) != std::string::npos;
      }
      return false;
    });
    EXPECT_EQ(code, 0) << path << ": not rejected with '" << what << "'";
    EXPECT_LT(grew_mib, 100.0) << path;
  }
}

TEST_F(Idx, ClassificationPairChecksShapes) {
  const auto images = write("img", idx({3, 2, 2}, Bytes(12, 255)));
  const auto labels = write("lab", idx({3}, {0, 1, 2}));
  const LabeledDataset d = load_idx_classification(images, labels, 3, false, 0, 1);
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(d.features, 4u);
  EXPECT_EQ(d.y, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(d.x[0], 1.0f);

  const auto labels2d = write("lab2d", idx({3, 1}, {0, 1, 2}));
  expect_data_error([&] { load_idx_classification(images, labels2d, 3, false, 0, 1); },
                    {labels2d, "wrong dimensions", "3 x 1"});
  const auto images2d = write("img2d", idx({3, 4}, Bytes(12, 0)));
  expect_data_error([&] { load_idx_classification(images2d, labels, 3, false, 0, 1); },
                    {images2d, "wrong dimensions"});
  const auto fewer = write("fewer", idx({2}, {0, 1}));
  expect_data_error([&] { load_idx_classification(images, fewer, 3, false, 0, 1); },
                    {fewer, "2 labels for 3 images"});
  const auto big_label = write("big", idx({3}, {0, 1, 3}));
  expect_data_error([&] { load_idx_classification(images, big_label, 3, false, 0, 1); },
                    {big_label, "label 3 of sample 2"});
}

// A crafted 1 MB Fashion-MNIST image file: 1 x 1 x 2^30 pixels, the header
// followed by 1 MiB of zeros, gzipped. Under the reader's 1 GiB default it
// would pass the header and cost about 5 GiB (bytes, then floats) per rank;
// with the limit the expected shape implies (10,000 x 28 x 28 bytes) it is
// refused at the header, in a child whose peak RSS grows by under 100 MB.
// A file of the right size but the wrong shape is refused before any
// conversion, naming the shape.
TEST_F(Idx, FashionMnistCraftedShapesAreRefusedBeforeConverting) {
  write_bomb("t10k-images-idx3-ubyte.gz", idx({1, 1, 1u << 30}, {}), 1);
  write("t10k-labels-idx1-ubyte", idx({10000}, Bytes(10000, 1)));
  const auto [code, grew_mib] = qsgd_test::in_child([&] {
    try {
      load_fashion_mnist(dir_, Split::test);
    } catch (const DataError& e) {
      const std::string w = e.what();
      return w.find("more than the limit of 7840000 data bytes") != std::string::npos &&
             w.find("Fashion-MNIST t10k has 10000 images of 28 x 28") != std::string::npos;
    }
    return false;
  });
  EXPECT_EQ(code, 0) << "the crafted image file was not refused at its header with the expected message";
  EXPECT_LT(grew_mib, 100.0);
  write("t10k-images-idx3-ubyte", idx({10000, 784, 1}, Bytes(10000 * 784, 7)));
  expect_data_error([&] { load_fashion_mnist(dir_, Split::test); },
                    {dir_ + "/t10k-images-idx3-ubyte", "images are 784 x 1, not 28 x 28"});
  write("t10k-images-idx3-ubyte", idx({9999, 28, 28}, Bytes(9999 * 784, 7)));
  expect_data_error([&] { load_fashion_mnist(dir_, Split::test); }, {"9999 images, expected 10000"});
}

TEST_F(Idx, FashionMnistMissingDirectoryNamesThePath) {
  expect_data_error([&] { load_fashion_mnist(dir_, Split::test); },
                    {dir_ + "/t10k-images-idx3-ubyte", ".gz", "dataset-fashion-mnist"});
}

TEST(FashionMnist, LoadsTheDebianPackage) {
  const std::string dir = default_fashion_mnist_dir();
  QSGD_REQUIRE_DATASET(dir);
  const LabeledDataset d = load_fashion_mnist(dir, Split::test);
  ASSERT_EQ(d.size(), 10000u);
  EXPECT_EQ(d.features, 784u);
  EXPECT_EQ(d.classes, 10u);
  std::vector<int> count(10, 0);
  for (int y : d.y) ++count[static_cast<std::size_t>(y)];
  for (int c : count) EXPECT_EQ(c, 1000);  // the test split is balanced
  double mean = 0;
  for (float v : d.x) mean += v;
  mean /= static_cast<double>(d.x.size());
  EXPECT_NEAR(mean, 0.0, 0.05);  // standardized with the training-set statistics
}

TEST(Teacher, DeterministicAndUsesEveryClass) {
  TeacherConfig c;
  c.samples = 500;
  const auto a = make_teacher_dataset(c), b = make_teacher_dataset(c);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
  std::vector<int> count(c.classes, 0);
  for (int y : a.y) ++count[static_cast<std::size_t>(y)];
  for (int k : count) EXPECT_GT(k, 500 / 20) << "a class is nearly empty";
  TeacherConfig c2 = c;
  c2.data_seed = 3;
  EXPECT_NE(make_teacher_dataset(c2).x, a.x);
}

TEST(Shard, DisjointCoveringAndBalanced) {
  for (std::size_t n : {0, 1, 7, 10, 64, 1001}) {
    for (int k : {1, 2, 3, 4, 7, 16}) {
      std::vector<int> owner(n, -1);
      std::size_t lo = n, hi = 0, total = 0;
      for (int r = 0; r < k; ++r) {
        const ShardRange s = shard_range(n, r, k, ShardPolicy::balanced);
        for (std::size_t i = s.begin; i < s.end; ++i) {
          EXPECT_EQ(owner[i], -1) << "overlap n=" << n << " k=" << k;
          owner[i] = r;
        }
        lo = std::min(lo, s.size());
        hi = std::max(hi, s.size());
        total += s.size();
        const ShardRange d = shard_range(n, r, k, ShardPolicy::drop_remainder);
        EXPECT_EQ(d.size(), n / static_cast<std::size_t>(k));
        EXPECT_EQ(d.begin, static_cast<std::size_t>(r) * (n / static_cast<std::size_t>(k)));
      }
      EXPECT_EQ(total, n);
      EXPECT_LE(hi - std::min(lo, hi), 1u) << "n=" << n << " k=" << k;
      EXPECT_TRUE(std::all_of(owner.begin(), owner.end(), [](int o) { return o >= 0; }));
    }
  }
  EXPECT_THROW(shard_range(10, 2, 2, ShardPolicy::balanced), std::invalid_argument);
  EXPECT_THROW(shard_range(10, 0, 0, ShardPolicy::balanced), std::invalid_argument);
}

TEST(Sampler, SamePermutationOnEveryRankAndDisjointShards) {
  const std::size_t n = 103;
  const int k = 4;
  for (std::uint64_t epoch : {0u, 1u, 5u}) {
    std::vector<int> seen(n, 0);
    for (int r = 0; r < k; ++r) {
      EpochSampler s(n, r, k, 42, ShardPolicy::drop_remainder);
      s.set_epoch(epoch);
      EXPECT_EQ(s.indices().size(), n / k);
      for (std::size_t i : s.indices()) ++seen[i];
      // The rank's slice is its range of the one shared permutation.
      std::vector<std::size_t> perm;
      epoch_permutation(n, 42, epoch, perm);
      const ShardRange range = shard_range(n, r, k, ShardPolicy::drop_remainder);
      EXPECT_TRUE(std::equal(s.indices().begin(), s.indices().end(), perm.begin() + static_cast<std::ptrdiff_t>(range.begin)));
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>((n / k) * k));
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 0), static_cast<long>(n % k));
  }
}

TEST(Sampler, ShuffleIsSeededPerEpochAndReproducible) {
  std::vector<std::size_t> a, b, c, d;
  epoch_permutation(1000, 7, 3, a);
  epoch_permutation(1000, 7, 3, b);
  epoch_permutation(1000, 7, 4, c);
  epoch_permutation(1000, 8, 3, d);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
  // Known answer: pins the algorithm (std::mt19937_64 is fully specified by
  // the standard), so every platform and rank computes these indices.
  std::vector<std::size_t> small;
  epoch_permutation(10, 42, 0, small);
  EXPECT_EQ(small, (std::vector<std::size_t>{7, 8, 3, 6, 5, 0, 9, 4, 2, 1}));
  EpochSampler plain(5, 0, 1, 1, ShardPolicy::balanced, /*shuffle=*/false);
  plain.set_epoch(9);
  EXPECT_EQ(plain.indices(), (std::vector<std::size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(plain.batches(2), 2u);
}

TEST(Corpus, DebianLicenseTexts) {
  const auto paths = default_corpus_paths();
  const TextCorpus c = load_text_corpus(paths);
  EXPECT_EQ(c.sources, paths);
  EXPECT_GT(c.text.size(), 100000u);
  EXPECT_LT(c.vocab.size(), 128u);
  EXPECT_TRUE(std::is_sorted(c.vocab.begin(), c.vocab.end()));
  ASSERT_EQ(c.tokens.size(), c.text.size());
  for (std::size_t i = 0; i < c.text.size(); i += 97) {
    EXPECT_EQ(c.vocab[static_cast<std::size_t>(c.tokens[i])], static_cast<std::uint8_t>(c.text[i]));
  }
  const TokenDataset train = make_token_dataset(c, 32, 0.0, 0.9);
  const TokenDataset val = make_token_dataset(c, 32, 0.9, 1.0);
  EXPECT_EQ(train.size(), (train.tokens.size() - 1) / 32);
  EXPECT_GT(val.size(), 100u);
  EXPECT_EQ(train.tokens.size() + val.tokens.size(), c.tokens.size());
}

TEST(Corpus, ALimitRefusesALargerCorpusNamingTheFile) {
  const auto paths = default_corpus_paths();
  const std::size_t first = load_text_corpus({paths[0]}).text.size();
  EXPECT_EQ(load_text_corpus({paths[0]}, first).text.size(), first);  // exactly at the limit
  expect_data_error([&] { load_text_corpus({paths[0]}, first - 1); }, {paths[0], "more than the limit of"});
  expect_data_error([&] { load_text_corpus({paths[0], paths[1]}, first + 10); }, {paths[1], "more than the limit"});
}

TEST(Corpus, MissingFileNamesThePath) {
  expect_data_error([] { load_text_corpus({"/usr/share/common-licenses/GPL-3", "/nonexistent/corpus.txt"}); },
                    {"/nonexistent/corpus.txt", "cannot open"});
}

TEST(BatchLoader, CopiesTheChosenSamples) {
  LabeledDataset d;
  d.features = 3;
  d.classes = 5;
  for (int i = 0; i < 5; ++i) {
    for (int k = 0; k < 3; ++k) d.x.push_back(static_cast<float>(10 * i + k));
    d.y.push_back(i);
  }
  BatchLoader l(d, 4);
  const std::size_t idx[] = {3, 0, 4};
  const Batch& b = l.load(idx, 3);
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(test::to_host(b.x), (std::vector<double>{30, 31, 32, 0, 1, 2, 40, 41, 42}));
  EXPECT_EQ(test::to_host(b.labels), (std::vector<double>{3, 0, 4}));
  const std::size_t too_many[] = {0, 1, 2, 3, 4};
  EXPECT_THROW(l.load(too_many, 5), std::invalid_argument);

  TokenDataset t;
  t.vocab = 10;
  t.seq_len = 3;
  t.tokens = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};  // samples: [0..3) [3..6) [6..9)
  EXPECT_EQ(t.size(), 3u);
  BatchLoader lt(t, 2);
  const std::size_t tidx[] = {2, 0};
  const Batch& tb = lt.load(tidx, 2);
  EXPECT_EQ(test::to_host(tb.tokens), (std::vector<double>{6, 7, 8, 0, 1, 2}));
  EXPECT_EQ(test::to_host(tb.labels), (std::vector<double>{7, 8, 9, 1, 2, 3}));
}

}  // namespace
}  // namespace qsgd::models
