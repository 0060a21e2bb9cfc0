#include "cli/plan_methods.h"

#include <yaml-cpp/yaml.h>

#include <c10/util/accumulate.h>
#include <fmt/format.h>

#include "experiments/setup/plan_resolution.h"
#include "experiments/study/study_text.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/sync_schedule.h"
#include "hyperparams/base/text.h"
#include "outputs/files/safe_files.h"
#include "reducers/planned_bits.h"
#include "reducers/tensor_costs.h"
#include "tasks/language_model.h"
#include "tasks/models/gpt.h"
#include "tasks/models/rnn_model.h"

namespace gcrun::cli {
namespace {

// Beyond any model trained today by far; a size from a typo (task.width=1e9) is refused here.
constexpr double kMaxPlannedParameters = 1e15;
constexpr double kMaxPlannedTensors = 1e6;
constexpr char kVocabularyFromData[] =
    "the vocabulary of real word-level data is decided by the data; give it with --vocabulary-size N";

struct PlanConfiguration {
  std::string name;
  std::vector<std::string> assignments;
};

// Every-step with exact, bf16 and PowerSGD rank 4; diloco and streaming-diloco at H with exact and
// each low-precision reducer gcrun has.
std::vector<PlanConfiguration> defaultGrid(int64_t sync_every) {
  std::vector<PlanConfiguration> grid = {
      {"every-step-exact", {"sync.strategy=every-step", "reducer.name=exact"}},
      {"every-step-bf16", {"sync.strategy=every-step", "reducer.name=bf16"}},
      {"every-step-powersgd-rank4", {"sync.strategy=every-step", "reducer.name=powersgd", "reducer.rank=4"}}};
  for (const std::string strategy : {"diloco", "streaming-diloco"}) {
    for (const std::string reducer : {"exact", "bf16", "fp8", "fp4", "int8"}) {
      grid.push_back(
          {strategy + "-" + reducer,
           {"sync.strategy=" + strategy, "sync.every=" + std::to_string(sync_every), "reducer.name=" + reducer}});
    }
  }
  return grid;
}

// --configurations: a YAML list of {name, set}, or a study file (its runs and its `set`).
std::vector<PlanConfiguration> configurationsFrom(const std::string& path, const std::string& preset) {
  const std::string text = files::readBoundedFile(path, files::kMaxConfigBytes);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UserError("--configurations " + path + ": invalid YAML at line " + std::to_string(e.mark.line + 1));
  }
  std::string study_yaml = text;
  if (root.IsSequence()) {
    YAML::Emitter study;
    study << YAML::BeginMap << YAML::Key << "base" << YAML::Value << preset << YAML::Key << "runs" << YAML::Value
          << root << YAML::EndMap;
    study_yaml = study.c_str();
  }
  const auto spec = experiments::parseStudyText(study_yaml, "--configurations " + path);
  if (!spec.grid.empty()) {
    throw UserError("--configurations " + path + ": a plan takes a study's runs, not its grid; list them as runs");
  }
  std::vector<PlanConfiguration> configurations;
  for (const auto& run : spec.runs) {
    auto assignments = spec.assignments;
    assignments.insert(assignments.end(), run.assignments.begin(), run.assignments.end());
    configurations.push_back({run.name, assignments});
  }
  return configurations;
}

// The model's tensor shapes in the order its size lists them, the vocabulary given where the data
// would decide it.
PlannedModel plannedModelOf(const experiments::ResolvedExperiment& experiment, const PlanRequest& request,
                            tasks::ModelSize& size) {
  const auto& config = experiment.config;
  if (!experiment.task.size) throw UserError("task.name: '" + config.task.name + "' does not say its model's size");
  size = experiment.task.size(config.task, config.training.batch_size);
  PlannedModel model{0, config.task.name};
  if (config.task.name == "language-model") {
    const auto s = tasks::languageModelSettings().read(config.task.settings);
    const double vocabulary =
        request.vocabulary > 0 ? double(request.vocabulary) : size.parameters.front().shape.front();
    if (vocabulary < 1) throw UserError(kVocabularyFromData);
    size = tasks::models::GptModel::size({int64_t(vocabulary), s.context, s.layers, s.heads, s.width, s.bias, 0});
    // Kaplan et al.'s N leaves out the embeddings (wte, wpe).
    model.non_embedding_parameters = size.parameterCount() - (vocabulary + double(s.context)) * double(s.width);
    model.layers = s.layers;
    model.context = s.context;
    model.width = s.width;
    model.batch_size = config.training.batch_size;
  } else if (config.task.name == "wikitext2" && !config.task.synthetic) {
    // wikiText2ModelSize counts a real corpus's vocabulary as empty until its files are read.
    if (request.vocabulary < 1) throw UserError(kVocabularyFromData);
    size = tasks::models::RnnModel::size(double(request.vocabulary));
  }
  model.parameters = size.parameterCount();
  double tensors = 0;
  for (const auto& group : size.parameters) tensors += group.count;
  if (!(model.parameters <= kMaxPlannedParameters) || !(tensors <= kMaxPlannedTensors)) {
    throw UserError(
        fmt::format("the model of these settings has {:.3g} parameters in {:.3g} tensors; a plan takes "
                    "at most 1e15 parameters and 1e6 tensors",
                    model.parameters, tensors));
  }
  return model;
}

std::vector<std::vector<int64_t>> plannedShapesOf(const tasks::ModelSize& size) {
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& group : size.parameters) {
    std::vector<int64_t> shape;
    for (double side : group.shape) shape.push_back(static_cast<int64_t>(side));
    for (double i = 0; i < group.count; ++i) shapes.push_back(shape);
  }
  return shapes;
}

