#pragma once

#include <string>
#include <vector>

#include "experiments/study/study.h"
#include "outputs/report/report.h"

namespace gcrun::experiments {

// A study's `predict:` for its report: the prediction table as a section, the headline's
// projected columns, and gcrun predict's own files (plots included) in DIR/predict. Runs without a
// step timeline are left out; a study none of whose runs has one writes no files and says so.
void addPrediction(const StudySpec::Prediction& prediction, const std::string& dir,
                   const std::vector<outputs::RunData>& runs, outputs::ReportOptions& report);

}  // namespace gcrun::experiments
