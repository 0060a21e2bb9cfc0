// Checkpoints that someone else prepared (docs/security.md), resumed through the binary under a
// 3 GiB data cap: a rank file and its manifest come from the same directory, so a tampered file
// with a recomputed size and checksum must still be refused (exit 2, one line naming the file and
// the tensor) before any of it is copied, a huge or deeply nested one before it costs memory or
// the stack, and a refused resume leaves the run directory as it was.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <torch/serialize.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "experiments/training/checkpoint.h"
#include "experiments/training/checkpoint_archive.h"
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
using State = std::map<std::string, at::Tensor>;
using namespace std::string_literals;

const std::string kGcrun = GCRUN_BINARY_PATH;
const std::string kQuick =
    " --set task.synthetic=true --set training.batch_size=32 --set task.test_batch_size=500"
    " --set output.sinks=[jsonl,csv] --set distributed.timeout_s=20";
const std::string kRankFile = "rank-0-step-2.pt";
const std::string kWeight = "param/fc1.weight";  // [128, 3136] float32
const int64_t kWeightElements = 128 * 3136;

// A refusal comes within seconds; the limit is for two cores shared with other builds.
CommandResult bounded(const std::string& command) { return runCommand("ulimit -d 3145728 && timeout 120 " + command); }

// Exit 2 and one line of gcrun's own that names each of `parts`.
void expectRefused(const CommandResult& result, const std::vector<std::string>& parts) {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  const auto lines = gcrunLines(result.output);
  ASSERT_EQ(lines.size(), 1u) << result.output;
  EXPECT_EQ(lines.front().rfind("gcrun: error: ", 0), 0u) << result.output;
  for (const auto& part : parts) EXPECT_TRUE(contains(lines.front(), part)) << "no '" << part << "' in " << lines[0];
}

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

State loadState(const std::string& archive) {
  State state;
  for (const auto& item : torch::pickle_load(std::vector<char>(archive.begin(), archive.end())).toGenericDict()) {
    state[item.key().toStringRef()] = item.value().toTensor();
  }
  return state;
}

std::string archiveOf(const State& state) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : state) dict.insert(name, tensor);
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  return std::string(bytes.begin(), bytes.end());
}

// `archive` with each record passed through `edit(name, bytes)` (the version record aside, which
// the writer adds).
template <class Edit>
std::string rewritten(const std::string& archive, Edit edit) {
  std::istringstream in(archive);
  caffe2::serialize::PyTorchStreamReader reader(&in);
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  for (const auto& name : reader.getAllRecords()) {
    if (name == "version" || name == ".data/version") continue;
    auto [data, size] = reader.getRecord(name);
    const std::string bytes = edit(name, std::string(static_cast<const char*>(data.get()), size));
    writer.writeRecord(name, bytes.data(), bytes.size());
  }
  writer.writeEndOfFile();
  return out;
}

// `archive` whose storage record of `size` bytes keeps only its first `keep`.
std::string withRecordCut(const std::string& archive, size_t size, size_t keep) {
  size_t cut = 0;
  auto result = rewritten(archive, [&](const std::string& name, const std::string& bytes) {
    if (name.rfind("data/", 0) != 0 || bytes.size() != size) return bytes;
    ++cut;
    return bytes.substr(0, keep);
  });
  EXPECT_EQ(cut, 1u) << "no single record of " << size << " bytes";
  return result;
}

std::string withPickle(const std::string& archive, const std::string& pickle) {
  return rewritten(
      archive, [&](const std::string& name, const std::string& bytes) { return name == "data.pkl" ? pickle : bytes; });
}

nlohmann::json readJson(const std::string& path) { return nlohmann::json::parse(readFile(path)); }

// Replaces the rank file of `run`'s checkpoint, its manifest entry's size and checksum recomputed
// to match.
void plantRankFile(const std::string& run, const std::string& bytes, const std::string& rank_file = kRankFile) {
  writeBytes(run + "/checkpoints/" + rank_file, bytes);
  const std::string manifest_path = run + "/checkpoints/manifest.json";
  auto manifest = readJson(manifest_path);
  std::ostringstream checksum;
  checksum << std::hex << experiments::checkpointChecksum(bytes);
  for (auto& file : manifest["files"]) {
    if (file["file"] != rank_file) continue;
    file["bytes"] = bytes.size();
    file["fnv1a"] = checksum.str();
  }
  std::ofstream(manifest_path) << manifest.dump();
}

