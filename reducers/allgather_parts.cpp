#include "reducers/allgather_parts.h"

#include <ATen/ATen.h>

#include "reducers/reducer.h"

namespace gcrun::reducers {

std::vector<std::vector<at::Tensor>> allgatherParts(comm::Communicator& comm, const std::vector<at::Tensor>& parts,
                                                    uint64_t& bits) {
  const auto message = at::cat(parts);
  // Gloo can hang on empty tensors: a payload without elements is not sent.
  const auto gathered = message.numel() > 0 ? comm.allgather(message) : std::vector<at::Tensor>(comm.size(), message);
  bits += bitsOf(message);
  std::vector<std::vector<at::Tensor>> split;
  for (const auto& worker : gathered) {
    std::vector<at::Tensor> pieces;
    int64_t offset = 0;
    for (const auto& part : parts) {
      pieces.push_back(worker.narrow(0, offset, part.numel()));
      offset += part.numel();
    }
    split.push_back(std::move(pieces));
  }
  return split;
}

}  // namespace gcrun::reducers
