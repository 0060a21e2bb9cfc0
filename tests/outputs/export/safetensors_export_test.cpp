// `gcrun export RUN --format safetensors` through the binary, checked by a reader written here from
// the format's specification (not gcrun's writer): every tensor is the checkpoint's, under
// nanoGPT's names; PyTorch's twin GPT (bench/safetensors_twin.py, its own reader) given the file
// computes gcrun's logits; local-update runs export the model their evaluations see; bad input is
// one line, exit 2.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

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
using Tensors = std::map<std::string, at::Tensor>;

const std::string kGcrun = GCRUN_BINARY_PATH;
constexpr int64_t kHeads = 2;
const std::string kTiny =
    " --set task.synthetic=true --set task.synthetic_samples=4000 --set task.width=32 --set task.layers=2"
    " --set task.heads=" +
    std::to_string(kHeads) +
    " --set task.context=16 --set training.batch_size=4 --set evaluation.max_samples=256"
    " --set output.sinks=[console,jsonl] --set distributed.timeout_s=20 --set training.max_steps=2";

// Registers the language-model task again as plugin-language-model (tests/support/language_model_plugin.cpp).
const std::string kPlugin = std::string(" --plugin ") + GCRUN_LANGUAGE_MODEL_PLUGIN_PATH;

// The file's tensors and metadata, read as the specification says: an 8-byte little-endian
// header length N, N bytes of JSON ({name: {dtype, shape, data_offsets: [begin, end)}, optional
// "__metadata__"}), then the data, which the tensors' offsets must cover exactly, without overlaps.
struct SafetensorsContent {
  Tensors tensors;
  nlohmann::json metadata;
};

SafetensorsContent readSafetensors(const std::string& bytes) {
  static const std::map<std::string, std::pair<at::ScalarType, size_t>> dtypes = {
      {"F32", {at::kFloat, 4}}, {"F64", {at::kDouble, 8}}, {"I64", {at::kLong, 8}}, {"I32", {at::kInt, 4}}};
  if (bytes.size() < 8) throw std::runtime_error("shorter than the header length");
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | static_cast<unsigned char>(bytes[i]);
  if (length > bytes.size() - 8) throw std::runtime_error("header length past the end");
  EXPECT_EQ(length % 8, 0u) << "gcrun pads its header to a multiple of 8";
  auto header = nlohmann::json::parse(bytes.substr(8, length));
  const std::string data = bytes.substr(8 + length);
  SafetensorsContent content;
  std::map<uint64_t, uint64_t> spans;  // begin -> end
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      content.metadata = info;
      continue;
    }
    const auto& [dtype, element] = dtypes.at(info.at("dtype").get<std::string>());
    const auto shape = info.at("shape").get<std::vector<int64_t>>();
    const auto offsets = info.at("data_offsets").get<std::vector<uint64_t>>();
    uint64_t elements = 1;
    for (int64_t side : shape) elements *= static_cast<uint64_t>(side);
    if (offsets.size() != 2 || offsets[1] < offsets[0] || offsets[1] > data.size() ||
        offsets[1] - offsets[0] != elements * element) {
      throw std::runtime_error("bad data_offsets of " + name);
    }
    if (!spans.emplace(offsets[0], offsets[1]).second) throw std::runtime_error("two tensors start together");
    content.tensors[name] = torch::empty(shape, at::TensorOptions().dtype(dtype));
    std::memcpy(content.tensors[name].data_ptr(), data.data() + offsets[0], offsets[1] - offsets[0]);
  }
  uint64_t covered = 0;
  for (const auto& [begin, end] : spans) {
    if (begin != covered) throw std::runtime_error("a hole or an overlap at byte " + std::to_string(begin));
    covered = end;
  }
  if (covered != data.size()) throw std::runtime_error("data past the last tensor");
  return content;
}

// One rank's checkpoint, as torch.load would read it (LibTorch's pickle reader, not gcrun's).
Tensors checkpointOf(const std::string& run, int rank) {
  const std::string bytes = readFile(run + "/checkpoints/rank-" + std::to_string(rank) + "-step-2.pt");
  Tensors state;
  for (const auto& item : torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict()) {
    state[item.key().toStringRef()] = item.value().toTensor();
  }
  return state;
}

// The tiny GPT runs the tests share, trained once: every-step, diloco and local-sgd over 2 workers.
class SafetensorsExport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    for (const auto& [name, sets] : std::map<std::string, std::string>{
             {"every-step", ""},
             {"diloco", " --set sync.strategy=diloco --set distributed.simulated_workers=2"},
             {"local-sgd", " --set sync.strategy=local-sgd --set distributed.simulated_workers=2"},
             {"plugin", kPlugin + " --set task.name=plugin-language-model"}}) {
      const auto made = runCommand(kGcrun + " experiment brown-gpt-adamw --output-dir " + run(name) + kTiny + sets);
      ASSERT_EQ(made.exit_code, 0) << made.output;
      outputs_[name] = made.output;
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string run(const std::string& name) { return dir_->file(name); }
  static CommandResult exportRun(const std::string& run, const std::string& file, const std::string& more = "") {
    return runCommand(kGcrun + " export " + run + " --format safetensors --output " + file + more);
  }
  static SafetensorsContent exported(const std::string& name) {
    const std::string file = dir_->file(name + ".safetensors");
    const auto result = exportRun(run(name), file, " --force");
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return readSafetensors(readFile(file));
  }

  static TempDir* dir_;
  static std::map<std::string, std::string> outputs_;  // each run's console output
};
TempDir* SafetensorsExport::dir_ = nullptr;
std::map<std::string, std::string> SafetensorsExport::outputs_;

