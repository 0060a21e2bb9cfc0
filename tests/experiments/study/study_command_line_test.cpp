// `gcrun study`'s command line both ways: every request written out by studyArguments (as a Slurm
// script's tasks run it) parses back, with the CLI's own parser, into the same request, whatever
// its values hold.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "experiments/study/slurm_script.h"
#include "experiments/study/study_command_line.h"
#include "tests/support/command.h"

namespace gcrun::experiments {
namespace {

StudyRequest parsed(const std::vector<std::string>& arguments) {
  CLI::App app;
  StudyCommandOptions options(app);
  std::vector<const char*> argv = {"gcrun"};
  for (const auto& argument : arguments) argv.push_back(argument.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return options.request();
}

void expectSame(const StudyRequest& a, const StudyRequest& b) {
  EXPECT_EQ(a.study, b.study);
  EXPECT_EQ(a.status_dir, b.status_dir);
  EXPECT_EQ(a.options.output_dir, b.options.output_dir);
  EXPECT_EQ(a.options.assignments, b.options.assignments);
  EXPECT_EQ(a.options.nproc_per_node, b.options.nproc_per_node);
  EXPECT_EQ(a.options.jobs, b.options.jobs);
  EXPECT_EQ(a.options.dry_run, b.options.dry_run);
  EXPECT_EQ(a.options.slurm, b.options.slurm);
  EXPECT_EQ(a.options.only, b.options.only);
  EXPECT_EQ(a.options.plugins, b.options.plugins);
}

StudyRequest roundTrip(const StudyRequest& request) { return parsed(studyArguments(request)); }

TEST(StudyCommandLine, ARequestOfDefaultsIsTheCommandAndTheStudy) {
  StudyRequest request;
  request.study = "fashion-ranks";
  EXPECT_EQ(studyArguments(request), (std::vector<std::string>{"study", "--jobs=1", "--", "fashion-ranks"}));
  expectSame(roundTrip(request), request);
}

TEST(StudyCommandLine, EveryOptionComesBackWhateverItsValueHolds) {
  StudyRequest request;
  request.study = "-a study file that looks like an option.yaml";
  request.options.output_dir = "--output-dir=dir with spaces/it's \"quoted\"";
  request.options.assignments = {
      "description=two words", "description=a=b=c", "description=line1\nline2", "--set=looks like a flag", "-x",
      "description=",          "description=--"};
  request.options.nproc_per_node = 3;
  request.options.jobs = 4;
  request.options.dry_run = true;
  request.options.slurm = true;
  request.options.only = 0;
  request.options.plugins = {"lib one.so", "--plugin", "-"};
  expectSame(roundTrip(request), request);
  request.options.only = 12345;
  expectSame(roundTrip(request), request);
}

TEST(StudyCommandLine, AStatusRequestComesBack) {
  StudyRequest request;
  request.status_dir = "runs/a study\twith a tab";
  expectSame(roundTrip(request), request);
}

// Whichever option comes last, the study after it is read as the study.
TEST(StudyCommandLine, AStudyThatLooksLikeAnOptionComesBackAfterAnyOption) {
  for (const std::string last : {"", "--set", "--plugin", "--output-dir", "--only"}) {
    StudyRequest request;
    request.study = "--set=x";
    if (last == "--set") request.options.assignments = {"-y"};
    if (last == "--plugin") request.options.plugins = {"-z.so"};
    if (last == "--output-dir") request.options.output_dir = "-w";
    if (last == "--only") request.options.only = 7;
    expectSame(roundTrip(request), request);
  }
}

// The shorthands a user may type are written back out in the spelling they stand for.
TEST(StudyCommandLine, ShorthandsComeBackAsWhatTheyMean) {
  const auto typed = parsed({"study", "tiny.yaml", "--simulated-workers", "4", "--set", "seed=2", "--only", "3"});
  EXPECT_EQ(typed.options.assignments, (std::vector<std::string>{"seed=2", "distributed.simulated_workers=4"}));
  EXPECT_EQ(typed.options.only, 3u);
  expectSame(roundTrip(typed), typed);
}

// A Slurm task's line is studyArguments with the task's index from the shell: run by bash, it
// reaches gcrun as the words the parser reads back into the study's request.
TEST(StudyCommandLine, ASlurmTaskRunsTheStudysOwnRequest) {
  StudySpec spec;
  spec.name = "s";
  spec.file = "/studies/it's a \"study\".yaml";
  StudyOptions options;
  options.assignments = {"training.epochs=2", "description=$(touch pwned) `x`"};
  options.plugins = {"/lib/p one.so"};
  options.nproc_per_node = 2;
  const auto script = slurmScript(spec, options, "/out/it's$(x)", 4);
  const auto srun = script.find("\nsrun ");
  ASSERT_NE(srun, std::string::npos) << script;
  const std::string line = script.substr(srun + 6, script.find('\n', srun + 1) - srun - 6);
  // The words the shell makes of the line, one per line (no value here holds a newline).
  const auto words =
      testing::runCommand("SLURM_ARRAY_TASK_ID=3; for a in " + line + "; do printf '%s\\n' \"$a\"; done");
  ASSERT_EQ(words.exit_code, 0) << words.output;
  std::vector<std::string> arguments;
  size_t start = 0;
  for (size_t end; (end = words.output.find('\n', start)) != std::string::npos; start = end + 1) {
    arguments.push_back(words.output.substr(start, end - start));
  }
  ASSERT_GE(arguments.size(), 2u) << words.output;
  arguments.erase(arguments.begin());  // the program
  const auto request = parsed(arguments);
  EXPECT_EQ(request.study, spec.file);
  EXPECT_EQ(request.options.output_dir, "/out/it's$(x)");
  EXPECT_EQ(request.options.assignments, options.assignments);
  EXPECT_EQ(request.options.plugins, options.plugins);
  EXPECT_EQ(request.options.only, 3u);
}

}  // namespace
}  // namespace gcrun::experiments
