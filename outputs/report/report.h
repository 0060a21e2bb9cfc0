#pragma once

#include <optional>
#include <string>
#include <vector>

#include "outputs/report/plots.h"
#include "outputs/report/run_data.h"
#include "outputs/report/summary.h"
#include "outputs/report/target.h"

namespace gcrun::outputs {

// The files a report writes into its folder (a study's report is at the top of its directory).
namespace report_files {
inline constexpr char kMarkdown[] = "report.md";
inline constexpr char kCsv[] = "report.csv";
inline constexpr char kHtml[] = "report.html";
inline constexpr char kPlots[] = "plots";  // PNG and SVG, with the data they were drawn from
}  // namespace report_files

// A table the report adds after its own (a study's prediction over workers and networks), or
// before it (the answer a reader wants first: which method is fastest where).
struct ReportSection {
  std::string title;
  std::string text;  // above the table: a paragraph per line
  TextTable table;
  std::vector<Plot> plots = {};  // drawn with the report's figures, shown under the table
  bool leading = false;          // before the report's own table
  bool folded = false;           // closed in report.html (<details>); a plain section in report.md
  std::string link = {};         // a file the table comes from, relative to the report ("predict/predict.csv")
};

struct ReportOptions {
  std::string output_dir;  // where report.* and plots/ go
  std::vector<std::string> formats = {"md", "csv", "html"};
  std::string title;                      // a line under the heading (a study's description)
  std::vector<std::string> skipped = {};  // "path: why" for runs left out (LoadedRuns::skipped)
  std::optional<Target> target = {};      // the measured time to it (runs loaded with its metric)
  std::optional<ReportProjection> projection = {};
  std::vector<ReportSection> sections = {};
};

struct ReportResult {
  std::vector<std::string> files;  // written, report files first
  size_t runs = 0;
  size_t configurations = 0;
  std::string note;  // why plots are missing, if they are
};

// The formats `gcrun report --format` accepts.
const std::vector<std::string>& reportFormats();

// Writes the report of `runs` into options.output_dir: report.md and report.csv (one row per
// configuration, its seeds grouped: the final metric's mean ± std and range, median time per
// batch, MiB sent per worker and epoch, compression against a float32 all-reduce, the paper's value
// and the distance to it), plots/ (PNG and SVG through gnuplot, with the data they were drawn
// from) and report.html (one page, no network: the tables and the SVG plots inline). Runs that
// failed or are still going are listed as such, and the skipped ones with why.
// Every name and label read from a run is text in each format (safe_text.h), and every file is
// written below options.output_dir through files::Directory: a symlink planted there is replaced
// or refused (a UserError naming it), never written through.
ReportResult writeReport(const std::vector<RunData>& runs, const ReportOptions& options);

}  // namespace gcrun::outputs
