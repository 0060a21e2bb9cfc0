#pragma once

#include <vector>

#include "experiments/study/study.h"
#include "outputs/report/report.h"
#include "outputs/study_directory.h"

namespace gcrun::experiments {

// A study's `predict:` for its report: the fastest-method matrices with their heat maps as its
// opening sections, the prediction table as a folded section linking predict.csv, the headline's
// projected columns, and gcrun predict's own files (plots included) in DIR/predict, all from one
// reading of each run's step timeline. Runs without one are left out; a study none of whose runs
// has one, or a completed run whose timeline is missing, writes no files and says so.
void addPrediction(const StudySpec::Prediction& prediction, const outputs::StudyDirectory& study,
                   const std::vector<outputs::RunData>& runs, outputs::ReportOptions& report);

}  // namespace gcrun::experiments
