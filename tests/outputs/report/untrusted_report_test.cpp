// gcrun report on run directories from someone else, through the binary: names that would be
// gnuplot, HTML, Markdown or spreadsheet syntax, planted symlinks and stale plots, files that
// never end or expand without bound, and inputs that are no report at all.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/fmt/fmt.h>

#include "outputs/json.h"
#include "tests/support/command.h"
#include "tests/support/gnuplot.h"
#include "tests/support/json_string.h"
#include "tests/support/temp_dir.h"

namespace gcrun::outputs {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::readFile;
using testing::runCommand;
using testing::TempDir;

// What a run directory holds, each string written as given (JSON- or YAML-escaped).
struct HostileRun {
  std::string experiment = "fashion-sgd";
  std::string metric = "test.accuracy";  // paper.metric in config.yaml, and the events' name
  std::string reducer = "exact";
  int seed = 1;
  std::string final_value = "0.85";  // as run.json has it: any JSON/YAML scalar
};

std::string yamlString(const std::string& text) { return jsonString(text); }  // JSON strings are YAML

void writeRun(const std::string& dir, const HostileRun& run) {
  fs::create_directories(dir);
  std::ofstream(dir + "/config.yaml") << "seed: " << run.seed
                                      << "\ntask:\n  name: fashion-mnist\nreducer:\n  name: " << yamlString(run.reducer)
                                      << "\npaper:\n  metric: " << yamlString(run.metric) << "\n  value: 0.9\n";
  std::ofstream(dir + "/run.json") << "{\"experiment\": " << jsonString(run.experiment)
                                   << ", \"world_size\": 2, \"num_parameters\": 1000, \"steps\": 20, "
                                      "\"epochs_done\": 2, \"bits_sent\": 33554432, \"status\": \"completed\", "
                                      "\"final_metrics\": {"
                                   << jsonString(run.metric) << ": " << run.final_value << "}}\n";
  std::ofstream(dir + "/timer_summary.json") << "{\"batch\": {\"median_duration\": 0.05}}\n";
  const auto dot = run.metric.find('.');
  std::ofstream metrics(dir + "/metrics.jsonl");
  for (int epoch = 1; epoch <= 2; ++epoch) {
    metrics << fmt::format("{{\"name\": \"loss\", \"value\": {}, \"split\": \"train\", \"step\": {}, \"window\": 5}}\n",
                           1.0 / epoch, 10 * epoch);
    metrics << "{\"name\": " << jsonString(run.metric.substr(dot + 1))
            << ", \"split\": " << jsonString(run.metric.substr(0, dot))
            << fmt::format(", \"value\": {}, \"epoch\": {}, \"step\": {}, \"bits\": {}}}\n", 0.8, epoch, 10 * epoch,
                           epoch * 1000);
  }
}

std::string gcrun(const std::string& arguments) { return std::string(GCRUN_BINARY_PATH) + " " + arguments; }

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A refusal: exit 2 and one line "gcrun: error: ..." naming `what`.
void expectOneLineError(const testing::CommandResult& result, const std::string& what) {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  const auto lines = linesOf(result.output);
  ASSERT_EQ(lines.size(), 1u) << result.output;
  EXPECT_EQ(lines[0].rfind("gcrun: error: ", 0), 0u) << result.output;
  EXPECT_TRUE(contains(lines[0], what)) << result.output;
}

TEST(HostileReport, NamesNeverReachGnuplotAsCommands) {
  GCRUN_SKIP_WITHOUT_GNUPLOT();
  TempDir dir;
  // Each would run `touch <marker>` if it reached gnuplot as syntax: a backquote in a directory
  // name, a newline then a command in run.json's experiment (two names, so the group takes the
  // experiment's) and in config.yaml's paper.metric.
  writeRun(dir.file("runs/x`touch ${MARK}1`-seed1"), {});
  HostileRun by_experiment;
  by_experiment.experiment = "exp\nsystem 'touch ${MARK}2'\n";
  by_experiment.reducer = "topk";
  writeRun(dir.file("runs/e1-seed1"), by_experiment);
  by_experiment.seed = 2;
  writeRun(dir.file("runs/e2-seed2"), by_experiment);
  HostileRun by_metric;
  by_metric.metric = "test.acc\nsystem 'touch ${MARK}3'\n@macro `touch ${MARK}4`";
  by_metric.reducer = "powersgd";
  writeRun(dir.file("runs/m-seed1"), by_metric);
  const std::string marks = dir.file("mark");
  const auto result =
      runCommand("MARK=" + marks + " " + gcrun("report " + dir.file("runs") + " --output " + dir.file("out")));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (int k = 1; k <= 4; ++k) EXPECT_FALSE(fs::exists(marks + std::to_string(k))) << "gnuplot ran a command " << k;
  // gnuplot read every script as it was meant: all four plots drawn.
  for (const char* plot : {"metric-vs-epoch", "metric-vs-data", "metric-vs-time", "loss-vs-step"}) {
    EXPECT_TRUE(fs::is_regular_file(dir.file(std::string("out/plots/") + plot + ".svg")))
        << plot << "\n"
        << readFile(dir.file("out/plots/gnuplot.log"));
  }
  EXPECT_FALSE(contains(result.output, "note:")) << result.output;
  // A newline in a label adds no data lines: every line is a comment, a separator or four numbers.
  for (const auto& line : linesOf(readFile(dir.file("out/plots/metric-vs-epoch.dat")))) {
    if (line.empty() || line[0] == '#') continue;
    double x, mean, min, max;
    EXPECT_EQ(std::sscanf(line.c_str(), "%lf %lf %lf %lf", &x, &mean, &min, &max), 4) << line;
  }
}

// A file outside the report that a planted symlink points at; it must keep its bytes.
struct Victim {
  explicit Victim(const std::string& path) : path(path) { std::ofstream(path) << "precious\n"; }
  bool untouched() const { return readFile(path) == "precious\n"; }
  std::string path;
};

TEST(HostileReport, PlantedSymlinksAreReplacedOrRefusedNeverWrittenThrough) {
  GCRUN_SKIP_WITHOUT_GNUPLOT();
  TempDir dir;
  writeRun(dir.file("runs/a-seed1"), {});
  const std::string out = dir.file("out");
  fs::create_directories(out + "/plots");
  std::vector<Victim> victims;
  for (const char* name : {"report.md", "report.html", "report.csv", "plots/metric-vs-epoch.png",
                           "plots/metric-vs-epoch.svg", "plots/metric-vs-epoch.dat", "plots/loss-vs-step.gp"}) {
    victims.emplace_back(dir.file("victim-" + std::to_string(victims.size())));
    fs::create_symlink(victims.back().path, out + "/" + name);
  }
  const auto result = runCommand(gcrun("report " + dir.file("runs") + " --output " + out));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const auto& victim : victims) EXPECT_TRUE(victim.untouched()) << victim.path;
  for (const char* name : {"report.md", "plots/metric-vs-epoch.png", "plots/metric-vs-epoch.svg"}) {
    EXPECT_FALSE(fs::is_symlink(out + "/" + name)) << name;
    EXPECT_TRUE(fs::is_regular_file(out + "/" + name)) << name;
  }
  // gnuplot's own directory is gone again.
  for (const auto& entry : fs::directory_iterator(out + "/plots")) {
    EXPECT_FALSE(entry.is_directory()) << entry.path();
  }

