#include "reducers/comm/agreement.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include <ATen/ATen.h>
#include <c10/util/hash.h>

#include "hyperparams/base/errors.h"
#include "hyperparams/base/text.h"

namespace gcrun::comm {
namespace {

// A SHA-1's 160 bits in three int64 words, the last one half used.
constexpr int64_t kDigestWords = 3;
using Digest = std::array<int64_t, kDigestWords>;

// How much of a differing entry's name and value the ranks exchange to name it.
constexpr size_t kShownBytes = 256;
// present flag, then name and value, each a 2-byte length and kShownBytes.
constexpr int64_t kShownEntryBytes = 1 + 2 * (2 + static_cast<int64_t>(kShownBytes));

void appendSized(std::string& out, const std::string& bytes) {
  const uint64_t size = bytes.size();
  out.append(reinterpret_cast<const char*>(&size), sizeof(size));
  out.append(bytes);
}

// `bytes` is never empty here (a size comes first): c10::sha1 leaves an empty string's state unset.
Digest sha1Of(const std::string& bytes) {
  const std::string hex = c10::sha1(bytes).str();  // 40 hex digits
  Digest digest{};
  for (int64_t word = 0; word < kDigestWords; ++word) {
    digest[word] = static_cast<int64_t>(std::stoull(hex.substr(word * 16, 16), nullptr, 16));
  }
  return digest;
}

Digest entryDigest(const std::pair<std::string, std::string>& entry) {
  std::string sized;
  appendSized(sized, entry.first);
  appendSized(sized, entry.second);
  return sha1Of(sized);
}

Digest listDigest(const std::vector<Digest>& entries) {
  std::string bytes;
  appendSized(bytes, std::string(reinterpret_cast<const char*>(entries.data()), entries.size() * sizeof(Digest)));
  return sha1Of(bytes);
}

// Every rank's `cpu`, in rank order, on the CPU (the group's device may be a GPU).
std::vector<at::Tensor> gathered(Communicator& comm, const at::Tensor& cpu) {
  auto all = comm.allgather(cpu.to(comm.device()));
  for (auto& tensor : all) tensor = tensor.cpu();
  return all;
}

at::Tensor digestTable(const std::vector<Digest>& digests, int64_t rows) {
  auto table = at::zeros({rows, kDigestWords}, at::kLong);  // a row of zeros: no such entry
  std::memcpy(table.data_ptr(), digests.data(), digests.size() * sizeof(Digest));
  return table;
}

struct ShownEntry {
  bool present = false;
  std::string name, value;
};

at::Tensor packShown(const NamedValues& values, int64_t index) {
  auto packed = at::zeros({kShownEntryBytes}, at::kByte);
  if (index >= static_cast<int64_t>(values.size())) return packed;
  auto* bytes = packed.data_ptr<uint8_t>();
  bytes[0] = 1;
  size_t at = 1;
  for (const auto* text : {&values[index].first, &values[index].second}) {
    const size_t length = std::min(text->size(), kShownBytes);
    bytes[at] = static_cast<uint8_t>(length >> 8);
    bytes[at + 1] = static_cast<uint8_t>(length & 0xff);
    std::memcpy(bytes + at + 2, text->data(), length);
    at += 2 + kShownBytes;
  }
  return packed;
}

ShownEntry unpackShown(const at::Tensor& packed) {
  const auto* bytes = packed.data_ptr<uint8_t>();
  ShownEntry entry;
  entry.present = bytes[0] != 0;
  size_t at = 1;
  for (auto* text : {&entry.name, &entry.value}) {
    const size_t length = std::min<size_t>((static_cast<size_t>(bytes[at]) << 8) | bytes[at + 1], kShownBytes);
    text->assign(reinterpret_cast<const char*>(bytes + at + 2), length);
    at += 2 + kShownBytes;
  }
  return entry;
}

// The first entry (index, rank) at which a rank's digest differs from rank 0's; nothing if none.
std::optional<std::pair<int64_t, int>> firstDifferingEntry(const std::vector<at::Tensor>& tables) {
  const int64_t rows = tables.front().size(0);
  for (int64_t index = 0; index < rows; ++index) {
    for (size_t rank = 1; rank < tables.size(); ++rank) {
      if (!at::equal(tables[rank][index], tables.front()[index])) return std::pair{index, static_cast<int>(rank)};
    }
  }
  return std::nullopt;
}

std::string describe(const ShownEntry& zero, const ShownEntry& other, int rank, int64_t index,
                     const std::string& what) {
  const std::string head = "the workers disagree on " + what + ": ";
  const std::string on_other = " on rank " + std::to_string(rank);
  if (zero.present && other.present && zero.name == other.name) {
    return head + clipForMessage(zero.name) + " is " + clipForMessage(zero.value) + " on rank 0 but " +
           clipForMessage(other.value) + on_other;
  }
  const auto entry = [](const ShownEntry& shown) {
    return shown.present ? clipForMessage(shown.name) + " = " + clipForMessage(shown.value) : std::string("nothing");
  };
  return head + "entry " + std::to_string(index + 1) + " is " + entry(zero) + " on rank 0 but " + entry(other) +
         on_other;
}

// Once the lists' digests differ: the counts, a digest per entry, then the first differing entry.
std::string nameDifference(Communicator& comm, const NamedValues& values, const std::vector<Digest>& digests,
                           const std::string& what) {
  int64_t rows = 0;
  for (const auto& count : gathered(comm, at::full({1}, static_cast<int64_t>(values.size()), at::kLong))) {
    rows = std::max(rows, count.item<int64_t>());
  }
  const auto found = firstDifferingEntry(gathered(comm, digestTable(digests, rows)));
  if (!found) return "the workers disagree on " + what + " (no single entry differs)";
  const auto [index, rank] = *found;
  const auto shown = gathered(comm, packShown(values, index));
  return describe(unpackShown(shown.front()), unpackShown(shown[rank]), rank, index, what);
}

}  // namespace

std::string disagreement(Communicator& comm, const NamedValues& values, const std::string& what) {
  std::vector<Digest> digests;
  digests.reserve(values.size());
  for (const auto& entry : values) digests.push_back(entryDigest(entry));
  const auto whole = listDigest(digests);
  const auto all = gathered(comm, digestTable({whole}, 1));
  const bool same = std::all_of(all.begin(), all.end(), [&](const at::Tensor& t) { return at::equal(t, all.front()); });
  return same ? "" : nameDifference(comm, values, digests, what);
}

void agreeOn(Communicator& comm, const NamedValues& values, const std::string& what) {
  if (auto line = disagreement(comm, values, what); !line.empty()) throw UserError(line);
}

std::optional<RankProblem> firstProblem(Communicator& comm, const std::string& problem) {
  const std::string own = problem.substr(0, kMaxSharedProblemBytes);
  const auto lengths = gathered(comm, at::full({1}, static_cast<int64_t>(own.size()), at::kLong));
  for (size_t rank = 0; rank < lengths.size(); ++rank) {
    const int64_t length = std::min<int64_t>(lengths[rank].item<int64_t>(), kMaxSharedProblemBytes);
    if (length <= 0) continue;
    auto bytes = at::zeros({length}, at::kByte);
    if (comm.rank() == static_cast<int>(rank)) std::memcpy(bytes.data_ptr(), own.data(), length);
    bytes = bytes.to(comm.device());
    comm.broadcast(bytes, static_cast<int>(rank));
    bytes = bytes.cpu();
    return RankProblem{static_cast<int>(rank), std::string(reinterpret_cast<const char*>(bytes.data_ptr()), length)};
  }
  return std::nullopt;
}

}  // namespace gcrun::comm
