// `gcrun sample RUN` through the binary (cli/sample_command.cpp, docs/sample.md): the same seed gives
// the same bytes and another seed others; the output is the prompt, then its continuation; a
// local-update run samples its global model (checked against a greedy decode of the checkpoint's
// θ_g, read here by LibTorch's own reader); control bytes are escaped; bad input is one line, exit 2.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "tasks/models/gpt.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::gcrunLines;
using testing::readFile;
using testing::runCommand;
using testing::TempDir;

const std::string kGcrun = GCRUN_BINARY_PATH;
constexpr int64_t kHeads = 2;
const std::string kTiny = " --set task.width=32 --set task.layers=2 --set task.heads=" + std::to_string(kHeads) +
                          " --set task.context=16 --set training.batch_size=4 --set evaluation.max_samples=64"
                          " --set output.sinks=[jsonl] --set distributed.timeout_s=20 --set training.max_steps=2";

// A small text with an escape byte in it, so that the run's vocabulary holds one.
std::string tinyText(int lines) {
  static const char* const kLines[] = {"the cat sat on the mat.", "a dog ran to the park!", "we saw it \x1b too."};
  std::string text;
  for (int i = 0; i < lines; ++i) text += std::string(kLines[i % 3]) + "\n";
  return text;
}

std::map<std::string, at::Tensor> checkpointOf(const std::string& run) {
  const std::string bytes = readFile(run + "/checkpoints/rank-0-step-2.pt");
  std::map<std::string, at::Tensor> state;
  for (const auto& item : torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict()) {
    state[item.key().toStringRef()] = item.value().toTensor();
  }
  return state;
}

// The greedy continuation of `ids` by the GPT whose parameters are the entries `prefix`<name>.
std::vector<int64_t> greedy(const std::map<std::string, at::Tensor>& state, const std::string& prefix,
                            std::vector<int64_t> ids, int tokens) {
  const auto& wte = state.at(prefix + "transformer.wte.weight");
  tasks::models::GptShape shape{wte.size(0), state.at(prefix + "transformer.wpe.weight").size(0), 2, kHeads,
                                wte.size(1)};
  tasks::models::GptModel model(shape, 0);
  model.eval();
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) item.value().copy_(state.at(prefix + item.key()));
  for (int i = 0; i < tokens; ++i) {
    // The context cropped to the model's, as nanoGPT's generate() does.
    const auto begin = ids.end() - std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(ids.size()), shape.context);
    const auto input = torch::tensor(std::vector<int64_t>(begin, ids.end()), torch::kInt64).view({1, -1});
    ids.push_back(model.forward(input).select(1, -1).argmax(-1).item<int64_t>());
  }
  return ids;
}

// The ids a sample of data without text prints (the line that is not gcrun's note on stderr).
std::string idsLine(const std::string& output) {
  std::string ids;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("gcrun", 0) != 0) ids = line;
  }
  return ids;
}

class Sample : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string data = dir_->file("data");
    fs::create_directories(data);
    std::ofstream(data + "/wiki.train.tokens", std::ios::binary) << tinyText(150);
    std::ofstream(data + "/wiki.valid.tokens", std::ios::binary) << tinyText(12);
    std::ofstream(data + "/wiki.test.tokens", std::ios::binary) << tinyText(12);
    for (const auto& [name, sets] : std::map<std::string, std::string>{
             {"char", " --set task.data_dir=" + data},
             {"diloco",
              " --set task.synthetic=true --set task.synthetic_samples=4000 --set sync.strategy=diloco"
              " --set distributed.simulated_workers=2 --set optimizer.learning_rate=0.05 --set "
              "optimizer.warmup_steps=0"}}) {
      const auto made = runCommand(kGcrun + " experiment brown-gpt-adamw --output-dir " + run(name) + kTiny + sets);
      ASSERT_EQ(made.exit_code, 0) << made.output;
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string run(const std::string& name) { return dir_->file(name); }
  static CommandResult sample(const std::string& run, const std::string& flags) {
    return runCommand(kGcrun + " sample " + run + " " + flags);
  }

  static TempDir* dir_;
};
TempDir* Sample::dir_ = nullptr;

TEST_F(Sample, TheSameSeedGivesTheSameBytesAnotherSeedOthers) {
  const auto first = sample(run("char"), "--tokens 80 --seed 7");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(sample(run("char"), "--tokens 80 --seed 7").output, first.output);
  EXPECT_NE(sample(run("char"), "--tokens 80 --seed 8").output, first.output);
  // The default prompt, a line break, is printed first; one byte per character token follows.
  EXPECT_EQ(first.output.rfind("\n", 0), 0u) << first.output;
}

