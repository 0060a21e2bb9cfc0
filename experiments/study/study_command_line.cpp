#include "experiments/study/study_command_line.h"

#include <CLI/CLI.hpp>

#include "hyperparams/base/number_flags.h"

namespace gcrun::experiments {

StudyCommandOptions::StudyCommandOptions(CLI::App& app)
    : command_(app.add_subcommand("study",
                                  "Run a study (configurations x seeds) and report it (see `gcrun list studies`)")) {
  auto& options = request_.options;
  auto* command = command_;
  command->add_option("study", request_.study, "A built-in study's name, or a study YAML file");
  command->add_option("--status", request_.status_dir,
                      "Print where the study in this directory stands (its runs, progress, ETA); starts nothing");
  command->add_option("--output-dir", options.output_dir, "Study directory (default: runs/<study>; rerun to resume)");
  command->add_option("--set", options.assignments, "Override a setting of every run: key=value (repeatable)");
  command
      ->add_option("--nproc-per-node", options.nproc_per_node,
                   "Workers per run (default: the study's `processes`, else 1)")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 1024));
  command->add_option("--jobs", options.jobs, "Runs at once on this machine (they split its cores)")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 256));
  command->add_flag("--dry-run", options.dry_run, "Print the runs and their overrides, run nothing");
  command->add_flag("--slurm", options.slurm, "Write DIR/slurm.sbatch, a job array with one task per run");
  only_option_ = command->add_option(kOnlyOption, only_, "Run only this index of the plan (a Slurm array task)")
                     ->transform(plainWholeNumber());
  command
      ->add_option("--simulated-workers", simulated_workers_,
                   "Logical workers per process in every run (distributed.simulated_workers)")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 4096));
  command->add_option("--plugin", options.plugins,
                      "Shared library whose gcrun_register() adds reducers, tasks or sinks (repeatable)");
}

StudyRequest StudyCommandOptions::request() const {
  auto request = request_;
  if (only_option_->count() > 0) request.options.only = only_;
  if (simulated_workers_ > 0) {
    request.options.assignments.push_back("distributed.simulated_workers=" + std::to_string(simulated_workers_));
  }
  return request;
}

std::vector<std::string> studyArguments(const StudyRequest& request) {
  std::vector<std::string> arguments = {"study"};
  const auto add = [&](const std::string& name, const std::string& value) { arguments.push_back(name + "=" + value); };
  const auto add_if_given = [&](const std::string& name, const std::string& value) {
    if (!value.empty()) add(name, value);
  };
  const auto& options = request.options;
  for (const auto& assignment : options.assignments) add("--set", assignment);
  for (const auto& plugin : options.plugins) add("--plugin", plugin);
  add_if_given("--status", request.status_dir);
  add_if_given("--output-dir", options.output_dir);
  if (options.nproc_per_node != 0) add("--nproc-per-node", std::to_string(options.nproc_per_node));
  if (options.dry_run) arguments.push_back("--dry-run");
  if (options.slurm) arguments.push_back("--slurm");
  if (options.only) add(kOnlyOption, std::to_string(*options.only));
  // Always, and last: after an option that takes a list (--set, --plugin) CLI11 reads "--" as the
  // end of that list, and the study would then be read as an option; after one value it ends them.
  add("--jobs", std::to_string(options.jobs));
  if (!request.study.empty()) {
    arguments.push_back("--");
    arguments.push_back(request.study);
  }
  return arguments;
}

}  // namespace gcrun::experiments
