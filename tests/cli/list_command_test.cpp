// `gcrun list`: the optimizers and schedules, and the key table as markdown.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/support/command.h"

namespace {

using gcrun::testing::contains;
using gcrun::testing::runCommand;

const std::string kGcrun = GCRUN_BINARY_PATH;

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

TEST(ListOptimizers, NamesEachOptimizerAndSchedule) {
  const auto result = runCommand(kGcrun + " list optimizers");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* name : {"  sgd ", "  adamw ", "schedules (optimizer.schedule):", "  reference ", "  cosine "}) {
    EXPECT_TRUE(contains(result.output, name)) << name << "\n" << result.output;
  }
  // The optimizers come before the schedules.
  EXPECT_LT(result.output.find("  adamw "), result.output.find("schedules"));
}

TEST(ListKeysMarkdown, OneRowPerKeyWithItsDefault) {
  const auto plain = runCommand(kGcrun + " list keys");
  const auto markdown = runCommand(kGcrun + " list keys --markdown");
  ASSERT_EQ(markdown.exit_code, 0) << markdown.output;
  const auto rows = linesOf(markdown.output);
  ASSERT_GT(rows.size(), 2u);
  EXPECT_EQ(rows[0], "| key | default | accepts | meaning |");
  // Every key `gcrun list keys` names has its row: the plain listing's unindented key lines.
  size_t keys = 0;
  for (const auto& line : linesOf(plain.output)) {
    if (line.size() < 3 || line[2] == ' ') continue;
    const auto key = line.substr(2, line.find(' ', 2) - 2);
    ++keys;
    EXPECT_TRUE(contains(markdown.output, "| `" + key + "` |")) << key;
  }
  EXPECT_EQ(rows.size(), keys + 2);
  // A built-in key: the default of an empty configuration, the accepted values, the alias.
  EXPECT_TRUE(contains(markdown.output, "| `training.epochs` | `1` | an integer >= 1 |")) << markdown.output;
  EXPECT_TRUE(contains(markdown.output, "Alias: `num_epochs`."));
  EXPECT_TRUE(contains(markdown.output, "| `output.sinks` | `[console, jsonl, csv]` |"));
  // A declared setting: each owner's default, owners of one default together.
  EXPECT_TRUE(
      contains(markdown.output, "| `sync.every` | `8` (local-sgd); `32` (diloco, streaming-diloco, sparseloco) |"))
      << markdown.output;
  // Text that would break the table is escaped: no bare '<' (an HTML tag) in any row.
  EXPECT_FALSE(contains(markdown.output, "<r>"));
}

TEST(ListKeysMarkdown, IsForTheKeysOnly) {
  const auto result = runCommand(kGcrun + " list reducers --markdown");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, "gcrun list keys --markdown")) << result.output;
}

}  // namespace
