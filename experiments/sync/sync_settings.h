#pragma once

#include <cstdint>

#include "hyperparams/settings.h"

namespace gcrun::experiments {

// Settings that several strategies read, declared alike by each (one key, one meaning).
template <class Options>
hyperparams::SettingsSchema<Options> withPeriod(const hyperparams::SettingsSchema<Options>& schema,
                                                int64_t Options::*field) {
  return schema.add(field, "every", hyperparams::integerAtLeast(1),
                    "H: the strategies that sync models (all but every-step) sync every this many steps.");
}

template <class Options>
hyperparams::SettingsSchema<Options> withDrift(const hyperparams::SettingsSchema<Options>& schema,
                                               bool Options::*field) {
  return schema.add(field, "drift", hyperparams::boolean(),
                    "measure the replicas' drift from their mean at each sync (replica_drift; costs an "
                    "uncounted all-reduce of the parameters per sync: off for timing runs).");
}

}  // namespace gcrun::experiments
