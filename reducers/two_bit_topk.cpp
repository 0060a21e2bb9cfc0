#include "reducers/two_bit_topk.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "reducers/bit_stream.h"
#include "reducers/quantized_reducer.h"

namespace gcrun::reducers {
namespace {

// A group of chunks of one size, as the rows of a matrix, encoded.
struct EncodedRows {
  at::Tensor positions, codes, levels;
};

// Of each row of `tied` (bool), how many are true: a byte loop, as a bool tensor's sum would first
// widen every element to int64.
std::vector<int64_t> countPerRow(const at::Tensor& tied) {
  const auto bytes = tied.contiguous();
  const int64_t rows = bytes.size(0), width = bytes.size(1);
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data_ptr<bool>());
  std::vector<int64_t> counts(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t count = 0;
    for (int64_t j = 0; j < width; ++j) count += data[r * width + j];
    counts[r] = count;
  }
  return counts;
}

// What a stable descending sort keeps first, from the k-th value: all above it and, of the ties at
// it, the lowest indices (a running count along each row). Ascending positions.
at::Tensor keptByTieRule(const at::Tensor& magnitudes, const at::Tensor& threshold, int64_t k) {
  const auto above = magnitudes.gt(threshold);
  const auto tied = magnitudes.eq(threshold);
  const auto ties_kept = above.sum(1, /*keepdim=*/true).neg().add(k);
  const auto keep = above.logical_or(tied.logical_and(tied.cumsum(1).le(ties_kept)));
  return keep.nonzero().select(1, 1).view({-1, k});
}

// The positions of each row's k largest `magnitudes`, as a stable descending sort's first k: by
// descending magnitude, of equal magnitudes the lower index first. Found with topk instead of a
// sort of the whole row (a chunk of 4096 keeps 82); only the k kept are sorted. topk's choice among
// values tied at the k-th is unspecified, so a row where such ties are not all kept (rare with real
// gradients) takes the tie rule. NaN compares with nothing, so magnitudes with NaN (which topk, as
// sort, ranks above all others: it shows among the kept) take the full sort.
at::Tensor topPositions(const at::Tensor& magnitudes, int64_t k) {
  const auto [values, indices] = magnitudes.topk(k, 1);
  if (values.isnan().any().item<bool>()) {
    return std::get<1>(magnitudes.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true)).narrow(1, 0, k);
  }
  const auto threshold = values.narrow(1, k - 1, 1);
  const auto tied_in_row = countPerRow(magnitudes.eq(threshold));
  const auto tied_in_kept = countPerRow(values.eq(threshold));
  std::vector<int64_t> ambiguous;
  for (size_t r = 0; r < tied_in_row.size(); ++r) {
    if (tied_in_row[r] != tied_in_kept[r]) ambiguous.push_back(static_cast<int64_t>(r));
  }
  auto ascending = std::get<0>(indices.sort(/*dim=*/1));
  if (!ambiguous.empty()) {
    const auto rows = at::tensor(ambiguous, at::kLong);
    ascending.index_copy_(0, rows, keptByTieRule(magnitudes.index_select(0, rows), threshold.index_select(0, rows), k));
  }
  const auto order = std::get<1>(magnitudes.gather(1, ascending).sort(/*stable=*/true, 1, /*descending=*/true));
  return ascending.gather(1, order);
}

EncodedRows encodeRows(const at::Tensor& rows, int64_t k) {
  const auto order = topPositions(rows.abs(), k);
  const auto kept = rows.gather(1, order);
  const auto magnitudes = kept.abs();
  const int64_t lower = k / 2;
  const auto upper_level = magnitudes.narrow(1, 0, k - lower).mean(1);
  const auto lower_level = lower > 0 ? magnitudes.narrow(1, k - lower, lower).mean(1) : upper_level;
  const auto upper = at::arange(k).lt(k - lower).to(at::kByte).mul(2);
  return {order, kept.lt(0).to(at::kByte).add(upper), at::stack({lower_level, upper_level}, 1)};
}

// `count` fields of `bits` bits from a packed stream of `size` bytes, as int64.
at::Tensor unpackFields(const uint8_t* bytes, int64_t size, int64_t count, int64_t bits) {
  auto fields = at::zeros({count}, at::kLong);
  if (bits == 0) return fields;
  int64_t* out = fields.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int64_t>(fieldAt(bytes, size, i, static_cast<int>(bits)));
  return fields;
}

// The chunk of each kept value, in payload order.
at::Tensor chunkOfEachKept(const TwoBitTopKLayout& layout) {
  const int64_t full = layout.numel / layout.chunk;
  const int64_t rest = layout.numel % layout.chunk;
  auto chunks = at::arange(full).unsqueeze(1).expand({full, layout.keptIn(layout.chunk)}).flatten();
  if (rest == 0) return chunks;
  return at::cat({chunks, at::full({layout.keptIn(rest)}, full, at::kLong)});
}

}  // namespace

