#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hyperparams/config.h"

namespace torch::nn {
class Module;
}

namespace gcrun::tasks {

// A parameter as the model registers it.
struct NamedShape {
  std::string name;
  std::vector<int64_t> shape;
};

// What a transformer's FLOPs per token need (Kaplan et al. 2020): its blocks, context and width,
// and N, its parameters without the embedding tables.
struct TransformerFacts {
  int64_t layers = 0;
  int64_t context = 0;
  int64_t width = 0;
  double non_embedding_parameters = 0;
};

// A task's model as `gcrun plan` takes it (TaskSpec::plan): its parameters in the model's order,
// from the model's own code built shape only, and, for a transformer, its facts.
struct ModelPlan {
  std::vector<NamedShape> parameters;
  std::optional<TransformerFacts> transformer;
};

// The parameters of `model` in its order (a model built ShapeOnly, or one small at any setting).
std::vector<NamedShape> namedShapesOf(const torch::nn::Module& model);

// The vocabulary of a model whose data decides it: `settled` where the settings alone do (synthetic
// data; 0: they do not), else task.vocabulary_size, else `bound` (an upper bound, such as the 256
// byte ids of character-level data; 0: unknown until the data is read). A task.vocabulary_size
// other than a settled vocabulary is a UserError naming the key.
int64_t vocabularyOf(const TaskOptions& options, int64_t settled, int64_t bound);
// The same for a plan, which reads no data: a UserError naming task.vocabulary_size when unknown.
int64_t plannedVocabulary(const TaskOptions& options, int64_t settled, int64_t bound);
// Refuses, naming task.vocabulary_size and `source`, a given vocabulary other than `read`, the one
// the data read from `source` has: a plan of that value would not be this run's model.
void checkVocabularySize(const TaskOptions& options, int64_t read, const std::string& source);

}  // namespace gcrun::tasks
