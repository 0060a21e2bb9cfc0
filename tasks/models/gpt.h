#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "tasks/model_size.h"
#include "tasks/models/dropout.h"

namespace gcrun::tasks::models {

// The shape of a GPT: vocabulary V, context T (the longest input), L blocks of H heads over width d.
struct GptShape {
  int64_t vocabulary = 65;
  int64_t context = 64;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t width = 128;
  bool bias = true;
  double dropout = 0.0;
};

// nanoGPT's decoder-only GPT (karpathy/nanoGPT model.py, its non-flash attention path), written so
// that a PyTorch twin reproduces its bits: every op and every random draw in a fixed order.
// Parameters, in this order and with nanoGPT's names:
//   transformer.wte.weight [V,d], transformer.wpe.weight [T,d], then per block i:
//   transformer.h.i.{ln_1.weight, ln_1.bias, attn.c_attn.weight [3d,d], attn.c_attn.bias,
//   attn.c_proj.weight [d,d], attn.c_proj.bias, ln_2.weight, ln_2.bias, mlp.c_fc.weight [4d,d],
//   mlp.c_fc.bias, mlp.c_proj.weight [d,4d], mlp.c_proj.bias}, then transformer.ln_f.{weight,bias};
//   without bias, no *.bias at all. The output projection is wte itself (tied: no parameter).
// Initialisation: one CPU generator seeded with `seed`; in the order above, LayerNorm weights 1,
// biases 0 (no draw), every *.c_proj.weight normal(0, 0.02 / sqrt(2L)), every other weight
// normal(0, 0.02). The causal mask, tril(ones(t, t)) for an input of length t, is a constant made by
// each forward: no buffer, so no checkpoint holds it (earlier versions saved it as `causal_mask`).
// Dropout (p = shape.dropout) after the embeddings, on the attention weights, after each c_proj,
// all from one private generator (seedRandomness), drawn in forward order.
class GptModel : public torch::nn::Module {
 public:
  GptModel(const GptShape& shape, uint64_t seed);
  // Its parameters on the meta device, uninitialised (no memory at any size).
  GptModel(const GptShape& shape, ShapeOnly);

  // idx: int64 [B, t] with t <= T, on the model's device -> logits [B, t, V].
  at::Tensor forward(const at::Tensor& idx);
  // The mean cross entropy of forward(inputs) against targets (both int64 [B, t]).
  at::Tensor loss(const at::Tensor& logits, const at::Tensor& targets) const;

  // Reseeds the dropout masks (see Classifier::seedRandomness); touches no generator at p = 0.
  void seedRandomness(uint64_t seed);
  at::Tensor randomState() const { return dropout_.state(); }
  void setRandomState(const at::Tensor& state);

  const GptShape& shape() const { return shape_; }

  // Its parameters' shapes (grouped by shape), without building it: V d + T d + L (12 d^2 + 13 d)
  // + 2 d elements with biases, V d + T d + L (12 d^2 + 2 d) + d without.
  static ModelSize size(const GptShape& shape);

  // Whether `saved`, a checkpoint's buffer `name` of an earlier version, is the causal mask this
  // model makes for its context (then it is ignored); false for any other name. Throws
  // std::invalid_argument when it is that buffer but not the mask.
  bool isFormerBuffer(const std::string& name, const at::Tensor& saved) const;

 private:
  struct Block {
    at::Tensor ln_1_weight, ln_1_bias, c_attn_weight, c_attn_bias, attn_proj_weight, attn_proj_bias;
    at::Tensor ln_2_weight, ln_2_bias, c_fc_weight, c_fc_bias, mlp_proj_weight, mlp_proj_bias;
  };

  void registerParameters(const at::TensorOptions& options);
  void initialize(uint64_t seed);
  at::Tensor attention(const Block& block, const at::Tensor& x);
  at::Tensor mlp(const Block& block, const at::Tensor& x);

  GptShape shape_;
  at::Tensor wte_, wpe_, ln_f_weight_, ln_f_bias_;
  std::vector<Block> blocks_;
  Dropout dropout_;
};

}  // namespace gcrun::tasks::models
