#pragma once

#include <string_view>

namespace gcrun::experiments {

// How deep a checkpoint pickle may nest containers and MARKs. A rank file is a flat dict of
// tensors, each a _rebuild_tensor_v2 call on a few tuples (depth 4); LibTorch's unpickler and
// IValue recurse without a limit, so a million nested lists would overflow the stack.
inline constexpr int kMaxPickleNesting = 32;

// Checks a pickle before LibTorch's unpickler sees it: only the opcodes that torch.save and
// LibTorch's Pickler write for a dict of tensors (protocol 2), only the globals such a dict
// names, every argument inside the bytes, and no value nested deeper than kMaxPickleNesting. A
// container cannot be changed once it is inside another (memo GETs could otherwise nest it
// deeper with a flat stack). Throws std::invalid_argument saying what and where.
void checkCheckpointPickle(std::string_view pickle);

}  // namespace gcrun::experiments
