#include <cstdio>
#include <optional>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/units.h"
#include "outputs/performance/report_projection.h"
#include "outputs/report/report.h"
#include "outputs/report/safe_text.h"

namespace gcrun::cli {

void addReportCommand(CLI::App& app) {
  struct Flags {
    std::vector<std::string> inputs;
    std::string output_dir;
    std::vector<std::string> formats = outputs::reportFormats();
    std::string target;
    std::string predict;
  };
  auto flags = std::make_shared<Flags>();
  auto* command =
      app.add_subcommand("report", "Tables and plots of run or study directories (found by their run.json)");
  command->add_option("dirs", flags->inputs, "Run or study directories, searched recursively")->required();
  command->add_option("--output", flags->output_dir, "Where the report goes (default: the first directory)");
  command->add_option("--format", flags->formats, "Comma-separated: md, csv, html (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember(outputs::reportFormats()));
  command->add_option("--target", flags->target, "METRIC=VALUE, e.g. test.accuracy=0.9: the time each run took to it");
  command->add_option("--predict", flags->predict,
                      std::string("Projected columns for traced runs: workers=16,bandwidth=10gbit[,latency=") +
                          units::kDefaultLatency + "][,sync_every=H] or workers=16,network=FILE");
  command->callback([flags] {
    std::optional<outputs::Target> target;
    if (!flags->target.empty()) target = outputs::parseTarget(flags->target, "--target");
    std::optional<performance::ProjectionSpec> projection;
    if (!flags->predict.empty()) projection = performance::parseProjection(flags->predict, "--predict");
    auto loaded = outputs::loadRuns(flags->inputs, target ? target->metric : "");
    if (loaded.found == 0) {
      std::string inputs;
      for (const auto& input : flags->inputs) inputs += (inputs.empty() ? "" : ", ") + input;
      throw UserError("report: no run directories (a directory with run.json) found under " + inputs);
    }
    outputs::ReportOptions options{flags->output_dir.empty() ? flags->inputs.front() : flags->output_dir,
                                   flags->formats, "", loaded.skipped};
    options.target = target;
    if (projection) options.projection = performance::projectRuns(performance::traceRuns(loaded.runs), *projection);
    const auto result = outputs::writeReport(loaded.runs, options);
    // Names from the runs are printed on one line each: no terminal escapes, no forged lines.
    std::printf("%zu runs in %zu configurations\n", result.runs, result.configurations);
    for (const auto& file : result.files) std::printf("  %s\n", oneLine(file).c_str());
    for (const auto& line : loaded.skipped) std::printf("skipped: %s\n", oneLine(line).c_str());
    if (!result.note.empty()) std::printf("note: %s\n", oneLine(result.note).c_str());
  });
}

}  // namespace gcrun::cli