  // A log appended to, or plots/ itself, as a symlink: refused, naming it.
  const Victim log(dir.file("victim-log"));
  fs::remove(out + "/plots/gnuplot.log");
  fs::create_symlink(log.path, out + "/plots/gnuplot.log");
  expectOneLineError(runCommand(gcrun("report " + dir.file("runs") + " --output " + out)), out + "/plots/gnuplot.log");
  EXPECT_TRUE(log.untouched());
  const std::string elsewhere = dir.file("elsewhere");
  fs::create_directories(elsewhere);
  fs::remove_all(out + "/plots");
  fs::create_directory_symlink(elsewhere, out + "/plots");
  expectOneLineError(runCommand(gcrun("report " + dir.file("runs") + " --output " + out)), out + "/plots");
  EXPECT_TRUE(fs::is_empty(elsewhere));
}

TEST(HostileReport, PagesHoldNoMarkupFromRunsOrStaleFiles) {
  TempDir dir;
  HostileRun run;
  run.experiment = "<script>alert(1)</script>";
  run.reducer = "<img src=x onerror=alert(2)>";
  writeRun(dir.file("runs/<b onmouseover=alert(3)>x-seed1"), run);
  const std::string out = dir.file("out");
  fs::create_directories(out + "/plots");
  std::ofstream(out + "/plots/metric-vs-epoch.svg") << "<svg><script>alert(4)</script></svg>\n";
  // No gnuplot on PATH: the page must not fall back on the stale SVG.
  const auto result = runCommand("PATH=/nonexistent " + gcrun("report " + dir.file("runs") + " --output " + out));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "gnuplot is not installed")) << result.output;
  const auto page = readFile(out + "/report.html");
  for (const char* markup : {"<script", "<img", "<b "}) EXPECT_FALSE(contains(page, markup)) << markup << "\n" << page;
  EXPECT_TRUE(contains(page, "&lt;img src=x")) << page;
  const auto md = readFile(out + "/report.md");
  for (const char* markup : {"<script", "<img", "<b "}) EXPECT_FALSE(contains(md, markup)) << markup << "\n" << md;
  EXPECT_FALSE(contains(md, "![")) << "no image links to plots this report did not draw\n" << md;
}

