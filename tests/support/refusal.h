#pragma once

#include <string>

#include <gtest/gtest.h>

#include "tests/support/command.h"

namespace gcrun::testing {

// Exit 2 and one line of gcrun's own that names `part`: bad input refused.
inline void expectRefused(const CommandResult& result, const std::string& part) {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  const auto lines = gcrunLines(result.output);
  ASSERT_EQ(lines.size(), 1u) << result.output;
  EXPECT_TRUE(contains(lines.front(), part)) << result.output;
}

}  // namespace gcrun::testing
