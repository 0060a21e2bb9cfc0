#include "reducers/builtin_reducers.h"

#include <torch/nn/module.h>

namespace gcrun::reducers {
Registry<ReducerSpec>& reducerRegistry() {
  static Registry<ReducerSpec>* registry = [] {
    auto* r = new Registry<ReducerSpec>("reducer");
    r->add("exact", "all-reduce average of the full gradient (SGD; the reference's ExactReducer)", exactSpec());
    r->add("powersgd", "rank-r PowerSGD: power iteration with a warm-started query (the reference's RankKReducer)",
           powerSgdSpec());
    r->add("powersgd-ddp",
           "PyTorch DDP's powerSGD_hook (torch 1.13) op for op, on one bucket of every parameter: bit for bit "
           "the hook's update",
           powerSgdDdpSpec());
    r->add("unbiased-rank",
           "half a power iteration per step, P and Q in turn, local error (the reference's HalfRankKReducer)",
           unbiasedRankSpec());
    r->add("svd", "each worker's best rank-r approximation, (u, s, v) all-gathered (the reference's SVDReducer)",
           svdSpec());
    r->add("atomo", "Atomo: r singular atoms sampled per tensor, rescaled, all-gathered (the reference's AtomoReducer)",
           atomoSpec());
    r->add("signum", "majority vote of bit-packed signs, all-gathered (the reference's SignSGDwithMajorityVoteReducer)",
           signumSpec());
    r->add("sign-norm",
           "bit-packed signs times each tensor's mean |g|, all-gathered (the reference's SignAndNormReducer)",
           signNormSpec());
    r->add("topk", "per-tensor top-k magnitudes, values and positions all-gathered (the reference's TopKReducer)",
           topKSpec());
    r->add("global-topk", "top-k magnitudes of the whole gradient, all-gathered (the reference's GlobalTopKReducer)",
           globalTopKSpec());
    r->add("random-k",
           "k random elements per tensor from a shared generator (the reference's UniformRandomSparseReducer)",
           randomKSpec());
    r->add("random-block",
           "a random contiguous block per tensor from a shared generator (the reference's "
           "UniformRandomSparseBlockReducer)",
           randomBlockSpec());
    r->add("qsgd", "QSGD: unbiased stochastic s-level quantization with a norm per tensor, bit-packed, all-gathered",
           qsgdSpec());
    r->add("terngrad", "TernGrad: unbiased stochastic ternary {-1, 0, 1} times max|g| per tensor, 2 bits, all-gathered",
           ternGradSpec());
    r->add("fp16", "half-precision all-reduce, divided by the workers before the cast (Horovod's fp16 compression)",
           fp16Spec());
    r->add("bf16", "bfloat16 all-reduce, divided by the workers before the cast (DDP's bf16_compress_hook)",
           bf16Spec());
    r->add("two-bit-topk",
           "SparseLoCo's codec: chunk-wise top-k at two levels per chunk, 2-bit values and positions within "
           "the chunk packed as Templar sends them, all-gathered",
           twoBitTopKSpec());
    r->add("dct-topk",
           "DeMo's codec: top-k DCT coefficients per block, int64 positions and float32 values as bloc97/DeMo "
           "sends them, all-gathered",
           dctTopKSpec());
    r->add("fp8", "8-bit floats (E4M3 or E5M2) scaled by amax per block or tensor, all-gathered, summed in float32",
           fp8Spec());
    r->add("fp4", "Streaming DiLoCo's 4-bit E3M0 floats scaled by amax, two a byte, all-gathered, summed in float32",
           fp4Spec());
    r->add("int8", "INTELLECT-1's min-max uint8 per tensor, all-gathered, summed in float32", int8Spec());
    return r;
  }();
  return *registry;
}

std::vector<ParameterInfo> parametersOf(const torch::nn::Module& model) {
  std::vector<ParameterInfo> parameters;
  for (const auto& item : model.named_parameters()) parameters.push_back({item.key(), item.value().sizes().vec()});
  return parameters;
}

}  // namespace gcrun::reducers
