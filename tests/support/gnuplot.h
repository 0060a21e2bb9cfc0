#pragma once

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace gcrun::testing {

// Whether a gnuplot is on PATH, as the report looks for it (outputs/report/plots.cpp).
inline bool gnuplotInstalled() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (::access(((dir.empty() ? std::string(".") : dir) + "/gnuplot").c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace gcrun::testing

// Tests of drawn plots need gnuplot (scripts/bootstrap installs it; a GPU machine may lack it).
#define GCRUN_SKIP_WITHOUT_GNUPLOT()         \
  if (!::gcrun::testing::gnuplotInstalled()) \
  GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox): the plots cannot be drawn"
