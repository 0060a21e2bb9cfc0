#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/plugins.h"
#include "experiments/study/study_progress.h"
#include "experiments/study/study_runner.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/number_flags.h"

namespace gcrun::cli {

void addStudyCommand(CLI::App& app, int& exit_code) {
  struct Flags {
    std::string study;
    experiments::StudyOptions options;
    size_t only = 0;
    int simulated_workers = 0;
    std::string status_dir;
  };
  auto flags = std::make_shared<Flags>();
  auto& options = flags->options;
  auto* command =
      app.add_subcommand("study", "Run a study (configurations x seeds) and report it (see `gcrun list studies`)");
  command->add_option("study", flags->study, "A built-in study's name, or a study YAML file");
  command->add_option("--status", flags->status_dir,
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
  auto* only = command->add_option("--only", flags->only, "Run only this index of the plan (a Slurm array task)")
                   ->transform(plainWholeNumber());
  command
      ->add_option("--simulated-workers", flags->simulated_workers,
                   "Logical workers per process in every run (distributed.simulated_workers)")
      ->transform(plainWholeNumber())
      ->check(CLI::Range(1, 4096));
  addPluginOption(*command, options.plugins);
  command->callback([flags, only, &exit_code] {
    if (!flags->status_dir.empty()) {
      std::fputs(experiments::studyStatusText(flags->status_dir).c_str(), stdout);
      return;
    }
    if (flags->study.empty()) throw UserError("study: name a built-in study or a study file, or give --status DIR");
    loadPlugins(flags->options.plugins);
    auto options = flags->options;
    if (only->count() > 0) options.only = flags->only;
    if (flags->simulated_workers > 0) {
      options.assignments.push_back("distributed.simulated_workers=" + std::to_string(flags->simulated_workers));
    }
    exit_code = experiments::runStudy(experiments::loadStudy(flags->study), options);
  });
}

}  // namespace gcrun::cli
