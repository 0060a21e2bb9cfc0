#pragma once

#include "hyperparams/config_keys.h"

namespace gcrun::experiments {

// The configuration keys: the built-in ones and the settings of every reducer, task, sink and sync strategy
// registered at the time of the call (a plugin's once it is loaded), each section's owners in the
// order they were registered. Computed from the registries at every call; nothing is cached, so a
// caller builds it once and hands it on.
hyperparams::ConfigKeys configKeys();

}  // namespace gcrun::experiments
