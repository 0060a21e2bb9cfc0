#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "hyperparams/config.h"
#include "hyperparams/registry.h"

namespace torch::nn {
class Module;
}

namespace gcrun::tasks {

// This worker's place in the data-parallel group; tasks shard their data by it.
struct Shard {
  int rank = 0;
  int world_size = 1;
};

struct Batch {
  at::Tensor inputs;
  at::Tensor targets;
};

// Sample-weighted sums of metrics, so that workers can add theirs up before dividing.
struct MetricSums {
  std::map<std::string, double> sums;  // metric -> sum over samples of the per-sample value
  double weight = 0;                   // number of samples (or tokens)

  void add(const std::string& name, double sum) { sums[name] += sum; }
  void merge(const MetricSums& other);
  std::map<std::string, double> means() const;
};

// Yields one epoch of training batches for one worker.
class BatchStream {
 public:
  virtual ~BatchStream() = default;
  virtual std::optional<Batch> next() = 0;
};

// A Task is the model, its data and its loss.
//
// Contract:
//  - The model's parameters are built in the constructor from the context's seed alone, so every
//    worker starts from identical weights without a broadcast; the parameter order is fixed.
//  - trainBatches(shard, epoch) is deterministic in (seed, epoch, shard): across the ranks of one
//    epoch every training sample is used exactly once (up to the padding and drop_last of the
//    reference's sampler), each rank gets batchesPerEpoch(shard) batches of batch_size.
//  - trainLoss() runs the forward pass in training mode and adds the batch's metrics to `metrics`;
//    the trainer calls backward() on the returned scalar.
//  - evaluate() runs this rank's part of the test split in eval mode without gradients and returns
//    its sums; the trainer adds them up over ranks and calls finalize() on the means.
class Task {
 public:
  virtual ~Task() = default;

  virtual torch::nn::Module& model() = 0;
  virtual int64_t batchesPerEpoch(const Shard& shard) const = 0;
  virtual std::unique_ptr<BatchStream> trainBatches(const Shard& shard, int64_t epoch) = 0;
  virtual at::Tensor trainLoss(const Batch& batch, MetricSums& metrics) = 0;
  virtual MetricSums evaluate(const Shard& shard) = 0;

  // Derived metrics from the reduced means (perplexity from cross entropy, say). Default: as is.
  virtual std::map<std::string, double> finalize(std::map<std::string, double> means) const {
    return means;
  }
  // Whether the data is synthetic (marked in every output).
  virtual bool synthetic() const = 0;
};

struct TaskContext {
  const TaskOptions& options;
  int64_t batch_size;  // per worker
  uint64_t seed;
  c10::Device device;
};

using TaskFactory = std::function<std::unique_ptr<Task>(const TaskContext&)>;

// The tasks gcrun knows, by `task.name`; built-ins are registered on first use.
Registry<TaskFactory>& taskRegistry();

}  // namespace gcrun::tasks
