#include "experiments/training/training_state.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <torch/torch.h>

#include "experiments/sync/reducer_state.h"
#include "hyperparams/base/errors.h"

namespace gcrun::experiments {
namespace {

const at::Tensor& entry(const TensorMap& state, const std::string& name) {
  const auto found = state.find(name);
  if (found == state.end()) throw UserError("checkpoint entry '" + name + "' is missing");
  return found->second;
}

std::string describe(const at::Tensor& t) {
  std::string shape;
  for (auto size : t.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(size);
  return std::string(c10::toString(t.scalar_type())) + " [" + shape + "]";
}

void checkLike(const at::Tensor& saved, const at::Tensor& expected, const std::string& name) {
  if (!saved.sizes().equals(expected.sizes()) || saved.scalar_type() != expected.scalar_type()) {
    throw UserError("checkpoint entry '" + name + "' is " + describe(saved) + ", this run's is " + describe(expected) +
                    " (a different model or setting)");
  }
}

bool hasPrefix(const std::string& name, const std::string& prefix) { return name.rfind(prefix, 0) == 0; }

// Entries this run may lack in a checkpoint: the optimizer's it makes as it goes (momenta before
// their first step), the window counters of checkpoints written before they existed, and the
// task's and those the synchronizer checks itself, which their loadState() asks for by name.
bool mayBeMissing(const std::string& name, const TrainingParts& parts) {
  return parts.optimizer.mayLack(name) || name == "counter/window_loss" || name == "counter/window_steps" ||
         name == "counter/syncs" || name == "counter/sync_bits" || hasPrefix(name, "task/") ||
         parts.synchronizer.checksEntry(name);
}

bool isFormerBuffer(const tasks::Task& task, const std::string& name, const at::Tensor& saved) {
  try {
    return task.isFormerBuffer(name.substr(std::string("buffer/").size()), saved);
  } catch (const std::invalid_argument& e) {
    throw UserError("checkpoint entry '" + name + "': " + e.what());
  }
}

// Every entry of `state` is one `expected` names, of its dtype and shape, before anything is
// copied. Entries a synchronizer or task adds or reshapes as it runs (powersgd-ddp's bucket order
// is empty until its second step) are checked by their loadState(), not against a fresh run's; a
// train_sums/ entry, one per metric, is a float64 scalar.
void checkEntries(const TensorMap& state, const TensorMap& expected, const TrainingParts& parts) {
  const at::Tensor sum = torch::scalar_tensor(0.0, torch::kFloat64);
  for (const auto& [name, saved] : state) {
    if (parts.synchronizer.checksEntry(name)) continue;
    const auto found = expected.find(name);
    if (found != expected.end()) {
      checkLike(saved, found->second, name);
    } else if (hasPrefix(name, "train_sums/")) {
      checkLike(saved, sum, name);
    } else if (hasPrefix(name, "buffer/") && isFormerBuffer(parts.task, name, saved)) {
      continue;  // a constant an earlier version saved: the model makes it, and it was checked equal
    } else if (!hasPrefix(name, "task/")) {
      throw UserError("checkpoint entry '" + name + "' is not one this run saves (a different model or setting)");
    }
  }
  for (const auto& kv : expected) {
    if (!mayBeMissing(kv.first, parts)) entry(state, kv.first);
  }
}

// The entries under `prefix`, without it.
TensorMap withPrefix(const TensorMap& state, const std::string& prefix) {
  TensorMap out;
  for (const auto& kv : state) {
    if (kv.first.rfind(prefix, 0) == 0) out[kv.first.substr(prefix.size())] = kv.second;
  }
  return out;
}

double finiteReal(const TensorMap& state, const std::string& name) {
  const double value = entry(state, name).item<double>();
  if (!std::isfinite(value)) throw UserError("checkpoint entry '" + name + "' is not finite");
  return value;
}

// The saved position, each counter within what a run could have counted: its step is
// epoch * batches_per_epoch + batch (the loop counts one step per batch, and a resumed run keeps
// the batch size and world size), its syncs and log window at most its steps, its syncs' bits at
// most its bits; its sums and time finite.
LoopPosition positionFrom(const TensorMap& state, int64_t batches_per_epoch) {
  constexpr int64_t kMost = std::numeric_limits<int64_t>::max();
  LoopPosition position;
  position.step = savedStep(state);
  position.batch_index = checkpointCount(state, "counter/batch", 0, std::min(batches_per_epoch, position.step));
  position.epoch = checkpointCount(state, "counter/epoch", 0, kMost);
  if (position.epoch != (position.step - position.batch_index) / batches_per_epoch ||
      (position.step - position.batch_index) % batches_per_epoch != 0) {
    throw UserError("checkpoint entries 'counter/epoch' " + std::to_string(position.epoch) + " and 'counter/batch' " +
                    std::to_string(position.batch_index) + " do not make 'counter/step' " +
                    std::to_string(position.step) + " at " + std::to_string(batches_per_epoch) +
                    " batches an epoch (a different batch size, world size or data)");
  }
  position.bits = static_cast<uint64_t>(checkpointCount(state, "counter/bits", 0, kMost));
  position.loss_sum = finiteReal(state, "counter/loss_sum");
  position.elapsed_s = finiteReal(state, "counter/elapsed_s");
  if (position.elapsed_s < 0) throw UserError("checkpoint entry 'counter/elapsed_s' is negative");
  if (state.count("counter/window_steps") > 0) {
    position.window_loss = finiteReal(state, "counter/window_loss");
    position.window_steps = checkpointCount(state, "counter/window_steps", 0, position.step);
  }
  if (state.count("counter/syncs") > 0) {
    position.syncs = checkpointCount(state, "counter/syncs", 0, position.step);
    position.sync_bits =
        static_cast<uint64_t>(checkpointCount(state, "counter/sync_bits", 0, static_cast<int64_t>(position.bits)));
  }
  for (const auto& kv : withPrefix(state, "train_sums/")) {
    const double value = finiteReal(state, "train_sums/" + kv.first);
    if (kv.first == ".weight") {
      position.train_sums.weight = value;
    } else {
      position.train_sums.sums[kv.first] = value;
    }
  }
  return position;
}

}  // namespace

TensorMap snapshotTraining(const TrainingParts& parts, const LoopPosition& position) {
  TensorMap state;
  for (const auto& item : parts.task.model().named_parameters()) state["param/" + item.key()] = item.value();
  for (const auto& item : parts.task.model().named_buffers()) state["buffer/" + item.key()] = item.value();
  parts.optimizer.saveState(state);
  parts.synchronizer.saveState(state);
  tasks::Task::State task_state;
  parts.task.saveState(task_state);
  for (const auto& kv : task_state) state["task/" + kv.first] = kv.second;
  const auto integer = [](int64_t v) { return torch::scalar_tensor(v, torch::kInt64); };
  const auto real = [](double v) { return torch::scalar_tensor(v, torch::kFloat64); };
  state["counter/step"] = integer(position.step);
  state["counter/epoch"] = integer(position.epoch);
  state["counter/batch"] = integer(position.batch_index);
  state["counter/bits"] = integer(static_cast<int64_t>(position.bits));
  state["counter/syncs"] = integer(position.syncs);
  state["counter/sync_bits"] = integer(static_cast<int64_t>(position.sync_bits));
  state["counter/loss_sum"] = real(position.loss_sum);
  state["counter/elapsed_s"] = real(position.elapsed_s);
  state["counter/window_loss"] = real(position.window_loss);
  state["counter/window_steps"] = integer(position.window_steps);
  state["train_sums/.weight"] = real(position.train_sums.weight);
  for (const auto& kv : position.train_sums.sums) state["train_sums/" + kv.first] = real(kv.second);
  return state;
}

TensorMap expectedTraining(const TrainingParts& parts) {
  TensorMap expected = snapshotTraining(parts, LoopPosition{});
  parts.optimizer.expectState(expected);
  return expected;
}

uint64_t bytesOf(const TensorMap& state) {
  uint64_t bytes = 0;
  for (const auto& kv : state) bytes += kv.second.nbytes();
  return bytes;
}

LoopPosition restoreTraining(const TensorMap& state, const TrainingParts& parts, int64_t batches_per_epoch,
                             std::optional<tasks::Task::State>& task_state) {
  checkEntries(state, expectedTraining(parts), parts);
  LoopPosition position = positionFrom(state, batches_per_epoch);
  torch::NoGradGuard no_grad;
  for (const auto& item : parts.task.model().named_parameters()) {
    item.value().detach().copy_(state.at("param/" + item.key()));
  }
  for (const auto& item : parts.task.model().named_buffers()) {
    item.value().detach().copy_(state.at("buffer/" + item.key()));
  }
  parts.optimizer.loadState(state);
  parts.synchronizer.loadState(state);
  task_state.reset();
  if (position.batch_index > 0) task_state = withPrefix(state, "task/");
  return position;
}

std::unique_ptr<tasks::BatchStream> batchesFrom(tasks::Task& task, const tasks::Shard& shard,
                                                const LoopPosition& position,
                                                std::optional<tasks::Task::State>& task_state) {
  auto batches = task.trainBatches(shard, position.epoch);
  for (int64_t skipped = 0; skipped < position.batch_index; ++skipped) batches->next();
  if (task_state) {
    try {
      task.loadState(*task_state);
    } catch (const std::invalid_argument& e) {
      throw UserError(std::string("checkpoint: ") + e.what());
    }
    task_state.reset();
  }
  return batches;
}

}  // namespace gcrun::experiments