TEST(HostileReport, TablesKeepTheirShapeAndSpreadsheetsRunNoFormulas) {
  TempDir dir;
  HostileRun formula;
  formula.reducer = "=HYPERLINK(\"http://x\",\"y\")";
  writeRun(dir.file("runs/+cmd-seed1"), formula);
  HostileRun lines;
  lines.reducer = "r\n# injected heading\n| forged | row |";
  lines.experiment = "\r=1+1";
  writeRun(dir.file("runs/l-seed1"), lines);
  HostileRun bytes;
  bytes.reducer =
      "bad\xff\xfe"
      "bytes";
  writeRun(dir.file("runs/@bytes-seed1"), bytes);
  // JSON values that are no number: the final is missing.
  const std::vector<std::pair<std::string, std::string>> not_numbers = {
      {"notnum", "null"}, {"text", "\"NaN\""}, {"flag", "true"}};
  // No JSON (NaN, .inf) or past a double's range: run.json is not read at all.
  const std::vector<std::pair<std::string, std::string>> not_json = {
      {"nan", "NaN"}, {"overflow", "1e400"}, {"endless", ".inf"}, {"huge", "123456789012345678901234567890e999"}};
  for (const auto* list : {&not_numbers, &not_json}) {
    for (const auto& [name, value] : *list) {
      HostileRun run;
      run.reducer = name;
      run.final_value = value;
      writeRun(dir.file("runs/" + name + "-seed1"), run);
    }
  }
  const auto result = runCommand(gcrun("report " + dir.file("runs") + " --output " + dir.file("out")));
  ASSERT_EQ(result.exit_code, 0) << result.output;

  const auto csv = readFile(dir.file("out/report.csv"));
  EXPECT_TRUE(contains(csv, "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"")) << csv;
  EXPECT_TRUE(contains(csv, "\"'+cmd\"")) << csv;
  EXPECT_TRUE(contains(csv, "\"'@bytes\"")) << csv;
  EXPECT_FALSE(contains(csv, ",=") || contains(csv, ",+") || contains(csv, ",@") || contains(csv, "\n=")) << csv;
  // gcrun's own numbers stay numbers: 0.85 against the paper's 0.9.
  EXPECT_TRUE(contains(csv, ",0.9,-0.05")) << csv;

  const auto md = readFile(dir.file("out/report.md"));
  EXPECT_FALSE(contains(md, "\n# injected")) << md;
  EXPECT_FALSE(contains(md, "\n| forged")) << md;
  // Every table row keeps its 11 cells: 12 unescaped pipes.
  for (const auto& line : linesOf(md)) {
    if (line.empty() || line[0] != '|') continue;
    int pipes = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\\')
        ++i;
      else if (line[i] == '|')
        ++pipes;
    }
    EXPECT_EQ(pipes, 12) << line;
  }
  for (const auto& file :
       {csv, md, readFile(dir.file("out/report.html")), readFile(dir.file("out/plots/metric-vs-epoch.svg"))}) {
    EXPECT_FALSE(contains(file, "\xff")) << "invalid UTF-8 passed through";
  }
  EXPECT_TRUE(contains(md,
                       "bad\xEF\xBF\xBD\xEF\xBF\xBD"
                       "bytes"))
      << md;
  // Not-a-number finals are missing ("—"), not 0 and not inf%.
  for (const auto& line : linesOf(md)) {
    for (const auto* list : {&not_numbers, &not_json}) {
      for (const auto& [name, value] : *list) {
        if (!contains(line, "| " + name + " |")) continue;
        const bool read = list == &not_numbers;
        EXPECT_TRUE(contains(line, read ? "| 0 (1 completed) | — |" : "| 0 (1 unreadable) | — |")) << line;
        EXPECT_FALSE(contains(line, "inf%") || contains(line, "nan%") || contains(line, " 0.00% ±")) << line;
      }
    }
  }
}

// Whether this system lets a test make a FIFO.
bool makeFifo(const std::string& path) { return ::mkfifo(path.c_str(), 0644) == 0; }

TEST(HostileReport, FilesThatNeverEndOrExplodeAreSkippedWithANote) {
  TempDir dir;
  writeRun(dir.file("runs/good-seed1"), {});
  // 100 MB of numbers: yaml-cpp would take some 38 times that.
  writeRun(dir.file("runs/big-seed1"), {});
  {
    std::ofstream big(dir.file("runs/big-seed1/run.json"));
    big << "[";
    const std::string chunk = [] {
      std::string ones;
      for (int i = 0; i < 1 << 20; ++i) ones += "1,";
      return ones;
    }();
    for (int i = 0; i < 50; ++i) big << chunk;
    big << "1]\n";
  }
  writeRun(dir.file("runs/zero-seed1"), {});
  fs::remove(dir.file("runs/zero-seed1/metrics.jsonl"));
  fs::create_symlink("/dev/zero", dir.file("runs/zero-seed1/metrics.jsonl"));
  writeRun(dir.file("runs/fifo-seed1"), {});
  fs::remove(dir.file("runs/fifo-seed1/metrics.jsonl"));
  ASSERT_TRUE(makeFifo(dir.file("runs/fifo-seed1/metrics.jsonl")));
  writeRun(dir.file("runs/fifojson-seed1"), {});
  fs::remove(dir.file("runs/fifojson-seed1/run.json"));
  ASSERT_TRUE(makeFifo(dir.file("runs/fifojson-seed1/run.json")));
  writeRun(dir.file("runs/bomb-seed1"), {});
  {
    std::ofstream bomb(dir.file("runs/bomb-seed1/config.yaml"));
    bomb << "seed: 1\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (int level = 1; level <= 9; ++level) {
      bomb << "a" << level << ": &a" << level << " [";
      for (int k = 0; k < 10; ++k) bomb << (k ? ", " : "") << "*a" << level - 1;
      bomb << "]\n";
    }
  }
  // 2 GiB of data (heap and anonymous memory, not the libraries' code, which a CUDA LibTorch maps by
  // the gigabyte): far above what the report needs, far below what the big file would take.
  const auto result = runCommand("timeout 120 prlimit --data=2147483648 " +
                                 gcrun("report " + dir.file("runs") + " --output " + dir.file("out")));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "1 runs in 1 configurations")) << result.output;
  for (const char* skipped : {"big-seed1", "zero-seed1", "fifo-seed1", "fifojson-seed1", "bomb-seed1"}) {
    EXPECT_TRUE(contains(result.output, std::string("skipped: ") + dir.file("runs/") + skipped)) << skipped << "\n"
                                                                                                 << result.output;
    EXPECT_TRUE(contains(readFile(dir.file("out/report.md")), dir.file("runs/") + skipped)) << skipped;
  }
}

