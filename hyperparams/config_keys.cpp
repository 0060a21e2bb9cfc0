#include "hyperparams/config_keys.h"

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

// What a key accepts: the text shown to users, the check, and what a YAML null stands for where
// null is allowed (a key without `if_null` rejects null, unless its type is itself optional).
template <class T>
struct Rule {
  std::string accepted;
  std::function<bool(const T&)> ok;
  std::optional<T> if_null;
};

// Reading one value of each field type; false when the node is of the wrong shape or type.
bool parse(const YAML::Node& node, int64_t& out) { return YAML::convert<int64_t>::decode(node, out); }
bool parse(const YAML::Node& node, bool& out) { return YAML::convert<bool>::decode(node, out); }

bool parse(const YAML::Node& node, double& out) {
  return YAML::convert<double>::decode(node, out) && std::isfinite(out);
}

bool parse(const YAML::Node& node, std::string& out) {
  if (!node.IsScalar()) return false;
  out = node.Scalar();
  return true;
}

bool parse(const YAML::Node& node, std::optional<double>& out) {
  if (node.IsNull()) {
    out.reset();
    return true;
  }
  double value = 0.0;
  if (!parse(node, value)) return false;
  out = value;
  return true;
}

// A single scalar is read as a one-element list.
template <class T>
bool parse(const YAML::Node& node, std::vector<T>& out) {
  std::vector<T> values;
  if (node.IsScalar()) {
    values.emplace_back();
    if (!parse(node, values.back())) return false;
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      values.emplace_back();
      if (!parse(item, values.back())) return false;
    }
  } else {
    return false;
  }
  out = std::move(values);
  return true;
}

YAML::Node toNode(int64_t value) { return YAML::Node(value); }
YAML::Node toNode(bool value) { return YAML::Node(value); }
YAML::Node toNode(double value) { return YAML::Node(formatNumber(value)); }
YAML::Node toNode(const std::string& value) { return YAML::Node(value); }

YAML::Node toNode(const std::optional<double>& value) {
  return value ? toNode(*value) : YAML::Node(YAML::NodeType::Null);
}

template <class T>
YAML::Node toNode(const std::vector<T>& values) {
  YAML::Node node(YAML::NodeType::Sequence);
  for (const auto& value : values) node.push_back(toNode(value));
  node.SetStyle(YAML::EmitterStyle::Flow);
  return node;
}

// `access` is a generic lambda returning a reference to the field, so the same lambda serves the
// setter (mutable config) and the getter (const config).
template <class T, class Access>
KeySpec field(std::string key, Rule<T> rule, Access access, std::string help) {
  static_assert(std::is_same_v<decltype(access(std::declval<ExperimentConfig&>())), T&>,
                "the rule's value type must be the field's type");
  KeySpec spec{std::move(key), rule.accepted, std::move(help), nullptr, nullptr};
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
  return spec;
}

Rule<int64_t> integerAtLeast(int64_t min, const std::string& note = "") {
  return {"an integer >= " + std::to_string(min) + note, [min](int64_t v) { return v >= min; }, {}};
}

Rule<double> numberAtLeast(double min) {
  return {"a number >= " + formatNumber(min), [min](double v) { return v >= min; }, {}};
}

Rule<double> numberAbove(double min) {
  return {"a number > " + formatNumber(min), [min](double v) { return v > min; }, {}};
}

Rule<double> fraction() {
  return {"a number in [0, 1)", [](double v) { return v >= 0.0 && v < 1.0; }, {}};
}

Rule<double> positiveFraction() {
  return {"a number in (0, 1]", [](double v) { return v > 0.0 && v <= 1.0; }, {}};
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

Rule<bool> boolean() { return {"true or false", nullptr, {}}; }

Rule<std::string> oneOf(std::vector<std::string> choices) {
  std::string text = "one of: ";
  for (size_t i = 0; i < choices.size(); ++i) text += (i ? ", " : "") + choices[i];
  return {text,
          [choices](const std::string& v) {
            return std::find(choices.begin(), choices.end(), v) != choices.end();
          },
          {}};
}

// Names of registry entries; the registries themselves check them when the run starts.
Rule<std::string> name() {
  return {"a non-empty name", [](const std::string& v) { return !v.empty(); }, {}};
}

Rule<std::string> text() { return {"a string", nullptr, std::string()}; }

Rule<std::vector<double>> epochList() {
  auto ok = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double e) { return e >= 0.0; }) &&
           std::is_sorted(v.begin(), v.end());
  };
  return {"a list of numbers >= 0 in non-decreasing order ([] or null: none)", ok, std::vector<double>()};
}

