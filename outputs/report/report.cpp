#include "outputs/report/report.h"

#include <algorithm>
#include <sstream>

#include <spdlog/fmt/fmt.h>

#include "hyperparams/base/errors.h"
#include "outputs/files/safe_files.h"
#include "outputs/report/layer_report.h"
#include "outputs/report/plots.h"
#include "outputs/report/safe_text.h"
#include "outputs/report/summary.h"

namespace gcrun::outputs {
namespace {

const char kNotes[] =
    "The final metric is each run's value at its end; seeds are grouped when everything else in the "
    "configuration is equal. Time per batch is each run's median step (the mean over seeds), on this "
    "machine and at this run's world size; MiB/epoch is what one worker sent per epoch; compression is what "
    "a float32 all-reduce would have sent divided by what was sent.";

// The heading of the report's own table when sections come before it.
const char kResults[] = "Results by configuration";

std::string projectionLabel(const ReportOptions& options) {
  return options.projection ? options.projection->label : "";
}

// The runs that did not complete, with their error.
std::vector<std::string> unfinished(const std::vector<RunData>& runs) {
  std::vector<std::string> lines;
  for (const auto& run : runs) {
    if (run.status == RunStatus::completed) continue;
    lines.push_back(run.dir + ": " + statusLabel(run) +
                    (run.error.empty() ? "" : " (" + run.error.substr(0, run.error.find('\n')) + ")"));
  }
  return lines;
}

std::string summaryLine(const std::vector<RunData>& runs, size_t configurations) {
  const bool synthetic = std::any_of(runs.begin(), runs.end(), [](const RunData& r) { return r.synthetic; });
  return fmt::format(
      "{} runs in {} configurations.{}", runs.size(), configurations,
      synthetic ? " Some runs trained on synthetic data: their metrics say nothing about the task." : "");
}

// A drawn plot's image (a plot gnuplot did not draw has none).
std::string markdownFigure(const Plot& plot, const RenderedPlots& rendered) {
  if (!rendered.svg.count(plot.name)) return "";
  return "![" + markdownText(plot.title) + "](plots/" + plot.name + ".png)\n\n";
}

// A section's text, a paragraph per line.
std::vector<std::string> paragraphsOf(const std::string& text) {
  std::vector<std::string> paragraphs;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) paragraphs.push_back(line);
  }
  return paragraphs;
}

std::string markdownSection(const ReportSection& section, const RenderedPlots& rendered) {
  std::string out = "\n## " + markdownText(section.title) + "\n\n";
  for (const auto& paragraph : paragraphsOf(section.text)) out += markdownText(paragraph) + "\n\n";
  if (!section.link.empty()) out += "[" + markdownText(section.link) + "](" + section.link + ")\n\n";
  out += markdownTable(section.table);
  if (!section.plots.empty()) out += "\n";
  for (const auto& plot : section.plots) out += markdownFigure(plot, rendered);
  return out;
}

bool anyLeading(const std::vector<ReportSection>& sections) {
  return std::any_of(sections.begin(), sections.end(), [](const ReportSection& s) { return s.leading; });
}

std::string markdown(const std::vector<RunData>& runs, const std::vector<ConfigGroup>& groups,
                     const std::vector<Plot>& plots, const RenderedPlots& rendered, const ReportOptions& options,
                     const std::vector<ReportSection>& sections) {
  std::string out = "# gcrun report\n\n";
  if (!options.title.empty()) out += markdownText(options.title) + "\n\n";
  for (const auto& section : sections) {
    if (section.leading) out += markdownSection(section, rendered).substr(1) + "\n";
  }
  if (anyLeading(sections)) out += "## " + std::string(kResults) + "\n\n";
  if (const auto finding = findingLine(groups); !finding.empty()) out += "**" + markdownText(finding) + "**\n\n";
  out += summaryLine(runs, groups.size()) + "\n\n" + markdownTable(resultTable(groups, projectionLabel(options))) +
         "\n" + kNotes + "\n";
  for (const auto& section : sections) {
    if (!section.leading) out += markdownSection(section, rendered);
  }
  const auto open = unfinished(runs);
  if (!open.empty()) {
    out += "\n## Runs not completed\n\n";
    for (const auto& line : open) out += "- " + markdownText(line) + "\n";
  }
  if (!options.skipped.empty()) {
    out += "\n## Left out\n\n";
    for (const auto& line : options.skipped) out += "- " + markdownText(line) + "\n";
  }
  out += "\n## Plots\n\n";
  for (const auto& plot : plots) out += markdownFigure(plot, rendered);
  if (!rendered.note.empty()) out += markdownText(rendered.note) + "\n";
  return out;
}

// Cells this long (settings, run names) are at most 30em wide: they wrap between words, and a
// word longer than that anywhere. Shorter ones, numbers among them, never break.
constexpr size_t kLongCell = 32;