TEST(HostileReport, InputsThatAreNoReportSayWhyInOneLine) {
  TempDir dir;
  writeRun(dir.file("runs/a-seed1"), {});
  fs::create_symlink("loop", dir.file("runs/loop"));  // a symlink to itself
  const auto looped = runCommand(gcrun("report " + dir.file("runs") + " --output " + dir.file("out")));
  EXPECT_EQ(looped.exit_code, 0) << looped.output;
  EXPECT_TRUE(contains(looped.output, "1 runs in 1 configurations")) << looped.output;
  EXPECT_TRUE(contains(looped.output, "skipped: " + dir.file("runs/loop"))) << looped.output;

  std::ofstream(dir.file("file")) << "not a directory\n";
  expectOneLineError(runCommand(gcrun("report " + dir.file("runs") + " --output " + dir.file("file"))),
                     dir.file("file"));

  fs::create_directories(dir.file("empty"));
  expectOneLineError(runCommand(gcrun("report " + dir.file("empty"))),
                     "no run directories (a directory with run.json) found under " + dir.file("empty"));
  EXPECT_FALSE(fs::exists(dir.file("empty/report.md")));
}

TEST(HostileReport, ObjectsOfAMillionKeysParseInLinearTime) {
  TempDir dir;
  const auto keys = [](int count, const std::string& value) {
    std::string text;
    for (int i = 0; i < count; ++i) text += "\"k" + std::to_string(i) + "\": " + value + ", ";
    return text;
  };
  // Each file within its size limit (16 MiB, a metrics line 64 KiB), where a search of the object
  // per key inserted would keep the report busy for hours.
  writeRun(dir.file("runs/keys-seed1"), {});
  std::string run_json = readFile(dir.file("runs/keys-seed1/run.json"));
  run_json.replace(run_json.find("\"final_metrics\": {") + 18, 0, keys(1000000, "1"));
  std::ofstream(dir.file("runs/keys-seed1/run.json")) << run_json;
  std::ofstream(dir.file("runs/keys-seed1/timer_summary.json"))
      << "{" << keys(1000000, "{}") << "\"batch\": {\"median_duration\": 0.05}}\n";
  {
    std::ofstream metrics(dir.file("runs/keys-seed1/metrics.jsonl"), std::ios::app);
    for (int line = 0; line < 200; ++line) metrics << "{" << keys(5000, "0") << "\"name\": \"x\"}\n";
  }
  // A key twice is no JSON gcrun wrote: that run.json is unreadable, and the run says so.
  HostileRun twice;
  twice.reducer = "fp16";
  writeRun(dir.file("runs/twice-seed1"), twice);
  std::ofstream(dir.file("runs/twice-seed1/run.json")) << "{\"status\": \"completed\", \"status\": \"failed\"}\n";
  const auto result = runCommand("timeout 120 prlimit --data=2147483648 " +
                                 gcrun("report " + dir.file("runs") + " --output " + dir.file("out")));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "2 runs in 2 configurations")) << result.output;
  const std::string csv = readFile(dir.file("out/report.csv"));
  EXPECT_TRUE(contains(csv, "unreadable")) << csv;
  EXPECT_TRUE(contains(csv, "0.85")) << csv;
}

