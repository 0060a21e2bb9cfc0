#include "tasks/models/gpt.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

namespace gcrun::tasks::models {
namespace {

constexpr double kLayerNormEpsilon = 1e-5;
constexpr double kInitStd = 0.02;

bool endsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A submodule `name` of `parent` holding `weight` and, when `bias`, `bias`; returns them.
std::pair<at::Tensor, at::Tensor> addLayer(torch::nn::Module& parent, const std::string& name,
                                           std::vector<int64_t> weight_shape, int64_t bias_size, bool bias,
                                           const at::TensorOptions& options) {
  auto layer = parent.register_module(name, std::make_shared<torch::nn::Module>());
  at::Tensor weight = layer->register_parameter("weight", at::empty(weight_shape, options));
  at::Tensor bias_tensor = bias ? layer->register_parameter("bias", at::empty({bias_size}, options)) : at::Tensor();
  return {weight, bias_tensor};
}

}  // namespace

GptModel::GptModel(const GptShape& shape, uint64_t seed) : shape_(shape), dropout_(shape.dropout) {
  registerParameters(at::TensorOptions());
  initialize(seed);
}

GptModel::GptModel(const GptShape& shape, ShapeOnly) : shape_(shape), dropout_(shape.dropout) {
  registerParameters(at::TensorOptions().device(at::kMeta));
}

void GptModel::registerParameters(const at::TensorOptions& options) {
  const int64_t d = shape_.width;
  const bool bias = shape_.bias;
  auto transformer = register_module("transformer", std::make_shared<torch::nn::Module>());
  wte_ = addLayer(*transformer, "wte", {shape_.vocabulary, d}, 0, false, options).first;
  wpe_ = addLayer(*transformer, "wpe", {shape_.context, d}, 0, false, options).first;
  auto h = transformer->register_module("h", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < shape_.layers; ++i) {
    auto block = h->register_module(std::to_string(i), std::make_shared<torch::nn::Module>());
    Block b;
    std::tie(b.ln_1_weight, b.ln_1_bias) = addLayer(*block, "ln_1", {d}, d, bias, options);
    auto attn = block->register_module("attn", std::make_shared<torch::nn::Module>());
    std::tie(b.c_attn_weight, b.c_attn_bias) = addLayer(*attn, "c_attn", {3 * d, d}, 3 * d, bias, options);
    std::tie(b.attn_proj_weight, b.attn_proj_bias) = addLayer(*attn, "c_proj", {d, d}, d, bias, options);
    std::tie(b.ln_2_weight, b.ln_2_bias) = addLayer(*block, "ln_2", {d}, d, bias, options);
    auto mlp = block->register_module("mlp", std::make_shared<torch::nn::Module>());
    std::tie(b.c_fc_weight, b.c_fc_bias) = addLayer(*mlp, "c_fc", {4 * d, d}, 4 * d, bias, options);
    std::tie(b.mlp_proj_weight, b.mlp_proj_bias) = addLayer(*mlp, "c_proj", {d, 4 * d}, d, bias, options);
    blocks_.push_back(b);
  }
  std::tie(ln_f_weight_, ln_f_bias_) = addLayer(*transformer, "ln_f", {d}, d, bias, options);
}

// In parameter order, one generator: the twin draws the same numbers into the same tensors.
void GptModel::initialize(uint64_t seed) {
  torch::NoGradGuard no_grad;
  at::Generator generator = at::detail::createCPUGenerator(seed);
  const double proj_std = kInitStd / std::sqrt(2.0 * static_cast<double>(shape_.layers));
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    at::Tensor& p = item.value();
    const bool layer_norm = name.find(".ln_") != std::string::npos;
    if (endsWith(name, ".bias")) {
      p.zero_();
    } else if (layer_norm) {
      p.fill_(1.0);
    } else if (endsWith(name, ".c_proj.weight")) {
      p.normal_(0.0, proj_std, generator);
    } else {
      p.normal_(0.0, kInitStd, generator);
    }
  }
}

