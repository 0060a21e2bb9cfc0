#include "outputs/report/report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/fmt/fmt.h>

#include "hyperparams/base/errors.h"
#include "outputs/report/plots.h"
#include "outputs/report/summary.h"
#include "outputs/run_files.h"

namespace gcrun::outputs {
namespace {

namespace fs = std::filesystem;

const char kNotes[] =
    "The final metric is each run's value at its end; seeds are grouped when everything else in the "
    "configuration is equal. Time per batch is each run's median step (the mean over seeds), on this "
    "machine and at this run's world size; MiB/epoch is what one worker sent per epoch; compression is what "
    "a float32 all-reduce would have sent divided by what was sent.";

std::string html(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The runs that did not complete, with their error.
std::vector<std::string> unfinished(const std::vector<RunData>& runs) {
  std::vector<std::string> lines;
  for (const auto& run : runs) {
    if (run.status == "completed") continue;
    lines.push_back(run.dir + ": " + run.status + (run.error.empty() ? "" : " (" + run.error.substr(0, run.error.find('\n')) + ")"));
  }
  return lines;
}

std::string summaryLine(const std::vector<RunData>& runs, size_t configurations) {
  const bool synthetic = std::any_of(runs.begin(), runs.end(), [](const RunData& r) { return r.synthetic; });
  return fmt::format("{} runs in {} configurations.{}", runs.size(), configurations,
                     synthetic ? " Some runs trained on synthetic data: their metrics say nothing about the task." : "");
}

std::string markdown(const std::vector<RunData>& runs, const std::vector<ConfigGroup>& groups,
                     const std::vector<Plot>& plots, const ReportOptions& options) {
  std::string out = "# gcrun report\n\n";
  if (!options.title.empty()) out += options.title + "\n\n";
  out += summaryLine(runs, groups.size()) + "\n\n" + markdownTable(resultTable(groups)) + "\n" + kNotes + "\n";
  const auto open = unfinished(runs);
  if (!open.empty()) {
    out += "\n## Runs not completed\n\n";
    for (const auto& line : open) out += "- " + line + "\n";
  }
  out += "\n## Plots\n\n";
  for (const auto& plot : plots) {
    if (!plot.curves.empty()) out += "![" + plot.title + "](plots/" + plot.name + ".png)\n\n";
  }
  return out;
}

std::string htmlPage(const std::vector<RunData>& runs, const std::vector<ConfigGroup>& groups,
                     const std::vector<Plot>& plots, const ReportOptions& options, const std::string& plot_dir) {
  const auto table = resultTable(groups);
  std::string out =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gcrun report</title><style>"
      "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;font-size:90%}"
      "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f3f3f3}"
      "figure{margin:1.5em 0}svg{max-width:100%;height:auto}</style></head><body>\n<h1>gcrun report</h1>\n";
  if (!options.title.empty()) out += "<p>" + html(options.title) + "</p>\n";
  out += "<p>" + html(summaryLine(runs, groups.size())) + "</p>\n<table>\n<tr>";
  for (const auto& cell : table.header) out += "<th>" + html(cell) + "</th>";
  out += "</tr>\n";
  for (const auto& row : table.rows) {
    out += "<tr>";
    for (const auto& cell : row) out += "<td>" + html(cell) + "</td>";
    out += "</tr>\n";
  }
  out += "</table>\n<p>" + html(kNotes) + "</p>\n";
  const auto open = unfinished(runs);
  if (!open.empty()) {
    out += "<h2>Runs not completed</h2>\n<ul>\n";
    for (const auto& line : open) out += "<li>" + html(line) + "</li>\n";
    out += "</ul>\n";
  }
  out += "<h2>Plots</h2>\n";
  for (const auto& plot : plots) {
    const std::string svg = plot_dir + "/" + plot.name + ".svg";
    if (plot.curves.empty() || !fs::is_regular_file(svg)) continue;
    std::string image = readText(svg);
    if (const auto start = image.find("<svg"); start != std::string::npos) image = image.substr(start);
    out += "<figure>\n" + image + "\n<figcaption>" + html(plot.title) + "</figcaption></figure>\n";
  }
  return out + "</body></html>\n";
}

}  // namespace

const std::vector<std::string>& reportFormats() {
  static const std::vector<std::string> formats = {"md", "csv", "html"};
  return formats;
}

ReportResult writeReport(const std::vector<RunData>& runs, const ReportOptions& options) {
  for (const auto& format : options.formats) {
    if (std::find(reportFormats().begin(), reportFormats().end(), format) == reportFormats().end()) {
      throw UserError("report: unknown format '" + format + "'; accepted: md, csv, html");
    }
  }
  const auto wants = [&](const char* format) {
    return std::find(options.formats.begin(), options.formats.end(), format) != options.formats.end();
  };
  ReportResult result;
  result.runs = runs.size();
  const auto groups = groupRuns(runs, options.reads);
  result.configurations = groups.size();
  fs::create_directories(options.output_dir);
  const std::string plot_dir = options.output_dir + "/plots";
  const auto plots = reportPlots(groups);
  if (wants("md") || wants("html")) {
    fs::create_directories(plot_dir);
    result.note = renderPlots(plots, plot_dir);
  }
  const auto write = [&](const std::string& name, const std::string& text) {
    writeFileAtomically(options.output_dir + "/" + name, text);
    result.files.push_back(options.output_dir + "/" + name);
  };
  if (wants("md")) write("report.md", markdown(runs, groups, plots, options) + (result.note.empty() ? "" : "\n" + result.note + "\n"));
  if (wants("csv")) write("report.csv", csvTable(groups));
  if (wants("html")) write("report.html", htmlPage(runs, groups, plots, options, plot_dir));
  for (const auto& plot : plots) {
    for (const char* extension : {".png", ".svg"}) {
      const std::string path = plot_dir + "/" + plot.name + extension;
      if (!plot.curves.empty() && fs::is_regular_file(path)) result.files.push_back(path);
    }
  }
  return result;
}

}  // namespace gcrun::outputs
