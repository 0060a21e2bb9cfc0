#pragma once

#include <optional>
#include <string_view>

namespace gcrun::outputs {

// How a run stands: run.json's "status" from the run's start to its end, and study.json's for each
// run of a study. Written and read only through runStatusText and parseRunStatus, so that every
// file spells each the same way.
enum class RunStatus {
  pending,      // a study's run that has not started (study.json only; no run.json says it)
  running,      // from the start until the run ends
  completed,    // trained to its end
  interrupted,  // stopped by a signal after a checkpoint
  failed,       // training threw; the record's `error` says what
  refused,      // bad input stopped it before training; `error` says why
};

// The word the files hold: "pending", "running", "completed", "interrupted", "failed", "refused".
const char* runStatusText(RunStatus status);

// The status `text` is the word of; nothing for any other text (a file gcrun did not write).
std::optional<RunStatus> parseRunStatus(std::string_view text);

// Whether the run ended without completing: failed, interrupted or refused.
bool endedUnfinished(RunStatus status);

}  // namespace gcrun::outputs
