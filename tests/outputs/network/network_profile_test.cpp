// network.yaml's reader (every error class, through a real file too) and writer.
#include "outputs/network/network_profile.h"

#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"
#include "tests/support/user_error.h"

namespace gcrun::network {
namespace {

using testing::expectMessageHas;
using testing::userErrorOf;

TEST(NetworkProfile, CollectiveNames) {
  for (const auto collective : {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::broadcast}) {
    EXPECT_EQ(parseCollective(collectiveName(collective), "c"), collective);
  }
  expectMessageHas(userErrorOf([] { parseCollective("allreduce", "--collectives"); }),
                   {"--collectives", "'allreduce'", "all-reduce, all-gather or broadcast"});
}

void expectSameProfile(const NetworkProfile& a, const NetworkProfile& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.backend, b.backend);
  EXPECT_EQ(a.bandwidth_bytes_per_s, b.bandwidth_bytes_per_s);
  EXPECT_EQ(a.latency_s, b.latency_s);
  ASSERT_EQ(a.fits.size(), b.fits.size());
  for (size_t i = 0; i < a.fits.size(); ++i) {
    EXPECT_EQ(a.fits[i].collective, b.fits[i].collective);
    EXPECT_EQ(a.fits[i].world_size, b.fits[i].world_size);
    EXPECT_EQ(a.fits[i].dtype, b.fits[i].dtype);
    EXPECT_EQ(a.fits[i].latency_s, b.fits[i].latency_s);
    EXPECT_EQ(a.fits[i].seconds_per_byte, b.fits[i].seconds_per_byte);
    EXPECT_EQ(a.fits[i].max_relative_residual, b.fits[i].max_relative_residual);
    ASSERT_EQ(a.fits[i].samples.size(), b.fits[i].samples.size());
    for (size_t k = 0; k < a.fits[i].samples.size(); ++k) {
      EXPECT_EQ(a.fits[i].samples[k].bytes, b.fits[i].samples[k].bytes);
      EXPECT_EQ(a.fits[i].samples[k].seconds, b.fits[i].samples[k].seconds);
    }
  }
}

TEST(NetworkProfile, RoundTripsExactly) {
  NetworkProfile profile;
  profile.name = "veth: 1 gbit";
  profile.backend = "gloo";
  profile.bandwidth_bytes_per_s = 1.25e8;
  profile.latency_s = 5e-5;
  profile.fits = {
      {CollectiveKind::all_reduce, 2, 8.1e-5, 1.7e-8, 0.06, {{4, 8.2e-5}, {1000000, 0.01}, {268435456, 4.56789}}},
      {CollectiveKind::all_gather, 4, 1.0 / 3, 2.0 / 7, 0, {}},
      {CollectiveKind::broadcast, 0, 0, 1e-9, 0, {}}};
  expectSameProfile(parseProfile(profileYaml(profile), "p.yaml"), profile);
  profile.fits.push_back(profile.fits[0]);
  profile.fits.back().dtype = DataType::float16;
  profile.fits.push_back(profile.fits[1]);
  profile.fits.back().dtype = DataType::bfloat16;
  const auto text = profileYaml(profile);
  EXPECT_NE(text.find("  - collective: all-reduce\n    dtype: float16\n"), std::string::npos) << text;
  expectSameProfile(parseProfile(text, "p.yaml"), profile);
  const auto link = linkProfile(1.25e9, 2e-5);
  EXPECT_EQ(link.name, "10gbit/20us");
  expectSameProfile(parseProfile(profileYaml(link), "q.yaml"), link);
}

TEST(NetworkProfile, HandWrittenLinkWithOverrides) {
  const auto profile = parseProfile(
      "bandwidth: 10gbit\nlatency: 20us\ncollectives:\n  all-gather:\n    latency: 40us\n"
      "  broadcast: {bandwidth: 1gbit, latency: 1ms}\n",
      "/some/dir/lab.yaml");
  EXPECT_EQ(profile.name, "lab");
  EXPECT_DOUBLE_EQ(profile.bandwidth_bytes_per_s, 1.25e9);
  EXPECT_DOUBLE_EQ(profile.latency_s, 2e-5);
  ASSERT_EQ(profile.fits.size(), 2u);
  EXPECT_EQ(profile.fits[0].collective, CollectiveKind::all_gather);
  EXPECT_EQ(profile.fits[0].world_size, 0);
  EXPECT_DOUBLE_EQ(profile.fits[0].latency_s, 4e-5);
  EXPECT_DOUBLE_EQ(profile.fits[0].seconds_per_byte, 1 / 1.25e9);
  EXPECT_DOUBLE_EQ(profile.fits[1].seconds_per_byte, 1 / 1.25e8);
  EXPECT_DOUBLE_EQ(profile.fits[1].latency_s, 1e-3);
}

TEST(NetworkProfile, AFitWithoutDtypeIsFloat32AndEachDtypeIsAFitOfItsOwn) {
  const auto profile = parseProfile(
      "fits:\n"
      "  - {collective: all-reduce, world_size: 4, latency_s: 1e-4, seconds_per_byte: 2.5e-9}\n"
      "  - {collective: all-reduce, dtype: float16, world_size: 4, latency_s: 1e-4, seconds_per_byte: 1.4e-8}\n"
      "  - {collective: all-reduce, dtype: bfloat16, world_size: 4, latency_s: 1e-4, seconds_per_byte: 3e-9}\n"
      "  - {collective: all-gather, dtype: uint8, world_size: 4, latency_s: 1e-4, seconds_per_byte: 1e-9}\n",
      "n.yaml");
  ASSERT_EQ(profile.fits.size(), 4u);
  EXPECT_EQ(profile.fits[0].dtype, DataType::float32);
  EXPECT_EQ(profile.fits[1].dtype, DataType::float16);
  EXPECT_EQ(profile.fits[2].dtype, DataType::bfloat16);
  EXPECT_EQ(profile.fits[3].dtype, DataType::uint8);
  // A hand-written override has none of its own: it is written as float32 and reads back so.
  const auto overridden =
      parseProfile("bandwidth: 1gbit\nlatency: 1us\ncollectives:\n  all-reduce: {latency: 2us}\n", "o.yaml");
  expectSameProfile(parseProfile(profileYaml(overridden), "o.yaml"), overridden);
}

TEST(NetworkProfile, AnUnknownOrRepeatedDtypeIsOneLineNamingTheKey) {
  const std::string fit = "  - {collective: all-reduce, world_size: 2, latency_s: 0, seconds_per_byte: 0";
  expectMessageHas(
      userErrorOf([&] { parseProfile("fits:\n" + fit + "}\n" + fit + "}\n" + fit + ", dtype: float8}\n", "n.yaml"); }),
      {"n.yaml: fits[2].dtype: 'float8' is not a data type; expected float32, float16, bfloat16,"});
  expectMessageHas(userErrorOf([&] { parseProfile("fits:\n" + fit + ", dtype: [float16]}\n", "n.yaml"); }),
                   {"n.yaml", "fits[0].dtype", "a single value"});
  expectMessageHas(userErrorOf([&] {
                     parseProfile("fits:\n" + fit + ", dtype: float16}\n" + fit + ", dtype: float16}\n", "n.yaml");
                   }),
                   {"n.yaml", "fits", "all-reduce at world_size 2 in float16", "twice"});
  // float32 written out and left out are the same fit.
  expectMessageHas(userErrorOf([&] { parseProfile("fits:\n" + fit + ", dtype: float32}\n" + fit + "}\n", "n.yaml"); }),
                   {"all-reduce at world_size 2 in float32", "twice"});
  EXPECT_EQ(parseProfile("fits:\n" + fit + ", dtype: float16}\n" + fit + ", dtype: bfloat16}\n" + fit + "}\n", "n.yaml")
                .fits.size(),
            3u);
}

// Each error: one line with the file, the key and what is wrong with it.
TEST(NetworkProfile, EveryParseErrorNamesFileAndKey) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"bandwidth: [1gbit\n", {"n.yaml", "not valid YAML", "line"}},
      {"- 1\n- 2\n", {"n.yaml", "expected a mapping"}},
      {"", {"n.yaml", "expected a mapping"}},
      {"bandwidth: 1gbit\nlatency: 1us\nspeed: 3\n", {"n.yaml", "speed", "unknown key", "bandwidth"}},
      {"bandwidth: 10gbps\nlatency: 1us\n", {"n.yaml", "bandwidth", "10gbps", "unknown unit"}},
      {"bandwidth: 1gbit\nlatency: -20us\n", {"n.yaml", "latency", "-20us", "from 0s to 1000s"}},
      {"bandwidth: 1gbit\nlatency: 20us\nbandwidth: 1bit\n", {"n.yaml", "bandwidth", "given twice"}},
      {"bandwidth: 1gbit\n", {"n.yaml", "latency", "missing"}},
      {"bandwidth: {a: 1}\nlatency: 1us\n", {"n.yaml", "bandwidth", "a single value"}},
      {"name: x\n", {"n.yaml", "no link and no fits"}},
      {"fits: 3\n", {"n.yaml", "fits", "a list"}},
      {"fits:\n  - collective: reduce\n    world_size: 2\n    latency_s: 0\n    seconds_per_byte: 0\n",
       {"n.yaml", "fits[0].collective", "'reduce'", "all-reduce, all-gather or broadcast"}},
      {"fits:\n  - collective: all-reduce\n    world_size: two\n    latency_s: 0\n    seconds_per_byte: 0\n",
       {"n.yaml", "fits[0].world_size", "'two'", "whole number"}},
      {"fits:\n  - collective: all-reduce\n    world_size: 0x2\n    latency_s: 0\n    seconds_per_byte: 0\n",
       {"n.yaml", "fits[0].world_size", "'0x2'", "whole number"}},
      {"fits:\n  - collective: all-reduce\n    world_size: 2\n    latency_s: -1\n    seconds_per_byte: 0\n",
       {"n.yaml", "fits[0].latency_s", "'-1'", "from 0 to 1000"}},
      {"fits:\n  - collective: all-reduce\n    world_size: 2\n    latency_s: 0x1p-10\n    seconds_per_byte: 0\n",
       {"n.yaml", "fits[0].latency_s", "'0x1p-10'", "from 0 to 1000"}},
      {"fits:\n  - collective: all-reduce\n    world_size: 2\n    latency_s: 0\n    seconds_per_byte: 1e300\n",
       {"n.yaml", "fits[0].seconds_per_byte", "'1e300'", "from 0 to 8"}},
      {"fits:\n  - collective: all-reduce\n    world_size: 2\n    latency_s: 0\n",
       {"fits[0].seconds_per_byte", "missing"}},
      {"fits:\n  - {collective: all-reduce, world_size: 2, latency_s: 0, seconds_per_byte: 0, slope: 1}\n",
       {"fits[0].slope", "unknown key", "seconds_per_byte"}},
      {"fits:\n  - {collective: broadcast, world_size: 2, latency_s: 0, seconds_per_byte: 0}\n"
       "  - {collective: broadcast, world_size: 2, latency_s: 1, seconds_per_byte: 0}\n",
       {"n.yaml", "fits", "broadcast at world_size 2", "twice"}},
      {"collectives:\n  all-reduce: {latency: 1us}\n", {"collectives.all-reduce.bandwidth", "missing"}},
      {"fits:\n  - {collective: all-reduce, world_size: 2, latency_s: 0, seconds_per_byte: 0, samples: [[8, 1], [4, "
       "2]]}\n",
       {"n.yaml", "fits[0].samples[1]", "grow"}},
      {"fits:\n  - {collective: all-reduce, world_size: 2, latency_s: 0, seconds_per_byte: 0, samples: [[0, 1], "
       "[1e-300, 1e6]]}\n",
       {"n.yaml", "fits[0].samples[1][0]", "'1e-300'", "whole bytes"}},
      {"fits:\n  - {collective: all-reduce, world_size: 2, latency_s: 0, seconds_per_byte: 0, samples: [[8, 0]]}\n",
       {"n.yaml", "fits[0].samples[0]", "above 0"}},
      {"fits:\n  - {collective: all-reduce, world_size: 2, latency_s: 0, seconds_per_byte: 0, samples: [8]}\n",
       {"n.yaml", "fits[0].samples[0]", "[bytes, seconds]"}},
      {"bandwidth: 1gbit\nlatency: 1us\ncollectives:\n  allgather: {latency: 1us}\n",
       {"n.yaml", "collectives.allgather", "unknown key", "all-gather"}},
      {"bandwidth: 1gbit\nlatency: 1us\ncollectives:\n  all-gather: {latency: 1 us s}\n",
       {"n.yaml", "collectives.all-gather.latency", "unknown unit"}},
  };
  for (const auto& [text, parts] : cases) {
    SCOPED_TRACE(text);
    expectMessageHas(userErrorOf([&] { parseProfile(text, "n.yaml"); }), parts);
  }
}

