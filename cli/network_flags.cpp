#include "cli/network_flags.h"

#include <sstream>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"
#include "hyperparams/base/units.h"

namespace gcrun::cli {

std::vector<std::string> commaItems(const std::vector<std::string>& values, const std::string& flag) {
  std::vector<std::string> items;
  for (const auto& value : values) {
    std::stringstream stream(value + ",");
    for (std::string item; std::getline(stream, item, ',');) {
      if (item.empty()) throw UserError(flag + ": '" + clipForMessage(value, 60) + "' has an empty item");
      items.push_back(item);
    }
  }
  return items;
}

std::vector<network::NetworkProfile> networksFromFlags(const std::vector<std::string>& profiles,
                                                       const std::vector<std::string>& bandwidths,
                                                       const std::string& latency) {
  std::vector<network::NetworkProfile> networks;
  for (const auto& path : profiles) networks.push_back(network::loadProfile(path));
  auto links = commaItems(bandwidths, "--bandwidth");
  if (links.empty() && networks.empty()) links = {"1gbit", "10gbit", "100gbit"};
  const double seconds = units::parseDuration(latency, "--latency");
  for (const auto& bandwidth : links) {
    networks.push_back(network::linkProfile(units::parseBandwidth(bandwidth, "--bandwidth"), seconds));
  }
  return networks;
}

}  // namespace gcrun::cli
