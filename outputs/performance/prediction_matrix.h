#pragma once

#include <optional>
#include <string>
#include <vector>

#include "outputs/performance/prediction.h"
#include "outputs/performance/quality_rule.h"
#include "outputs/report/plots.h"
#include "outputs/report/summary.h"

namespace gcrun::performance {

// The answer a reader wants first from a prediction: at each worker count and network, which
// method is fastest and by how much, against the comparison's full-precision baseline (exact).
struct MatrixCell {
  enum class Verdict {
    faster,         // `method` beats exact beyond the noise
    no_difference,  // the fastest method is within 1 ± noise of exact
    exact,          // exact beats every method beyond the noise; `method` is the runner-up
    only_exact,     // no method to compare with exact
    no_exact,       // no exact baseline: `method` is the fastest by predicted time
    no_run,         // nothing predicted here (runs predicted at their own worker counts)
    none_within,    // every method is outside the quality rule (exact, if within, is the answer)
  };
  Verdict verdict = Verdict::no_exact;
  std::string method;                                       // a run name (PredictionRow::run)
  std::optional<double> speedup_vs_exact, speedup_vs_fp16;  // the method's; fp16's only where it is not fp16
  // The fastest method the quality rule left out, where it is faster than the answer: noted
  // beside it ("powersgd-rank1: 7.99x, but 4.9 points lower").
  struct Outside {
    std::string method;
    std::optional<double> speedup_vs_exact;
    std::string why;
  };
  std::optional<Outside> outside = {};
  bool exact_outside = false;  // no_exact because exact is outside the rule (it did not reach the target)
};

// One comparison's matrix (PredictionRow::comparison).
struct PredictionMatrix {
  std::string runs;                            // its run names, "exact, fp16, powersgd-rank2"
  std::vector<int> workers;                    // the rows, in the order of the prediction
  std::vector<std::string> networks;           // the columns, in the order of the prediction
  std::vector<std::vector<MatrixCell>> cells;  // [worker][network]
};

// One matrix per comparison, in order of first appearance. A row is the exact baseline's own when
// it has a speedup over exact but no break-even against it (predictRuns); likewise for fp16. The
// fastest method has the largest speedup over exact among the methods `quality` lets be named
// (under a target rule: by predicted time to the target); the noise is its row's.
std::vector<PredictionMatrix> predictionMatrices(const std::vector<PredictionRow>& rows, const QualityRule& quality);

// "powersgd-rank2 1.9x (1.3x over fp16)", "no difference", "exact (next: fp16 0.8x)", "only exact",
// "rank2 1.3x over fp16 (no exact run)", "" (no_run); a method outside the quality rule that would
// have been faster follows: "powersgd-rank4 3.1x; powersgd-rank1: 7.99x, but 4.9 points lower".
std::string cellText(const MatrixCell& cell);

// The matrix as a table: a "workers" column, then one column per network.
outputs::TextTable matrixTable(const PredictionMatrix& matrix);

// What a cell means, for the line above the matrices.
extern const char kMatrixLegend[];

// The matrices as Markdown: the legend and the quality rule's sentence, then each matrix (headed
// by its runs when there are several). Empty without rows.
std::string matrixMarkdown(const std::vector<PredictionRow>& rows, const QualityRule& quality);

// The heat map of `matrix`: workers (y) x networks (x), each cell coloured by the fastest method's
// speedup over exact (exact's own runner-up's where exact is fastest) and labelled with its name
// and speedup. Named `name`.
outputs::Plot matrixHeatMap(const PredictionMatrix& matrix, const std::string& name);

// The heat maps of `rows`' matrices: "speedup-matrix", then "speedup-matrix-2", ...
std::vector<outputs::Plot> matrixHeatMaps(const std::vector<PredictionRow>& rows, const QualityRule& quality);

}  // namespace gcrun::performance