TEST_F(SafetensorsExport, EveryTensorIsTheCheckpointsUnderNanoGptNamesWithTheRunInTheMetadata) {
  const auto content = exported("every-step");
  const auto state = checkpointOf(run("every-step"), 0);
  size_t parameters = 0;
  for (const auto& [entry, tensor] : state) {
    if (entry.rfind("param/", 0) != 0) continue;
    ++parameters;
    const auto name = entry.substr(6);
    ASSERT_TRUE(content.tensors.count(name)) << name;
    EXPECT_TRUE(torch::equal(content.tensors.at(name), tensor)) << name;
  }
  EXPECT_EQ(parameters, 2u + 2u * 12u + 2u);  // wte, wpe, 12 per block, ln_f
  EXPECT_EQ(content.tensors.size(), parameters + 1);
  EXPECT_TRUE(torch::equal(content.tensors.at("lm_head.weight"), content.tensors.at("transformer.wte.weight")));
  EXPECT_EQ(content.tensors.at("transformer.h.1.attn.c_attn.weight").sizes(), (std::vector<int64_t>{96, 32}));

  const auto& metadata = content.metadata;
  EXPECT_EQ(metadata.at("settings").get<std::string>(), readFile(run("every-step") + "/config.yaml"));
  EXPECT_EQ(metadata.at("experiment"), "brown-gpt-adamw");
  EXPECT_EQ(metadata.at("step"), "2");
  EXPECT_EQ(metadata.at("tokenizer"), "char");
  EXPECT_EQ(metadata.at("vocabulary_size"), std::to_string(content.tensors.at("transformer.wte.weight").size(0)));
  EXPECT_EQ(metadata.at("gcrun_version"), GCRUN_VERSION);
  EXPECT_TRUE(contains(metadata.at("model").get<std::string>(), "rank 0")) << metadata.dump();
}

// What makes a task's model a language model is what its registration declares
// (TaskSpec::language_model), not its name: a plugin's task gets the tokenizer metadata and
// nanoGPT's lm_head.weight as the built-in one does.
TEST_F(SafetensorsExport, APluginsLanguageModelTaskGetsTheTokenizerAndTheTiedOutput) {
  const std::string file = dir_->file("plugin.safetensors");
  const auto result = exportRun(run("plugin"), file, kPlugin);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto content = readSafetensors(readFile(file));
  EXPECT_EQ(content.metadata.at("task"), "plugin-language-model");
  EXPECT_EQ(content.metadata.value("tokenizer", ""), "char") << content.metadata.dump();
  EXPECT_EQ(content.metadata.value("vocabulary_size", ""), "65") << content.metadata.dump();
  ASSERT_TRUE(content.tensors.count("lm_head.weight"));
  EXPECT_TRUE(torch::equal(content.tensors.at("lm_head.weight"), content.tensors.at("transformer.wte.weight")));
}

// gcrun's GPT built from the file's tensors and PyTorch's twin given the same file compute the
// same logits on the same tokens.
TEST_F(SafetensorsExport, PyTorchsTwinGivenTheFileComputesGcrunsLogits) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "Debian's python3-torch is not installed";
  }
  const std::string file = dir_->file("twin.safetensors");
  ASSERT_EQ(exportRun(run("every-step"), file).exit_code, 0);
  const auto tensors = readSafetensors(readFile(file)).tensors;
  const auto& wte = tensors.at("transformer.wte.weight");
  tasks::models::GptShape shape{wte.size(0), tensors.at("transformer.wpe.weight").size(0), 2, kHeads, wte.size(1)};
  tasks::models::GptModel model(shape, 0);
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) item.value().copy_(tensors.at(item.key()));
  const auto tokens =
      torch::arange(0, 2 * 16, torch::kInt64).remainder(shape.vocabulary).mul(7).remainder(shape.vocabulary);
  const auto mine = model.forward(tokens.view({2, 16})).flatten();

  std::string rows;
  for (int64_t i = 0; i < tokens.size(0); ++i) {
    rows += (i == 0 ? "" : (i % 16 == 0 ? ";" : ",")) + std::to_string(tokens[i].item<int64_t>());
  }
  const auto twin = runCommand(std::string("/usr/bin/python3 ") + GCRUN_SAFETENSORS_TWIN + " " + file + " " +
                               std::to_string(kHeads) + " '" + rows + "'");
  ASSERT_EQ(twin.exit_code, 0) << twin.output;
  const auto theirs = nlohmann::json::parse(twin.output).get<std::vector<double>>();
  ASSERT_EQ(theirs.size(), static_cast<size_t>(mine.numel()));
  for (size_t i = 0; i < theirs.size(); ++i) {
    const double ours = mine[static_cast<int64_t>(i)].item<double>();
    EXPECT_NEAR(ours, theirs[i], 1e-5 * std::max(1.0, std::abs(theirs[i]))) << "logit " << i;
  }
}