// `depth` lists, each inside the one before.
std::string nestedLists(int depth) {
  std::string pickle = "\x80\x02";
  for (int level = 0; level < depth; ++level) pickle += "](";  // a list, and a MARK for what goes in it
  return pickle + "]" + std::string(depth, 'e') + ".";         // each APPENDS closes one level
}

// A finished two-step fashion-sgd run with a checkpoint, made once; each test tampers with a copy.
class HostileCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_dir_ = new TempDir;
    const auto made = runCommand(kGcrun + " experiment fashion-sgd --output-dir " + suite_dir_->file("run") + kQuick +
                                 " --set training.max_steps=2");
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() {
    delete suite_dir_;
    suite_dir_ = nullptr;
  }

  void SetUp() override { fs::copy(suite_dir_->file("run"), run_, fs::copy_options::recursive); }

  CommandResult resume(const std::string& flags = "") const {
    return bounded(kGcrun + " experiment fashion-sgd --resume " + run_ + " --set training.max_steps=4" + flags);
  }
  std::string rankFile() const { return run_ + "/checkpoints/" + kRankFile; }
  std::string manifestPath() const { return run_ + "/checkpoints/manifest.json"; }
  nlohmann::json manifest() const { return readJson(manifestPath()); }
  void setManifest(const nlohmann::json& manifest) const { std::ofstream(manifestPath()) << manifest.dump(); }
  void plant(const std::string& bytes) const { plantRankFile(run_, bytes); }
  State state() const { return loadState(readFile(rankFile())); }

  static TempDir* suite_dir_;
  TempDir dir_;
  const std::string run_ = dir_.file("run");
};

TempDir* HostileCheckpoint::suite_dir_ = nullptr;

TEST_F(HostileCheckpoint, AWellFormedCheckpointStillResumes) {
  plant(archiveOf(state()));  // rewritten, as PyTorch would, with the same tensors
  const auto resumed = resume();
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, "from the checkpoint of step 2")) << resumed.output;
  EXPECT_TRUE(fs::is_regular_file(run_ + "/.gcrun.lock"));
}

// The error-feedback memories are views of one flat buffer, saved as one storage record of all
// 421,642 parameters: cut to 8 bytes, the old code copied whatever lay past them into every
// memory and completed the run (exit 0).
TEST_F(HostileCheckpoint, AStorageRecordShorterThanItsTensorsIsRefused) {
  plant(withRecordCut(readFile(rankFile()), 421642 * 4, 8));
  expectRefused(resume(), {kRankFile, "tensor 'memory/", "which holds 8"});
}

// A tensor's record cut short, the same with a storage of its own (the old code: exit 1).
TEST_F(HostileCheckpoint, AShortRecordOfAParameterIsRefused) {
  State tampered = state();
  // One element longer than the tensor: no other record has its size.
  tampered[kWeight] = torch::cat({tampered[kWeight].flatten(), torch::zeros({1})}).narrow(0, 0, kWeightElements);
  tampered[kWeight] = tampered[kWeight].view({128, 3136});
  plant(withRecordCut(archiveOf(tampered), (kWeightElements + 1) * 4, 8));
  expectRefused(resume(), {kRankFile, "tensor '" + kWeight + "'", "which holds 8"});
}

// The record holds exactly the tensor's element count: only the offset or the strides reach past.
TEST_F(HostileCheckpoint, AnOffsetOrStrideOutsideTheStorageIsRefused) {
  const at::Tensor weight = state()[kWeight];
  const at::Tensor offset_base = torch::cat({torch::zeros({1}), weight.flatten()});
  const at::Tensor stride_base = torch::zeros({128 * 3137});
  const std::map<std::string, std::pair<at::Tensor, int64_t>> views = {
      {"offset", {offset_base.narrow(0, 1, kWeightElements).view({128, 3136}), offset_base.numel()}},
      {"stride", {stride_base.as_strided({128, 3136}, {3137, 1}), stride_base.numel()}}};
  for (const auto& [what, view] : views) {
    SCOPED_TRACE(what);
    fs::remove_all(run_);
    fs::copy(suite_dir_->file("run"), run_, fs::copy_options::recursive);
    State tampered = state();
    tampered[kWeight] = view.first;
    plant(withRecordCut(archiveOf(tampered), view.second * 4, kWeightElements * 4));
    expectRefused(resume(), {kRankFile, "tensor '" + kWeight + "'"});
  }
}

