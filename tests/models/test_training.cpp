// Short deterministic training runs: the loss must fall by a stated factor.
// All seeds are fixed, so each run is deterministic; the factors are set
// well below what the runs reach (given in each test) so that a change of
// BLAS summation order cannot flip them, while a broken gradient, optimizer
// or data pipeline cannot reach them.

#include <gtest/gtest.h>

#include <sys/stat.h>

#include "qsgd/models/char_lstm.hpp"
#include "qsgd/models/cnn.hpp"
#include "qsgd/models/data/batch_loader.hpp"
#include "qsgd/models/data/fashion_mnist.hpp"
#include "qsgd/models/data/sampler.hpp"
#include "qsgd/models/data/teacher.hpp"
#include "qsgd/models/data/text_corpus.hpp"
#include "qsgd/models/mlp.hpp"
#include "qsgd/models/sgd.hpp"
#include "test_util.hpp"

namespace qsgd::models {
namespace {

// Mean loss and accuracy over the whole dataset, in batches.
template <class Data>
LossStats evaluate(Model& m, const Data& d, std::size_t batch) {
  BatchLoader loader(d, batch);
  std::vector<std::size_t> idx(d.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  LossStats total;
  double loss_sum = 0;
  for (std::size_t b = 0; b < d.size(); b += batch) {
    const std::size_t n = std::min(batch, d.size() - b);
    m.forward(loader.load(&idx[b], n));
    loss_sum += m.loss() * static_cast<double>(m.stats().rows);
    total.correct += m.stats().correct;
    total.rows += m.stats().rows;
  }
  total.loss = loss_sum / static_cast<double>(total.rows);
  return total;
}

template <class Data>
void train(Model& m, const Data& d, const SgdConfig& sc, std::size_t batch, std::size_t epochs, std::uint64_t seed,
           std::size_t max_steps = ~std::size_t(0)) {
  Sgd sgd(m.params(), sc);
  BatchLoader loader(d, batch);
  EpochSampler sampler(d.size(), 0, 1, seed);
  std::size_t steps = 0;
  for (std::size_t e = 0; e < epochs; ++e) {
    sampler.set_epoch(e);
    for (std::size_t b = 0; b < sampler.batches(batch) && steps < max_steps; ++b, ++steps) {
      m.zero_grad();
      m.forward(loader.load(sampler.batch(b, batch), batch));
      m.backward();
      sgd.step(m.grads());
    }
  }
}

TEST(Training, MlpLearnsTheTeacher) {
  // 2048 training samples of a 32-16-4 teacher, student MLP 32-64-4, batch
  // 64, SGD lr 0.1 (warm-up 10 steps, cosine to 0.01), momentum 0.9,
  // 8 epochs = 256 steps. Held-out loss (512 samples, other inputs, same
  // teacher) starts at 1.43 and reaches 0.39 with 87% accuracy (PyTorch,
  // same data and hyperparameters, constant lr: 0.53 held-out, 0.09 on the
  // training set; this run, constant lr: 0.58 and 0.10). Required: a 3x
  // reduction and 80% held-out accuracy.
  TeacherConfig tc;
  tc.samples = 2048;
  tc.hidden = 16;
  const LabeledDataset train_set = make_teacher_dataset(tc);
  tc.samples = 512;
  tc.data_seed = 99;
  const LabeledDataset held_out = make_teacher_dataset(tc);

  MlpConfig mc;
  mc.widths = {32, 64, 4};
  Mlp m(mc, 3);
  const LossStats before = evaluate(m, held_out, 128);
  SgdConfig sc;
  sc.lr.base_lr = 0.1;
  sc.lr.warmup_steps = 10;
  sc.lr.decay = LrDecay::cosine;
  sc.lr.total_steps = 256;
  sc.lr.min_lr = 0.01;
  sc.momentum = 0.9;
  train(m, train_set, sc, 64, 8, 11);
  const LossStats after = evaluate(m, held_out, 128);
  RecordProperty("loss_before", std::to_string(before.loss));
  RecordProperty("loss_after", std::to_string(after.loss));
  RecordProperty("accuracy_after", std::to_string(after.accuracy()));
  EXPECT_LT(after.loss, before.loss / 3) << "before " << before.loss << " after " << after.loss;
  EXPECT_GT(after.accuracy(), 0.80);
}

TEST(Training, RunsAreBitwiseReproducible) {
  TeacherConfig tc;
  tc.samples = 256;
  const LabeledDataset d = make_teacher_dataset(tc);
  MlpConfig mc;
  mc.widths = {32, 16, 4};
  SgdConfig sc;
  sc.lr.base_lr = 0.05;
  auto run = [&] {
    Mlp m(mc, 5);
    train(m, d, sc, 32, 2, 13);
    return test::to_host(m.params());
  };
  EXPECT_EQ(run(), run());
}

TEST(Training, CnnLearnsFashionMnist) {
  // 512 Fashion-MNIST test-split images (the smaller file), the default CNN,
  // batch 32, lr 0.05 momentum 0.9, 30 steps. Loss on those images starts
  // at 2.29 and reaches 0.73; required: a 2x reduction.
  const std::string dir = default_fashion_mnist_dir();
  QSGD_REQUIRE_DATASET(dir);
  LabeledDataset d = load_fashion_mnist(dir, Split::test);
  d.x.resize(512 * d.features);
  d.y.resize(512);
  Cnn m(CnnConfig{}, 7);
  const double before = evaluate(m, d, 256).loss;
  SgdConfig sc;
  sc.lr.base_lr = 0.05;
  train(m, d, sc, 32, 2, 17, 30);
  const double after = evaluate(m, d, 256).loss;
  RecordProperty("loss_before", std::to_string(before));
  RecordProperty("loss_after", std::to_string(after));
  EXPECT_LT(after, before / 2) << "before " << before << " after " << after;
}

TEST(Training, CharLstmLearnsTheLicenseTexts) {
  // Character LSTM (hidden 64, 16-step windows) on the Debian license corpus
  // (144,573 bytes, 85 distinct), batch 32, lr 1.0 momentum 0.9, 200 steps.
  // Held-out (last 10%) loss per character starts at 4.43 (about
  // log 85 = 4.44) and reaches 2.23, below the corpus' unigram entropy of
  // 3.19 nats, so the model uses context. Required: a 1.8x reduction (2.46).
  const TextCorpus corpus = load_text_corpus(default_corpus_paths());
  const TokenDataset train_set = make_token_dataset(corpus, 16, 0.0, 0.9);
  const TokenDataset held_out = make_token_dataset(corpus, 16, 0.9, 1.0);
  CharLstmConfig lc;
  lc.vocab = corpus.vocab.size();
  lc.hidden = 64;
  lc.seq_len = 16;
  CharLstm m(lc, 9);
  const double before = evaluate(m, held_out, 64).loss;
  SgdConfig sc;
  sc.lr.base_lr = 1.0;
  sc.momentum = 0.9;
  train(m, train_set, sc, 32, 1, 19, 200);
  const double after = evaluate(m, held_out, 64).loss;
  RecordProperty("loss_before", std::to_string(before));
  RecordProperty("loss_after", std::to_string(after));
  EXPECT_LT(after, before / 1.8) << "before " << before << " after " << after;
}

}  // namespace
}  // namespace qsgd::models