at::Tensor GptModel::attention(const Block& block, const at::Tensor& x) {
  const int64_t batch = x.size(0), t = x.size(1), d = shape_.width, heads = shape_.heads;
  const auto qkv = at::linear(x, block.c_attn_weight, block.c_attn_bias).split(d, 2);
  const auto headed = [&](const at::Tensor& part) { return part.view({batch, t, heads, d / heads}).transpose(1, 2); };
  const at::Tensor q = headed(qkv[0]), k = headed(qkv[1]), v = headed(qkv[2]);
  at::Tensor att = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(d / heads)));
  const at::Tensor future = at::ones({t, t}, att.options().dtype(at::kBool)).triu(1);
  att = att.masked_fill(future, -std::numeric_limits<double>::infinity());
  att = dropout_(at::softmax(att, -1), is_training());
  const at::Tensor y = at::matmul(att, v).transpose(1, 2).contiguous().view({batch, t, d});
  return dropout_(at::linear(y, block.attn_proj_weight, block.attn_proj_bias), is_training());
}

at::Tensor GptModel::mlp(const Block& block, const at::Tensor& x) {
  const at::Tensor hidden = at::gelu(at::linear(x, block.c_fc_weight, block.c_fc_bias));
  return dropout_(at::linear(hidden, block.mlp_proj_weight, block.mlp_proj_bias), is_training());
}

at::Tensor GptModel::forward(const at::Tensor& idx) {
  const int64_t t = idx.size(1), d = shape_.width;
  if (t > shape_.context) {
    throw std::invalid_argument("GPT input of length " + std::to_string(t) + " is longer than its context " +
                                std::to_string(shape_.context));
  }
  const at::Tensor positions = at::arange(t, idx.options().dtype(at::kLong));
  at::Tensor x = dropout_(at::embedding(wte_, idx) + at::embedding(wpe_, positions), is_training());
  for (const Block& block : blocks_) {
    x = x + attention(block, at::layer_norm(x, {d}, block.ln_1_weight, block.ln_1_bias, kLayerNormEpsilon));
    x = x + mlp(block, at::layer_norm(x, {d}, block.ln_2_weight, block.ln_2_bias, kLayerNormEpsilon));
  }
  x = at::layer_norm(x, {d}, ln_f_weight_, ln_f_bias_, kLayerNormEpsilon);
  return at::linear(x, wte_);
}

at::Tensor GptModel::loss(const at::Tensor& logits, const at::Tensor& targets) const {
  return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), targets.view(-1));
}

void GptModel::seedRandomness(uint64_t seed) {
  if (shape_.dropout > 0) dropout_.seed(seed, wte_.device());
}

void GptModel::setRandomState(const at::Tensor& state) { dropout_.setState(state, wte_.device()); }

ModelSize GptModel::size(const GptShape& shape) {
  const double d = static_cast<double>(shape.width), layers = static_cast<double>(shape.layers);
  ModelSize size{{{{static_cast<double>(shape.vocabulary), d}}, {{static_cast<double>(shape.context), d}}}};
  // Per block: c_attn [3d, d], c_proj [d, d], c_fc [4d, d], c_proj [d, 4d].
  size.parameters.push_back({{3 * d, d}, layers});
  size.parameters.push_back({{d, d}, layers});
  size.parameters.push_back({{4 * d, d}, layers});
  size.parameters.push_back({{d, 4 * d}, layers});
  if (shape.bias) {
    // ln_1, ln_2 (weight and bias), c_attn's bias [3d], c_proj's, c_fc's [4d], c_proj's; ln_f's two.
    size.parameters.push_back({{d}, 6 * layers + 2});
    size.parameters.push_back({{3 * d}, layers});
    size.parameters.push_back({{4 * d}, layers});
  } else {
    size.parameters.push_back({{d}, 2 * layers + 1});
  }
  return size;
}

bool GptModel::isFormerBuffer(const std::string& name, const at::Tensor& saved) const {
  if (name != "causal_mask") return false;
  const int64_t t = shape_.context;
  if (saved.dim() != 2 || saved.size(0) != t || saved.size(1) != t || saved.scalar_type() != at::kFloat ||
      !saved.equal(at::ones({t, t}, saved.options()).tril())) {
    throw std::invalid_argument("buffer 'causal_mask' is not the causal mask tril(ones(" + std::to_string(t) + ", " +
                                std::to_string(t) + ")) this model uses (a crafted or different model's checkpoint)");
  }
  return true;
}

}  // namespace gcrun::tasks::models
