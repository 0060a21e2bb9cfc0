#include <string>

#include "reducers/builtin_reducers.h"
#include "reducers/float_formats.h"

namespace gcrun::reducers {
namespace {

struct Fp4Options {
  std::string scale = "block";
  int64_t scale_block = 128;
};

const hyperparams::SettingsSchema<Fp4Options>& fp4Settings() {
  static const auto schema =
      withGroupScaling(hyperparams::SettingsSchema<Fp4Options>(), &Fp4Options::scale, &Fp4Options::scale_block);
  return schema;
}

std::unique_ptr<GradientCodec> fp4Codec(const SettingValues& settings) {
  const auto options = fp4Settings().read(settings);
  return makeMinifloatCodec(e3m0(), groupOf(options.scale, options.scale_block));
}

}  // namespace

// Streaming DiLoCo's outer gradients in 4-bit floats (Douillard et al., arXiv 2501.18512): E3M0,
// a sign and 3 exponent bits, no mantissa, so every value sent is 0 or +-2^e, and the sum over
// workers is taken in float32. The paper names the format and the float32 accumulation; the
// scaling it does not spell out in what we could read, so gcrun scales as fp8 does: amax to the
// largest code (16) per tensor or per reducer.scale_block elements (default 128). Rounding to the
// nearest value, ties to the even code (between 2^e and 2^(e+1) the midpoint 1.5 * 2^e goes to
// whichever of the two has the even exponent field), saturating. Codes two to a byte (low nibble
// first), all-gathered, decoded and summed in float32 in rank order by every worker.
// Bits: 4 per element (the last byte padded) plus 32 per scale.
ReducerSpec fp4Spec() {
  const auto make = [](const ReducerContext& context) {
    return makeAllGatherReducer(context.comm, fp4Codec(context.options.settings));
  };
  ReducerSpec spec{make,
                   CollectiveKind::all_gather,
                   fp4Settings().specs(),
                   true,
                   {Granularity::layer, Granularity::model, Granularity::bucket},
                   ""};
  spec.planned_bits = fp4PlannedBits;
  spec.whole_step = true;  // two codes a byte over all the tensors: one message, padded once
  return spec;
}

uint64_t fp4PlannedBits(const ReducerOptions& options, const TensorShapes& shapes) {
  return codecPlannedBits(*fp4Codec(options.settings), shapes);
}

}  // namespace gcrun::reducers
