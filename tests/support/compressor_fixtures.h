#pragma once

// What the compressor tests share: reproducible per-worker inputs, float64 references, tolerances.

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace gcrun::reducers {

using Shapes = std::vector<std::vector<int64_t>>;

struct Buffers {
  std::vector<at::Tensor> send, out, memory;
};

// Worker `rank`'s inputs at `step`, reproducible on any thread, so that every rank can compute
// the float64 reference from all workers' inputs without communicating.
inline std::vector<at::Tensor> inputsOf(const Shapes& shapes, int rank, int step = 0) {
  auto generator = at::detail::createCPUGenerator(1000 * step + rank + 17);
  std::vector<at::Tensor> tensors;
  for (const auto& shape : shapes) tensors.push_back(torch::randn(shape, generator, torch::kFloat32));
  return tensors;
}

inline Buffers buffersFor(const std::vector<at::Tensor>& send) {
  Buffers b;
  for (const auto& t : send) {
    b.send.push_back(t.clone());
    b.out.push_back(torch::full_like(t, 123.0));
    b.memory.push_back(torch::full_like(t, 456.0));
  }
  return b;
}

inline at::Tensor f64(const at::Tensor& t) { return t.to(torch::kFloat64); }

// Tensor i averaged over all workers' inputs, in float64.
inline at::Tensor meanInput(const Shapes& shapes, int world_size, size_t i, int step = 0) {
  auto sum = torch::zeros(shapes[i], torch::kFloat64);
  for (int w = 0; w < world_size; ++w) sum += f64(inputsOf(shapes, w, step)[i]);
  return sum / world_size;
}

inline at::Tensor asMatrix(const at::Tensor& t) { return t.reshape({t.size(0), -1}); }

// The best rank-r approximation of a matrix, in float64.
inline at::Tensor bestApproximation(const at::Tensor& m, int64_t r) {
  at::Tensor u, s, vh;
  std::tie(u, s, vh) = torch::linalg_svd(f64(m), /*full_matrices=*/false);
  r = std::min(r, s.size(0));
  return torch::matmul(u.narrow(1, 0, r) * s.narrow(0, 0, r), vh.narrow(0, 0, r));
}

// Gram-Schmidt as the reference does it, in float64.
inline void orthogonalize64(at::Tensor& p, double eps = 1e-8) {
  for (int64_t i = 0; i < p.size(1); ++i) {
    auto col = p.narrow(1, i, 1);
    col.div_(col.pow(2).sum().sqrt() + eps);
    if (i + 1 < p.size(1)) {
      auto rest = p.narrow(1, i + 1, p.size(1) - i - 1);
      rest.sub_((col * rest).sum(0, true) * col);
    }
  }
}

inline double relativeError(const at::Tensor& actual, const at::Tensor& expected) {
  return (f64(actual) - f64(expected)).norm().item<double>() / std::max(f64(expected).norm().item<double>(), 1e-12);
}

inline void expectClose(const at::Tensor& actual, const at::Tensor& expected, double tolerance,
                        const std::string& what) {
  EXPECT_LT(relativeError(actual, expected), tolerance) << what;
}

}  // namespace gcrun::reducers
