#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

#include "hyperparams/base/registry.h"
#include "tasks/model_size.h"

namespace gcrun::tasks::models {

// What a task tells an architecture about its data.
struct ModelSpec {
  int64_t in_channels = 1;
  int64_t image_size = 28;  // square images
  int64_t num_classes = 10;
};

// An image classifier: [B, C, H, W] float images -> [B, num_classes] logits.
class Classifier : public torch::nn::Module {
 public:
  virtual at::Tensor forward(at::Tensor images) = 0;
  // Models with dropout draw their masks from a private generator that this reseeds; tasks call it
  // with a (seed, rank, epoch) stream seed, so masks are deterministic and threads never share one.
  virtual void seedRandomness(uint64_t seed) {}
  // That generator's state, for checkpoints taken mid-epoch; undefined for models without one.
  virtual at::Tensor randomState() const { return {}; }
  virtual void setRandomState(const at::Tensor& state) {}
  // buildModel() calls this after PyTorch's default initialisation, with the same seeded generator,
  // for architectures whose reference re-initialises some layers (VGG's convs).
  virtual void reinitialize(at::Generator& generator) {}
};

// Factories build the modules only; buildModel() initialises the weights.
using ModelFactory = std::function<std::shared_ptr<Classifier>(const ModelSpec&)>;

// An architecture: its factory, and its parameters' shapes for a spec, in the factory's order,
// without building it (the memory estimate before a run).
struct Architecture {
  ModelFactory make;
  std::function<ModelSize(const ModelSpec&)> size;
};

// The architectures, by `task.architecture`; built-ins are registered on first use.
Registry<Architecture>& modelRegistry();

// Looks the architecture up (unknown: the registry's UserError), builds it on the CPU and draws
// every weight from a generator seeded with `seed` alone: identical on every worker and thread,
// independent of torch's global RNG and of other threads.
std::shared_ptr<Classifier> buildModel(const std::string& architecture, const ModelSpec& spec, uint64_t seed);

// The built-in architectures (see their files).
std::shared_ptr<Classifier> makeCnn(const ModelSpec& spec);
std::shared_ptr<Classifier> makeResNet18(const ModelSpec& spec);
std::shared_ptr<Classifier> makeVgg16(const ModelSpec& spec);
ModelSize cnnSize(const ModelSpec& spec);
ModelSize resNet18Size(const ModelSpec& spec);
ModelSize vgg16Size(const ModelSpec& spec);

}  // namespace gcrun::tasks::models