TEST(NetworkProfile, AYamlBombIsRefusedBeforeItIsRead) {
  // One fit of 100 samples aliased 1,000 times: 200,000 numbers in 12 KB.
  std::string bomb =
      "fits:\n  - &fit {collective: all-reduce, world_size: 2, latency_s: 0, seconds_per_byte: 0, samples: [";
  for (int k = 1; k <= 100; ++k) bomb += (k > 1 ? ", [" : "[") + std::to_string(4 * k) + ", 1]";
  bomb += "]}\n";
  for (int k = 0; k < 1000; ++k) bomb += "  - *fit\n";
  expectMessageHas(userErrorOf([&] { parseProfile(bomb, "n.yaml"); }),
                   {"n.yaml", "more than 10000 values once its YAML aliases are expanded"});
}

TEST(NetworkProfile, LoadsARealFileAndRefusesBadOnes) {
  testing::TempDir dir;
  const auto path = dir.file("network.yaml");
  std::ofstream(path) << "bandwidth: 1gbit\nlatency: 50us\n";
  EXPECT_EQ(loadProfile(path).name, "network");
  std::ofstream(path) << "bandwidth: 1gbit\nlatency: 50us\nfits: [{{\n";
  expectMessageHas(userErrorOf([&] { loadProfile(path); }), {path, "not valid YAML"});
  expectMessageHas(userErrorOf([&] { loadProfile(dir.file("missing.yaml")); }), {"missing.yaml"});
  expectMessageHas(userErrorOf([&] { loadProfile(dir.path().string()); }), {dir.path().string()});
  const auto fifo = dir.file("fifo.yaml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expectMessageHas(userErrorOf([&] { loadProfile(fifo); }), {"fifo.yaml"});
}

}  // namespace
}  // namespace gcrun::network
