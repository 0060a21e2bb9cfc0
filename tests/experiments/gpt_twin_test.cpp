// gcrun's GPT with AdamW against its PyTorch twin (bench/gpt_twin.py): the same model, weights,
// batches, schedule, clipping and AdamW under DDP over Gloo with 2 processes, against `gcrun
// experiment` with 2 processes. The twin shares no code with gcrun; Debian's python3-torch 1.13 and
// gcrun's LibTorch 1.13.1 share ATen, so the same operations in the same order give the same bits.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

using testing::readFile;
using testing::runCommand;

constexpr int kSteps = 50;

// Sentences of common words from a fixed generator: text with structure to learn, the same on
// every machine (std::mt19937 and the modulo are fully specified).
void writeSplit(const std::string& path, int sentences, uint32_t seed) {
  static const std::vector<std::string> words = {
      "the",  "of",        "and",    "to",   "a",     "in",     "that",  "is",
      "was",  "he",        "for",    "it",   "with",  "as",     "his",   "on",
      "be",   "at",        "by",     "this", "had",   "not",    "are",   "but",
      "from", "or",        "have",   "an",   "they",  "which",  "one",   "you",
      "were", "her",       "all",    "she",  "there", "would",  "their", "we",
      "him",  "been",      "has",    "when", "who",   "will",   "more",  "no",
      "The",  "Fulton",    "County", "jury", "said",  "Friday", "an",    "investigation",
      "of",   "Atlanta's", "recent"};
  std::mt19937 random(seed);
  std::ofstream out(path);
  for (int s = 0; s < sentences; ++s) {
    const int length = 3 + static_cast<int>(random() % 10);
    for (int w = 0; w < length; ++w) out << words[random() % words.size()] << ' ';
    out << ".\n";
  }
}

std::string writeData(const testing::TempDir& dir) {
  const std::string data = dir.file("data");
  std::filesystem::create_directories(data);
  writeSplit(data + "/wiki.train.tokens", 2500, 1);
  writeSplit(data + "/wiki.valid.tokens", 300, 2);
  writeSplit(data + "/wiki.test.tokens", 300, 3);
  return data;
}

// The settings both sides run with, as gcrun keys and as the twin's flags.
struct Setting {
  std::string key, flag, value;
};

const std::vector<Setting>& baseSettings() {
  static const std::vector<Setting> settings = {
      {"seed", "--seed", "3"},
      {"task.context", "--context", "64"},
      {"task.layers", "--layers", "2"},
      {"task.heads", "--heads", "4"},
      {"task.width", "--width", "64"},
      {"training.batch_size", "--batch-size", "8"},
      {"training.max_steps", "--steps", std::to_string(kSteps)},
      {"optimizer.learning_rate", "--learning-rate", "0.003"},
      {"optimizer.min_learning_rate", "--min-learning-rate", "0.0003"},
      {"optimizer.warmup_steps", "--warmup-steps", "10"},
      {"optimizer.decay_steps", "--decay-steps", "40"},
      {"optimizer.beta2", "--beta2", "0.99"},
      {"optimizer.weight_decay", "--weight-decay", "0.1"},
      {"optimizer.clip_norm", "--clip-norm", "0.5"},
  };
  return settings;
}

struct TwinRun {
  std::vector<double> gcrun, twin;
  double sent_fraction = 0;  // of what every-step fp32 all-reduce would have sent
};

