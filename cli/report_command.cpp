#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "experiments/study/study.h"
#include "outputs/report/report.h"

namespace gcrun::cli {

void addReportCommand(CLI::App& app) {
  struct Flags {
    std::vector<std::string> inputs;
    std::string output_dir;
    std::vector<std::string> formats = outputs::reportFormats();
  };
  auto flags = std::make_shared<Flags>();
  auto* command = app.add_subcommand("report", "Tables and plots of run or study directories (found by their run.json)");
  command->add_option("dirs", flags->inputs, "Run or study directories, searched recursively")->required();
  command->add_option("--output", flags->output_dir, "Where the report goes (default: the first directory)");
  command->add_option("--format", flags->formats, "Comma-separated: md, csv, html (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember(outputs::reportFormats()));
  command->callback([flags] {
    std::vector<outputs::RunData> runs;
    for (const auto& dir : outputs::findRunDirectories(flags->inputs)) runs.push_back(outputs::loadRun(dir));
    const auto result = outputs::writeReport(
        runs, {flags->output_dir.empty() ? flags->inputs.front() : flags->output_dir, flags->formats, "",
               experiments::reducerReads});
    std::printf("%zu runs in %zu configurations\n", result.runs, result.configurations);
    for (const auto& file : result.files) std::printf("  %s\n", file.c_str());
    if (!result.note.empty()) std::printf("note: %s\n", result.note.c_str());
  });
}

}  // namespace gcrun::cli
