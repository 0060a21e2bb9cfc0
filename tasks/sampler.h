#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "tasks/task.h"

namespace gcrun::tasks {

// The reference's DistributedSampler (paper-code/tasks/utils.py, a copy of PyTorch's of 2019).
// Each epoch shuffles [0, N) with a CPU generator seeded by the epoch number alone: this is the
// reference's choice, and it makes the permutation the same on every worker (and in every run,
// whatever the experiment's seed). The permutation is padded by repeating its first entries up to a
// multiple of the world size, and rank r takes the positions r, r + W, r + 2W, ...
class DistributedSampler {
 public:
  DistributedSampler(int64_t num_samples, const Shard& shard);

  // ceil(N / W): the same on every rank, thanks to the padding.
  int64_t samplesPerRank() const { return samples_per_rank_; }

  // Full batches only: the reference's loader drops the last, incomplete one.
  int64_t batchCount(int64_t batch_size) const;

  // This rank's sample indices (int64 [samplesPerRank()], on the CPU) for one epoch.
  at::Tensor epochIndices(int64_t epoch) const;

 private:
  int64_t num_samples_;
  Shard shard_;
  int64_t samples_per_rank_;
};

// Seed of one worker's random stream in one epoch (augmentation, dropout): a hash of the three,
// so streams differ between workers and epochs and repeat exactly between runs.
uint64_t streamSeed(uint64_t seed, int rank, int64_t epoch);

// The test split: rank r takes r, r + W, r + 2W, ... of [0, N), unshuffled and unpadded, so the
// ranks together see every test sample exactly once. `max_samples` > 0 takes [0, max_samples) of it.
at::Tensor testShardIndices(int64_t num_samples, const Shard& shard, int64_t max_samples = 0);

// The batch size of an evaluation: test_batch_size, and at most 32 on the CPU, where a convolutional
// network's forward pass costs several times more per image at batches of hundreds (the issue's
// ResNet-18: 45 ms per image at 250, 10 ms at 32). The sums are in double: the chunking changes
// the metrics in the last float digits only.
int64_t evaluationChunk(int64_t test_batch_size, c10::Device device);

}  // namespace gcrun::tasks
