#include "hyperparams/config_keys.h"

#include "hyperparams/yaml_values.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>

namespace gcrun::hyperparams {
namespace {

using yaml_values::parse;
using yaml_values::toNode;

// `access` is a generic lambda returning a reference to the field, so the same lambda serves the
// setter (mutable config) and the getter (const config).
template <class T, class Access>
KeySpec field(std::string key, Rule<T> rule, Access access, std::string help) {
  static_assert(std::is_same_v<decltype(access(std::declval<ExperimentConfig&>())), T&>,
                "the rule's value type must be the field's type");
  KeySpec spec{std::move(key), rule.accepted, std::move(help), nullptr, nullptr, nullptr};
  spec.set = [rule, access](ExperimentConfig& config, const YAML::Node& node) {
    T value{};
    if (node.IsNull() && rule.if_null) {
      value = *rule.if_null;
    } else if (!parse(node, value)) {
      return false;
    }
    if (rule.ok && !rule.ok(value)) return false;
    access(config) = std::move(value);
    return true;
  };
  spec.get = [access](const ExperimentConfig& config) { return toNode(access(config)); };
  spec.choices = rule.choices;
  return spec;
}

Rule<std::optional<double>> nullOr(const Rule<double>& rule) {
  auto ok = rule.ok;
  return {"null or " + rule.accepted, [ok](const std::optional<double>& v) { return !v || ok(*v); }, {}};
}

// A rule whose value also accepts null, standing for `value`; `meaning` says what both stand for.
template <class T>
Rule<T> orNull(Rule<T> rule, T value, const std::string& meaning) {
  rule.accepted += " or null (" + meaning + ")";
  rule.if_null = std::move(value);
  return rule;
}

template <class E>
Rule<E> oneOfEnum() {
  return {oneOf(enumNames<E>()).accepted, nullptr, {}, enumNames<E>()};
}

Rule<std::vector<double>> epochList() {
  auto ok = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double e) { return e >= 0.0; }) && std::is_sorted(v.begin(), v.end());
  };
  return {"a list of numbers >= 0 in non-decreasing order ([] or null: none)", ok, std::vector<double>()};
}

Rule<std::vector<std::string>> nameList() {
  auto ok = [](const std::vector<std::string>& v) {
    return !v.empty() && std::none_of(v.begin(), v.end(), [](const std::string& s) { return s.empty(); });
  };
  return {"a non-empty list of non-empty names (one name is a one-element list)", ok, {}};
}

Rule<std::string> stepWindowOrOff() {
  auto ok = [](const std::string& v) { return v.empty() || parseStepWindow(v).has_value(); };
  return {"\"A-B\" (the 1-based steps A to B, 1 <= A <= B), \"N\" (step N alone) or \"\" (off)", ok, std::string()};
}

