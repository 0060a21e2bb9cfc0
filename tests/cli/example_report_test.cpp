// docs/example-report/ against what today's gcrun writes for its study. scripts/make-example-report
// makes it from a real run of the built-in study fashion-ranks (minutes to an hour); this test runs
// the same study for two steps on synthetic data (about a minute) and compares what does not depend
// on the training: each configuration's row, its reducer, the settings that tell it apart, its
// workers and seeds. When report.cpp changes what those say, the committed example goes stale and
// this fails: rerun scripts/make-example-report.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::readFile;
using gcrun::testing::runCommand;
using gcrun::testing::TempDir;

const std::string kGcrun = GCRUN_BINARY_PATH;
const std::string kExample = std::string(GCRUN_SOURCE_DIR) + "/docs/example-report";

// One CSV record: fields split at commas outside double quotes, "" a quote within them.
std::vector<std::string> fieldsOf(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

// The columns of report.csv that the training does not decide, one string per row.
std::vector<std::string> rowsWithout(const std::string& csv) {
  const std::vector<std::string> wanted = {"configuration",     "reducer", "settings", "workers",
                                           "simulated_workers", "seeds",   "status",   "metric"};
  std::stringstream stream(csv);
  std::string line;
  std::getline(stream, line);
  const auto header = fieldsOf(line);
  std::vector<size_t> columns;
  for (const auto& name : wanted) {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) columns.push_back(i);
    }
  }
  EXPECT_EQ(columns.size(), wanted.size()) << "report.csv's header: " << line;
  std::vector<std::string> rows;
  while (std::getline(stream, line)) {
    const auto fields = fieldsOf(line);
    std::string row;
    for (const auto column : columns) row += (column < fields.size() ? fields[column] : "?") + " | ";
    rows.push_back(row);
  }
  return rows;
}

TEST(ExampleReport, RowsAreWhatGcrunWritesForItsStudy) {
  TempDir dir;
  const auto study = runCommand(kGcrun + " study fashion-ranks --output-dir " + dir.file("study") +
                                " --set training.max_steps=2 --set task.synthetic=true"
                                " --set task.synthetic_samples=512 --set evaluation.max_samples=64");
  ASSERT_EQ(study.exit_code, 0) << study.output;
  const auto expected = rowsWithout(readFile(dir.file("study/report.csv")));
  ASSERT_EQ(expected.size(), 4u);  // sgd and PowerSGD ranks 1, 2 and 4
  EXPECT_EQ(rowsWithout(readFile(kExample + "/report.csv")), expected)
      << "docs/example-report is out of date: run scripts/make-example-report";
  // The Markdown table says the same as the CSV: each configuration's settings, as written now.
  const auto markdown = readFile(kExample + "/report.md");
  const auto fresh = readFile(dir.file("study/report.md"));
  for (const char* configuration : {"| sgd | exact |", "| rank1 | powersgd |", "| rank4 | powersgd |"}) {
    const auto at = fresh.find(configuration);
    ASSERT_NE(at, std::string::npos) << configuration << "\n" << fresh;
    const auto settings_end = fresh.find(" | ", at + std::string(configuration).size() + 1);
    const auto row_start = fresh.substr(at, settings_end - at);
    EXPECT_NE(markdown.find(row_start), std::string::npos) << row_start;
  }
}

}  // namespace
