#include "experiments/study/slurm_script.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <spdlog/fmt/fmt.h>

#include "experiments/study/study_command_line.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/process.h"
#include "hyperparams/base/text.h"
#include "outputs/study_directory.h"

namespace gcrun::experiments {
namespace {

std::string shellQuoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A value written on an #SBATCH line or in a comment of slurm.sbatch, where no shell quoting
// applies: a newline there would start a line of its own, which bash runs. sbatch also splits an
// #SBATCH line at white space, into options of its own (`on_sbatch_line`).
void checkScriptLine(const std::string& value, const std::string& what, bool on_sbatch_line, const std::string& fix) {
  const auto bad = std::find_if(value.begin(), value.end(),
                                [&](unsigned char c) { return c < 0x20 || c == 0x7f || (on_sbatch_line && c == ' '); });
  if (bad == value.end()) return;
  const std::string kind = *bad == '\n' ? "a newline" : *bad == ' ' ? "a space" : "a control character";
  throw UserError("study: --slurm: " + what + " '" + clipForMessage(value) + "' holds " + kind +
                  ", which slurm.sbatch cannot hold on its " + (on_sbatch_line ? "#SBATCH lines" : "comment lines") +
                  "; " + fix);
}

// A job name of characters that need no quoting anywhere.
std::string jobName(const std::string& name) {
  std::string out = "gcrun-";
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return out;
}

// The task's `gcrun study` line: studyArguments of the study with its --set and --plugin options in
// the study directory, each word quoted for the shell, and the task's index from Slurm.
std::string taskCommand(const StudySpec& spec, const StudyOptions& options, const std::string& absolute_dir) {
  StudyRequest task;
  task.study = spec.file.empty() ? spec.name : spec.file;
  task.options.output_dir = absolute_dir;
  task.options.assignments = options.assignments;
  task.options.plugins = options.plugins;
  const auto arguments = studyArguments(task);  // "study", the options, "--", the study
  std::string command = shellQuoted(process::currentExecutable()) + " " + shellQuoted(arguments.front());
  // Right after the subcommand, where it can be no option's value: the one word the shell fills in.
  command += std::string(" ") + kOnlyOption + " \"$SLURM_ARRAY_TASK_ID\"";
  for (size_t i = 1; i < arguments.size(); ++i) command += " " + shellQuoted(arguments[i]);
  return command;
}

}  // namespace

std::string slurmScript(const StudySpec& spec, const StudyOptions& options, const std::string& dir, size_t count) {
  namespace study_files = outputs::study_files;
  const std::string absolute = std::filesystem::absolute(dir).string();
  checkScriptLine(spec.name, "the study's name", false, "rename the study file");
  checkScriptLine(absolute, "the study directory", true, "choose another --output-dir");
  return fmt::format(
      "#!/bin/bash\n"
      "# Written by `gcrun study --slurm`: study {0}, one array task per run ({1} runs; `gcrun study ... --dry-run`\n"
      "# lists them). Each task starts {2} worker(s) with srun; gcrun reads the Slurm variables.\n"
      "# Submit with `sbatch {3}/{7}`; when all tasks are done: gcrun report {3}\n"
      "#SBATCH --job-name={6}\n#SBATCH --array=0-{4}\n#SBATCH --ntasks={2}\n"
      "#SBATCH --output={3}/{8}/{9}\n"
      "srun {5}\n",
      spec.name, count, options.nproc_per_node, absolute, count - 1, taskCommand(spec, options, absolute),
      jobName(spec.name), study_files::kSlurmScript, study_files::kLogs, study_files::kSlurmLog);
}

}  // namespace gcrun::experiments
