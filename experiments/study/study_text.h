#pragma once

#include <string>

#include "experiments/study/study.h"

namespace gcrun::experiments {

// A study from its YAML text, as loadStudy reads a file's; `source` names it in messages ("file
// PATH"). For `gcrun plan --configurations`, which takes a study's configurations. Throws UserError.
StudySpec parseStudyText(const std::string& yaml, const std::string& source);

}  // namespace gcrun::experiments