TEST_F(Sample, TheOutputIsThePromptThenItsContinuation) {
  const auto result = sample(run("char"), "--prompt 'the dog' --tokens 40 --temperature 1.5 --top-k 5");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  ASSERT_EQ(result.output.rfind("the dog", 0), 0u) << result.output;
  // 40 bytes follow (an escape byte shows as 4), and a line break ends the output.
  EXPECT_GE(result.output.size(), 7u + 40u) << result.output;
  EXPECT_EQ(result.output.back(), '\n');
}

// The model's text is data: a control byte it (or the prompt) holds is shown as an escape.
TEST_F(Sample, ControlBytesAreEscapedLineBreaksPass) {
  const auto result = sample(run("char"), "--prompt \"$(printf 'a\\033cat\\nsat')\" --tokens 1");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output.rfind("a\\x1bcat\nsat", 0), 0u) << result.output;
  EXPECT_FALSE(contains(result.output, "\x1b")) << result.output;
}

// DiLoCo's workers step apart from θ_g between syncs; sample draws from θ_g, as export exports it.
// With --top-k 1 each draw is the most likely token: a greedy decode of the checkpoint's θ_g.
TEST_F(Sample, ALocalUpdateRunSamplesItsGlobalModel) {
  const auto result = sample(run("diloco"), "--prompt '3 1 4' --tokens 24 --top-k 1");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  // Synthetic data has no text: the ids, space-separated, and one line on stderr saying so.
  EXPECT_TRUE(contains(result.output, "gcrun sample: the run trained on synthetic data")) << result.output;
  std::vector<int64_t> sampled;
  std::istringstream ids(idsLine(result.output));
  for (int64_t id = 0; ids >> id;) sampled.push_back(id);

  const auto state = checkpointOf(run("diloco"));
  const auto global = greedy(state, "diloco/global/", {3, 1, 4}, 24);
  ASSERT_NE(global, greedy(state, "param/", {3, 1, 4}, 24)) << "the replica would pass this test too";
  EXPECT_EQ(sampled, global) << result.output;
}

// PyTorch's twin GPT given the run's export draws, as nanoGPT's generate() does with
// torch.multinomial and a generator seeded alike, the same tokens as gcrun sample.
TEST_F(Sample, PyTorchsTwinDrawsTheSameTokensWithTheSameSeed) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "Debian's python3-torch is not installed";
  }
  const std::string file = dir_->file("twin.safetensors");
  const auto exported =
      runCommand(kGcrun + " export " + run("diloco") + " --format safetensors --force --output " + file);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto result = sample(run("diloco"), "--prompt '3 1 4' --tokens 40 --temperature 1.3 --top-k 20 --seed 5");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto twin = runCommand(std::string("/usr/bin/python3 ") + GCRUN_SAMPLE_TWIN + " " + file + " " +
                               std::to_string(kHeads) + " '3 1 4' 40 1.3 20 5");
  ASSERT_EQ(twin.exit_code, 0) << twin.output;
  EXPECT_EQ(idsLine(result.output), idsLine(twin.output));
}

// Exit 2 and one line of gcrun's own naming each of `parts`.
void expectRefused(const CommandResult& result, const std::vector<std::string>& parts) {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  const auto lines = gcrunLines(result.output);
  ASSERT_EQ(lines.size(), 1u) << result.output;
  for (const auto& part : parts) EXPECT_TRUE(contains(lines.front(), part)) << "no '" << part << "' in " << lines[0];
}

TEST_F(Sample, BadInputIsOneLineAndExitTwo) {
  expectRefused(sample(run("char"), "--temperature 0"), {"--temperature", "above 0"});
  expectRefused(sample(run("char"), "--top-k 0"), {"--top-k 0", "at least 1"});
  expectRefused(sample(run("char"), "--tokens 0"), {"--tokens 0", "at least 1"});
  expectRefused(sample(run("char"), "--prompt 'Zebra'"), {"'Z'", "not in this run's character vocabulary"});
  expectRefused(sample(run("char"), "--prompt ''"), {"--prompt", "no tokens"});
  expectRefused(sample(run("diloco"), "--prompt '3 x'"), {"'x'", "not a token id"});
  expectRefused(sample(dir_->file("missing"), ""), {"missing", "no such directory"});

  TempDir scratch;
  const std::string copy = scratch.file("copy");
  fs::copy(run("char"), copy, fs::copy_options::recursive);
  fs::remove_all(copy + "/checkpoints");
  expectRefused(sample(copy, ""), {"no checkpoint"});
  std::string config = readFile(copy + "/config.yaml");
  const auto at = config.find("architecture: gpt");
  ASSERT_NE(at, std::string::npos) << config;
  config.replace(at, 17, "architecture: lstm");
  const auto task = config.find("name: language-model");
  ASSERT_NE(task, std::string::npos) << config;
  config.replace(task, 20, "name: wikitext2");
  std::ofstream(copy + "/config.yaml", std::ios::trunc) << config;
  expectRefused(sample(copy, ""), {"a GPT language model", "wikitext2"});
}

}  // namespace
}  // namespace gcrun
