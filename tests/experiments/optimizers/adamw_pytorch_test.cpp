// gcrun's AdamW, clip and cosine schedule against PyTorch's (adamw_twin.py, run by Debian's
// python3-torch 1.13, which shares ATen with LibTorch 1.13.1): the same float32 inputs give the
// same bits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "tests/experiments/optimizers/optimizer_fixtures.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun::experiments {
namespace {

using gcrun::testing::runCommand;
using gcrun::testing::TempDir;
using testing::Model;

constexpr char kDebianPython[] = "/usr/bin/python3";
constexpr int kSteps = 12;

void writeBytes(const std::string& path, const at::Tensor& tensor) {
  const at::Tensor flat = tensor.contiguous();
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(flat.data_ptr()), flat.nbytes());
}

at::Tensor readFloats(const std::string& path, at::IntArrayRef shape) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  at::Tensor out = at::empty(shape, at::kFloat);
  EXPECT_EQ(bytes.size(), out.nbytes()) << path;
  if (bytes.size() == out.nbytes()) std::memcpy(out.data_ptr(), bytes.data(), bytes.size());
  return out;
}

// Gradients large enough to be clipped on some steps, small enough not to be on others.
std::vector<at::Tensor> gradientsAt(int step, const Model& model, at::Generator& generator) {
  std::vector<at::Tensor> grads;
  const double scale = step % 3 == 0 ? 0.01 : 2.0;
  for (const auto& p : model.params) grads.push_back(at::randn(p.sizes(), generator, at::kFloat) * scale);
  return grads;
}

TEST(AdamWAgainstPyTorch, SameBitsAsTorchAdamWWithClipAndCosineSchedule) {
  if (::access(kDebianPython, X_OK) != 0) GTEST_SKIP() << kDebianPython << " is missing";
  if (runCommand(std::string(kDebianPython) + " -c 'import torch'").exit_code != 0) {
    GTEST_SKIP() << "Debian's python3-torch is not installed (apt-get install python3-torch)";
  }
  OptimizerOptions options;
  options.name = "adamw";
  options.learning_rate = 3e-3;
  options.min_learning_rate = 3e-4;
  options.beta1 = 0.9;
  options.beta2 = 0.95;
  options.epsilon = 1e-8;
  options.weight_decay = 0.1;
  // Not 1: the coefficient's order (reciprocal, then times clip_norm) then shows in the bits.
  options.clip_norm = 0.7;
  options.schedule = "cosine";
  options.warmup_steps = 2;
  options.decay_steps = 5;

  at::Generator generator = at::detail::createCPUGenerator(1234);
  Model model;
  model.add("transformer.wte.weight", at::randn({11, 4}, generator, at::kFloat));  // an embedding: not decayed
  model.add("h.0.attn.c_attn.weight", at::randn({12, 4}, generator, at::kFloat));
  model.add("h.0.attn.c_attn.bias", at::randn({12}, generator, at::kFloat));
  model.add("lm_head.weight", at::randn({5, 4, 3}, generator, at::kFloat));
  model.add("ln_f.weight", at::ones({4}, at::kFloat));

  TempDir dir;
  {
    std::ofstream spec(dir.file("spec.txt"));
    spec.precision(17);
    spec << "lr " << options.learning_rate << "\nmin_lr " << options.min_learning_rate << "\nwarmup 2\ndecay 5\n"
         << "steps " << kSteps << "\nbeta1 0.9\nbeta2 0.95\neps 1e-8\nwd 0.1\nclip 0.7\ndecayed 1,3\n";
    for (const auto& p : model.params) {
      spec << "shape";
      for (auto size : p.sizes()) spec << " " << size;
      spec << "\n";
    }
  }
  for (size_t k = 0; k < model.params.size(); ++k)
    writeBytes(dir.file("init_" + std::to_string(k) + ".bin"), model.params[k]);

  auto adamw = testing::makeOptimizer(options, model, {"transformer.wte.weight"});
  for (int step = 0; step < kSteps; ++step) {
    const auto grads = gradientsAt(step, model, generator);
    for (size_t k = 0; k < grads.size(); ++k) {
      writeBytes(dir.file("grad_" + std::to_string(step) + "_" + std::to_string(k) + ".bin"), grads[k]);
    }
    testing::stepWith(*adamw, model, grads, step);
  }

  const auto twin = runCommand(std::string(kDebianPython) + " " + GCRUN_ADAMW_TWIN + " " + dir.path().string());
  ASSERT_EQ(twin.exit_code, 0) << twin.output;

  TensorMap state;
  adamw->saveState(state);
  for (size_t k = 0; k < model.params.size(); ++k) {
    const auto shape = model.params[k].sizes();
    const std::string suffix = "_" + std::to_string(k) + ".bin";
    EXPECT_TRUE(at::equal(model.params[k], readFloats(dir.file("final" + suffix), shape))) << model.names[k];
    EXPECT_TRUE(at::equal(state.at("adamw/exp_avg/" + model.names[k]), readFloats(dir.file("exp_avg" + suffix), shape)))
        << model.names[k];
    EXPECT_TRUE(
        at::equal(state.at("adamw/exp_avg_sq/" + model.names[k]), readFloats(dir.file("exp_avg_sq" + suffix), shape)))
        << model.names[k];
  }
  EXPECT_FALSE(at::equal(model.params[0], readFloats(dir.file("init_0.bin"), model.params[0].sizes())));

  // The schedule, past the decay's end too, to the bit.
  std::ifstream rate_lines(dir.file("rates.txt"));
  int64_t step = 0;
  for (std::string line; std::getline(rate_lines, line); ++step) {
    EXPECT_EQ(adamw->learningRate({step, 0.0}), std::strtod(line.c_str(), nullptr)) << "step " << step << ": " << line;
  }
  EXPECT_EQ(step, options.decay_steps + 3);
}

}  // namespace
}  // namespace gcrun::experiments
