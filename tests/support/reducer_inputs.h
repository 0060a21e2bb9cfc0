#pragma once

// What the reducer tests share: worker-specific inputs of every shape a model has, and their mean.

#include <cstdint>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "reducers/reducer.h"

namespace gcrun::reducers {

struct Buffers {
  std::vector<at::Tensor> send, out, memory;
};

// Shapes of every kind a model has: scalar, vector, matrix, conv kernel, tiny, and an all-zero one.
inline std::vector<std::vector<int64_t>> mixedShapes() { return {{}, {7}, {5, 3}, {4, 3, 3, 3}, {1, 1}, {6, 4}}; }

// Ranks run as threads: each draws from its own generator, never torch's global one.
inline at::Tensor randn(at::IntArrayRef shape, at::Generator& generator) {
  return torch::randn(shape, generator, torch::kFloat32);
}

// Worker-specific inputs, reproducible from (rank, step); the last tensor is all zero.
inline Buffers makeInputs(const std::vector<std::vector<int64_t>>& shapes, int rank, int step = 0) {
  auto generator = at::detail::createCPUGenerator(1000 * step + rank);
  Buffers b;
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto t = randn(shapes[i], generator);
    if (i + 1 == shapes.size()) t.zero_();
    b.send.push_back(t);
    b.out.push_back(torch::full(shapes[i], 123.0));  // garbage the reducer must overwrite
    b.memory.push_back(torch::full(shapes[i], 456.0));
  }
  return b;
}

// The mean over ranks of each rank's tensor.
inline at::Tensor meanOverRanks(Communicator& comm, const at::Tensor& t) {
  auto sum = t.clone();
  comm.allreduceSum(sum);
  return sum / comm.size();
}

}  // namespace gcrun::reducers