std::vector<KeySpec> makeKeyTable() {
  // clang-format off
  return {
      field("description", text(),
            [](auto& c) -> auto& { return c.description; },
            "A one-line summary of the experiment; presets say what they reproduce."),
      field("seed", integerAtLeast(0),
            [](auto& c) -> auto& { return c.seed; },
            "Random seed of the model initialisation and the data order."),
      field("device", oneOfEnum<Device>(),
            [](auto& c) -> auto& { return c.device; },
            "The device the workers train on."),
      field("task.name", name(),
            [](auto& c) -> auto& { return c.task.name; },
            "The task (dataset, model and loss) from the task registry."),
      field("task.architecture", name(),
            [](auto& c) -> auto& { return c.task.architecture; },
            "The model architecture; which names exist depends on the task."),
      field("task.data_dir", text(),
            [](auto& c) -> auto& { return c.task.data_dir; },
            "Directory of the dataset files; empty: the task's default location."),
      field("task.synthetic", boolean(),
            [](auto& c) -> auto& { return c.task.synthetic; },
            "Train on random data of the real shapes (smoke runs, benchmarks)."),
      field("task.synthetic_samples", integerAtLeast(0, " (0: the real data set's size)"),
            [](auto& c) -> auto& { return c.task.synthetic_samples; },
            "Training samples (tokens for language models) of the synthetic data."),
      field("task.test_batch_size", integerAtLeast(1),
            [](auto& c) -> auto& { return c.task.test_batch_size; },
            "Largest batch of the evaluation passes; on the CPU they use at most 32 (faster per sample)."),
      field("task.vocabulary_size", integerAtLeast(0, " (0: from the data)"),
            [](auto& c) -> auto& { return c.task.vocabulary_size; },
            "The language model's vocabulary for `gcrun plan` where the data decides it; a run refuses another."),
      field("training.epochs", integerAtLeast(1),
            [](auto& c) -> auto& { return c.training.epochs; },
            "Passes over the training data."),
      field("training.max_steps", integerAtLeast(0, " (0: no limit)"),
            [](auto& c) -> auto& { return c.training.max_steps; },
            "Stop after this many optimizer steps; the run still evaluates at its end."),
      field("training.batch_size", integerAtLeast(1),
            [](auto& c) -> auto& { return c.training.batch_size; },
            "Training batch size per worker, as in the reference."),
      field("optimizer.name", name(),
            [](auto& c) -> auto& { return c.optimizer.name; },
            "The optimizer from the optimizer registry: sgd (the reference's) or adamw (torch 1.13's)."),
      field("optimizer.learning_rate", numberAbove(0),
            [](auto& c) -> auto& { return c.optimizer.learning_rate; },
            "Base learning rate (before scaling and warm-up)."),
      field("optimizer.conv_learning_rate", nullOr(numberAbove(0)),
            [](auto& c) -> auto& { return c.optimizer.conv_learning_rate; },
            "Learning rate of the conv weights (names with 'conv' and 'weight'); null: learning_rate."),
      field("optimizer.momentum", fraction(),
            [](auto& c) -> auto& { return c.optimizer.momentum; },
            "Momentum coefficient."),
      field("optimizer.momentum_type", oneOfEnum<MomentumType>(),
            [](auto& c) -> auto& { return c.optimizer.momentum_type; },
            "Momentum update; the reference's nesterov steps along g + m."),
      field("optimizer.weight_decay", numberAtLeast(0),
            [](auto& c) -> auto& { return c.optimizer.weight_decay; },
            "Weight decay of the conv and other groups."),
      field("optimizer.weight_decay_conv", nullOr(numberAtLeast(0)),
            [](auto& c) -> auto& { return c.optimizer.weight_decay_conv; },
            "Weight decay of the conv weights; null: weight_decay."),
      field("optimizer.weight_decay_other", nullOr(numberAtLeast(0)),
            [](auto& c) -> auto& { return c.optimizer.weight_decay_other; },
            "Weight decay of parameters neither conv nor batch-norm; null: weight_decay."),
      field("optimizer.weight_decay_bn", numberAtLeast(0),
            [](auto& c) -> auto& { return c.optimizer.weight_decay_bn; },
            "Weight decay of the batch-norm parameters."),
      field("optimizer.memory", boolean(),
            [](auto& c) -> auto& { return c.optimizer.memory; },
            "Error feedback: keep what the reducer did not deliver for the next step."),
      field("optimizer.mom_before_reduce", boolean(),
            [](auto& c) -> auto& { return c.optimizer.mom_before_reduce; },
            "Apply momentum before the reduce (Signum) instead of after."),
      field("optimizer.wd_before_reduce", boolean(),
            [](auto& c) -> auto& { return c.optimizer.wd_before_reduce; },
            "Add weight decay before the reduce instead of after."),
      field("optimizer.decay_at_epochs", epochList(),
            [](auto& c) -> auto& { return c.optimizer.decay_at_epochs; },
            "Epochs at which the learning rate is divided by decay_with_factor."),
      field("optimizer.decay_with_factor", numberAbove(0),
            [](auto& c) -> auto& { return c.optimizer.decay_with_factor; },
            "Divisor of each learning-rate decay."),
      field("optimizer.scale_lr_with_factor",
            orNull(numberAtLeast(0), 0.0, "0 or null: the number of workers"),
            [](auto& c) -> auto& { return c.optimizer.scale_lr_with_factor; },
            "Factor the learning rate reaches at the end of the warm-up."),
      field("optimizer.warmup_epochs", numberAtLeast(0),
            [](auto& c) -> auto& { return c.optimizer.warmup_epochs; },
            "Fractional epochs of the linear learning-rate warm-up."),
      field("optimizer.beta1", fraction(),
            [](auto& c) -> auto& { return c.optimizer.beta1; },
            "AdamW: decay rate of the first moment (the gradient's running mean)."),
      field("optimizer.beta2", fraction(),
            [](auto& c) -> auto& { return c.optimizer.beta2; },
            "AdamW: decay rate of the second moment (the squared gradient's running mean)."),
      field("optimizer.epsilon", numberAbove(0),
            [](auto& c) -> auto& { return c.optimizer.epsilon; },
            "AdamW: added to the denominator."),
      field("optimizer.decay_embeddings", boolean(),
            [](auto& c) -> auto& { return c.optimizer.decay_embeddings; },
            "AdamW: weight-decay the task's embedding tables too (the other matrices always decay); true is "
            "nanoGPT's train.py rule, every tensor of 2 or more dims (brown-gpt-nanogpt)."),
      field("optimizer.clip_norm", numberAtLeast(0),
            [](auto& c) -> auto& { return c.optimizer.clip_norm; },
            "Clip the reduced gradient to this global L2 norm before the step (torch's clip_grad_norm_); 0: off."),
      field("optimizer.schedule", name(),
            [](auto& c) -> auto& { return c.optimizer.schedule; },
            "Learning-rate schedule: reference (warmup_epochs, decay_at_epochs) or cosine (nanoGPT's, by step)."),
      field("optimizer.warmup_steps", integerAtLeast(0),
            [](auto& c) -> auto& { return c.optimizer.warmup_steps; },
            "Cosine schedule: steps of the linear warm-up."),
      field("optimizer.decay_steps", integerAtLeast(0, " (0: the run's total steps)"),
            [](auto& c) -> auto& { return c.optimizer.decay_steps; },
            "Cosine schedule: the step where the decay reaches min_learning_rate."),
      field("optimizer.min_learning_rate", numberAtLeast(0),
            [](auto& c) -> auto& { return c.optimizer.min_learning_rate; },
            "Cosine schedule: the rate at and after decay_steps."),
      field("reducer.name", name(),
            [](auto& c) -> auto& { return c.reducer.name; },
            "The gradient reducer from the reducer registry (exact, powersgd, ...)."),
      field("reducer.granularity", oneOfEnum<Granularity>(),
            [](auto& c) -> auto& { return c.reducer.granularity; },
            "Compression unit: each tensor, the whole flattened gradient, or DDP-style buckets."),
      field("reducer.bucket_mb", numberAbove(0),
            [](auto& c) -> auto& { return c.reducer.bucket_mb; },
            "Bucket size in MiB: the exact reducer's all-reduce buckets (after a first of at most 1 MiB, as DDP's), "
            "and the compression unit when reducer.granularity is bucket."),
      field("sync.strategy", name(),
            [](auto& c) -> auto& { return c.sync.strategy; },
            "How the workers' models agree, from the sync strategy registry (every-step, local-sgd, diloco, "
            "sparseloco, demo); their settings are sync.*."),
      field("distributed.backend", oneOfEnum<Backend>(),
            [](auto& c) -> auto& { return c.distributed.backend; },
            "Collective backend between workers; auto picks one for the device."),
      field("distributed.timeout_s", numberFromTo(1, 7 * 24 * 3600, " (seconds: 1 s to 7 days)"),
            [](auto& c) -> auto& { return c.distributed.timeout_s; },
            "Seconds a collective may wait before the run fails."),
      field("distributed.simulated_workers", integerAtLeast(1),
            [](auto& c) -> auto& { return c.distributed.simulated_workers; },
            "Logical workers per process (the paper's 16 workers on one machine); compute runs in turn."),
      field("evaluation.max_samples", integerAtLeast(0, " (0: the whole split)"),
            [](auto& c) -> auto& { return c.evaluation.max_samples; },
            "Evaluate on the first samples (tokens for language models) of each split, all workers together."),
      field("evaluation.every_epochs", integerAtLeast(1),
            [](auto& c) -> auto& { return c.evaluation.every_epochs; },
            "Epochs between evaluations; the run's last epoch (or step) is always evaluated."),
      field("evaluation.every_steps", integerAtLeast(0, " (0: off)"),
            [](auto& c) -> auto& { return c.evaluation.every_steps; },
            "Also evaluate every this many steps within an epoch (validation and test at that step)."),
      field("checkpoint.every_steps", integerAtLeast(0, " (0: off)"),
            [](auto& c) -> auto& { return c.checkpoint.every_steps; },
            "Steps between checkpoints (one is always written at the end and on Ctrl-C)."),
      field("checkpoint.every_epochs", integerAtLeast(0, " (0: off)"),
            [](auto& c) -> auto& { return c.checkpoint.every_epochs; },
            "Epochs between checkpoints."),
      field("output.sinks", nameList(),
            [](auto& c) -> auto& { return c.output.sinks; },
            "Metric sinks from the sink registry (console, jsonl, csv, ...)."),
      field("output.log_every_steps", integerAtLeast(1),
            [](auto& c) -> auto& { return c.output.log_every_steps; },
            "Steps between console progress lines when stdout is not a terminal."),
      field("output.trace", stepWindowOrOff(),
            [](auto& c) -> auto& { return c.output.trace; },
            "Steps whose timeline is written to trace-rank<r>.json (Chrome trace, for Perfetto); empty: off."),
      field("output.layer_stats_every_steps", integerAtLeast(0, " (0: off)"),
            [](auto& c) -> auto& { return c.output.layer_stats_every_steps; },
            "Steps between rows of layers.csv: each parameter's bits sent, gradient norm and compression error."),
      field("paper.metric", text(),
            [](auto& c) -> auto& { return c.paper.metric; },
            "Final metric the preset reproduces, as run.json names it (test.accuracy, ...); empty: none."),
      field("paper.value", numberAtLeast(0),
            [](auto& c) -> auto& { return c.paper.value; },
            "The paper's value of paper.metric; run.json reports the run's distance to it."),
      field("paper.data_per_epoch_mb", numberAtLeast(0),
            [](auto& c) -> auto& { return c.paper.data_per_epoch_mb; },
            "The paper's MiB sent per worker per epoch."),
      field("paper.time_per_batch_ms", numberAtLeast(0),
            [](auto& c) -> auto& { return c.paper.time_per_batch_ms; },
            "The paper's time per batch at 16 workers, in milliseconds."),
      field("paper.source", text(),
            [](auto& c) -> auto& { return c.paper.source; },
            "Where the paper reports it (table and row)."),
  };
  // clang-format on
}

