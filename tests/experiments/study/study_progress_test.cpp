// Study progress from a study's files: a half-done study as study.json and run.json leave it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "experiments/study/study_progress.h"
#include "hyperparams/base/errors.h"
#include "outputs/run_info.h"
#include "tests/support/temp_dir.h"

namespace gcrun::experiments {
namespace {

void write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

void writeRun(const testing::TempDir& study, const std::string& name, const std::string& status,
              const std::string& start, const std::string& end, const std::string& error = "") {
  outputs::RunInfo info;
  info.status = outputs::parseRunStatus(status);
  info.start_time = start;
  info.end_time = end;
  info.error = error;
  write(study.path() / "runs" / name / "run.json", outputs::runInfoJson(info));
}

// Six runs: two completed (100 s and 300 s), one failed, one running, two not started. study.json
// still says pending for a run that has since completed under Slurm: its run.json is newer.
void halfDoneStudy(const testing::TempDir& study) {
  write(study.path() / "study.json", R"({"study": "s", "runs": [
    {"dir": "runs/a-seed1", "status": "completed", "seconds": 100},
    {"dir": "runs/b-seed1", "status": "pending", "seconds": 0},
    {"dir": "runs/c-seed1", "status": "failed", "seconds": 5, "error": "exit 1"},
    {"dir": "runs/d-seed1", "status": "running", "seconds": 0},
    {"dir": "runs/e-seed1", "status": "pending", "seconds": 0},
    {"dir": "runs/f-seed1", "status": "pending", "seconds": 0},
    {"dir": "../../etc", "status": "completed", "seconds": 1}]})");
  writeRun(study, "a-seed1", "completed", "2026-12-01T10:00:00Z", "2026-12-01T10:01:40Z");
  writeRun(study, "b-seed1", "completed", "2026-12-01T10:00:00Z", "2026-12-01T10:05:00Z");
  writeRun(study, "c-seed1", "failed", "2026-12-01T10:00:00Z", "2026-12-01T10:00:05Z", "the loss is nan\nsecond line");
  writeRun(study, "d-seed1", "running", "2026-12-01T10:00:00Z", "");
}

TEST(StudyProgress, CountsEveryStateAndEstimatesTheRest) {
  testing::TempDir study;
  halfDoneStudy(study);
  const auto runs = readStudyState(study.path().string());
  ASSERT_EQ(runs.size(), 6u);  // the entry outside runs/ is left out
  EXPECT_EQ(runs[1].status, outputs::RunStatus::completed);
  EXPECT_DOUBLE_EQ(runs[1].seconds, 300);
  const auto progress = progressOf(runs, 2);
  EXPECT_EQ(progress.completed, 2u);
  EXPECT_EQ(progress.failed, 1u);
  EXPECT_EQ(progress.running, 1u);
  EXPECT_EQ(progress.left, 2u);
  ASSERT_TRUE(progress.eta_seconds.has_value());
  EXPECT_DOUBLE_EQ(*progress.mean_seconds, 200);
  EXPECT_DOUBLE_EQ(*progress.eta_seconds, (2 + 0.5) * 200 / 2);
  EXPECT_EQ(progressLine(progress, 2),
            "2 of 6 done, 1 failed, 1 running, 2 left; ETA 4m10s (mean 3m20s a run, 2 at a time)");
}

TEST(StudyProgress, StatusTextHasALinePerRunAndNoForgedLines) {
  testing::TempDir study;
  halfDoneStudy(study);
  const auto text = studyStatusText(study.path().string());
  size_t lines = 0;
  for (const char c : text) lines += c == '\n';
  EXPECT_EQ(lines, 7u);  // six runs and the progress line
  // The error's newline is shown, not taken.
  EXPECT_NE(text.find("the loss is nan\\nsecond line"), std::string::npos);
  EXPECT_NE(text.find("study: 2 of 6 done, 1 failed, 1 running, 2 left; ETA"), std::string::npos);
}

TEST(StudyProgress, ADirectoryWithoutAStudyIsAUserError) {
  testing::TempDir empty;
  EXPECT_THROW(studyStatusText(empty.path().string()), UserError);
  write(empty.path() / "study.json", "[1, 2");
  EXPECT_THROW(studyStatusText(empty.path().string()), UserError);
}

}  // namespace
}  // namespace gcrun::experiments
