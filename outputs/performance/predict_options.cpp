#include "outputs/performance/predict_options.h"

#include "hyperparams/base/decimal.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/sync_schedule.h"
#include "hyperparams/base/text.h"

namespace gcrun::performance {

double parseComputeMsPerBatch(const std::string& text, const std::string& what) {
  const auto value = parseDecimal(text);
  if (!value || !(*value > 0) || *value > kMaxComputeMsPerBatch) {
    throw UserError(what + ": '" + clipForMessage(text, 60) +
                    "' is not a compute time per batch; expected milliseconds above 0 up to 1000000");
  }
  return *value;
}

int parseWorkerCount(const std::string& text, const std::string& what) {
  const auto value = parseWholeNumber(text);
  if (!value || *value < 1 || *value > network::kMaxWorkers) {
    throw UserError(what + ": '" + clipForMessage(text, 60) +
                    "' is not a worker count; expected a whole number from 1 to " +
                    std::to_string(network::kMaxWorkers));
  }
  return static_cast<int>(*value);
}

int64_t parseSyncEvery(const std::string& text, const std::string& what) {
  const auto value = parseWholeNumber(text);
  if (!value || *value < 1 || *value > kMaxSyncEvery) {
    throw UserError(what + ": '" + clipForMessage(text, 60) +
                    "' is not a sync period; expected a whole number of steps from 1 to " +
                    std::to_string(kMaxSyncEvery));
  }
  return *value;
}

double parseTargetCu(const std::string& text, const std::string& what) {
  const auto value = parseDecimal(text);
  if (!value || !(*value > 0) || *value > 1) {
    throw UserError(what + ": '" + clipForMessage(text, 60) +
                    "' is not a compute utilisation; expected a share above 0 up to 1, e.g. 0.9");
  }
  return *value;
}

QualityTolerance parseQualityTolerance(const std::string& text, const std::string& what) {
  if (text == "off") return {false, kDefaultQualityTolerance};
  const auto value = parseDecimal(text);
  if (!value || *value < 0 || *value > 1) {
    throw UserError(what + ": '" + clipForMessage(text, 60) +
                    "' is not a quality tolerance; expected off or a share from 0 up to 1, e.g. 0.02 (2 points of "
                    "accuracy, 2% of a loss)");
  }
  return {true, *value};
}

bool parseComputeProfile(const std::string& text, const std::string& what) {
  if (text == "shared" || text == "own") return text == "shared";
  throw UserError(what + ": '" + clipForMessage(text, 60) + "' is not a compute profile; expected shared or own");
}

}  // namespace gcrun::performance
