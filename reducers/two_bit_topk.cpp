#include "reducers/two_bit_topk.h"

#include <algorithm>
#include <cmath>
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

// The positions of each row's k largest `magnitudes`, as a stable descending sort's first k: by
// descending magnitude, of equal magnitudes the lower index first. Found from topk's k-th value
// instead of a sort of the whole row (a chunk of 4096 keeps 82): what lies above it is kept, and of
// the ties at it, the lowest indices; only the k kept are sorted. NaN compares with nothing, so a
// row with NaN takes the full sort.
at::Tensor topPositions(const at::Tensor& magnitudes, int64_t k) {
  if (magnitudes.isnan().any().item<bool>()) {
    return std::get<1>(magnitudes.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true)).narrow(1, 0, k);
  }
  const auto threshold = std::get<0>(magnitudes.topk(k, 1)).narrow(1, k - 1, 1);
  const auto above = magnitudes.gt(threshold);
  const auto tied = magnitudes.eq(threshold);
  const auto ties_kept = above.sum(1, /*keepdim=*/true).neg().add(k);
  const auto keep = above.logical_or(tied.logical_and(tied.cumsum(1).le(ties_kept)));
  const auto ascending = keep.nonzero().select(1, 1).view({-1, k});
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

at::Tensor decodeTwoBitTopK(const TwoBitTopK& payload, const TwoBitTopKLayout& layout) {
  auto dense = at::zeros({layout.numel}, at::kFloat);
  const int64_t kept = layout.kept();
  if (kept == 0) return dense;
  const auto codes = payload.codes.to(at::kLong);
  const auto upper = codes.div(2, "floor").unsqueeze(1);
  const auto chunk_of_kept = chunkOfEachKept(layout);
  const auto magnitudes = payload.levels.index_select(0, chunk_of_kept).gather(1, upper).squeeze(1);
  const auto values = at::where(codes.remainder(2).eq(1), magnitudes.neg(), magnitudes);
  dense.index_put_({payload.positions.add(chunk_of_kept.mul(layout.chunk))}, values);
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