TEST_F(HostileCheckpoint, AnEntryOfAnotherDtypeOrShapeIsRefusedByName) {
  for (const auto& [what, change] : std::map<std::string, at::Tensor>{{"dtype", state()[kWeight].to(torch::kDouble)},
                                                                      {"shape", state()[kWeight].flatten()}}) {
    SCOPED_TRACE(what);
    State tampered = state();
    tampered[kWeight] = change;
    plant(archiveOf(tampered));
    expectRefused(resume(), {kRankFile, "'" + kWeight + "'", "this run's is Float [128, 3136]"});
  }
}

// The old code ignored an entry it did not ask for and resumed (exit 0).
TEST_F(HostileCheckpoint, AMissingOrExtraEntryIsRefusedByName) {
  State missing = state();
  missing.erase("memory/fc1.weight");
  plant(archiveOf(missing));
  expectRefused(resume(), {kRankFile, "'memory/fc1.weight' is missing"});

  State extra = state();
  extra["param/planted"] = torch::zeros({3});
  plant(archiveOf(extra));
  expectRefused(resume(), {kRankFile, "'param/planted' is not one this run saves"});
}

// The GPT's causal mask is a constant it makes, not a buffer: no checkpoint holds it any more, one
// of an earlier version that holds it still resumes, and a crafted mask (all ones: a model that
// sees the future) is refused by name. The old code restored the ones and trained non-causally.
TEST(HostileGptCheckpoint, TheCausalMaskIsAConstantNotRestoredFromAFile) {
  TempDir dir;
  const auto run = dir.file("run");
  const std::string tiny =
      " --set task.synthetic=true --set task.synthetic_samples=4000 --set task.width=32 --set task.layers=1"
      " --set task.heads=2 --set task.context=16 --set training.batch_size=4 --set evaluation.max_samples=256"
      " --set output.sinks=[jsonl] --set distributed.timeout_s=20";
  const auto made =
      runCommand(kGcrun + " experiment brown-gpt-adamw --output-dir " + run + tiny + " --set training.max_steps=2");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const auto rank_file = run + "/checkpoints/" + kRankFile;
  State saved = loadState(readFile(rank_file));
  EXPECT_EQ(saved.count("buffer/causal_mask"), 0u);
  const auto resume = [&] {
    return bounded(kGcrun + " experiment brown-gpt-adamw --resume " + run + " --set training.max_steps=3");
  };

  State crafted = saved;
  crafted["buffer/causal_mask"] = torch::ones({16, 16});
  plantRankFile(run, archiveOf(crafted));
  expectRefused(resume(), {kRankFile, "'buffer/causal_mask'", "tril(ones(16, 16))"});

  State former = saved;  // as an earlier gcrun wrote it
  former["buffer/causal_mask"] = torch::ones({16, 16}).tril();
  plantRankFile(run, archiveOf(former));
  const auto resumed = resume();
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, "from the checkpoint of step 2")) << resumed.output;
}

