#include <cmath>
#include <stdexcept>
#include <string>

#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/utils.h>

#include "tasks/models/dropout.h"
#include "tasks/models/models.h"

namespace gcrun::tasks::models {
namespace {

namespace F = torch::nn::functional;
namespace nn = torch::nn;

constexpr int64_t kPool = 0;
// Configuration D: channels of the 13 conv3x3 layers, kPool for the 2x2 max-pools.
constexpr int64_t kConfigD[] = {64,    64,  kPool, 128, 128,   kPool, 256, 256, 256,
                                kPool, 512, 512,   512, kPool, 512,   512, 512, kPool};

// The reference's CIFAR VGG16 (tasks/cifar_architectures/vgg.py, lowercase `vgg16`): configuration
// D without batch norm, then Dropout, Linear(512, 512), ReLU, Dropout, Linear(512, 512), ReLU,
// Linear(512, classes); 15,245,130 parameters for CIFAR-10. Parameter names are its nn.Sequential
// indices, where ReLUs, pools and dropouts count too: features.0.weight, features.2.weight, ...,
// classifier.1.weight, classifier.4.weight, classifier.6.weight. No name contains "conv", so the
// reference's name rules put every VGG weight in the "other" weight-decay and learning-rate group.
class Vgg16 : public Classifier {
 public:
  explicit Vgg16(const ModelSpec& spec) : dropout_(0.5) {
    if (spec.image_size != 32) {
      throw std::invalid_argument("vgg16 needs 32x32 images, got " + std::to_string(spec.image_size));
    }
    int64_t in = spec.in_channels;
    for (int64_t channels : kConfigD) {
      if (channels == kPool) {
        features_->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));
        continue;
      }
      features_->push_back(nn::Conv2d(nn::Conv2dOptions(in, channels, 3).padding(1)));
      features_->push_back(nn::ReLU());
      in = channels;
    }
    register_module("features", features_);
    auto classifier = register_module("classifier", std::make_shared<nn::Module>());
    fc1_ = classifier->register_module("1", nn::Linear(512, 512));
    fc2_ = classifier->register_module("4", nn::Linear(512, 512));
    fc3_ = classifier->register_module("6", nn::Linear(512, spec.num_classes));
  }

  at::Tensor forward(at::Tensor images) override {
    at::Tensor x = features_->forward(images).flatten(1);
    x = F::relu(fc1_->forward(dropout_(x, is_training())));
    x = F::relu(fc2_->forward(dropout_(x, is_training())));
    return fc3_->forward(x);
  }

  void seedRandomness(uint64_t seed) override { dropout_.seed(seed, fc1_->weight.device()); }
  at::Tensor randomState() const override { return dropout_.state(); }
  void setRandomState(const at::Tensor& state) override { dropout_.setState(state, fc1_->weight.device()); }

  // The reference: conv weights ~ N(0, sqrt(2 / (k * k * out_channels))), conv biases 0.
  void reinitialize(at::Generator& generator) override {
    torch::NoGradGuard no_grad;
    for (const auto& module : features_->children()) {
      auto* conv = module->as<nn::Conv2dImpl>();
      if (!conv) continue;
      const auto& weight = conv->weight;
      const double fan_out = static_cast<double>(weight.size(0) * weight.size(2) * weight.size(3));
      conv->weight.normal_(0, std::sqrt(2.0 / fan_out), generator);
      conv->bias.zero_();
    }
  }

 private:
  nn::Sequential features_;
  nn::Linear fc1_{nullptr};
  nn::Linear fc2_{nullptr};
  nn::Linear fc3_{nullptr};
  Dropout dropout_;
};

}  // namespace

std::shared_ptr<Classifier> makeVgg16(const ModelSpec& spec) { return std::make_shared<Vgg16>(spec); }

ModelSize vgg16Size(const ModelSpec& spec) {
  ModelSize size;
  double in = static_cast<double>(spec.in_channels);
  for (int64_t channels : kConfigD) {
    if (channels == kPool) continue;
    const double out = static_cast<double>(channels);
    size.parameters.push_back({{out, in, 3, 3}});
    size.parameters.push_back({{out}});
    in = out;
  }
  const double classes = static_cast<double>(spec.num_classes);
  size.parameters.push_back({{512, 512}, 2});
  size.parameters.push_back({{512}, 2});
  size.parameters.push_back({{classes, 512}});
  size.parameters.push_back({{classes}});
  return size;
}

}  // namespace gcrun::tasks::models
