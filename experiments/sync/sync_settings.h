#pragma once

#include <cstdint>

#include "hyperparams/settings.h"

namespace gcrun::experiments {

// Settings that several strategies read, declared alike by each (one key, one meaning).
template <class Options>
hyperparams::SettingsSchema<Options> withPeriod(const hyperparams::SettingsSchema<Options>& schema,
                                                int64_t Options::*field) {
  return schema.add(field, "every", hyperparams::integerAtLeast(1),
                    "H: local-sgd and diloco sync the workers' models every this many steps.");
}

}  // namespace gcrun::experiments
