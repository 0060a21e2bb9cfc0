// gcrun as a plugin author meets it: `cmake --install` into a temporary prefix, examples/ configured
// and built against that prefix with find_package(gcrun), and its plugins run by the installed gcrun
// with their own keys.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/support/command.h"

namespace {

namespace fs = std::filesystem;

using gcrun::testing::contains;
using gcrun::testing::readFile;
using gcrun::testing::runCommand;

// Installed headers whose quoted includes are not installed: a plugin could not compile them.
std::string missingIncludes(const fs::path& include_dir) {
  std::string missing;
  const std::regex quoted("#include \"([^\"]+)\"");
  for (const auto& entry : fs::recursive_directory_iterator(include_dir)) {
    if (!entry.is_regular_file()) continue;
    const auto text = readFile(entry.path().string());
    for (std::sregex_iterator it(text.begin(), text.end(), quoted), end; it != end; ++it) {
      if (!fs::exists(include_dir / (*it)[1].str())) missing += entry.path().string() + ": " + (*it)[1].str() + "\n";
    }
  }
  return missing;
}

TEST(Install, AnOutOfTreePluginBuildsAgainstTheInstallAndDeclaresItsKeys) {
  const std::string cmake = GCRUN_CMAKE_COMMAND;
  if (!fs::exists(cmake))
    GTEST_SKIP() << "cmake (" << cmake << ") is not available, so nothing can be built against an install";
  // Under the build folder, emptied first: the example build's paths stay the same from run to run,
  // so the compiler cache serves them.
  const fs::path root = fs::path(GCRUN_BUILD_DIR) / "install-test";
  fs::remove_all(root);
  const auto prefix = root / "prefix", build = root / "build";

  const auto install = runCommand(cmake + " --install " + GCRUN_BUILD_DIR + " --prefix " + prefix.string());
  ASSERT_EQ(install.exit_code, 0) << install.output;
  ASSERT_TRUE(fs::exists(prefix / "lib/cmake/gcrun/gcrunConfig.cmake")) << install.output;
  ASSERT_TRUE(fs::exists(prefix / "include/gcrun/reducers/reducer.h")) << install.output;
  EXPECT_EQ(missingIncludes(prefix / "include/gcrun"), "");
  // Where bash-completion looks for gcrun's completion, the script that `gcrun completion bash` prints.
  const auto printed = runCommand((prefix / "bin/gcrun").string() + " completion bash");
  EXPECT_EQ(readFile((prefix / "share/bash-completion/completions/gcrun").string()), printed.output);

  const std::string launcher = std::string(GCRUN_CCACHE).empty() ? "" : " -DCMAKE_CXX_COMPILER_LAUNCHER=" GCRUN_CCACHE;
  const auto configure = runCommand(cmake + " -S " + GCRUN_SOURCE_DIR + "/examples -B " + build.string() +
                                    " -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=" + prefix.string() + launcher);
  ASSERT_EQ(configure.exit_code, 0) << configure.output;
  const auto compile = runCommand(cmake + " --build " + build.string() + " --parallel 2");
  ASSERT_EQ(compile.exit_code, 0) << compile.output;

  // Two reducer plugins and a sink: recording wraps int8-sum by name, each reads its own keys.
  const std::string gcrun = (prefix / "bin/gcrun").string();
  const std::string plugins = " --plugin " + (build / "libgcrun_int8_plugin.so").string() + " --plugin " +
                              (build / "libgcrun_recording_plugin.so").string() + " --plugin " +
                              (build / "libgcrun_terse_plugin.so").string();
  const std::string keys =
      " --set reducer.name=recording --set reducer.inner=int8-sum --set reducer.int8_levels=60"
      " --set reducer.record_to=" +
      (root / "records").string() + " --set 'output.sinks=[terse,jsonl]' --set output.terse_digits=3";
  const auto experiment = runCommand(gcrun + " experiment fashion-sgd" + plugins + keys + " --output-dir " +
                                     (root / "run").string() + " --set task.synthetic=true --set training.max_steps=2");
  ASSERT_EQ(experiment.exit_code, 0) << experiment.output;
  EXPECT_TRUE(contains(experiment.output, "terse: epoch=1 step=2")) << experiment.output;
  const auto records = readFile((root / "records/recording-rank0.tsv").string());
  EXPECT_TRUE(contains(records, "conv1.weight\t32x1x3x3\t2\t")) << records;
  EXPECT_TRUE(contains(records, "# int8-sum sent ")) << records;

  const auto shown = runCommand(gcrun + " show fashion-sgd" + plugins + keys);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  for (const char* line : {"  inner: int8-sum\n", "  int8_levels: 60\n", "  terse_digits: 3\n"}) {
    EXPECT_TRUE(contains(shown.output, line)) << line << shown.output;
  }
  const auto listed = runCommand(gcrun + " list keys" + plugins);
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  for (const char* key : {"reducer.inner", "reducer.record_to", "reducer.int8_levels", "output.terse_digits"}) {
    EXPECT_TRUE(contains(listed.output, key)) << key << listed.output;
  }
}

}  // namespace