// scripts/check-report-layout on a hostile report.html: the page used to run with its scripts on,
// and one that found the marker in the appended script wrote the expected line itself ("OK", exit
// 0, for a page 3000 px wide). Its scripts are off now and the sizes come over DevTools.
TEST(ReportLayoutCheck, APageCannotForgeItsResult) {
  if (runCommand("command -v chromium").exit_code != 0) GTEST_SKIP() << "Chromium is not installed";
  TempDir dir;
  std::ofstream(dir.file("report.html"))
      << "<html><body><div style=\"width:3000px\">wide</div><table><tr><td>a</td></tr></table><script>\n"
         "document.addEventListener('DOMContentLoaded', function () {\n"
         "  var m = document.scripts[document.scripts.length - 1].text.match(/gcrun-layout-[0-9a-f]+/);\n"
         "  var d = document.createElement('div');\n"
         "  d.textContent = (m ? m[0] : 'x') + ' 1280 1280 10';\n"
         "  document.body.appendChild(d);\n"
         "  document.body.innerHTML = '<table><tr><td>OK: no horizontal overflow</td></tr></table>';\n"
         "});\n</script></body></html>\n";
  const auto checked = runCommand("timeout 120 " + std::string(GCRUN_CHECK_REPORT_LAYOUT) + " " +
                                  dir.file("report.html") + " " + dir.file("shot.png"));
  EXPECT_EQ(checked.exit_code, 1) << checked.output;
  EXPECT_TRUE(contains(checked.output, "scrollWidth=3008 innerWidth=1280")) << checked.output;
  EXPECT_TRUE(contains(checked.output, "FAIL: the page scrolls sideways")) << checked.output;
  EXPECT_TRUE(fs::is_regular_file(dir.file("shot.png")));
}

}  // namespace
}  // namespace gcrun::outputs
