#pragma once

#include <string>
#include <vector>

#include "experiments/study/study_options.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace gcrun::experiments {

// `gcrun study`'s command line, both ways, as experiments/command_line.h has `gcrun experiment`'s:
// the CLI parses it here, and a Slurm script's tasks are written here, in the one spelling the CLI
// parses.

// What `gcrun study` is asked.
struct StudyRequest {
  std::string study;       // a built-in study's name or a study file; empty with --status
  std::string status_dir;  // --status DIR: say where the study in DIR stands, start nothing
  StudyOptions options;
};

// `--only INDEX`: a Slurm array task's line gives its index as the shell's "$SLURM_ARRAY_TASK_ID".
inline constexpr char kOnlyOption[] = "--only";

// Adds the `study` subcommand and its options to `app`; once app.parse() has run, request() is
// what they ask for. The options are bound to this object, which therefore stays put.
class StudyCommandOptions {
 public:
  explicit StudyCommandOptions(CLI::App& app);
  StudyCommandOptions(const StudyCommandOptions&) = delete;
  StudyCommandOptions& operator=(const StudyCommandOptions&) = delete;

  CLI::App& command() const { return *command_; }

  // --simulated-workers N becomes the assignment distributed.simulated_workers=N after the others;
  // --only, when given, options.only.
  StudyRequest request() const;

 private:
  CLI::App* command_;
  CLI::Option* only_option_ = nullptr;
  StudyRequest request_;
  size_t only_ = 0;
  int simulated_workers_ = 0;
};

// The arguments after the program's name that StudyCommandOptions parses back into `request`:
// "study", the options as --name=value (so that a value may begin with a dash or hold '=', spaces,
// quotes or newlines: it is one argument, never split), those left at their default left out but
// --jobs, then "--" and the study, which may begin with a dash too.
std::vector<std::string> studyArguments(const StudyRequest& request);

}  // namespace gcrun::experiments
