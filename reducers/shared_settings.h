#pragma once

#include <cstdint>

#include "hyperparams/settings.h"

namespace gcrun::reducers {

// Settings that several reducers read, declared alike by each (one key, one meaning): each reducer
// binds them to a field of its own options struct.
template <class Options>
hyperparams::SettingsSchema<Options> withRank(const hyperparams::SettingsSchema<Options>& schema,
                                              int64_t Options::*field) {
  return schema.add(field, "rank", hyperparams::integerAtLeast(1), "Rank of the low-rank reducers.",
                    {"optimizer_reducer_rank"});
}

template <class Options>
hyperparams::SettingsSchema<Options> withOrthogonalizationEpsilon(const hyperparams::SettingsSchema<Options>& schema,
                                                                  double Options::*field) {
  return schema.add(field, "orthogonalization_epsilon", hyperparams::numberAtLeast(0),
                    "Added to column norms in Gram-Schmidt so that all-zero columns stay finite.");
}

template <class Options>
hyperparams::SettingsSchema<Options> withCompression(const hyperparams::SettingsSchema<Options>& schema,
                                                     double Options::*field) {
  return schema.add(field, "compression", hyperparams::positiveFraction(),
                    "Fraction of the elements that top-k, random-k and random-block send.",
                    {"optimizer_reducer_compression"});
}

template <class Options>
hyperparams::SettingsSchema<Options> withRescale(const hyperparams::SettingsSchema<Options>& schema,
                                                 bool Options::*field) {
  return schema.add(field, "rescale", hyperparams::boolean(),
                    "random-k, random-block: scale by numel/k so the update is unbiased (reference: off).");
}

}  // namespace gcrun::reducers
