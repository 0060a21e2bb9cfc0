// `gcrun bench network` end to end: two real worker processes, the profile they write, --merge,
// and the input it refuses.
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "outputs/network/network_profile.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun {
namespace {

using testing::contains;
using testing::gcrunLines;
using testing::runCommand;

const std::string kGcrun = GCRUN_BINARY_PATH;
const std::string kSmall = " bench network --nproc-per-node 2 --max-bytes 64KiB --repeats 2";

void expectFits(const network::NetworkProfile& profile, int world_size, size_t count) {
  size_t found = 0;
  for (const auto& fit : profile.fits) {
    if (fit.world_size != world_size) continue;
    ++found;
    EXPECT_GE(fit.latency_s, 0);
    EXPECT_GE(fit.seconds_per_byte, 0);
    EXPECT_GT(fit.latency_s + fit.seconds_per_byte * 65536, 0);
  }
  EXPECT_EQ(found, count);
}

// The all-reduce in float32 and float16, all-gather and broadcast in float32.
TEST(BenchNetwork, TwoProcessesWriteAProfileWithAFitPerCollectiveAndDtype) {
  testing::TempDir dir;
  const auto file = dir.file("net.yaml");
  const auto result = runCommand(kGcrun + kSmall + " --dtypes float32,float16 --output " + file);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* part :
       {"collective", "dtype", "residual %", "all-gather", "64KiB", "float32 all-reduce at 2 workers: latency",
        "float16 all-reduce at 2 workers: latency", "float32 broadcast at 2 workers"}) {
    EXPECT_TRUE(contains(result.output, part)) << part << " not in\n" << result.output;
  }
  const auto profile = network::loadProfile(file);
  EXPECT_EQ(profile.name, "net");
  EXPECT_EQ(profile.backend, "gloo");
  expectFits(profile, 2, 4);
  std::vector<std::pair<CollectiveKind, DataType>> written;
  for (const auto& fit : profile.fits) written.emplace_back(fit.collective, fit.dtype);
  EXPECT_EQ(written,
            (std::vector<std::pair<CollectiveKind, DataType>>{{CollectiveKind::all_reduce, DataType::float32},
                                                              {CollectiveKind::all_reduce, DataType::float16},
                                                              {CollectiveKind::all_gather, DataType::float32},
                                                              {CollectiveKind::broadcast, DataType::float32}}));
}

// One file holds several world sizes: a W=2 run merged into a file that has W=4 keeps it.
TEST(BenchNetwork, MergeKeepsOtherWorldSizes) {
  testing::TempDir dir;
  const auto file = dir.file("net.yaml");
  std::ofstream(file)
      << "name: lab\nbandwidth: 1gbit\nlatency: 50us\nfits:\n"
      << "  - {collective: all-reduce, world_size: 4, latency_s: 1e-4, seconds_per_byte: 2e-8}\n"
      << "  - {collective: all-reduce, world_size: 2, latency_s: 9, seconds_per_byte: 1}\n"
      << "  - {collective: all-reduce, dtype: float16, world_size: 2, latency_s: 7, seconds_per_byte: 1}\n";
  const auto result =
      runCommand(kGcrun + kSmall + " --collectives all-reduce --dtypes float32 --merge --name lab --output " + file);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_FALSE(contains(result.output, "broadcast"));
  const auto profile = network::loadProfile(file);
  EXPECT_EQ(profile.name, "lab");
  EXPECT_DOUBLE_EQ(profile.latency_s, 5e-5);
  expectFits(profile, 4, 1);
  expectFits(profile, 2, 2);
  for (const auto& fit : profile.fits) {
    if (fit.world_size != 2) continue;
    // float32: measured, not the old 9 s; float16, another dtype: kept.
    EXPECT_EQ(fit.latency_s < 1, fit.dtype == DataType::float32) << fit.latency_s;
    EXPECT_EQ(fit.latency_s == 7, fit.dtype == DataType::float16) << fit.latency_s;
  }
  // Without --merge the file holds this run alone.
  ASSERT_EQ(runCommand(kGcrun + kSmall + " --collectives broadcast --output " + file).exit_code, 0);
  const auto fresh = network::loadProfile(file);
  ASSERT_EQ(fresh.fits.size(), 1u);
  EXPECT_EQ(fresh.fits[0].collective, CollectiveKind::broadcast);
  EXPECT_EQ(fresh.latency_s, -1);
}

// Refused before anything is measured: exit 2 with one line naming the input.
TEST(BenchNetwork, BadInputExitsTwoWithOneLine) {
  testing::TempDir dir;
  const auto corrupt = dir.file("corrupt.yaml");
  std::ofstream(corrupt) << "fits: [{{\n";
  const auto target = dir.file("target.yaml");
  std::ofstream(target) << "keep me\n";
  const auto link = dir.file("link.yaml");
  std::filesystem::create_symlink(target, link);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" bench network --merge --nproc-per-node 2 --output " + corrupt, "not valid YAML"},
      {" bench network --nproc-per-node 2 --output " + link, "a symlink"},
      {" bench network --nproc-per-node 2 --output " + dir.file("no/such/dir.yaml"), "no/such"},
      {" bench network --nproc-per-node 1", "2 or more workers"},
      {" bench network --nproc-per-node 2 --max-bytes 10gbps", "--max-bytes: '10gbps'"},
      {" bench network --nproc-per-node 2 --min-bytes 64KiB --max-bytes 64KiB", "not below --max-bytes"},
      {" bench network --nproc-per-node 2 --collectives all-to-all", "--collectives: 'all-to-all'"},
      {" bench network --nproc-per-node 2 --dtypes float32,float8", "--dtypes: 'float8' is not a data type"},
      {" bench network --models lstm", "--models is not an option of `gcrun bench network`"},
      {" bench reducers --output x.yaml", "--output is not an option of `gcrun bench reducers`"},
      {" bench network --nnodes 2 --node-rank 1", "--master-addr"},
  };
  for (const auto& [arguments, expected] : cases) {
    const auto result = runCommand(kGcrun + arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments << "\n" << result.output;
    const auto lines = gcrunLines(result.output);
    ASSERT_EQ(lines.size(), 1u) << arguments << "\n" << result.output;
    EXPECT_TRUE(contains(lines[0], expected)) << expected << " not in " << lines[0];
  }
  EXPECT_EQ(testing::readFile(target), "keep me\n");
}

}  // namespace
}  // namespace gcrun
