#include "tasks/sampler.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace gcrun::tasks {
namespace {

void checkShard(const Shard& shard) {
  if (shard.world_size < 1 || shard.rank < 0 || shard.rank >= shard.world_size) {
    throw std::invalid_argument("invalid shard: rank " + std::to_string(shard.rank) + " of world size " +
                                std::to_string(shard.world_size));
  }
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t num_samples, const Shard& shard)
    : num_samples_(num_samples), shard_(shard) {
  checkShard(shard);
  if (num_samples < 0) throw std::invalid_argument("negative number of samples");
  samples_per_rank_ = (num_samples + shard.world_size - 1) / shard.world_size;
}

int64_t DistributedSampler::batchCount(int64_t batch_size) const {
  if (batch_size < 1) throw std::invalid_argument("batch size must be positive");
  return samples_per_rank_ / batch_size;
}

at::Tensor DistributedSampler::epochIndices(int64_t epoch) const {
  at::Generator generator = at::detail::createCPUGenerator(static_cast<uint64_t>(epoch));
  at::Tensor permutation = at::randperm(num_samples_, generator, at::TensorOptions().dtype(at::kLong));
  const int64_t padding = samples_per_rank_ * shard_.world_size - num_samples_;
  // Padding is smaller than W, so when N < padding (N < W) the repeats wrap around more than once.
  at::Tensor padded = permutation;
  while (padded.size(0) < num_samples_ + padding && num_samples_ > 0) {
    int64_t missing = num_samples_ + padding - padded.size(0);
    padded = at::cat({padded, permutation.narrow(0, 0, std::min(missing, num_samples_))});
  }
  return padded.slice(0, shard_.rank, padded.size(0), shard_.world_size).contiguous();
}

uint64_t streamSeed(uint64_t seed, int rank, int64_t epoch) {
  // splitmix64's finalizer, applied to each input in turn.
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  return mix(mix(mix(seed) ^ static_cast<uint64_t>(rank)) ^ static_cast<uint64_t>(epoch));
}

at::Tensor testShardIndices(int64_t num_samples, const Shard& shard, int64_t max_samples) {
  checkShard(shard);
  if (max_samples > 0) num_samples = std::min(num_samples, max_samples);
  const auto options = at::TensorOptions().dtype(at::kLong);
  if (shard.rank >= num_samples) return at::empty({0}, options);
  return at::arange(shard.rank, num_samples, shard.world_size, options);
}

int64_t evaluationChunk(int64_t test_batch_size, c10::Device device) {
  constexpr int64_t kCpuChunk = 32;
  return device.is_cpu() ? std::min(test_batch_size, kCpuChunk) : test_batch_size;
}

}  // namespace gcrun::tasks
