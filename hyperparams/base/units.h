#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gcrun::units {

// Bytes, bandwidths and durations as people write and read them, and the wall clock: every unit
// name, scale and spelling gcrun uses is here, so that network.yaml, the flags, the logs and the
// tables agree.

// Byte units: B, KB, MB, GB are powers of 1000, KiB, MiB, GiB powers of 1024, as written (no other
// case). Bandwidths add bit rates per second in any case: bit, kbit, mbit, gbit ("1Gbit").

// Bits as MiB (2^20 bytes), the unit gcrun prints what a worker sent in.
inline double mibOfBits(double bits) { return bits / 8 / (1 << 20); }
// "12.3 MiB": one decimal.
std::string mibText(double mib);

// A whole number of bytes with an optional byte unit ("4", "64KiB", "1GB"); nothing for anything
// else (a fraction, another unit, a value past int64_t).
std::optional<int64_t> parseByteCount(const std::string& text);
// `bytes` in the largest binary unit that divides it ("64KiB", "256MiB"), else plain ("4").
std::string byteCountText(int64_t bytes);

// What --bandwidth, --latency and network.yaml accept: far past any real network on both sides,
// yet bounded, so that no prediction on them overflows into inf or nan.
inline constexpr double kMinBandwidth = 1.0 / 8;   // bytes/s: 1 bit/s
inline constexpr double kMaxBandwidth = 1e15 / 8;  // bytes/s: 1 Pbit/s
inline constexpr double kMaxLatency = 1000;        // seconds
// The latency of links given by their bandwidth alone (gcrun predict, report --predict, a study's
// predict: section).
inline constexpr char kDefaultLatency[] = "20us";

// "10gbit" -> 1.25e9 bytes/s; throws UserError naming `what`, the value and what is accepted (an
// unknown unit such as "10gbps", a number that is no plain decimal, one outside kMinBandwidth to
// kMaxBandwidth).
double parseBandwidth(const std::string& text, const std::string& what);
// "20us" -> 2e-5 s (units s, ms, us, ns); throws UserError for an unknown unit or a value outside
// 0 to kMaxLatency.
double parseDuration(const std::string& text, const std::string& what);
// 1.25e9 -> "10gbit"; 2e-5 -> "20us": the shortest exact spelling, which the parsers read back as
// the same double, for files, names and tables.
std::string bandwidthText(double bytes_per_s);
std::string durationText(double seconds);

// For people, three significant digits: "9.41 gbit/s", "812 us", "1.2 ms".
std::string roughBandwidthText(double bytes_per_s);
std::string roughDurationText(double seconds);
// Elapsed and remaining time for people, whole seconds: "45s", "1m23s", "2h05m"; "?" for a
// negative or non-finite time.
std::string elapsedText(double seconds);

// The wall clock: seconds since the Unix epoch (for timestamps and ages; intervals within a
// process use std::chrono::steady_clock).
double unixSeconds();

}  // namespace gcrun::units
