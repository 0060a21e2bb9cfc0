#include <string>

#include "reducers/builtin_reducers.h"
#include "reducers/float_formats.h"

namespace gcrun::reducers {
namespace {

struct Fp8Options {
  std::string format = "e4m3";
  std::string scale = "block";
  int64_t scale_block = 128;
};

const hyperparams::SettingsSchema<Fp8Options>& fp8Settings() {
  static const auto schema = withGroupScaling(
      hyperparams::SettingsSchema<Fp8Options>().add(&Fp8Options::format, "format", hyperparams::oneOf({"e4m3", "e5m2"}),
                                                    "fp8: OCP E4M3 (max 448, no inf) or E5M2 (max 57344)."),
      &Fp8Options::scale, &Fp8Options::scale_block);
  return schema;
}

std::unique_ptr<GradientCodec> fp8Codec(const SettingValues& settings) {
  const auto options = fp8Settings().read(settings);
  return makeMinifloatCodec(options.format == "e5m2" ? e5m2() : e4m3(), groupOf(options.scale, options.scale_block));
}

}  // namespace

// 8-bit floats with amax scaling, as torchft's FP8 all-reduce (torchft/quantization.py) sends them.
// What torchft does, read from its code: one float32 scale per row of each 2-D tensor (only 2-D
// tensors), scale = 448 / row amax (1 where that is infinite), x * scale cast to E4M3 (int8 with
// max 127 on GPUs without FP8), decoded as q / scale; the rows are exchanged by all-to-all, each
// rank dequantizes its share of every rank's rows, sums them in float32, divides, re-quantizes with
// a fresh scale and all-gathers the result (two quantizations, the second of the sum).
// gcrun keeps the scale rule and the float32 sum but works on flat tensors of any shape: one scale
// per tensor or per reducer.scale_block elements (default 128, a row-sized group; rows are not
// visible in a flat view), E4M3 or E5M2, and one all-gather of every worker's codes that each
// worker decodes and sums in float32 in rank order (one quantization: what each worker sent).
// Rounding to nearest even, saturating at +-max (Minifloat::encode). Bits: 8 per element plus 32
// per scale. Memory = send - decode(own codes): the error feedback of makeAllGatherReducer.
ReducerSpec fp8Spec() {
  const auto make = [](const ReducerContext& context) {
    return makeAllGatherReducer(context.comm, fp8Codec(context.options.settings));
  };
  ReducerSpec spec{make,
                   CollectiveKind::all_gather,
                   fp8Settings().specs(),
                   true,
                   {Granularity::layer, Granularity::model, Granularity::bucket},
                   ""};
  spec.planned_bits = fp8PlannedBits;
  return spec;
}

uint64_t fp8PlannedBits(const ReducerOptions& options, const TensorShapes& shapes) {
  return codecPlannedBits(*fp8Codec(options.settings), shapes);
}

}  // namespace gcrun::reducers
