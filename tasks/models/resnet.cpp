#include <stdexcept>
#include <string>

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "tasks/models/models.h"

namespace gcrun::tasks::models {
namespace {

namespace F = torch::nn::functional;
namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

nn::BatchNorm2d batchNorm(int64_t channels) { return nn::BatchNorm2d(nn::BatchNorm2dOptions(channels)); }

// kuangliu's BasicBlock: two conv3x3 + BN, plus a 1x1 conv + BN shortcut when the shape changes.
// The names (conv1, bn1, conv2, bn2, shortcut.0, shortcut.1) are the reference's parameter names.
class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", conv(in, out, 3, stride))),
        bn1_(register_module("bn1", batchNorm(out))),
        conv2_(register_module("conv2", conv(out, out, 3, 1))),
        bn2_(register_module("bn2", batchNorm(out))) {
    if (stride != 1 || in != out) {
      shortcut_ = register_module("shortcut", nn::Sequential(conv(in, out, 1, stride), batchNorm(out)));
    }
  }

  at::Tensor forward(at::Tensor x) {
    at::Tensor out = F::relu(bn1_->forward(conv1_->forward(x)));
    out = bn2_->forward(conv2_->forward(out));
    return F::relu(out + (shortcut_ ? shortcut_->forward(x) : x));
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Sequential shortcut_{nullptr};
};
TORCH_MODULE(BasicBlock);

// The reference's CIFAR ResNet18 (paper-code/tasks/cifar_architectures/resnet.py): a conv3x3 stem
// without max-pool, four stages of two BasicBlocks, avg_pool2d(4) and one linear layer.
class ResNet18 : public Classifier {
 public:
  explicit ResNet18(const ModelSpec& spec) {
    // Three stride-2 stages take the side to ceil(side / 8); avg_pool2d(4) must leave 1x1.
    const int64_t final_side = (spec.image_size + 7) / 8;
    if (final_side < 4 || final_side > 7) {
      throw std::invalid_argument("resnet18 needs images of 25 to 56 pixels, got " + std::to_string(spec.image_size));
    }
    conv1_ = register_module("conv1", conv(spec.in_channels, 64, 3, 1));
    bn1_ = register_module("bn1", batchNorm(64));
    int64_t in = 64;
    const int64_t widths[] = {64, 128, 256, 512};
    for (int stage = 0; stage < 4; ++stage) {
      nn::Sequential layer;
      for (int block = 0; block < 2; ++block) {
        const int64_t stride = (stage > 0 && block == 0) ? 2 : 1;
        layer->push_back(BasicBlock(in, widths[stage], stride));
        in = widths[stage];
      }
      layers_[stage] = register_module("layer" + std::to_string(stage + 1), layer);
    }
    linear_ = register_module("linear", nn::Linear(512, spec.num_classes));
  }

  at::Tensor forward(at::Tensor images) override {
    at::Tensor x = F::relu(bn1_->forward(conv1_->forward(images)));
    for (auto& layer : layers_) x = layer->forward(x);
    x = F::avg_pool2d(x, F::AvgPool2dFuncOptions(4));
    return linear_->forward(x.flatten(1));
  }

 private:
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  nn::Sequential layers_[4] = {nullptr, nullptr, nullptr, nullptr};
  nn::Linear linear_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> makeResNet18(const ModelSpec& spec) { return std::make_shared<ResNet18>(spec); }

// In the order the modules register them: each conv's weight (no bias) and its BatchNorm's weight
// and bias (their running statistics are buffers of the same size, in other_bytes).
ModelSize resNet18Size(const ModelSpec& spec) {
  ModelSize size;
  const auto convWithNorm = [&](double out, double in, double kernel) {
    size.parameters.push_back({{out, in, kernel, kernel}});
    size.parameters.push_back({{out}, 2});
    size.other_bytes += 2 * out * sizeof(float);
  };
  convWithNorm(64, static_cast<double>(spec.in_channels), 3);
  double in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const double out = 64.0 * (1 << stage);
    for (int block = 0; block < 2; ++block) {
      const bool shortcut = (stage > 0 && block == 0) || in != out;
      convWithNorm(out, in, 3);
      convWithNorm(out, out, 3);
      if (shortcut) convWithNorm(out, in, 1);
      in = out;
    }
  }
  const double classes = static_cast<double>(spec.num_classes);
  size.parameters.push_back({{classes, 512}});
  size.parameters.push_back({{classes}});
  return size;
}

}  // namespace gcrun::tasks::models
