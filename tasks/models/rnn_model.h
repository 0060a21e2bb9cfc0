#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "tasks/model_size.h"
#include "tasks/models/dropout.h"

namespace gcrun::tasks::models {

// The reference's RNNModel (tasks/language_modeling/model.py, from pytorch/examples'
// word_language_model) as the paper ran it: Embedding(V, 650) -> dropout -> 3-layer LSTM(650, 650)
// with dropout between layers -> dropout -> Linear(650, V) whose weight IS the embedding (tied:
// one parameter). All dropouts have p = 0.4. Parameters, in the reference's order and names:
// encoder.weight, rnn.{weight_ih,weight_hh,bias_ih,bias_hh}_l{0,1,2}, decoder.bias; 28,949,319 at
// V = 28,869. Initialisation: encoder uniform(+-0.1), decoder bias 0, LSTM PyTorch's default
// uniform(+-1/sqrt(650)), all from a generator seeded with `seed`.
class RnnModel : public torch::nn::Module {
 public:
  using Hidden = std::pair<at::Tensor, at::Tensor>;  // (h, c), each [layers, batch, hidden]

  RnnModel(int64_t vocabulary, uint64_t seed, int64_t size = 650, int64_t layers = 3, double dropout = 0.4);
  // Its parameters on the meta device, uninitialised (no memory at any vocabulary).
  RnnModel(int64_t vocabulary, ShapeOnly, int64_t size = 650, int64_t layers = 3);

  // tokens: int64 [seq, batch] -> logits [seq, batch, V] and the final hidden state.
  std::pair<at::Tensor, Hidden> forward(const at::Tensor& tokens, const Hidden& hidden);
  Hidden initHidden(int64_t batch) const;
  // Reseeds the dropout masks (see Classifier::seedRandomness).
  void seedRandomness(uint64_t seed);
  // The dropout generator's state (see Classifier::randomState).
  at::Tensor randomState() const { return dropout_.state(); }
  void setRandomState(const at::Tensor& state);

  int64_t vocabulary() const { return encoder_weight_.size(0); }

  // Its parameters' shapes (grouped by shape) for these arguments of the constructor.
  static ModelSize size(double vocabulary, int64_t size = 650, int64_t layers = 3);

 private:
  RnnModel(int64_t vocabulary, int64_t size, int64_t layers, double dropout, const at::TensorOptions& options);
  void initialize(uint64_t seed);

  int64_t size_;
  int64_t layers_;
  at::Tensor encoder_weight_;
  std::vector<std::vector<at::Tensor>> layer_weights_;  // per layer: w_ih, w_hh, b_ih, b_hh
  at::Tensor decoder_bias_;
  Dropout dropout_;
};

}  // namespace gcrun::tasks::models
