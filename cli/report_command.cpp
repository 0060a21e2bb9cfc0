#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "hyperparams/base/errors.h"
#include "outputs/report/report.h"
#include "outputs/report/safe_text.h"

namespace gcrun::cli {

void addReportCommand(CLI::App& app) {
  struct Flags {
    std::vector<std::string> inputs;
    std::string output_dir;
    std::vector<std::string> formats = outputs::reportFormats();
  };
  auto flags = std::make_shared<Flags>();
  auto* command =
      app.add_subcommand("report", "Tables and plots of run or study directories (found by their run.json)");
  command->add_option("dirs", flags->inputs, "Run or study directories, searched recursively")->required();
  command->add_option("--output", flags->output_dir, "Where the report goes (default: the first directory)");
  command->add_option("--format", flags->formats, "Comma-separated: md, csv, html (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember(outputs::reportFormats()));
  command->callback([flags] {
    auto loaded = outputs::loadRuns(flags->inputs);
    if (loaded.found == 0) {
      std::string inputs;
      for (const auto& input : flags->inputs) inputs += (inputs.empty() ? "" : ", ") + input;
      throw UserError("report: no run directories (a directory with run.json) found under " + inputs);
    }
    const auto result = outputs::writeReport(
        loaded.runs,
        {flags->output_dir.empty() ? flags->inputs.front() : flags->output_dir, flags->formats, "", loaded.skipped});
    // Names from the runs are printed on one line each: no terminal escapes, no forged lines.
    std::printf("%zu runs in %zu configurations\n", result.runs, result.configurations);
    for (const auto& file : result.files) std::printf("  %s\n", outputs::oneLine(file).c_str());
    for (const auto& line : loaded.skipped) std::printf("skipped: %s\n", outputs::oneLine(line).c_str());
    if (!result.note.empty()) std::printf("note: %s\n", outputs::oneLine(result.note).c_str());
  });
}

}  // namespace gcrun::cli
