#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reducers/comm/communicator.h"

namespace gcrun::comm {

// Named byte strings that every rank must hold alike: a worker's resolved settings, a checkpoint's
// entries that are the same on every rank. A value may be any bytes (a tensor's, or a digest of
// them); its name is what a mismatch names.
using NamedValues = std::vector<std::pair<std::string, std::string>>;

// Every rank of `comm` calls it with its own list, before the first collective that depends on
// it. The ranks first exchange one SHA-1 of the whole list, of the same size on every rank
// whatever the lists hold, so that disagreeing ranks never reach a collective of mismatched sizes
// (which Gloo answers with an abort). Only on a mismatch do they exchange their counts, one digest
// per entry, then the first differing entry's name and value (clipped). Returns "" when every rank
// holds the same names with the same values in the same order; otherwise one line, the same on
// every rank, naming `what`, the first differing entry and rank 0's and the first other rank's
// value. Cost: each value is hashed once (SHA-1 in memory); three small collectives more on a mismatch.
std::string disagreement(Communicator& comm, const NamedValues& values, const std::string& what);

// As disagreement(), throwing its line as a UserError (exit 2) on every rank when not empty.
void agreeOn(Communicator& comm, const NamedValues& values, const std::string& what);

// A problem one rank found, as every rank learns it.
struct RankProblem {
  int rank = 0;
  std::string problem;  // at most kMaxSharedProblemBytes of it
};
inline constexpr size_t kMaxSharedProblemBytes = 4096;

// Every rank passes its own problem ("" when it has none); every rank gets the lowest failing
// rank's, or nothing when no rank failed: so that a rank that stops because another one failed
// can say why. An all-gather of one number, and a broadcast of the message when one failed.
std::optional<RankProblem> firstProblem(Communicator& comm, const std::string& problem);

}  // namespace gcrun::comm
