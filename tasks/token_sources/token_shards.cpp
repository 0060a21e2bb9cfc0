#include "tasks/token_sources/token_shards.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>

#include <ATen/ATen.h>

#include "hyperparams/base/errors.h"
#include "outputs/files/safe_files.h"
#include "tasks/token_sources/mapping_faults.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token files are little-endian; so is this host");

namespace gcrun::tasks {
namespace {

// A read-only mapping of a whole file, unmapped when the last owner lets go; a SIGBUS inside it
// (the file shrank meanwhile) is reported naming the file.
struct Mapping {
  const unsigned char* data = nullptr;
  uint64_t size = 0;
  std::unique_ptr<MappedRegionWatch> watch;

  Mapping(const unsigned char* mapped, uint64_t bytes, const std::string& path)
      : data(mapped), size(bytes), watch(std::make_unique<MappedRegionWatch>(mapped, bytes, path)) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    watch.reset();  // before the range can be handed to another mapping
    if (data != nullptr) ::munmap(const_cast<unsigned char*>(data), size);
  }
};

std::shared_ptr<Mapping> mapWhole(const std::string& path) {
  const files::UniqueFd fd = files::openBoundedFile(path, kMaxTokenShardBytes);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw UserError("cannot read " + path + ": " + std::strerror(errno));
  const auto size = static_cast<uint64_t>(info.st_size);
  if (size == 0) return std::make_shared<Mapping>(nullptr, 0, path);
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (data == MAP_FAILED) throw UserError("cannot map " + path + ": " + std::strerror(errno));
  ::madvise(data, size, MADV_SEQUENTIAL);
  return std::make_shared<Mapping>(static_cast<const unsigned char*>(data), size, path);
}

int32_t headerField(const Mapping& mapping, int index) {
  int32_t value = 0;
  std::memcpy(&value, mapping.data + index * sizeof(int32_t), sizeof(value));
  return value;
}

// The number of tokens after the header; throws when the header is wrong.
uint64_t shardTokenCount(const Mapping& mapping, const std::string& path) {
  const std::string what = path + ": an llm.c token shard (magic " + std::to_string(kLlmcShardMagic) + ")";
  if (mapping.size < kLlmcHeaderBytes) {
    throw UserError(what + " of " + std::to_string(mapping.size) + " bytes, shorter than its " +
                    std::to_string(kLlmcHeaderBytes) + "-byte header: the file is truncated");
  }
  const int32_t version = headerField(mapping, 1);
  if (version != kLlmcShardVersion) {
    throw UserError(what + " of version " + std::to_string(version) + "; gcrun reads version " +
                    std::to_string(kLlmcShardVersion) + " (uint16 tokens, GPT-2's tokenizer)");
  }
  const int64_t declared = headerField(mapping, 2);
  const uint64_t expected = kLlmcHeaderBytes + 2 * static_cast<uint64_t>(std::max<int64_t>(declared, 0));
  if (declared < 0 || expected != mapping.size) {
    throw UserError(what + " declares " + std::to_string(declared) + " tokens, which take " + std::to_string(expected) +
                    " bytes with the header, but the file has " + std::to_string(mapping.size) +
                    (expected > mapping.size ? " (truncated)" : ""));
  }
  return static_cast<uint64_t>(declared);
}

}  // namespace

TokenShard mapTokenShard(const std::string& path) {
  const std::shared_ptr<Mapping> mapping = mapWhole(path);
  TokenShard shard;
  uint64_t offset = 0, tokens = 0;
  if (mapping->size >= sizeof(int32_t) && headerField(*mapping, 0) == kLlmcShardMagic) {
    shard.layout = "llm.c shard";
    tokens = shardTokenCount(*mapping, path);
    offset = kLlmcHeaderBytes;
  } else {
    shard.layout = "nanoGPT .bin";
    if (mapping->size % 2 != 0) {
      throw UserError(path + ": " + std::to_string(mapping->size) +
                      " bytes, an odd size; a nanoGPT .bin file is uint16 token ids (2 bytes each)");
    }
    tokens = mapping->size / 2;
  }
  if (tokens == 0) {
    shard.ids = at::empty({0}, at::kShort);
    return shard;
  }
  void* start = const_cast<unsigned char*>(mapping->data + offset);
  // The tensor owns the mapping: it is unmapped when the last view of the ids goes.
  shard.ids = at::from_blob(
      start, {static_cast<int64_t>(tokens)}, [mapping](void*) {}, at::TensorOptions().dtype(at::kShort));
  return shard;
}

void checkTokenIds(const TokenShard& shard, int64_t vocabulary, const std::string& path) {
  const auto* ids = reinterpret_cast<const uint16_t*>(shard.ids.data_ptr<int16_t>());
  const int64_t count = shard.ids.numel();
  uint16_t largest = 0;
  for (int64_t i = 0; i < count; ++i) largest = std::max(largest, ids[i]);
  if (largest < vocabulary) return;
  int64_t at = 0;
  while (ids[at] < vocabulary) ++at;
  const uint64_t header = std::string_view(shard.layout) == "llm.c shard" ? kLlmcHeaderBytes : 0;
  throw UserError(path + ": token id " + std::to_string(ids[at]) + " at byte " + std::to_string(header + 2 * at) +
                  " (token " + std::to_string(at) + ") is outside the vocabulary of " + std::to_string(vocabulary) +
                  "; set task.vocabulary_size to the tokenizer's (nanoGPT: meta.pkl's vocab_size)");
}

at::Tensor unsignedTokenIds(const at::Tensor& bits) { return bits.to(at::kLong).bitwise_and(0xFFFF); }

}  // namespace gcrun::tasks
