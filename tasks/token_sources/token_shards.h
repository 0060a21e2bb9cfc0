#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

namespace gcrun::tasks {

// llm.c's token shards (dev/data/data_common.py): a header of 256 little-endian int32, of which
// [0] is the magic, [1] the version (1: uint16 tokens) and [2] the token count, then the tokens.
inline constexpr int32_t kLlmcShardMagic = 20240520;
inline constexpr int32_t kLlmcShardVersion = 1;
inline constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);
// One token file at most: above nanoGPT's OpenWebText train.bin (17 GB of 9 billion tokens).
inline constexpr uint64_t kMaxTokenShardBytes = uint64_t{1} << 36;

// One file of uint16 token ids, memory-mapped read-only.
struct TokenShard {
  // int16 over the mapping, holding the uint16 ids' bits (torch 1.13 has no uint16): read them
  // through unsignedTokenIds(). Its deleter unmaps the file; it must not be written.
  at::Tensor ids;
  const char* layout = "";  // "llm.c shard" or "nanoGPT .bin"
};

// Maps `path` (a regular file of at most kMaxTokenShardBytes): an llm.c shard when its first four
// bytes are kLlmcShardMagic, otherwise nanoGPT's raw uint16 little-endian ids (prepare.py's
// np.uint16 tofile). A UserError naming the file for a shard shorter than its header, of another
// version, or whose size is not the header's plus 2 bytes per declared token; and for a raw file
// of an odd size.
TokenShard mapTokenShard(const std::string& path);

// One pass over `shard`'s ids: a UserError naming `path`, the id's byte offset in the file and
// the id when one is not below `vocabulary`.
void checkTokenIds(const TokenShard& shard, int64_t vocabulary, const std::string& path);

// int64 values of an int16 tensor of uint16 bits (what mapTokenShard's ids hold).
at::Tensor unsignedTokenIds(const at::Tensor& bits);

}  // namespace gcrun::tasks
