// Bytes, bandwidths and durations as people write them, both ways, and the times people read.
#include "hyperparams/base/units.h"

#include <gtest/gtest.h>

#include "tests/support/user_error.h"

namespace gcrun::units {
namespace {

using testing::expectMessageHas;
using testing::userErrorOf;

TEST(Units, EveryBandwidthUnit) {
  EXPECT_DOUBLE_EQ(parseBandwidth("10gbit", "bw"), 1.25e9);
  EXPECT_DOUBLE_EQ(parseBandwidth("100mbit", "bw"), 12.5e6);
  EXPECT_DOUBLE_EQ(parseBandwidth("8kbit", "bw"), 1000);
  EXPECT_DOUBLE_EQ(parseBandwidth("800bit", "bw"), 100);
  EXPECT_DOUBLE_EQ(parseBandwidth("1Gbit", "bw"), 1.25e8);
  EXPECT_DOUBLE_EQ(parseBandwidth("125MB", "bw"), 1.25e8);
  EXPECT_DOUBLE_EQ(parseBandwidth("2GB", "bw"), 2e9);
  EXPECT_DOUBLE_EQ(parseBandwidth("3KB", "bw"), 3000);
  EXPECT_DOUBLE_EQ(parseBandwidth("7B", "bw"), 7);
  EXPECT_DOUBLE_EQ(parseBandwidth("1GiB", "bw"), 1073741824.0);
  EXPECT_DOUBLE_EQ(parseBandwidth("1.5MiB", "bw"), 1.5 * 1048576);
  EXPECT_DOUBLE_EQ(parseBandwidth("2KiB", "bw"), 2048);
}

TEST(Units, EveryDurationUnit) {
  EXPECT_DOUBLE_EQ(parseDuration("2s", "lat"), 2);
  EXPECT_DOUBLE_EQ(parseDuration("1.5ms", "lat"), 1.5e-3);
  EXPECT_DOUBLE_EQ(parseDuration("20us", "lat"), 2e-5);
  EXPECT_DOUBLE_EQ(parseDuration("500ns", "lat"), 5e-7);
  EXPECT_DOUBLE_EQ(parseDuration("0s", "lat"), 0);
}

TEST(Units, BadValuesNameWhatTheValueAndTheUnits) {
  expectMessageHas(userErrorOf([] { parseBandwidth("10gbps", "bandwidth"); }),
                   {"bandwidth", "10gbps", "unknown unit 'gbps'", "gbit", "MiB"});
  expectMessageHas(userErrorOf([] { parseBandwidth("10", "bandwidth"); }), {"bandwidth", "'10'", "no unit"});
  expectMessageHas(userErrorOf([] { parseBandwidth("0gbit", "bandwidth"); }),
                   {"bandwidth", "0gbit", "from 1bit to 1000000gbit"});
  expectMessageHas(userErrorOf([] { parseBandwidth("-1gbit", "bandwidth"); }), {"-1gbit", "from 1bit"});
  expectMessageHas(userErrorOf([] { parseBandwidth("1e-300bit", "bandwidth"); }), {"1e-300bit", "from 1bit"});
  expectMessageHas(userErrorOf([] { parseBandwidth("2000000gbit", "bandwidth"); }), {"2000000gbit", "1 Pbit/s"});
  expectMessageHas(userErrorOf([] { parseBandwidth("0x10gbit", "bandwidth"); }), {"'0x10gbit'", "unknown unit"});
  expectMessageHas(userErrorOf([] { parseBandwidth(" 1gbit", "bandwidth"); }), {"' 1gbit'", "is not a bandwidth"});
  expectMessageHas(userErrorOf([] { parseBandwidth("fast", "bandwidth"); }), {"'fast'", "is not a bandwidth"});
  expectMessageHas(userErrorOf([] { parseBandwidth("1mb", "bandwidth"); }), {"unknown unit 'mb'"});
  expectMessageHas(userErrorOf([] { parseDuration("-5us", "latency"); }), {"latency", "-5us", "from 0s to 1000s"});
  expectMessageHas(userErrorOf([] { parseDuration("1e308s", "latency"); }), {"1e308s", "from 0s to 1000s"});
  expectMessageHas(userErrorOf([] { parseDuration("inf s", "latency"); }), {"'inf s'", "is not a duration"});
  expectMessageHas(userErrorOf([] { parseDuration("5sec", "latency"); }), {"latency", "5sec", "s, ms, us, ns"});
  expectMessageHas(userErrorOf([] { parseDuration("nan", "latency"); }), {"'nan'", "is not a duration"});
}

TEST(Units, TextIsTheShortestExactSpelling) {
  EXPECT_EQ(bandwidthText(1.25e9), "10gbit");
  EXPECT_EQ(bandwidthText(1.25e8), "1gbit");
  EXPECT_EQ(bandwidthText(1.25e7), "100mbit");  // bits per second, though "12.5MB" is shorter
  EXPECT_EQ(bandwidthText(2.5e7), "200mbit");   // and though "25MB" is
  EXPECT_EQ(bandwidthText(1073741824.0), "1GiB");
  EXPECT_EQ(durationText(2e-5), "20us");
  EXPECT_EQ(durationText(1.5e-3), "1.5ms");
  EXPECT_EQ(durationText(0), "0s");
  for (const double value : {1.7e8, 123456789.123, 3.3e3 / 7})
    EXPECT_EQ(parseBandwidth(bandwidthText(value), "bw"), value);
  for (const double value : {1.7e2, 123.456789123, 3.3e-3 / 7})
    EXPECT_EQ(parseDuration(durationText(value), "lat"), value);
}

TEST(Units, ByteCountsAreWholeBytesInAByteUnit) {
  EXPECT_EQ(parseByteCount("4"), 4);
  EXPECT_EQ(parseByteCount("64KiB"), 65536);
  EXPECT_EQ(parseByteCount("1GB"), 1000000000);
  EXPECT_EQ(parseByteCount("3B"), 3);
  for (const char* bad : {"", "1.5MiB", "64kib", "1gbit", "lots", " 4", "9223372036854775807KiB"}) {
    EXPECT_FALSE(parseByteCount(bad).has_value()) << bad;
  }
  EXPECT_EQ(byteCountText(4), "4");
  EXPECT_EQ(byteCountText(65536), "64KiB");
  EXPECT_EQ(byteCountText(int64_t{3} << 30), "3GiB");
  EXPECT_EQ(byteCountText(1000), "1000");
}

TEST(Units, MibIsTwoToTheTwentyBytes) {
  EXPECT_EQ(mibOfBits(8.0 * (1 << 20)), 1);
  EXPECT_EQ(mibText(mibOfBits(12.3 * 8 * 1024 * 1024)), "12.3 MiB");
}

TEST(Units, ElapsedTime) {
  EXPECT_EQ(elapsedText(0), "0s");
  EXPECT_EQ(elapsedText(45.4), "45s");
  EXPECT_EQ(elapsedText(59.6), "1m00s");
  EXPECT_EQ(elapsedText(83), "1m23s");
  EXPECT_EQ(elapsedText(7500), "2h05m");
  EXPECT_EQ(elapsedText(-1), "?");
}

TEST(Units, RoughTextHasThreeSignificantDigits) {
  EXPECT_EQ(roughBandwidthText(9.4123e9 / 8), "9.41 gbit/s");
  EXPECT_EQ(roughBandwidthText(1e6 / 8), "1 mbit/s");
  EXPECT_EQ(roughDurationText(812.4e-6), "812 us");
  EXPECT_EQ(roughDurationText(1.234e-3), "1.23 ms");
}

TEST(Units, TheClockIsUnixTime) {
  EXPECT_GT(unixSeconds(), 1.7e9);  // after 2023
}

}  // namespace
}  // namespace gcrun::units