std::vector<AliasSpec> builtInAliases() {
  return {
      {"num_epochs", "training.epochs", {}},
      {"optimizer_batch_size", "training.batch_size", {}},
      {"optimizer_learning_rate", "optimizer.learning_rate", {}},
      {"optimizer_conv_learning_rate", "optimizer.conv_learning_rate", {}},
      {"optimizer_momentum", "optimizer.momentum", {}},
      {"optimizer_momentum_type", "optimizer.momentum_type", {}},
      {"optimizer_memory", "optimizer.memory", {}},
      {"optimizer_reducer", "reducer.name", {}},
      {"optimizer_decay_at_epochs", "optimizer.decay_at_epochs", {}},
      {"optimizer_decay_with_factor", "optimizer.decay_with_factor", {}},
      {"optimizer_scale_lr_with_factor", "optimizer.scale_lr_with_factor", {}},
      {"optimizer_scale_lr_with_warmup_epochs", "optimizer.warmup_epochs", {}},
      {"optimizer_mom_before_reduce", "optimizer.mom_before_reduce", {}},
      {"optimizer_wd_before_reduce", "optimizer.wd_before_reduce", {}},
      {"optimizer_weight_decay_conv", "optimizer.weight_decay_conv", {}},
      {"optimizer_weight_decay_other", "optimizer.weight_decay_other", {}},
      {"optimizer_weight_decay_bn", "optimizer.weight_decay_bn", {}},
      {"task", "task.name", {{"Cifar", "cifar10"}, {"LanguageModeling", "wikitext2"}}},
      {"task_architecture", "task.architecture", {{"ResNet18", "resnet18"}, {"VGG16", "vgg16"}, {"LSTM", "lstm"}}},
      {"distributed_backend", "distributed.backend", {}},
  };
}

}  // namespace

ConfigKeys::ConfigKeys(const Extensions& extensions) : keys_(makeKeyTable()), aliases_(builtInAliases()) {
  addExtensionKeys(extensions, keys_, aliases_);
}

const KeySpec* ConfigKeys::find(const std::string& key) const {
  const auto found = std::find_if(keys_.begin(), keys_.end(), [&](const KeySpec& k) { return k.key == key; });
  return found == keys_.end() ? nullptr : &*found;
}

const AliasSpec* ConfigKeys::findAlias(const std::string& alias) const {
  const auto found =
      std::find_if(aliases_.begin(), aliases_.end(), [&](const AliasSpec& a) { return a.alias == alias; });
  return found == aliases_.end() ? nullptr : &*found;
}

}  // namespace gcrun::hyperparams