int64_t TwoBitTopKLayout::chunks() const { return (numel + chunk - 1) / chunk; }

int64_t TwoBitTopKLayout::keptIn(int64_t chunk_size) const {
  // A product within 1e-9 of a whole number is that number: 0.07 * 100 keeps 7, not 8.
  const auto wanted = static_cast<int64_t>(std::ceil(density * static_cast<double>(chunk_size) - 1e-9));
  return std::clamp<int64_t>(wanted, 1, chunk_size);
}

int64_t TwoBitTopKLayout::kept() const {
  const int64_t rest = numel % chunk;
  return numel / chunk * keptIn(chunk) + (rest > 0 ? keptIn(rest) : 0);
}

TwoBitTopK encodeTwoBitTopK(const at::Tensor& values, const TwoBitTopKLayout& layout) {
  const auto flat = values.reshape({-1});
  const int64_t full = layout.numel / layout.chunk;
  const int64_t rest = layout.numel % layout.chunk;
  std::vector<at::Tensor> positions{at::empty({0}, at::kLong)}, codes{at::empty({0}, at::kByte)},
      levels{at::empty({0, 2}, flat.options())};
  auto add = [&](const EncodedRows& rows) {
    positions.push_back(rows.positions.flatten());
    codes.push_back(rows.codes.flatten());
    levels.push_back(rows.levels);
  };
  if (full > 0)
    add(encodeRows(flat.narrow(0, 0, full * layout.chunk).view({full, layout.chunk}), layout.keptIn(layout.chunk)));
  if (rest > 0) add(encodeRows(flat.narrow(0, full * layout.chunk, rest).view({1, rest}), layout.keptIn(rest)));
  return {at::cat(positions), at::cat(codes), at::cat(levels).to(at::kFloat)};
}

KeptValues decodeKept(const TwoBitTopK& payload, const TwoBitTopKLayout& layout) {
  if (layout.kept() == 0) return {at::empty({0}, at::kLong), at::empty({0}, at::kFloat)};
  const auto codes = payload.codes.to(at::kLong);
  const auto upper = codes.div(2, "floor").unsqueeze(1);
  const auto chunk_of_kept = chunkOfEachKept(layout);
  const auto magnitudes = payload.levels.index_select(0, chunk_of_kept).gather(1, upper).squeeze(1);
  return {payload.positions.add(chunk_of_kept.mul(layout.chunk)),
          at::where(codes.remainder(2).eq(1), magnitudes.neg(), magnitudes)};
}

at::Tensor decodeTwoBitTopK(const TwoBitTopK& payload, const TwoBitTopKLayout& layout) {
  auto dense = at::zeros({layout.numel}, at::kFloat);
  const auto kept = decodeKept(payload, layout);
  if (kept.positions.numel() > 0) dense.index_put_({kept.positions}, kept.values);
  return dense;
}

int64_t TwoBitTopKLayout::indexBits() const {
  int64_t bits = 0;
  while ((int64_t{1} << bits) < chunk) ++bits;
  return bits;
}

at::Tensor packTwoBitTopK(const TwoBitTopK& payload, const TwoBitTopKLayout& layout) {
  const auto levels = payload.levels.contiguous().view({-1}).view(at::kByte);
  return at::cat({levels, packBits(payload.positions, layout.indexBits()), packBits(payload.codes, 2)});
}

TwoBitTopK unpackTwoBitTopK(const at::Tensor& bytes, const TwoBitTopKLayout& layout) {
  const auto cpu = bytes.to(at::kCPU).contiguous();
  const int64_t kept = layout.kept(), level_bytes = 8 * layout.chunks();
  const int64_t index_bytes = packedBytes(kept, layout.indexBits());
  const uint8_t* data = cpu.data_ptr<uint8_t>();
  // A copy: view(dtype) needs the floats to start on a float boundary of their storage.
  auto levels = cpu.narrow(0, 0, level_bytes).clone().view(at::kFloat).view({layout.chunks(), 2});
  auto positions = unpackFields(data + level_bytes, index_bytes, kept, layout.indexBits());
  auto codes = unpackFields(data + level_bytes + index_bytes, packedBytes(kept, 2), kept, 2).to(at::kByte);
  return {std::move(positions), std::move(codes), std::move(levels)};
}

uint64_t twoBitTopKBits(const TwoBitTopKLayout& layout) {
  const int64_t kept = layout.kept();
  return 8 * static_cast<uint64_t>(8 * layout.chunks() + packedBytes(kept, layout.indexBits()) + packedBytes(kept, 2));
}

}  // namespace gcrun::reducers
