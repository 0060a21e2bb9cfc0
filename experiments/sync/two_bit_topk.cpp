#include "experiments/sync/two_bit_topk.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/ATen.h>

namespace gcrun::experiments {
namespace {

// A group of chunks of one size, as the rows of a matrix, encoded.
struct EncodedRows {
  at::Tensor positions, codes, levels;
};

EncodedRows encodeRows(const at::Tensor& rows, int64_t k, int64_t first_position) {
  const int64_t count = rows.size(0);
  // A stable descending sort: of equal magnitudes the lower index comes first.
  const auto order = std::get<1>(rows.abs().sort(/*stable=*/true, /*dim=*/1, /*descending=*/true)).narrow(1, 0, k);
  const auto kept = rows.gather(1, order);
  const auto magnitudes = kept.abs();
  const int64_t lower = k / 2;
  const auto upper_level = magnitudes.narrow(1, 0, k - lower).mean(1);
  const auto lower_level = lower > 0 ? magnitudes.narrow(1, k - lower, lower).mean(1) : upper_level;
  const auto upper = at::arange(k).lt(k - lower).to(at::kByte).mul(2);
  const auto row_starts = at::arange(count).mul(rows.size(1)).add(first_position).unsqueeze(1);
  return {order.add(row_starts), kept.lt(0).to(at::kByte).add(upper), at::stack({lower_level, upper_level}, 1)};
}

const std::vector<int64_t> kCodeWeights = {1, 4, 16, 64};  // four 2-bit codes to a byte

at::Tensor packCodes(const at::Tensor& codes) {
  const int64_t bytes = (codes.numel() + 3) / 4;
  auto padded = at::zeros({bytes * 4}, at::kLong);
  padded.narrow(0, 0, codes.numel()).copy_(codes);
  return padded.view({bytes, 4}).mul(at::tensor(kCodeWeights, at::kLong)).sum(1).to(at::kByte);
}

at::Tensor unpackCodes(const at::Tensor& packed, int64_t count) {
  return packed.to(at::kLong)
      .unsqueeze(1)
      .div(at::tensor(kCodeWeights, at::kLong), "floor")
      .remainder(4)
      .flatten()
      .narrow(0, 0, count);
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
    add(encodeRows(flat.narrow(0, 0, full * layout.chunk).view({full, layout.chunk}), layout.keptIn(layout.chunk), 0));
  if (rest > 0)
    add(encodeRows(flat.narrow(0, full * layout.chunk, rest).view({1, rest}), layout.keptIn(rest),
                   full * layout.chunk));
  return {at::cat(positions).to(at::kInt), packCodes(at::cat(codes)), at::cat(levels).to(at::kFloat)};
}

at::Tensor decodeTwoBitTopK(const TwoBitTopK& payload, const TwoBitTopKLayout& layout) {
  auto dense = at::zeros({layout.numel}, at::kFloat);
  const int64_t kept = layout.kept();
  if (kept == 0) return dense;
  const auto codes = unpackCodes(payload.codes, kept);
  const auto upper = codes.div(2, "floor").unsqueeze(1);
  const auto magnitudes = payload.levels.index_select(0, chunkOfEachKept(layout)).gather(1, upper).squeeze(1);
  const auto values = at::where(codes.remainder(2).eq(1), magnitudes.neg(), magnitudes);
  dense.index_put_({payload.positions.to(at::kLong)}, values);
  return dense;
}

uint64_t twoBitTopKBits(const TwoBitTopKLayout& layout) {
  const auto kept = static_cast<uint64_t>(layout.kept());
  return 32 * kept + 8 * ((kept + 3) / 4) + 64 * static_cast<uint64_t>(layout.chunks());
}

}  // namespace gcrun::experiments