// DiLoCo's workers step apart from the global model θ_g between syncs (every 32 steps by default:
// after 2 steps θ_g is still the initial model); θ_g is what is evaluated, and exported.
TEST_F(SafetensorsExport, DilocoExportsTheGlobalModelNotAWorkersReplica) {
  const auto content = exported("diloco");
  const auto state = checkpointOf(run("diloco"), 0);
  const std::string name = "transformer.h.0.mlp.c_fc.weight";
  EXPECT_TRUE(torch::equal(content.tensors.at(name), state.at("diloco/global/" + name)));
  EXPECT_FALSE(torch::equal(content.tensors.at(name), state.at("param/" + name)));
  EXPECT_TRUE(contains(content.metadata.at("model").get<std::string>(), "global")) << content.metadata.dump();
}

// local-sgd evaluates the mean of the workers' models when they have drifted apart since the
// last average; the export is that mean.
TEST_F(SafetensorsExport, LocalSgdExportsTheWorkersMean) {
  const auto content = exported("local-sgd");
  const auto first = checkpointOf(run("local-sgd"), 0);
  const auto second = checkpointOf(run("local-sgd"), 1);
  const std::string name = "param/transformer.wte.weight";
  ASSERT_FALSE(torch::equal(first.at(name), second.at(name)));
  EXPECT_TRUE(torch::allclose(content.tensors.at("transformer.wte.weight"), (first.at(name) + second.at(name)) / 2));
}

// The one-worker run sends nothing: its epoch line and its last line say so, and what it would
// send with more workers; runs of two workers say what each sent.
TEST_F(SafetensorsExport, OneWorkerRunsSayNothingWasSent) {
  const auto& alone = outputs_.at("every-step");
  EXPECT_TRUE(contains(alone, "  nothing sent (one worker; each of more would send ")) << alone;
  EXPECT_TRUE(contains(alone, "steps, nothing sent (one worker; each of more would send ")) << alone;
  EXPECT_FALSE(contains(alone, "  sent ")) << alone;
  EXPECT_TRUE(contains(outputs_.at("diloco"), " sent per worker")) << outputs_.at("diloco");
}

// Exit 2 and one line of gcrun's own naming each of `parts`.
void expectRefused(const CommandResult& result, const std::vector<std::string>& parts) {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  const auto lines = gcrunLines(result.output);
  ASSERT_EQ(lines.size(), 1u) << result.output;
  for (const auto& part : parts) EXPECT_TRUE(contains(lines.front(), part)) << "no '" << part << "' in " << lines[0];
}

TEST_F(SafetensorsExport, BadInputIsOneLineAndExitTwo) {
  TempDir scratch;
  const std::string out = scratch.file("out.safetensors");
  expectRefused(exportRun(scratch.file("missing"), out), {"missing", "no such directory"});
  expectRefused(exportRun(scratch.path().string(), out), {"not a gcrun run directory", "config.yaml"});
  expectRefused(runCommand(kGcrun + " export " + run("every-step") + " --format onnx --output " + out),
                {"--format onnx", "safetensors"});

  const std::string copy = scratch.file("copy");
  fs::copy(run("every-step"), copy, fs::copy_options::recursive);
  const std::string rank_file = copy + "/checkpoints/rank-0-step-2.pt";
  const std::string whole = readFile(rank_file);
  std::ofstream(rank_file, std::ios::binary | std::ios::trunc) << whole.substr(0, whole.size() / 2);
  expectRefused(exportRun(copy, out), {"rank-0-step-2.pt", "shorter than manifest.json says"});
  fs::remove_all(copy + "/checkpoints");
  expectRefused(exportRun(copy, out), {"no checkpoint", "manifest.json"});
  EXPECT_FALSE(fs::exists(out));
}

// An existing --output is replaced only with --force, and a symlink there is replaced, never
// written through.
TEST_F(SafetensorsExport, AnExistingOutputNeedsForceAndASymlinkIsNotFollowed) {
  TempDir scratch;
  const std::string target = scratch.file("someone-elses-file");
  std::ofstream(target) << "keep";
  const std::string out = scratch.file("model.safetensors");
  fs::create_symlink(target, out);
  expectRefused(exportRun(run("every-step"), out), {out, "exists", "--force"});
  ASSERT_EQ(exportRun(run("every-step"), out, " --force").exit_code, 0);
  EXPECT_EQ(readFile(target), "keep");
  EXPECT_FALSE(fs::is_symlink(out));
  EXPECT_NO_THROW(readSafetensors(readFile(out)));
}

}  // namespace
}  // namespace gcrun
