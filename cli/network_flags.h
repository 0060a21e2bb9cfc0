#pragma once

#include <string>
#include <vector>

#include "outputs/network/network_profile.h"

namespace gcrun::cli {

// The items of comma-separated flag values ("2,16" or --workers 2 --workers 16). CLI11's own
// splitting drops empty items; "2,,16" is a typo to point out instead (UserError naming `flag`).
std::vector<std::string> commaItems(const std::vector<std::string>& values, const std::string& flag);

// The networks `gcrun predict` and `gcrun plan` cost on: each --network profile, then a link per
// --bandwidth item at --latency; 1, 10 and 100 Gbit/s when neither flag is given.
std::vector<network::NetworkProfile> networksFromFlags(const std::vector<std::string>& profiles,
                                                       const std::vector<std::string>& bandwidths,
                                                       const std::string& latency);

}  // namespace gcrun::cli