// What the configuration's reducer sends for `shapes`, from its own accounting.
double bitsFor(const experiments::ResolvedExperiment& experiment, const std::vector<std::vector<int64_t>>& shapes) {
  const auto bits = reducers::plannedBits(experiment.config.reducer.name, experiment.config.reducer, shapes);
  if (!bits) {
    throw UserError("reducer.name: gcrun plan cannot size '" + experiment.config.reducer.name +
                    "''s messages (its spec does not say what it sends); it plans " + reducers::plannableReducers());
  }
  return static_cast<double>(*bits);
}

// A whole_step reducer's bits are no sum over buckets (global-topk's k of all the elements, a
// message packed as a whole): the run reduces the step's tensors in one call, so they are sized at
// once, and the bits shared between the buckets by their elements, as lastCosts() shares a message.
void shareWholeStep(const experiments::ResolvedExperiment& experiment, const std::vector<std::vector<int64_t>>& shapes,
                    const std::vector<int64_t>& bucket_elements, planning::PlannedMethod& method) {
  const auto step_bits = static_cast<uint64_t>(bitsFor(experiment, shapes));
  method.message_bits.clear();
  for (uint64_t bits : reducers::splitInProportion(step_bits, bucket_elements)) {
    method.message_bits.push_back(static_cast<double>(bits));
  }
}

// Every step: the gradients in backward order (the reverse of the model's) in buckets of
// reducer.bucket_mb float32 MiB, each ready when backward has produced its share of the elements.
void bucketMessages(const experiments::ResolvedExperiment& experiment, const std::vector<std::vector<int64_t>>& shapes,
                    planning::PlannedMethod& method) {
  const double bucket_elements = experiment.config.reducer.bucket_mb * 1024 * 1024 / sizeof(float);
  double total = 0, done = 0, in_bucket = 0;
  for (const auto& shape : shapes) total += static_cast<double>(c10::multiply_integers(shape));
  std::vector<std::vector<int64_t>> bucket;
  std::vector<int64_t> bucket_sizes;
  for (auto it = shapes.rbegin(); it != shapes.rend(); ++it) {
    bucket.push_back(*it);
    in_bucket += static_cast<double>(c10::multiply_integers(*it));
    if (in_bucket < bucket_elements && std::next(it) != shapes.rend()) continue;
    done += in_bucket;
    method.message_bits.push_back(bitsFor(experiment, bucket));
    method.message_elements.push_back(in_bucket);
    method.ready.push_back(total > 0 ? done / total : 1.0);
    bucket_sizes.push_back(static_cast<int64_t>(in_bucket));
    bucket.clear();
    in_bucket = 0;
  }
  if (experiment.reducer.whole_step) shareWholeStep(experiment, shapes, bucket_sizes, method);
}

