// The study directory's owner: study.json written and read in one place, in the format older
// gcruns wrote (their study directories are still read), and what a study asks of runs/.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "hyperparams/base/errors.h"
#include "outputs/study_directory.h"
#include "tests/support/temp_dir.h"

namespace gcrun::outputs {
namespace {

namespace fs = std::filesystem;
using gcrun::testing::TempDir;

// study.json as gcrun wrote it before StudyDirectory, byte for byte.
const char kOlderStudyJson[] = R"({
  "study": "pays",
  "description": "tiny predict study",
  "runs": [
    {"index": 0, "config": "exact", "seed": 1, "dir": "runs/exact-seed1", "status": "completed", "exit_code": 0, "error": "", "attempts": 1, "seconds": 3.251855741},
    {"index": 1, "config": "fp16", "seed": 1, "dir": "runs/fp16-seed1", "status": "refused", "exit_code": 2, "error": "training.batch_size: 100000 is more than the 512 samples", "attempts": 2, "seconds": 0.5},
    {"index": 2, "config": "rank2", "seed": 1, "dir": "runs/rank2-seed1", "status": "pending", "exit_code": 0, "error": "", "attempts": 0, "seconds": 0}
  ]
}
)";

StudyRecord olderRecord() {
  StudyRecord record{"pays", "tiny predict study", {}};
  record.runs.push_back({0, "exact", 1, "exact-seed1", RunStatus::completed, 0, "", 1, 3.251855741});
  record.runs.push_back({1, "fp16", 1, "fp16-seed1", RunStatus::refused, 2,
                         "training.batch_size: 100000 is more than the 512 samples", 2, 0.5});
  record.runs.push_back({2, "rank2", 1, "rank2-seed1", RunStatus::pending, 0, "", 0, 0});
  return record;
}

void expectSame(const StudyRunRecord& a, const StudyRunRecord& b) {
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.config, b.config);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.attempts, b.attempts);
  EXPECT_DOUBLE_EQ(a.seconds, b.seconds);
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST(StudyRecord, IsWrittenAsOlderGcrunsWroteItAndReadBack) {
  EXPECT_EQ(studyRecordJson(olderRecord()), kOlderStudyJson);
  TempDir dir;
  write(dir.path() / "study.json", kOlderStudyJson);
  const auto read = readStudyRecord(dir.path().string(), 100);
  EXPECT_EQ(read.study, "pays");
  EXPECT_EQ(read.description, "tiny predict study");
  ASSERT_EQ(read.runs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) expectSame(read.runs[i], olderRecord().runs[i]);
}

// Someone else's study.json: only runs/<name> entries, each once; other words and types are defaults.
TEST(StudyRecord, AForeignFileIsReadAsData) {
  TempDir dir;
  write(dir.path() / "study.json", R"({"runs": [
    {"dir": "runs/a-seed1", "status": "bogus", "seconds": "ten", "attempts": -3, "exit_code": 1e30},
    {"dir": "runs/a-seed1", "status": "completed"},
    {"dir": "../../etc", "status": "completed"}, {"dir": "runs/../x"}, {"dir": "runs/"}, 7,
    {"dir": "runs/b-seed2", "status": "failed", "error": "boom"}]})");
  const auto read = readStudyRecord(dir.path().string(), 100);
  ASSERT_EQ(read.runs.size(), 2u);
  EXPECT_EQ(read.runs[0].name, "a-seed1");
  EXPECT_EQ(read.runs[0].status, RunStatus::pending);
  EXPECT_EQ(read.runs[0].seconds, 0);
  EXPECT_EQ(read.runs[0].attempts, 0);
  EXPECT_EQ(read.runs[0].exit_code, 0);
  EXPECT_EQ(read.runs[1].name, "b-seed2");
  EXPECT_EQ(read.runs[1].status, RunStatus::failed);
  EXPECT_EQ(read.runs[1].error, "boom");
  EXPECT_THROW(readStudyRecord(dir.path().string(), 1), UserError);
  EXPECT_THROW(readStudyRecord((dir.path() / "none").string(), 100), UserError);
}

TEST(StudyDirectory, OwnsItsFoldersAndClearsOnlyRunsOfItsStudy) {
  TempDir dir;
  const auto root = (dir.path() / "study").string();
  {
    const auto slurm = StudyDirectory::open(root, false);
    EXPECT_TRUE(fs::is_directory(root + "/runs") && fs::is_directory(root + "/logs"));
    EXPECT_FALSE(fs::exists(root + "/configs"));
  }
  const auto study = StudyDirectory::open(root, true);
  EXPECT_TRUE(fs::is_directory(root + "/configs"));
  EXPECT_EQ(study.runPath("exact-seed1"), root + "/runs/exact-seed1");
  EXPECT_EQ(study.logPath("exact-seed1"), root + "/logs/exact-seed1.log");
  EXPECT_EQ(study.configPath("exact-seed1"), root + "/configs/exact-seed1.yaml");
  EXPECT_EQ(study.predictPath(), root + "/predict");

  const auto run = olderRecord().runs[0];
  const auto other = olderRecord().runs[1];
  study.markRun("s", run);
  EXPECT_TRUE(study.isRunOf("s", run));
  EXPECT_FALSE(study.isRunOf("another study", run));
  fs::create_directories(root + "/runs/fp16-seed1");
  EXPECT_TRUE(study.isRunOf("s", other));  // empty
  write(root + "/runs/fp16-seed1/thesis.tex", "precious");
  EXPECT_FALSE(study.isRunOf("s", other));

  study.writeRecord(olderRecord());
  EXPECT_EQ(readStudyRecord(root, 100).runs.size(), 3u);
  study.writeRunConfig("exact-seed1", "seed: 1\n");
  EXPECT_TRUE(fs::is_regular_file(study.configPath("exact-seed1")));
  EXPECT_FALSE(study.runConfig("exact-seed1"));  // the run has written none
  EXPECT_FALSE(study.runInfo("exact-seed1"));
  EXPECT_FALSE(study.hasCheckpoint("exact-seed1"));
  EXPECT_EQ(study.logTail("exact-seed1", 10), "");
  {
    const auto log = study.openLog("exact-seed1");
    ASSERT_EQ(::write(log.get(), "line 1\ngcrun: error: x\n", 23), 23);
  }
  EXPECT_EQ(study.logTail("exact-seed1", 9), "error: x\n");
}

TEST(StudyDirectory, ASecondHolderOfTheLockWaitsThenIsRefused) {
  TempDir dir;
  const auto study = StudyDirectory::open(dir.path().string(), true);
  const auto held = study.lock(std::chrono::seconds(0), nullptr);
  ASSERT_TRUE(held);
  // flock locks belong to open files: a second open of study.lock is a second holder.
  int waited = 0;
  try {
    study.lock(std::chrono::seconds(0), [&] { ++waited; });
    ADD_FAILURE() << "locked twice";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("is in use by another study"), std::string::npos) << e.what();
  }
  EXPECT_LE(waited, 1);
}

}  // namespace
}  // namespace gcrun::outputs
