#pragma once

#include <memory>
#include <string>

namespace spdlog {
class logger;
}

namespace gcrun::outputs {

// The logger of one worker: everything to <run_dir>/rank-<rank>.log; to the console, info and
// above on rank 0 and warnings and above on the others, each line prefixed with the rank.
// Installed as spdlog's default logger, so library code logs with spdlog::info() and friends.
std::shared_ptr<spdlog::logger> installRankLogger(const std::string& run_dir, int rank);

}  // namespace gcrun::outputs