TwinRun runBoth(const std::string& preset, const std::vector<Setting>& extra, const std::string& twin_flags) {
  testing::TempDir dir;
  const std::string data = writeData(dir);
  std::string sets = " --set task.data_dir=" + data + " --set output.log_every_steps=1";
  std::string flags = " --data " + data + " --output " + dir.file("twin.json") + twin_flags;
  for (const auto& settings : {baseSettings(), extra}) {
    for (const auto& s : settings) {
      sets += " --set " + s.key + "=" + s.value;
      if (!s.flag.empty()) flags += " " + s.flag + " " + s.value;
    }
  }
  // One thread on both sides: a norm's blocking, and so its last bits, follows the thread count.
  const auto ours = runCommand("OMP_NUM_THREADS=1 " + std::string(GCRUN_BINARY_PATH) + " experiment " + preset +
                               " --nproc-per-node 2 --output-dir " + dir.file("run") + sets);
  EXPECT_EQ(ours.exit_code, 0) << ours.output;
  const auto twin = runCommand(
      "OMP_NUM_THREADS=1 /usr/bin/python3 -m torch.distributed.run --nnodes 1 "
      "--nproc_per_node 2 --redirects 1 --tee 1 --master_port " +
      std::to_string(29500 + ::getpid() % 2000) + " " GCRUN_GPT_TWIN + flags);
  EXPECT_EQ(twin.exit_code, 0) << twin.output;
  TwinRun run;
  std::istringstream metrics(readFile(dir.file("run/metrics.jsonl")));
  for (std::string line; std::getline(metrics, line);) {
    const auto event = nlohmann::json::parse(line);
    if (event["name"] == "cross_entropy" && event["split"] == "train" && event.contains("window")) {
      run.gcrun.push_back(event["value"].get<double>());
    }
  }
  if (ours.exit_code == 0) {
    const auto info = nlohmann::json::parse(readFile(dir.file("run/run.json")));
    run.sent_fraction =
        info["bits_sent"].get<double>() / (32.0 * info["num_parameters"].get<double>() * info["steps"].get<double>());
  }
  if (twin.exit_code == 0) {
    run.twin = nlohmann::json::parse(readFile(dir.file("twin.json")))["losses"].get<std::vector<double>>();
  }
  return run;
}

TEST(GptTwin, ExactAllReduceWithAdamWIsBitIdenticalToDdp) {
  if (!testing::peerPythonHas("torch.distributed.run"))
    GTEST_SKIP() << "Debian's python3-torch is missing: apt-get install python3-torch";
  const auto run = runBoth("brown-gpt-adamw", {}, "");
  EXPECT_DOUBLE_EQ(run.sent_fraction, 1.0);
  ASSERT_EQ(run.gcrun.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(run.twin.size(), static_cast<size_t>(kSteps));
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(run.gcrun[step], run.twin[step]) << "step " << step + 1;
  }
  // The run learned something: a twin that matched a model that does not train would prove little.
  EXPECT_LT(run.gcrun.back(), run.gcrun.front() - 0.5);
}

// brown-gpt-nanogpt as the preset sets it against the twin with nanoGPT's two defaults: no biases,
// and the decay on every tensor of 2 or more dims (the embeddings included).
TEST(GptTwin, NanoGptPresetIsBitIdenticalToDdpWithoutBiasesAndWithDecayedEmbeddings) {
  if (!testing::peerPythonHas("torch.distributed.run"))
    GTEST_SKIP() << "Debian's python3-torch is missing: apt-get install python3-torch";
  const auto run = runBoth("brown-gpt-nanogpt", {}, " --bias false --decay-embeddings true");
  ASSERT_EQ(run.gcrun.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(run.twin.size(), static_cast<size_t>(kSteps));
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(run.gcrun[step], run.twin[step]) << "step " << step + 1;
  }
  EXPECT_LT(run.gcrun.back(), run.gcrun.front() - 0.5);
}

// DDP's powerSGD_hook against gcrun's powersgd-ddp set up alike (docs/reducers.md: which settings make them
// alike): the hook's state on both sides, one DDP bucket, the hook's own error feedback.
TEST(GptTwin, PowerSgdHookIsBitIdenticalToPowersgdDdp) {
  if (!testing::peerPythonHas("torch.distributed.run"))
    GTEST_SKIP() << "Debian's python3-torch is missing: apt-get install python3-torch";
  const std::vector<Setting> hook = {
      {"reducer.name", "", "powersgd-ddp"},
      {"optimizer.memory", "", "false"},
      {"reducer.rank", "--rank", "4"},
      {"reducer.start_iter", "--start-iter", "10"},
      {"reducer.min_compression_rate", "--min-compression-rate", "2"},
      {"reducer.error_feedback", "--error-feedback", "true"},
      {"reducer.warm_start", "--warm-start", "true"},
      {"reducer.random_seed", "--random-seed", "5"},
  };
  const auto run = runBoth("brown-gpt-adamw", hook, " --hook powersgd --bucket-mb 64");
  // It compressed from iteration 10 on: a twin of plain all-reduce would match as well.
  EXPECT_LT(run.sent_fraction, 0.5);
  ASSERT_EQ(run.gcrun.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(run.twin.size(), static_cast<size_t>(kSteps));
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(run.gcrun[step], run.twin[step]) << "step " << step + 1;
  }
  EXPECT_LT(run.gcrun.back(), run.gcrun.front() - 0.5);
}

}  // namespace
}  // namespace gcrun
