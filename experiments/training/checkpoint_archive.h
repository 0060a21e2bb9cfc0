#pragma once

#include <string_view>

#include "experiments/training/checkpoint_pickle.h"
#include "hyperparams/base/tensor_map.h"

namespace gcrun::experiments {

// The dict[str, Tensor] of a torch.save zip archive (data.pkl and data/<key> records), read from
// `archive` without a copy of it: every record stored uncompressed inside the bytes, the pickle
// checked by checkCheckpointPickle, each record read once, and every tensor a dense
// CPU tensor whose elements lie inside its storage record. Throws std::invalid_argument naming
// the record or tensor at fault (other exceptions of LibTorch's reader may pass through).
TensorMap readTensorArchive(std::string_view archive);

}  // namespace gcrun::experiments