// The old code read all 8 GiB the manifest allowed: std::bad_alloc under the cap (exit 1).
TEST_F(HostileCheckpoint, AHugeRankFileIsRefusedBeforeItIsRead) {
  ASSERT_EQ(runCommand("truncate -s 8G " + rankFile()).exit_code, 0);
  auto changed = manifest();
  changed["files"][0]["bytes"] = 8ull << 30;
  setManifest(changed);
  const auto start = std::chrono::steady_clock::now();
  expectRefused(resume(), {kRankFile, "8589934592 bytes, more than the"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

// The old code overflowed the stack in LibTorch's unpickler (SIGSEGV, exit 139, nothing printed).
TEST_F(HostileCheckpoint, AMillionNestedListsAreRefused) {
  plant(withPickle(readFile(rankFile()), nestedLists(1000000)));
  expectRefused(resume(), {kRankFile, "nests deeper than 32 levels"});
}

// A study's interrupted run whose checkpoint nests a million lists: with the old code every rerun
// of the study resumed it and crashed (the run stayed "interrupted"); now it is recorded refused.
TEST(HostileCheckpointInAStudy, ARefusedResumeIsRecordedRefused) {
  TempDir dir;
  std::ofstream(dir.file("study.yaml")) << "base: fashion-sgd\n"
                                           "set: {task.synthetic: true, task.synthetic_samples: 512, "
                                           "training.max_steps: 2}\n"
                                           "runs:\n  - {name: sgd}\n";
  const std::string study = kGcrun + " study " + dir.file("study.yaml") + " --output-dir " + dir.file("out");
  const auto made = runCommand(study);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::string run = dir.file("out/runs/sgd-seed1");
  auto info = readJson(run + "/run.json");
  info["status"] = "interrupted";
  std::ofstream(run + "/run.json") << info.dump();
  plantRankFile(run, withPickle(readFile(run + "/checkpoints/" + kRankFile), nestedLists(1000000)));

  const auto again = bounded(study);
  EXPECT_EQ(again.exit_code, 1) << again.output;
  const auto recorded = readJson(dir.file("out/study.json"))["runs"][0];
  EXPECT_EQ(recorded["status"], "refused") << recorded;
  EXPECT_EQ(recorded["exit_code"], 2) << recorded;
  EXPECT_TRUE(contains(recorded["error"].get<std::string>(), "nests deeper than 32 levels")) << recorded;
}

// The old code resumed at the state's step whatever the manifest said (exit 0).
TEST_F(HostileCheckpoint, AManifestStepOtherThanTheStatesIsRefused) {
  auto changed = manifest();
  changed["step"] = 1;
  setManifest(changed);
  expectRefused(resume(), {"manifest.json: step 1", "counter/step 2"});
}

// The old code refused a planted tb/ or layers.csv only once it had taken the lock (creating
// .gcrun.lock) and logged the resume to rank-0.log, a checkpoint once it had taken the lock.
TEST_F(HostileCheckpoint, ARefusedResumeTakesNoLockAndWritesNoLog) {
  const std::string log = run_ + "/rank-0.log";
  const std::string text = readFile(log);
  const auto written = fs::last_write_time(log);
  const std::string victim = dir_.file("victim");
  fs::create_directory(victim);
  fs::create_symlink(victim, run_ + "/tb");
  expectRefused(resume(" --set output.sinks=[jsonl,csv,tensorboard]"), {run_ + "/tb is a symlink"});
  fs::remove(run_ + "/tb");
  fs::create_directory(run_ + "/layers.csv");
  expectRefused(resume(" --set output.layer_stats_every_steps=1"), {run_ + "/layers.csv is a directory"});
  fs::remove(run_ + "/layers.csv");
  plant(withPickle(readFile(rankFile()), nestedLists(100)));
  expectRefused(resume(), {kRankFile, "nests deeper than 32 levels"});
  EXPECT_FALSE(fs::exists(fs::symlink_status(run_ + "/.gcrun.lock")));
  EXPECT_EQ(readFile(log), text);
  EXPECT_EQ(fs::last_write_time(log), written);
  EXPECT_TRUE(fs::is_empty(victim));
}

// Counters no run could have saved. The old code took them as they were: an epoch of 2^62 ended
// the run with "nothing to do", a negative bit count was read as 2^64 - 1 bits sent.
TEST_F(HostileCheckpoint, CountersNoRunCouldHaveSavedAreRefusedByName) {
  const std::map<std::string, std::pair<int64_t, std::string>> counters = {
      {"counter/epoch", {int64_t{1} << 62, "do not make 'counter/step' 2"}},
      {"counter/batch", {-1, "'counter/batch' is -1, outside 0 to 2"}},
      {"counter/bits", {-1, "'counter/bits' is -1, outside 0"}},
      {"counter/syncs", {3, "'counter/syncs' is 3, outside 0 to 2"}},
      {"counter/step", {-5, "'counter/step' is -5, outside 0"}}};
  const State saved = state();  // each plant replaces the rank file state() reads
  for (const auto& [name, crafted] : counters) {
    SCOPED_TRACE(name);
    State tampered = saved;
    tampered[name] = torch::scalar_tensor(crafted.first, torch::kInt64);
    plant(archiveOf(tampered));
    expectRefused(resume(), {kRankFile, crafted.second});
  }
  State tampered = saved;
  tampered["counter/elapsed_s"] = torch::scalar_tensor(std::nan(""), torch::kFloat64);
  plant(archiveOf(tampered));
  expectRefused(resume(), {kRankFile, "'counter/elapsed_s' is not finite"});
}

// A powersgd-ddp run past DDP's bucket rebuild and its first compressed step, with a checkpoint.
class HostilePowerSgdDdpCheckpoint : public ::testing::Test {
 protected:
  static constexpr const char* kDdpRankFile = "rank-0-step-3.pt";
  static void SetUpTestSuite() {
    suite_dir_ = new TempDir;
    const auto made = runCommand(kGcrun + " experiment fashion-sgd --output-dir " + suite_dir_->file("run") + kQuick +
                                 kDdp + " --set training.max_steps=3");
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() {
    delete suite_dir_;
    suite_dir_ = nullptr;
  }
  void SetUp() override { fs::copy(suite_dir_->file("run"), run_, fs::copy_options::recursive); }

  CommandResult resume() const {
    return bounded(kGcrun + " experiment fashion-sgd --resume " + run_ + " --set training.max_steps=4");
  }
  State state() const { return loadState(readFile(run_ + "/checkpoints/" + kDdpRankFile)); }
  void plant(const State& tampered) const { plantRankFile(run_, archiveOf(tampered), kDdpRankFile); }

  static inline const std::string kDdp =
      " --set reducer.name=powersgd-ddp --set optimizer.memory=false --set reducer.start_iter=2"
      " --set reducer.min_compression_rate=0";
  static TempDir* suite_dir_;
  TempDir dir_;
  const std::string run_ = dir_.file("run");
};

TempDir* HostilePowerSgdDdpCheckpoint::suite_dir_ = nullptr;

TEST_F(HostilePowerSgdDdpCheckpoint, ItsOwnCheckpointResumes) {
  const auto resumed = resume();
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, "from the checkpoint of step 3")) << resumed.output;
}

// Checkpoints before the generator's state was saved counted its draws: the old code replayed a
// crafted count of 2^62 draws, for ever, before resuming.
TEST_F(HostilePowerSgdDdpCheckpoint, ASeedCountIsBoundedByTheCompressedSteps) {
  State tampered = state();
  tampered.erase("reducer/seed_generator");
  tampered["reducer/seeds_drawn"] = torch::scalar_tensor(int64_t{1} << 62, torch::kInt64);
  plant(tampered);
  const auto start = std::chrono::steady_clock::now();
  expectRefused(resume(), {kDdpRankFile, "'seeds_drawn' is 4611686018427387904, outside 0 to 1"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));

  tampered["reducer/seeds_drawn"] = torch::scalar_tensor(int64_t{1}, torch::kInt64);
  plant(tampered);
  const auto old_format = resume();
  EXPECT_EQ(old_format.exit_code, 0) << old_format.output;
}

// layOut() indexes the bucket with the saved order: one that is no permutation of the model's
// tensors, or a generator state out of range, is refused before any of it is used.
TEST_F(HostilePowerSgdDdpCheckpoint, ABucketOrderOrGeneratorNoRunSavesIsRefused) {
  const State saved = state();  // each plant replaces the rank file state() reads
  State tampered = saved;
  const auto order = tampered["reducer/bucket_order"];
  tampered["reducer/bucket_order"] = torch::full_like(order, order.numel() + 7);
  plant(tampered);
  expectRefused(resume(), {kDdpRankFile, "'bucket_order' is no permutation of 0 to"});

  tampered = saved;
  tampered["reducer/bucket_order"] = order.narrow(0, 0, order.numel() - 1).clone();
  plant(tampered);
  expectRefused(resume(), {kDdpRankFile, "'bucket_order' has " + std::to_string(order.numel() - 1) + " tensors"});

  tampered = saved;
  tampered["reducer/seed_generator"] = torch::full({625}, int64_t{1} << 40, torch::kInt64);
  plant(tampered);
  expectRefused(resume(), {kDdpRankFile, "'seed_generator' value 0 is 1099511627776"});

  tampered = saved;
  tampered["reducer/iter"] = torch::scalar_tensor(int64_t{-1}, torch::kInt64);
  plant(tampered);
  expectRefused(resume(), {kDdpRankFile, "'iter' is -1"});
}

// Each rank reads its own file: the old code resumed rank 1 with another model (every-step), or
// another θ_g (diloco), than rank 0's, and the workers trained apart without a word.
TEST(HostileCheckpointOfOneRank, EntriesEveryRankHoldsAlikeMustAgree) {
  // settings -> the entry tampered with in rank 1's file
  const std::map<std::string, std::string> strategies = {
      {"", "param/fc1.weight"}, {" --set sync.strategy=diloco --set sync.every=2", "diloco/global/fc1.weight"}};
  for (const auto& [settings, entry] : strategies) {
    SCOPED_TRACE(entry);
    TempDir dir;
    const std::string run = dir.file("run");
    const auto made = runCommand(kGcrun + " experiment fashion-sgd --nproc-per-node 2 --output-dir " + run + kQuick +
                                 settings + " --set training.max_steps=2");
    ASSERT_EQ(made.exit_code, 0) << made.output;
    const std::string rank_file = "rank-1-step-2.pt";
    State tampered = loadState(readFile(run + "/checkpoints/" + rank_file));
    ASSERT_TRUE(tampered.count(entry)) << entry;
    tampered[entry] = tampered[entry] + 1;
    plantRankFile(run, archiveOf(tampered), rank_file);
    const auto resumed =
        bounded(kGcrun + " experiment fashion-sgd --nproc-per-node 2 --resume " + run + " --set training.max_steps=4");
    EXPECT_EQ(resumed.exit_code, 2) << resumed.output;
    const auto lines = gcrunLines(resumed.output);  // each worker's line, then the launcher's
    ASSERT_FALSE(lines.empty()) << resumed.output;
    EXPECT_TRUE(contains(lines.front(), "the ranks' checkpoints: " + entry + " is ")) << lines.front();
  }
}

// --- the pickle check alone ---

TEST(CheckpointPickle, TorchSavesPicklesPass) {
  const std::string archive = archiveOf({{"a", torch::ones({2, 3})}, {"b", torch::arange(4)}});
  const State loaded = experiments::readTensorArchive(archive);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_TRUE(loaded.at("a").equal(torch::ones({2, 3})));
  EXPECT_TRUE(loaded.at("b").equal(torch::arange(4)));
}

void expectPickleRefused(const std::string& pickle, const std::string& part) {
  try {
    experiments::checkCheckpointPickle(pickle);
    ADD_FAILURE() << "accepted; expected '" << part << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), part)) << e.what();
  }
}

TEST(CheckpointPickle, NestingThroughTheMemoWithAFlatStackIsRefused) {
  // Each round gets the list last memoized, memoizes a new one and appends it there: a stack of
  // one list per round, but lists nested as deep as there are rounds.
  std::string pickle = "\x80\x02]q\x00"s;
  for (int round = 0; round < 100; ++round) pickle += "h\x00]q\x00"s + "a";
  expectPickleRefused(pickle + ".", "adds to a value that is no open list");
}

TEST(CheckpointPickle, OpcodesAndGlobalsNoCheckpointHoldsAreRefused) {
  expectPickleRefused(
      "\x80\x02"
      "cos\nsystem\n.",
      "names 'os.system'");
  expectPickleRefused("\x80\x02(l.", "opcode 0x6c");
  expectPickleRefused("\x80\x02(((((((((((((((((((((((((((((((((((.", "nests deeper than 32");
  expectPickleRefused("\x80\x02X\xff\xff\xff\x00ab.", "ends inside a field");
}

}  // namespace
}  // namespace gcrun
