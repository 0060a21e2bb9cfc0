#include "reducers/builtin_reducers.h"

namespace gcrun::reducers {

Registry<ReducerSpec>& reducerRegistry() {
  static Registry<ReducerSpec>* registry = [] {
    auto* r = new Registry<ReducerSpec>("reducer");
    r->add("exact", "all-reduce average of the full gradient (SGD; the reference's ExactReducer)",
           ReducerSpec{makeExactReducer, "all-reduce", {}, true, {"layer", "model", "bucket"}});
    r->add("powersgd",
           "rank-r PowerSGD: power iteration with a warm-started query (the reference's RankKReducer)",
           ReducerSpec{makePowerSgdReducer, "all-reduce",
                       {"reducer.rank", "reducer.reuse_query", "reducer.n_power_iterations",
                        "reducer.orthogonalization_epsilon", "reducer.start_iter", "reducer.min_compression_rate"},
                       true, {"layer", "model", "bucket"}});
    r->add("unbiased-rank",
           "half a power iteration per step, P and Q in turn, local error (the reference's HalfRankKReducer)",
           ReducerSpec{makeUnbiasedRankReducer, "all-reduce", {"reducer.rank", "reducer.orthogonalization_epsilon"},
                       true, {"layer", "model"}});
    r->add("svd", "each worker's best rank-r approximation, (u, s, v) all-gathered (the reference's SVDReducer)",
           ReducerSpec{makeSvdReducer, "all-gather", {"reducer.rank"}, true, {"layer", "model"}});
    r->add("atomo", "Atomo: r singular atoms sampled per tensor, rescaled, all-gathered (the reference's AtomoReducer)",
           ReducerSpec{makeAtomoReducer, "all-gather", {"reducer.rank"}, false, {"layer", "model"}});
    r->add("signum", "majority vote of bit-packed signs, all-gathered (the reference's SignSGDwithMajorityVoteReducer)",
           ReducerSpec{makeSignumReducer, "all-gather", {}, false, {"layer", "model", "bucket"}});
    r->add("sign-norm", "bit-packed signs times each tensor's mean |g|, all-gathered (the reference's SignAndNormReducer)",
           ReducerSpec{makeSignNormReducer, "all-gather", {}, true, {"layer", "model", "bucket"}});
    r->add("topk", "per-tensor top-k magnitudes, values and positions all-gathered (the reference's TopKReducer)",
           ReducerSpec{makeTopKReducer, "all-gather", {"reducer.compression"}, true, {"layer", "model", "bucket"}});
    r->add("global-topk", "top-k magnitudes of the whole gradient, all-gathered (the reference's GlobalTopKReducer)",
           ReducerSpec{makeGlobalTopKReducer, "all-gather", {"reducer.compression"}, true, {"layer", "model", "bucket"}});
    r->add("random-k", "k random elements per tensor from a shared generator (the reference's UniformRandomSparseReducer)",
           ReducerSpec{makeRandomKReducer, "all-reduce", {"reducer.compression", "reducer.rescale"}, true, {"layer", "model", "bucket"}});
    r->add("random-block",
           "a random contiguous block per tensor from a shared generator (the reference's UniformRandomSparseBlockReducer)",
           ReducerSpec{makeRandomBlockReducer, "all-reduce", {"reducer.compression", "reducer.rescale"}, true, {"layer", "model", "bucket"}});
    r->add("qsgd", "QSGD: unbiased stochastic s-level quantization with a norm per tensor, bit-packed, all-gathered",
           ReducerSpec{makeQsgdReducer, "all-gather", {"reducer.quantization_levels"}, true, {"layer", "model", "bucket"}});
    r->add("terngrad", "TernGrad: unbiased stochastic ternary {-1, 0, 1} times max|g| per tensor, 2 bits, all-gathered",
           ReducerSpec{makeTernGradReducer, "all-gather", {}, true, {"layer", "model", "bucket"}});
    r->add("fp16", "half-precision all-reduce, divided by the workers before the cast (Horovod's fp16 compression)",
           ReducerSpec{makeFp16Reducer, "all-reduce", {}, true, {"layer", "model", "bucket"}});
    r->add("bf16", "bfloat16 all-reduce, divided by the workers before the cast (DDP's bf16_compress_hook)",
           ReducerSpec{makeBf16Reducer, "all-reduce", {}, true, {"layer", "model", "bucket"}});
    return r;
  }();
  return *registry;
}

}  // namespace gcrun::reducers
