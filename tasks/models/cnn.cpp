#include <stdexcept>

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "tasks/models/models.h"

namespace gcrun::tasks::models {
namespace {

namespace F = torch::nn::functional;

// A small, fast CNN for 28x28 images: two conv3x3 + ReLU + 2x2 max-pool stages, then two linear
// layers. The submodule names (conv1, conv2, fc1, fc2) put the conv weights in the conv group.
class Cnn : public Classifier {
 public:
  explicit Cnn(const ModelSpec& spec) {
    if (spec.image_size % 4 != 0) {
      throw std::invalid_argument("cnn needs an image size divisible by 4, got " + std::to_string(spec.image_size));
    }
    const int64_t pooled = spec.image_size / 4;
    conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(spec.in_channels, 32, 3).padding(1)));
    conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
    fc1_ = register_module("fc1", torch::nn::Linear(64 * pooled * pooled, 128));
    fc2_ = register_module("fc2", torch::nn::Linear(128, spec.num_classes));
  }

  at::Tensor forward(at::Tensor images) override {
    at::Tensor x = F::max_pool2d(F::relu(conv1_->forward(images)), F::MaxPool2dFuncOptions(2));
    x = F::max_pool2d(F::relu(conv2_->forward(x)), F::MaxPool2dFuncOptions(2));
    x = F::relu(fc1_->forward(x.flatten(1)));
    return fc2_->forward(x);
  }

 private:
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::Conv2d conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr};
  torch::nn::Linear fc2_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> makeCnn(const ModelSpec& spec) { return std::make_shared<Cnn>(spec); }

ModelSize cnnSize(const ModelSpec& spec) {
  const double pooled = static_cast<double>(spec.image_size / 4), classes = static_cast<double>(spec.num_classes);
  return {{{{32, static_cast<double>(spec.in_channels), 3, 3}},
           {{32}},
           {{64, 32, 3, 3}},
           {{64}},
           {{128, 64 * pooled * pooled}},
           {{128}},
           {{classes, 128}},
           {{classes}}}};
}

}  // namespace gcrun::tasks::models
