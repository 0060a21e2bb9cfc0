// output.trace through the gcrun binary: real 2-process runs and simulated workers write trace
// files whose phases and collectives read back, with the bytes the run reports as sent.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include <yaml-cpp/yaml.h>

#include "outputs/trace/trace_file.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun::trace {
namespace {

using testing::contains;
using testing::runCommand;
using testing::TempDir;

// Keeps each run's end-of-run evaluation short.
const std::string kSmallEvaluation = " --set evaluation.max_samples=200";

testing::CommandResult gcrun(const std::string& arguments) {
  return runCommand(std::string(GCRUN_BINARY_PATH) + " " + arguments);
}

// bits_sent / steps of the run's run.json: every step of these reducers sends the same.
double bitsPerStep(const std::string& run_dir) {
  const auto info = YAML::LoadFile(run_dir + "/run.json");
  return info["bits_sent"].as<double>() / info["steps"].as<double>();
}

// Each traced step of each worker has its phases, and its collectives carry the step's bits.
void expectStepsTraced(const ProcessTimeline& timeline, double bits_per_step) {
  for (const auto& worker : timeline.workers) {
    std::map<int64_t, std::set<std::string>> phases;
    for (const auto& span : worker.spans) {
      EXPECT_GE(span.duration_us, 0);
      phases[span.step].insert(span.name);
    }
    std::map<int64_t, double> bytes;
    for (const auto& collective : worker.collectives) {
      EXPECT_LE(collective.issued_us, collective.wait_us);
      EXPECT_LE(collective.wait_us, collective.done_us);
      EXPECT_EQ(collective.group_size, timeline.world_size);
      bytes[collective.step] += static_cast<double>(collective.bytes);
    }
    for (int64_t step = 2; step <= 4; ++step) {
      for (const char* phase : {"batch", "forward", "backward", "reduce", "optimizer"}) {
        EXPECT_TRUE(phases[step].count(phase)) << "worker " << worker.worker << " step " << step << ": " << phase;
      }
      EXPECT_DOUBLE_EQ(bytes[step] * 8, bits_per_step) << "worker " << worker.worker << " step " << step;
    }
    phases.erase(2), phases.erase(3), phases.erase(4);
    EXPECT_TRUE(phases.empty()) << "worker " << worker.worker << " traced a step outside 2-4";
  }
}

// Every collective the run traced is of `kind` and `dtype`.
void expectEveryCollective(const ProcessTimeline& timeline, CollectiveKind kind, DataType dtype) {
  for (const auto& worker : timeline.workers) {
    for (const auto& collective : worker.collectives) {
      EXPECT_EQ(collective.kind, kind) << collectiveName(collective.kind);
      EXPECT_EQ(collective.dtype, dtype) << dataTypeName(collective.dtype);
    }
  }
}

void expectTwoProcessTrace(const std::string& preset, const std::string& reducer, CollectiveKind kind, DataType dtype,
                           const std::string& settings = "") {
  TempDir dir;
  const std::string run_dir = dir.file("run");
  const auto result = gcrun("experiment " + preset + " --nproc-per-node 2 --output-dir " + run_dir +
                            " --set training.max_steps=5 --set output.trace=2-4" + kSmallEvaluation + settings);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (int rank = 0; rank < 2; ++rank) {
    const auto timeline = readTraceFile(run_dir + "/trace-rank" + std::to_string(rank) + ".json");
    EXPECT_EQ(timeline.rank, rank);
    EXPECT_EQ(timeline.world_size, 2);
    EXPECT_EQ(timeline.reducer, reducer);
    EXPECT_EQ(timeline.backend, "gloo");
    EXPECT_FALSE(timeline.truncated);
    ASSERT_EQ(timeline.workers.size(), 1u);
    EXPECT_EQ(timeline.workers[0].worker, rank);
    expectStepsTraced(timeline, bitsPerStep(run_dir));
    expectEveryCollective(timeline, kind, dtype);
  }
}

TEST(TraceRun, ExactTwoProcessesTraceTheirStepsAndBytes) {
  expectTwoProcessTrace("fashion-sgd", "exact", CollectiveKind::all_reduce, DataType::float32);
}

TEST(TraceRun, PowerSgdTwoProcessesTraceTheirStepsAndBytes) {
  expectTwoProcessTrace("fashion-powersgd-rank2", "powersgd", CollectiveKind::all_reduce, DataType::float32);
}

// fp16 between 2 workers all-gathers its float16 payloads, so that the model costs the sum they
// stand for at other worker counts as a float16 all-reduce.
TEST(TraceRun, Fp16TwoProcessesTraceAFloat16Swap) {
  expectTwoProcessTrace("fashion-sgd", "fp16", CollectiveKind::all_gather, DataType::float16,
                        " --set reducer.name=fp16");
}

TEST(TraceRun, SimulatedWorkersHaveATrackEach) {
  TempDir dir;
  const std::string run_dir = dir.file("run");
  const auto result = gcrun("experiment fashion-powersgd-rank2 --output-dir " + run_dir +
                            " --set distributed.simulated_workers=2 --set training.max_steps=5"
                            " --set output.trace=2-4" +
                            kSmallEvaluation);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto timeline = readTraceFile(run_dir + "/trace-rank0.json");
  EXPECT_EQ(timeline.world_size, 2);
  ASSERT_EQ(timeline.workers.size(), 2u);
  EXPECT_EQ(timeline.workers[0].worker, 0);
  EXPECT_EQ(timeline.workers[1].worker, 1);
  expectStepsTraced(timeline, bitsPerStep(run_dir));
}

TEST(TraceRun, OffWritesNoTraceAndABadWindowIsOneLine) {
  TempDir dir;
  const std::string run_dir = dir.file("run");
  const auto off =
      gcrun("experiment fashion-sgd --output-dir " + run_dir + " --set training.max_steps=2" + kSmallEvaluation);
  ASSERT_EQ(off.exit_code, 0) << off.output;
  EXPECT_FALSE(std::filesystem::exists(run_dir + "/trace-rank0.json"));
  for (const char* bad : {"0-3", "4-2", "x"}) {
    const auto refused = gcrun("experiment fashion-sgd --output-dir " + dir.file(std::string("bad") + bad) +
                               " --set output.trace=" + bad);
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_EQ(std::count(refused.output.begin(), refused.output.end(), '\n'), 1) << refused.output;
    EXPECT_TRUE(contains(refused.output, "output.trace")) << refused.output;
    EXPECT_TRUE(contains(refused.output, bad)) << refused.output;
    EXPECT_TRUE(contains(refused.output, "\"A-B\"")) << refused.output;
  }
}

}  // namespace
}  // namespace gcrun::trace