// Periodic: fragment p of F holds tensors p, p + F, p + 2F, ... (streaming-diloco strides the
// model's modules; diloco's one fragment is the whole model).
void fragmentMessages(const experiments::ResolvedExperiment& experiment,
                      const std::vector<std::vector<int64_t>>& shapes, planning::PlannedMethod& method) {
  if (static_cast<int64_t>(shapes.size()) < method.fragments) {
    throw UserError("sync.fragments = " + std::to_string(method.fragments) + ": at most the model's " +
                    std::to_string(shapes.size()) + " tensors");
  }
  for (int64_t p = 0; p < method.fragments; ++p) {
    std::vector<std::vector<int64_t>> fragment;
    double elements = 0;
    for (size_t i = static_cast<size_t>(p); i < shapes.size(); i += static_cast<size_t>(method.fragments)) {
      fragment.push_back(shapes[i]);
      elements += static_cast<double>(c10::multiply_integers(shapes[i]));
    }
    method.message_bits.push_back(bitsFor(experiment, fragment));
    method.message_elements.push_back(elements);
  }
}

// How the configuration's messages travel: the reducer's collective, in the type it sums.
void wireOf(const experiments::ResolvedExperiment& experiment, planning::PlannedMethod& method) {
  method.collective = experiment.reducer.collective.value_or(CollectiveKind::all_reduce);
  method.dtype = experiment.reducer.summed_in;
}

planning::PlannedMethod plannedMethodOf(const std::string& name, const experiments::ResolvedExperiment& experiment,
                                        const std::vector<std::vector<int64_t>>& shapes) {
  const auto& config = experiment.config;
  const SyncSchedule schedule = experiment.sync.schedule ? experiment.sync.schedule(config) : everyStepSchedule();
  if (config.sync.strategy != "every-step" && config.sync.strategy != "diloco" &&
      config.sync.strategy != "streaming-diloco") {
    throw UserError("sync.strategy: gcrun plan models every-step, diloco and streaming-diloco, not '" +
                    config.sync.strategy + "'");
  }
  if (config.reducer.granularity != Granularity::layer) {
    throw UserError("reducer.granularity: gcrun plan sizes messages per tensor; set reducer.granularity=layer");
  }
  planning::PlannedMethod method{
      name,           config.sync.strategy, config.reducer.name, schedule.every, schedule.fragments,
      schedule.delay, schedule.periodic};
  wireOf(experiment, method);
  if (method.periodic) {
    fragmentMessages(experiment, shapes, method);
  } else {
    bucketMessages(experiment, shapes, method);
  }
  return method;
}

}  // namespace

PlannedConfigurations planConfigurations(const PlanRequest& request) {
  const auto configurations = request.configurations_file.empty()
                                  ? defaultGrid(request.sync_every)
                                  : configurationsFrom(request.configurations_file, request.preset);
  PlannedConfigurations planned;
  for (const auto& configuration : configurations) {
    auto assignments = request.assignments;
    assignments.insert(assignments.end(), configuration.assignments.begin(), configuration.assignments.end());
    try {
      const auto experiment =
          experiments::resolveForPlan(experiments::layeredConfig(request.preset, request.config_file, assignments));
      tasks::ModelSize size;
      const auto model = plannedModelOf(experiment, request, size);
      if (planned.methods.empty()) planned.model = model;
      planned.methods.push_back(plannedMethodOf(configuration.name, experiment, plannedShapesOf(size)));
      planned.reducers.push_back(experiment.config.reducer);
    } catch (const UserError& e) {
      throw UserError("configuration '" + clipForMessage(configuration.name) + "': " + e.what());
    }
  }
  return planned;
}

}  // namespace gcrun::cli
