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
#include "reducers/granularity.h"
#include "reducers/planned_bits.h"
#include "reducers/tensor_costs.h"
#include "tasks/task.h"

namespace gcrun::cli {
namespace {

// Beyond any model trained today by far; a size from a typo (task.width=1e9) is refused here.
constexpr double kMaxPlannedParameters = 1e15;
constexpr double kMaxPlannedTensors = 1e6;

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

// The names of the registry's entries whose spec has `field` set, for a refusal's "it plans ...".
template <class Spec, class Field>
std::string namesWith(const Registry<Spec>& registry, Field field) {
  std::string names;
  for (const auto* entry : registry.entries()) {
    if (entry->factory.*field) names += (names.empty() ? "" : ", ") + entry->name;
  }
  return names;
}

// Refuses a model whose size alone is absurd, before any of its shapes is made: a size from a typo
// (task.width=1e9) never reaches a tensor's shape.
void checkPlannableSize(const tasks::ModelSize& size) {
  double tensors = 0;
  for (const auto& group : size.parameters) tensors += group.count;
  const double parameters = size.parameterCount();
  if (!(parameters <= kMaxPlannedParameters) || !(tensors <= kMaxPlannedTensors)) {
    throw UserError(
        fmt::format("the model of these settings has {:.3g} parameters in {:.3g} tensors; a plan takes "
                    "at most 1e15 parameters and 1e6 tensors",
                    parameters, tensors));
  }
}

// The task's model as its own code makes it, shape only (TaskSpec::plan), after its size bounded it.
PlannedModel plannedModelOf(const experiments::ResolvedExperiment& experiment,
                            std::vector<tasks::NamedShape>& parameters) {
  const auto& config = experiment.config;
  if (!experiment.task.size || !experiment.task.plan) {
    throw UserError("task.name: gcrun plan cannot build '" + config.task.name + "''s model shape only; it plans " +
                    namesWith(tasks::taskRegistry(), &tasks::TaskSpec::plan));
  }
  checkPlannableSize(experiment.task.size(config.task, config.training.batch_size));
  auto plan = experiment.task.plan(config.task, config.training.batch_size);
  PlannedModel model{0, config.task.name};
  for (const auto& parameter : plan.parameters) model.parameters += double(c10::multiply_integers(parameter.shape));
  if (plan.transformer) {
    model.non_embedding_parameters = plan.transformer->non_embedding_parameters;
    model.layers = plan.transformer->layers;
    model.context = plan.transformer->context;
    model.width = plan.transformer->width;
    model.batch_size = config.training.batch_size;
  }
  parameters = std::move(plan.parameters);
  return model;
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

// Whether the strategy's sends are the reducer's messages (then its codec runs on them).
bool throughReducer(const experiments::SyncPlan& sync) {
  return sync.exchange == experiments::SyncPlan::Exchange::reducer;
}

// What one send of `shapes` holds, as the strategy exchanges it: the reducer's bits, or the
// parameters' float32 elements (an exact average of them).
double sendBits(const experiments::ResolvedExperiment& experiment, const experiments::SyncPlan& sync,
                const std::vector<std::vector<int64_t>>& shapes) {
  if (throughReducer(sync)) return bitsFor(experiment, shapes);
  double elements = 0;
  for (const auto& shape : shapes) elements += static_cast<double>(c10::multiply_integers(shape));
  return elements * 32;
}

// Every step: the gradients in the buckets the exact reducer all-reduces (ddpBuckets: DDP's, in
// backward order, float32, reducer.bucket_mb each after a smaller first), each ready when backward
// has produced its share of the elements (or, for a strategy that sends once backward is done,
// then).
void bucketMessages(const experiments::ResolvedExperiment& experiment, const experiments::SyncPlan& sync,
                    const std::vector<tasks::NamedShape>& parameters, planning::PlannedMethod& method) {
  std::vector<int64_t> tensor_bytes;
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& parameter : parameters) {
    tensor_bytes.push_back(c10::multiply_integers(parameter.shape) * static_cast<int64_t>(sizeof(float)));
    shapes.push_back(parameter.shape);
  }
  const double total = static_cast<double>(c10::sum_integers(tensor_bytes)) / sizeof(float);
  double done = 0;
  std::vector<int64_t> bucket_sizes;
  for (const auto& members : reducers::ddpBuckets(tensor_bytes, reducers::bucketBytes(experiment.config.reducer))) {
    std::vector<std::vector<int64_t>> bucket;
    int64_t elements = 0;
    for (size_t k : members) {
      bucket.push_back(shapes[k]);
      elements += tensor_bytes[k] / static_cast<int64_t>(sizeof(float));
    }
    done += static_cast<double>(elements);
    method.message_bits.push_back(sendBits(experiment, sync, bucket));
    if (throughReducer(sync)) method.message_elements.push_back(static_cast<double>(elements));
    method.ready.push_back(total > 0 && sync.during_backward ? done / total : 1.0);
    bucket_sizes.push_back(elements);
  }
  if (throughReducer(sync) && experiment.reducer.whole_step) {
    shareWholeStep(experiment, shapes, bucket_sizes, method);
  }
}

// Periodic: one message per fragment, each holding the parameters the strategy's own assignment
// gives it (SyncPlan::fragments; diloco's one fragment is the whole model).
void fragmentMessages(const experiments::ResolvedExperiment& experiment, const experiments::SyncPlan& sync,
                      const std::vector<tasks::NamedShape>& parameters, planning::PlannedMethod& method) {
  std::vector<std::vector<size_t>> fragments(1);
  if (sync.fragments) {
    std::vector<std::string> names;
    for (const auto& parameter : parameters) names.push_back(parameter.name);
    fragments = sync.fragments(names, method.fragments);
  } else {
    for (size_t i = 0; i < parameters.size(); ++i) fragments[0].push_back(i);
  }
  for (const auto& fragment : fragments) {
    std::vector<std::vector<int64_t>> shapes;
    double elements = 0;
    for (size_t i : fragment) {
      shapes.push_back(parameters[i].shape);
      elements += static_cast<double>(c10::multiply_integers(parameters[i].shape));
    }
    method.message_bits.push_back(sendBits(experiment, sync, shapes));
    if (throughReducer(sync)) method.message_elements.push_back(elements);
  }
}

// How the configuration's messages travel: the reducer's collective, in the type it sums.
void wireOf(const experiments::ResolvedExperiment& experiment, planning::PlannedMethod& method) {
  method.collective = experiment.reducer.collective.value_or(CollectiveKind::all_reduce);
  method.dtype = experiment.reducer.summed_in;
}

planning::PlannedMethod plannedMethodOf(const std::string& name, const experiments::ResolvedExperiment& experiment,
                                        const std::vector<tasks::NamedShape>& parameters) {
  const auto& config = experiment.config;
  if (!experiment.sync.plan || !experiment.sync.schedule) {
    throw UserError("sync.strategy: gcrun plan cannot model '" + config.sync.strategy + "' (it declares no plan); it " +
                    "plans " + namesWith(experiments::synchronizerRegistry(), &experiments::SynchronizerSpec::plan));
  }
  if (config.reducer.granularity != Granularity::layer) {
    throw UserError("reducer.granularity: gcrun plan sizes messages per tensor; set reducer.granularity=layer");
  }
  const SyncSchedule schedule = experiment.sync.schedule(config);
  const experiments::SyncPlan sync = experiment.sync.plan(config);
  planning::PlannedMethod method;
  method.configuration = name;
  method.strategy = config.sync.strategy;
  method.reducer = config.reducer.name;
  method.sync_every = schedule.every;
  method.fragments = schedule.fragments;
  method.delay = schedule.delay;
  method.periodic = schedule.periodic;
  if (throughReducer(sync)) wireOf(experiment, method);
  if (method.periodic) {
    fragmentMessages(experiment, sync, parameters, method);
  } else {
    bucketMessages(experiment, sync, parameters, method);
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
      std::vector<tasks::NamedShape> parameters;
      const auto model = plannedModelOf(experiment, parameters);
      if (planned.methods.empty()) planned.model = model;
      planned.methods.push_back(plannedMethodOf(configuration.name, experiment, parameters));
      planned.reducers.push_back(experiment.config.reducer);
    } catch (const UserError& e) {
      throw UserError("configuration '" + clipForMessage(configuration.name) + "': " + e.what());
    }
  }
  return planned;
}

}  // namespace gcrun::cli
