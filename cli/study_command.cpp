#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/plugins.h"
#include "experiments/study/study.h"
#include "experiments/study/study_command_line.h"
#include "experiments/study/study_progress.h"
#include "experiments/study/study_runner.h"
#include "hyperparams/base/errors.h"

namespace gcrun::cli {

void addStudyCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<experiments::StudyCommandOptions>(app);
  options->command().callback([options, &exit_code] {
    const auto request = options->request();
    if (!request.status_dir.empty()) {
      std::fputs(experiments::studyStatusText(request.status_dir).c_str(), stdout);
      return;
    }
    if (request.study.empty()) throw UserError("study: name a built-in study or a study file, or give --status DIR");
    // A study's runs get the same --plugin options, so they load the same plugins.
    loadPlugins(request.options.plugins);
    exit_code = experiments::runStudy(experiments::loadStudy(request.study), request.options);
  });
}

}  // namespace gcrun::cli