Rule<std::vector<std::string>> nameList() {
  auto ok = [](const std::vector<std::string>& v) {
    return !v.empty() && std::none_of(v.begin(), v.end(), [](const std::string& s) { return s.empty(); });
  };
  return {"a non-empty list of non-empty names (one name is a one-element list)", ok, {}};
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
      field("device", oneOf({"cpu", "cuda"}),
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
            "Batch size of the evaluation passes."),
      field("training.epochs", integerAtLeast(1),
            [](auto& c) -> auto& { return c.training.epochs; },
            "Passes over the training data."),
      field("training.max_steps", integerAtLeast(0, " (0: no limit)"),
            [](auto& c) -> auto& { return c.training.max_steps; },
            "Stop after this many optimizer steps; the run still evaluates at its end."),
      field("training.batch_size", integerAtLeast(1),
            [](auto& c) -> auto& { return c.training.batch_size; },
            "Training batch size per worker, as in the reference."),
      field("optimizer.learning_rate", numberAbove(0),
            [](auto& c) -> auto& { return c.optimizer.learning_rate; },
            "Base learning rate (before scaling and warm-up)."),
      field("optimizer.conv_learning_rate", nullOr(numberAbove(0)),
            [](auto& c) -> auto& { return c.optimizer.conv_learning_rate; },
            "Learning rate of the conv weights (names with 'conv' and 'weight'); null: learning_rate."),
      field("optimizer.momentum", fraction(),
            [](auto& c) -> auto& { return c.optimizer.momentum; },
            "Momentum coefficient."),
      field("optimizer.momentum_type", oneOf({"nesterov", "heavy-ball", "exponential_moving_average"}),
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
      field("reducer.name", name(),
            [](auto& c) -> auto& { return c.reducer.name; },
            "The gradient reducer from the reducer registry (exact, powersgd, ...)."),
      field("reducer.rank", integerAtLeast(1),
            [](auto& c) -> auto& { return c.reducer.rank; },
            "Rank of the low-rank reducers."),
      field("reducer.reuse_query", boolean(),
            [](auto& c) -> auto& { return c.reducer.reuse_query; },
            "PowerSGD warm start: reuse the previous step's Q."),
      field("reducer.n_power_iterations", integerAtLeast(0),
            [](auto& c) -> auto& { return c.reducer.n_power_iterations; },
            "Extra PowerSGD power iterations per step (2: the paper's best approximation)."),
      field("reducer.orthogonalization_epsilon", numberAtLeast(0),
            [](auto& c) -> auto& { return c.reducer.orthogonalization_epsilon; },
            "Added to column norms in Gram-Schmidt so that all-zero columns stay finite."),
      field("reducer.start_iter", integerAtLeast(0),
            [](auto& c) -> auto& { return c.reducer.start_iter; },
            "Steps of plain all-reduce before compression starts (PyTorch's start_powerSGD_iter)."),
      field("reducer.min_compression_rate", numberAtLeast(0),
            [](auto& c) -> auto& { return c.reducer.min_compression_rate; },
            "Compress a matrix only if n*m > rate*rank*(n+m) (PyTorch's rule; 0: every matrix)."),
      field("reducer.compression", positiveFraction(),
            [](auto& c) -> auto& { return c.reducer.compression; },
            "Fraction of the elements that top-k, random-k and random-block send."),
      field("reducer.quantization_levels", integerAtLeast(1),
            [](auto& c) -> auto& { return c.reducer.quantization_levels; },
            "QSGD's number of quantization levels s."),
      field("reducer.rescale", boolean(),
            [](auto& c) -> auto& { return c.reducer.rescale; },
            "random-k, random-block: scale by numel/k so the update is unbiased (reference: off)."),
      field("reducer.granularity", oneOf({"layer", "model", "bucket"}),
            [](auto& c) -> auto& { return c.reducer.granularity; },
            "Compression unit: each tensor, the whole flattened gradient, or DDP-style buckets."),
      field("reducer.bucket_mb", numberAbove(0),
            [](auto& c) -> auto& { return c.reducer.bucket_mb; },
            "Bucket size in MiB when reducer.granularity is bucket."),
      field("distributed.backend", oneOf({"auto", "gloo", "nccl"}),
            [](auto& c) -> auto& { return c.distributed.backend; },
            "Collective backend between workers; auto picks one for the device."),
      field("distributed.timeout_s", numberAbove(0),
            [](auto& c) -> auto& { return c.distributed.timeout_s; },
            "Seconds a collective may wait before the run fails."),
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

const std::map<std::string, std::string> kReducerClasses = {
    {"ExactReducer", "exact"},
    {"RankKReducer", "powersgd"},
    {"HalfRankKReducer", "unbiased-rank"},
    {"SVDReducer", "svd"},
    {"AtomoReducer", "atomo"},
    {"SignSGDwithMajorityVoteReducer", "signum"},
    {"SignAndNormReducer", "sign-norm"},
    {"TopKReducer", "topk"},
    {"GlobalTopKReducer", "global-topk"},
    {"UniformRandomSparseReducer", "random-k"},
    {"UniformRandomSparseBlockReducer", "random-block"},
};

const std::map<std::string, std::string> kTaskNames = {{"Cifar", "cifar10"},
                                                       {"LanguageModeling", "wikitext2"}};

}  // namespace

const std::vector<KeySpec>& keyTable() {
  static const std::vector<KeySpec> table = makeKeyTable();
  return table;
}

const std::vector<AliasSpec>& aliasTable() {
  static const std::vector<AliasSpec> table = {
      {"num_epochs", "training.epochs", {}},
      {"optimizer_batch_size", "training.batch_size", {}},
      {"optimizer_learning_rate", "optimizer.learning_rate", {}},
      {"optimizer_conv_learning_rate", "optimizer.conv_learning_rate", {}},
      {"optimizer_momentum", "optimizer.momentum", {}},
      {"optimizer_momentum_type", "optimizer.momentum_type", {}},
      {"optimizer_memory", "optimizer.memory", {}},
      {"optimizer_reducer", "reducer.name", kReducerClasses},
      {"optimizer_reducer_rank", "reducer.rank", {}},
      {"optimizer_reducer_reuse_query", "reducer.reuse_query", {}},
      {"optimizer_reducer_n_power_iterations", "reducer.n_power_iterations", {}},
      {"optimizer_reducer_compression", "reducer.compression", {}},
      {"optimizer_decay_at_epochs", "optimizer.decay_at_epochs", {}},
      {"optimizer_decay_with_factor", "optimizer.decay_with_factor", {}},
      {"optimizer_scale_lr_with_factor", "optimizer.scale_lr_with_factor", {}},
      {"optimizer_scale_lr_with_warmup_epochs", "optimizer.warmup_epochs", {}},
      {"optimizer_mom_before_reduce", "optimizer.mom_before_reduce", {}},
      {"optimizer_wd_before_reduce", "optimizer.wd_before_reduce", {}},
      {"optimizer_weight_decay_conv", "optimizer.weight_decay_conv", {}},
      {"optimizer_weight_decay_other", "optimizer.weight_decay_other", {}},
      {"optimizer_weight_decay_bn", "optimizer.weight_decay_bn", {}},
      {"task", "task.name", kTaskNames},
      {"task_architecture", "task.architecture", {}},
      {"distributed_backend", "distributed.backend", {}},
  };
  return table;
}

std::string formatNumber(double value) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  // %g writes 150 as 1.5e+02 when two digits suffice; spell such whole numbers out.
  const char* exponent = std::strchr(text, 'e');
  const int power = exponent ? std::atoi(exponent + 1) : -1;
  if (power >= 0 && power < 16) std::snprintf(text, sizeof(text), "%.*g", power + 1, value);
  return text;
}

}  // namespace gcrun::hyperparams