// A table in its own horizontal scroll box: a table wider than the page scrolls, the page does not.
std::string htmlTable(const TextTable& table) {
  std::string out = "<div class=\"wide\"><table>\n<tr>";
  for (const auto& cell : table.header) out += "<th>" + htmlText(cell) + "</th>";
  out += "</tr>\n";
  for (const auto& row : table.rows) {
    out += "<tr>";
    for (const auto& cell : row) {
      out += cell.size() > kLongCell ? "<td><div class=\"long\">" + htmlText(cell) + "</div></td>"
                                     : "<td>" + htmlText(cell) + "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</table></div>\n";
}

std::string htmlList(const std::string& heading, const std::vector<std::string>& lines) {
  if (lines.empty()) return "";
  std::string out = "<h2>" + heading + "</h2>\n<ul>\n";
  for (const auto& line : lines) out += "<li>" + htmlText(line) + "</li>\n";
  return out + "</ul>\n";
}

// Only what gnuplot drew just now from sanitized labels; a file already in plots/ is not ours to trust.
std::string htmlFigure(const Plot& plot, const RenderedPlots& rendered) {
  const auto svg = rendered.svg.find(plot.name);
  if (svg == rendered.svg.end()) return "";
  const auto start = svg->second.find("<svg");
  const std::string image = start == std::string::npos ? svg->second : svg->second.substr(start);
  return "<figure>\n" + validUtf8(image) + "\n<figcaption>" + htmlText(plot.title) + "</figcaption></figure>\n";
}

std::string htmlSection(const ReportSection& section, const RenderedPlots& rendered) {
  std::string body;
  for (const auto& paragraph : paragraphsOf(section.text)) body += "<p>" + htmlText(paragraph) + "</p>\n";
  if (!section.link.empty()) {
    body += "<p><a href=\"" + htmlText(section.link) + "\">" + htmlText(section.link) + "</a></p>\n";
  }
  body += htmlTable(section.table);
  for (const auto& plot : section.plots) body += htmlFigure(plot, rendered);
  if (!section.folded) return "<h2>" + htmlText(section.title) + "</h2>\n" + body;
  return fmt::format("<details>\n<summary><h2>{}</h2> ({} rows)</summary>\n{}</details>\n", htmlText(section.title),
                     section.table.rows.size(), body);
}

std::string htmlPage(const std::vector<RunData>& runs, const std::vector<ConfigGroup>& groups,
                     const std::vector<Plot>& plots, const RenderedPlots& rendered, const ReportOptions& options,
                     const std::vector<ReportSection>& sections) {
  std::string out =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gcrun report</title><style>"
      "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;font-size:90%}"
      "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f3f3f3}"
      ".long{max-width:30em;overflow-wrap:break-word}.wide{overflow-x:auto;max-width:100%}"
      "summary{cursor:pointer;margin:1em 0}summary h2{display:inline}"
      "figure{margin:1.5em 0}svg{max-width:100%;height:auto}</style></head><body>\n<h1>gcrun report</h1>\n";
  if (!options.title.empty()) out += "<p>" + htmlText(options.title) + "</p>\n";
  for (const auto& section : sections) {
    if (section.leading) out += htmlSection(section, rendered);
  }
  if (anyLeading(sections)) out += "<h2>" + std::string(kResults) + "</h2>\n";
  if (const auto finding = findingLine(groups); !finding.empty())
    out += "<p><strong>" + htmlText(finding) + "</strong></p>\n";
  out += "<p>" + htmlText(summaryLine(runs, groups.size())) + "</p>\n" +
         htmlTable(resultTable(groups, projectionLabel(options))) + "<p>" + htmlText(kNotes) + "</p>\n";
  for (const auto& section : sections) {
    if (!section.leading) out += htmlSection(section, rendered);
  }
  out += htmlList("Runs not completed", unfinished(runs)) + htmlList("Left out", options.skipped);
  out += "<h2>Plots</h2>\n";
  for (const auto& plot : plots) out += htmlFigure(plot, rendered);
  if (!rendered.note.empty()) out += "<p>" + htmlText(rendered.note) + "</p>\n";
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
  auto groups = groupRuns(runs);
  annotateGroups(groups, options.target ? &*options.target : nullptr,
                 options.projection ? &*options.projection : nullptr);
  result.configurations = groups.size();
  const auto out = files::Directory::open(options.output_dir, true);
  auto plots = reportPlots(groups);
  auto sections = options.sections;
  if (auto plot = layerErrorPlot(groups)) plots.push_back(std::move(*plot));
  if (auto section = layerBytesSection(groups)) sections.push_back(std::move(*section));
  RenderedPlots rendered;
  if (wants("md") || wants("html")) {
    auto drawn = plots;
    for (const auto& section : sections) drawn.insert(drawn.end(), section.plots.begin(), section.plots.end());
    rendered = renderPlots(drawn, out.sub(report_files::kPlots, true));
  }
  result.note = rendered.note;
  const auto write = [&](const std::string& name, const std::string& text) {
    out.writeAtomically(name, text);
    result.files.push_back(out.pathOf(name));
  };
  if (wants("md")) write(report_files::kMarkdown, markdown(runs, groups, plots, rendered, options, sections));
  if (wants("csv")) write(report_files::kCsv, csvTable(groups));
  if (wants("html")) write(report_files::kHtml, htmlPage(runs, groups, plots, rendered, options, sections));
  result.files.insert(result.files.end(), rendered.images.begin(), rendered.images.end());
  return result;
}

}  // namespace gcrun::outputs
