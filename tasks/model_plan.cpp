#include "tasks/model_plan.h"

#include <torch/nn/module.h>

#include "hyperparams/base/errors.h"

namespace gcrun::tasks {

std::vector<NamedShape> namedShapesOf(const torch::nn::Module& model) {
  std::vector<NamedShape> shapes;
  for (const auto& item : model.named_parameters()) shapes.push_back({item.key(), item.value().sizes().vec()});
  return shapes;
}

int64_t vocabularyOf(const TaskOptions& options, int64_t settled, int64_t bound) {
  const int64_t given = options.vocabulary_size;
  if (settled > 0 && given > 0 && given != settled) {
    throw UserError("task.vocabulary_size = " + std::to_string(given) + ": this data's vocabulary is " +
                    std::to_string(settled) + "; give that or 0");
  }
  if (settled > 0) return settled;
  return given > 0 ? given : bound;
}

int64_t plannedVocabulary(const TaskOptions& options, int64_t settled, int64_t bound) {
  const int64_t vocabulary = vocabularyOf(options, settled, bound);
  if (vocabulary < 1) {
    throw UserError(
        "task.vocabulary_size: the vocabulary of real word-level data is decided by the data, which a plan does "
        "not read; give it (--set task.vocabulary_size=N)");
  }
  return vocabulary;
}

void checkVocabularySize(const TaskOptions& options, int64_t read, const std::string& source) {
  if (options.vocabulary_size > 0 && options.vocabulary_size != read) {
    throw UserError("task.vocabulary_size = " + std::to_string(options.vocabulary_size) + ": the data of " + source +
                    " has a vocabulary of " + std::to_string(read) + "; give that or 0 (the key sizes plans)");
  }
}

}  // namespace gcrun::tasks
