#include <cmath>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include "tasks/models/models.h"

namespace gcrun::tasks::models {
namespace {

// PyTorch's default for conv and linear layers: weight ~ kaiming_uniform_(a = sqrt(5)), bias ~
// U(+-1/sqrt(fan_in)), computed the way torch.nn.init does.
void initLayer(at::Tensor& weight, at::Tensor& bias, at::Generator& generator) {
  const double fan_in = static_cast<double>(weight.numel() / weight.size(0));
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1 + a * a));
  const double weight_bound = std::sqrt(3.0) * (gain / std::sqrt(fan_in));
  weight.uniform_(-weight_bound, weight_bound, generator);
  if (bias.defined()) {
    const double bias_bound = 1 / std::sqrt(fan_in);
    bias.uniform_(-bias_bound, bias_bound, generator);
  }
}

// The modules' constructors drew their weights from torch's global RNG, which other threads share;
// redraw them all, in construction order, from a private generator. BatchNorm starts at (1, 0).
void initParameters(Classifier& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  at::Generator generator = at::detail::createCPUGenerator(seed);
  for (const auto& module : model.modules()) {
    if (auto* conv = module->as<torch::nn::Conv2dImpl>()) {
      initLayer(conv->weight, conv->bias, generator);
    } else if (auto* linear = module->as<torch::nn::LinearImpl>()) {
      initLayer(linear->weight, linear->bias, generator);
    } else if (auto* bn = module->as<torch::nn::BatchNorm2dImpl>()) {
      bn->reset_parameters();
    } else if (!module->named_parameters(/*recurse=*/false).is_empty()) {
      throw std::logic_error("no seeded initialisation for module " + module->name());
    }
  }
  model.reinitialize(generator);
}

}  // namespace

Registry<Architecture>& modelRegistry() {
  static Registry<Architecture> registry = [] {
    Registry<Architecture> builtins("architecture");
    builtins.add("cnn",
                 "small CNN for 28x28 images: 2 conv3x3 + max-pool, 2 linear (421,642 "
                 "params for 1 channel and 10 classes)",
                 {makeCnn, cnnSize});
    builtins.add("resnet18",
                 "the reference's CIFAR ResNet18 (kuangliu): 11,173,962 params for 3 "
                 "channels and 10 classes",
                 {makeResNet18, resNet18Size});
    builtins.add("vgg16",
                 "the reference's CIFAR VGG16: configuration D without batch norm, "
                 "dropout classifier (15,245,130 params for 32x32 RGB and 10 classes)",
                 {makeVgg16, vgg16Size});
    return builtins;
  }();
  return registry;
}

std::shared_ptr<Classifier> buildModel(const std::string& architecture, const ModelSpec& spec, uint64_t seed) {
  std::shared_ptr<Classifier> model = modelRegistry().at(architecture).factory.make(spec);
  initParameters(*model, seed);
  return model;
}

}  // namespace gcrun::tasks::models
