#include "outputs/run_status.h"

#include <array>
#include <utility>

namespace gcrun::outputs {
namespace {

constexpr std::array<std::pair<RunStatus, const char*>, 6> kRunStatusWords = {{{RunStatus::pending, "pending"},
                                                                               {RunStatus::running, "running"},
                                                                               {RunStatus::completed, "completed"},
                                                                               {RunStatus::interrupted, "interrupted"},
                                                                               {RunStatus::failed, "failed"},
                                                                               {RunStatus::refused, "refused"}}};

}  // namespace

const char* runStatusText(RunStatus status) {
  for (const auto& [value, word] : kRunStatusWords) {
    if (value == status) return word;
  }
  return "";  // not reached: kRunStatusWords names every status
}

std::optional<RunStatus> parseRunStatus(std::string_view text) {
  for (const auto& [value, word] : kRunStatusWords) {
    if (text == word) return value;
  }
  return std::nullopt;
}

bool endedUnfinished(RunStatus status) {
  return status == RunStatus::failed || status == RunStatus::interrupted || status == RunStatus::refused;
}

}  // namespace gcrun::outputs
