#include "tasks/models/rnn_model.h"

#include <cmath>
#include <string>
#include <tuple>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>

namespace gcrun::tasks::models {

RnnModel::RnnModel(int64_t vocabulary, uint64_t seed, int64_t size, int64_t layers, double dropout)
    : RnnModel(vocabulary, size, layers, dropout, at::TensorOptions()) {
  initialize(seed);
}

RnnModel::RnnModel(int64_t vocabulary, ShapeOnly, int64_t size, int64_t layers)
    : RnnModel(vocabulary, size, layers, 0, at::TensorOptions().device(at::kMeta)) {}

RnnModel::RnnModel(int64_t vocabulary, int64_t size, int64_t layers, double dropout, const at::TensorOptions& options)
    : size_(size), layers_(layers), dropout_(dropout) {
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  encoder_weight_ = encoder->register_parameter("weight", at::empty({vocabulary, size}, options));
  // torch.nn.LSTM registers its parameters flat on the module, layer by layer.
  auto rnn = register_module("rnn", std::make_shared<torch::nn::Module>());
  for (int64_t layer = 0; layer < layers; ++layer) {
    const std::string suffix = "_l" + std::to_string(layer);
    const std::pair<const char*, std::vector<int64_t>> shapes[] = {{"weight_ih", {4 * size, size}},
                                                                   {"weight_hh", {4 * size, size}},
                                                                   {"bias_ih", {4 * size}},
                                                                   {"bias_hh", {4 * size}}};
    std::vector<at::Tensor> weights;
    for (const auto& [name, shape] : shapes) {
      weights.push_back(rnn->register_parameter(name + suffix, at::empty(shape, options)));
    }
    layer_weights_.push_back(weights);
  }
  auto decoder = register_module("decoder", std::make_shared<torch::nn::Module>());
  decoder_bias_ = decoder->register_parameter("bias", at::empty({vocabulary}, options));
}

// In parameter order from one generator, as the reference draws them.
void RnnModel::initialize(uint64_t seed) {
  torch::NoGradGuard no_grad;
  at::Generator generator = at::detail::createCPUGenerator(seed);
  encoder_weight_.uniform_(-0.1, 0.1, generator);
  const double bound = 1.0 / std::sqrt(static_cast<double>(size_));
  for (const auto& weights : layer_weights_) {
    for (const auto& w : weights) w.uniform_(-bound, bound, generator);
  }
  decoder_bias_.zero_();
}

ModelSize RnnModel::size(double vocabulary, int64_t size, int64_t layers) {
  const double h = static_cast<double>(size), per_layer = static_cast<double>(layers);
  return {{{{vocabulary, h}}, {{4 * h, h}, 2 * per_layer}, {{4 * h}, 2 * per_layer}, {{vocabulary}}}};
}

// One at::lstm call per layer, so that the dropout between layers uses the model's generator.
std::pair<at::Tensor, RnnModel::Hidden> RnnModel::forward(const at::Tensor& tokens, const Hidden& hidden) {
  at::Tensor x = dropout_(at::embedding(encoder_weight_, tokens), is_training());
  std::vector<at::Tensor> h, c;
  for (int64_t layer = 0; layer < layers_; ++layer) {
    if (layer > 0) x = dropout_(x, is_training());
    auto result = at::lstm(x, {hidden.first.narrow(0, layer, 1), hidden.second.narrow(0, layer, 1)},
                           layer_weights_[layer], /*has_biases=*/true, /*num_layers=*/1, /*dropout=*/0.0, is_training(),
                           /*bidirectional=*/false, /*batch_first=*/false);
    x = std::get<0>(result);
    h.push_back(std::get<1>(result));
    c.push_back(std::get<2>(result));
  }
  x = dropout_(x, is_training());
  return {at::linear(x, encoder_weight_, decoder_bias_), {at::cat(h), at::cat(c)}};
}

RnnModel::Hidden RnnModel::initHidden(int64_t batch) const {
  return {at::zeros({layers_, batch, size_}, encoder_weight_.options()),
          at::zeros({layers_, batch, size_}, encoder_weight_.options())};
}

void RnnModel::seedRandomness(uint64_t seed) { dropout_.seed(seed, encoder_weight_.device()); }

void RnnModel::setRandomState(const at::Tensor& state) { dropout_.setState(state, encoder_weight_.device()); }

}  // namespace gcrun::tasks::models
