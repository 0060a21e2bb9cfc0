#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hyperparams/base/collective.h"

namespace gcrun::network {

// A network as the step model sees it: a latency (alpha, seconds per message) and a per-byte cost
// (beta, seconds per byte) per collective, fitted by `gcrun bench network` at a world size, or
// written by hand as one bandwidth and latency for every collective (units:
// hyperparams/base/units.h).
//
// network.yaml, as gcrun writes it (a hand-written profile may give only `bandwidth` and `latency`,
// and may override them per collective under `collectives:`):
//   name: veth-1gbit             # optional; default: the file's stem
//   bandwidth: 1gbit             # units: bit, kbit, mbit, gbit (per second), or B, KB, MB, GB, KiB,
//   latency: 50us                #   MiB, GiB per second written as 125MB; latency: s, ms, us, ns
//   backend: gloo                # what it was measured with (informative)
//   fits:                        # from `gcrun bench network`; absent in a hand-written profile
//     - collective: all-reduce   # all-reduce, all-gather or broadcast
//       dtype: float16           # what it was timed in (optional; absent: float32)
//       world_size: 2
//       latency_s: 8.1e-05
//       seconds_per_byte: 1.7e-08
//       max_relative_residual: 0.06   # informative
// One fit per (collective, world_size, dtype). The link and the overrides under `collectives:` stand
// for every dtype.

// A collective a profile costs (every CollectiveKind but barrier): "all-reduce", "all-gather" or
// "broadcast"; throws UserError naming `what` and the accepted names.
CollectiveKind parseCollective(const std::string& name, const std::string& what);

// One measured size: the median time of a collective whose message is `bytes` per worker.
struct Sample {
  double bytes = 0;
  double seconds = 0;
};

struct Fit {
  CollectiveKind collective = CollectiveKind::all_reduce;
  int world_size = 2;
  double latency_s = 0;
  double seconds_per_byte = 0;
  double max_relative_residual = 0;
  // The medians the fit came from, by size (`samples: [[bytes, seconds], ...]`; none in a
  // hand-written profile). One line rarely fits a transport from 4 B to 256 MiB (copies, protocol
  // switches): at its own world size the step model interpolates these instead.
  std::vector<Sample> samples;
  // The elements it was timed in: a reduction's per-byte cost depends on them (Gloo's float16 sum
  // is far slower than its float32 one). A hand-written override's is unused: it costs any dtype.
  DataType dtype = DataType::float32;
};

struct NetworkProfile {
  std::string name;
  // The file it was read from (parseProfile's source), which messages about it name; empty for a
  // link given by flags.
  std::string source;
  std::string backend;
  // The hand-written link: both set (> 0 bandwidth, >= 0 latency), or neither (< 0) when only
  // fits are given.
  double bandwidth_bytes_per_s = -1;
  double latency_s = -1;
  // Hand-written per-collective overrides of the link, world_size 0 (any); fitted ones at theirs.
  std::vector<Fit> fits;
};

// Worker counts: a fit's world_size, and those a prediction is made at.
inline constexpr int kMaxWorkers = 1 << 20;

// A fit's samples: sizes in whole bytes from 0 to 1 PB, times above 0 up to 1e6 s.
inline constexpr double kMaxSampleBytes = 1e15;
inline constexpr double kMaxSampleSeconds = 1e6;

// Parses network.yaml's text; `source` (the file's name) prefixes every error, which names the
// key and what would be accepted. Refused: a profile with neither a link nor fits, a key given
// twice, a number that is no plain decimal or is outside its range (a fit's latency_s 0 to
// units::kMaxLatency, seconds_per_byte 0 to 1/units::kMinBandwidth, its samples as above), and a document of
// more than hyperparams::kMaxYamlValues values once its aliases are expanded.
NetworkProfile parseProfile(const std::string& yaml_text, const std::string& source);
// Reads and parses a file (bounded read); a missing or unreadable file is a UserError.
NetworkProfile loadProfile(const std::string& path);
// The YAML text gcrun writes; parseProfile(profileYaml(p)) == p.
std::string profileYaml(const NetworkProfile& profile);
// A profile of one hand-given link, named "<bandwidth>/<latency>" ("10gbit/20us").
NetworkProfile linkProfile(double bandwidth_bytes_per_s, double latency_s);

// Least squares fit of seconds = latency + seconds_per_byte * bytes over (bytes, seconds) points,
// weighted by 1/seconds^2 (relative error), so that small messages count as much as large ones;
// both coefficients are kept >= 0. max_relative_residual is max |fit - measured| / measured.
// Needs samples of two or more sizes, each with a positive time (std::invalid_argument otherwise).
Fit fitLatencyAndPerByte(CollectiveKind collective, int world_size, const std::vector<Sample>& samples);

}  // namespace gcrun::network
