#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "reducers/dct_blocks.h"
#include "reducers/reducer.h"
#include "reducers/two_bit_topk.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"

// The codecs of SparseLoCo (two-bit-topk) and DeMo (dct-topk) as reducers: the 2-bit top-k codec
// on a chunk worked out by hand, its packing in the published format byte by byte, its bits at the
// production setting, DeMo's DCT against its closed form, and both reducers over two ranks. The
// invariants every reducer keeps are in reducers_test.cpp, which runs these two as well.

namespace gcrun::reducers {
namespace {

// --- the 2-bit top-k codec ---

// Ten values in chunks of 8 at density 0.5: the first chunk keeps k = 4, the second (two
// elements) k = 1. Chunk 0's magnitudes by size: 6 (at 6), 4 (1), 3 (3), 2 (4); the two smallest
// kept, 3 and 2, form the lower level 2.5, the others the upper level 5. Chunk 1 is a tie, -7 and
// 7: the lower index is kept and both levels are 7.
const std::vector<double> kChunkValues = {0.5, -4, 1, 3, -2, 0.25, 6, -1, -7, 7};
const TwoBitTopKLayout kHandLayout{10, 8, 0.5};

TEST(TwoBitTopK, KeepsEachChunksLargestMagnitudesAtTwoLevels) {
  const auto payload = encodeTwoBitTopK(torch::tensor(kChunkValues, torch::kFloat64), kHandLayout);
  // Positions within their chunk: -7 is element 0 of chunk 1.
  EXPECT_TRUE(torch::equal(payload.positions, torch::tensor({6, 1, 3, 4, 0}, torch::kLong)));
  // Codes (bit 0 negative, bit 1 upper): 6 -> 2, -4 -> 3, 3 -> 0, -2 -> 1, -7 -> 3.
  EXPECT_TRUE(torch::equal(payload.codes, torch::tensor({2, 3, 0, 1, 3}, torch::kByte)));
  EXPECT_TRUE(torch::equal(payload.levels, torch::tensor({2.5, 5.0, 7.0, 7.0}, torch::kFloat).view({2, 2})));
}

// The kept positions are a stable descending sort's first k of each chunk.
void expectStableSortsFirstK(const at::Tensor& values, const TwoBitTopKLayout& layout) {
  const auto payload = encodeTwoBitTopK(values, layout);
  std::vector<at::Tensor> expected;
  for (int64_t start = 0; start < layout.numel; start += layout.chunk) {
    const auto chunk = values.narrow(0, start, std::min(layout.chunk, layout.numel - start));
    const auto order = std::get<1>(chunk.abs().sort(/*stable=*/true, 0, /*descending=*/true));
    expected.push_back(order.narrow(0, 0, layout.keptIn(chunk.numel())));
  }
  EXPECT_TRUE(torch::equal(payload.positions, torch::cat(expected)));
}

// Whatever the ties: magnitudes drawn from five values make every chunk's k-th magnitude a tie of
// many, broken by the lower index; distinct normal draws have none (topk's own choice is kept);
// draws rounded to one decimal tie at the k-th in some chunks and not in others.
TEST(TwoBitTopK, KeepsWhatAStableSortKeepsAmongManyTies) {
  const TwoBitTopKLayout layout{3 * 64 + 10, 64, 0.2};
  torch::manual_seed(3);
  expectStableSortsFirstK(torch::randint(-2, 3, {layout.numel}, torch::kFloat).mul(1.5), layout);
}

TEST(TwoBitTopK, KeepsWhatAStableSortKeepsWithAndWithoutTies) {
  const TwoBitTopKLayout layout{40 * 256 + 100, 256, 0.05};
  torch::manual_seed(4);
  const auto normal = torch::randn({layout.numel});
  expectStableSortsFirstK(normal, layout);
  expectStableSortsFirstK(normal.mul(10).round().div(10), layout);
}

// NaN has no place among the magnitudes' order but the sort's (largest): it is kept first.
TEST(TwoBitTopK, KeepsNanAsTheLargestMagnitude) {
  const auto payload = encodeTwoBitTopK(torch::tensor({1.0f, NAN, -3.0f, 2.0f}), TwoBitTopKLayout{4, 4, 0.5});
  EXPECT_TRUE(torch::equal(payload.positions, torch::tensor({1, 2}, torch::kLong)));
  torch::manual_seed(5);
  const auto with_nan = torch::randn({200});
  with_nan[150] = NAN;
  expectStableSortsFirstK(with_nan, TwoBitTopKLayout{200, 64, 0.05});
}

TEST(TwoBitTopK, DecodesToTheLevelsWithTheirSignsAndZeroElsewhere) {
  const auto payload = encodeTwoBitTopK(torch::tensor(kChunkValues, torch::kFloat64), kHandLayout);
  const std::vector<float> expected = {0, -5, 0, 2.5, -2.5, 0, 5, 0, -7, 0};
  EXPECT_TRUE(torch::equal(decodeTwoBitTopK(payload, kHandLayout), torch::tensor(expected)));
}

TEST(TwoBitTopK, PacksLevelsThenPositionsThenCodesByHand) {
  const auto payload = encodeTwoBitTopK(torch::tensor(kChunkValues, torch::kFloat64), kHandLayout);
  const auto bytes = packTwoBitTopK(payload, kHandLayout);
  // 2 chunks of two float32 levels (16 bytes); 5 positions of ceil(log2 8) = 3 bits, 6 + 1*8 +
  // 3*64 + 4*512 + 0 = 2254 = 0x08CE in 2 bytes; 5 codes of 2 bits, 2 + 3*4 + 0*16 + 1*64 = 78
  // and 3, in 2 bytes.
  ASSERT_EQ(bytes.numel(), 16 + 2 + 2);
  EXPECT_TRUE(torch::equal(bytes.narrow(0, 0, 16).clone().view(torch::kFloat), payload.levels.flatten()));
  EXPECT_TRUE(torch::equal(bytes.narrow(0, 16, 4), torch::tensor({0xCE, 0x08, 78, 3}, torch::kByte)));
  EXPECT_EQ(twoBitTopKBits(kHandLayout), 8u * 20);
  const auto back = unpackTwoBitTopK(bytes, kHandLayout);
  EXPECT_TRUE(torch::equal(back.positions, payload.positions));
  EXPECT_TRUE(torch::equal(back.codes, payload.codes));
  EXPECT_TRUE(torch::equal(back.levels, payload.levels));
}

// Templar's pack_12bit_indices: a pair (a, b) of 12-bit positions in 3 bytes, a's low 8 bits, then
// a's high 4 bits under b's low 4 bits, then b's high 8 bits.
TEST(TwoBitTopK, PacksTwelveBitPositionsTwoToThreeBytes) {
  const TwoBitTopKLayout layout{8192, 4096, 1.0 / 4096};  // one kept per chunk
  EXPECT_EQ(layout.indexBits(), 12);
  auto values = torch::zeros({8192});
  values[0xABC] = 1;
  values[4096 + 0x123] = -1;
  const auto bytes = packTwoBitTopK(encodeTwoBitTopK(values, layout), layout);
  // 16 bytes of levels, 3 of positions, 1 of codes (2 = upper and positive, 3 = upper and negative).
  ASSERT_EQ(bytes.numel(), 16 + 3 + 1);
  EXPECT_TRUE(torch::equal(bytes.narrow(0, 16, 4), torch::tensor({0xBC, 0x3A, 0x12, 2 + 3 * 4}, torch::kByte)));
}

// SparseLoCo's production setting, top 64 of each 4096 (Templar's hparams): 64 * (12 + 2) bits of
// positions and values, 0.21875 bit per parameter, plus two float32 levels per chunk, 64 / 4096 =
// 0.015625: 0.234375 bit per parameter in all, 136.5 times less than float32.
TEST(TwoBitTopK, CostsZeroPoint234375BitPerParameterAtTop64Of4096) {
  const TwoBitTopKLayout layout{4096 * 16, 4096, 64.0 / 4096};
  EXPECT_EQ(layout.kept(), 64 * 16);
  const double per_parameter = static_cast<double>(twoBitTopKBits(layout)) / static_cast<double>(layout.numel);
  EXPECT_DOUBLE_EQ(per_parameter, 0.21875 + 0.015625);
  const auto values = torch::randn({layout.numel}, at::detail::createCPUGenerator(3));
  EXPECT_EQ(8u * static_cast<uint64_t>(packTwoBitTopK(encodeTwoBitTopK(values, layout), layout).numel()),
            twoBitTopKBits(layout));
}

TEST(TwoBitTopK, KeepsCeilOfDensityTimesTheChunkAndAtLeastOne) {
  EXPECT_EQ((TwoBitTopKLayout{100, 100, 0.07}.kept()), 7);  // not 8 from 0.07 * 100 = 7.000000000000001
  EXPECT_EQ((TwoBitTopKLayout{4096, 4096, 0.02}.kept()), 82);
  EXPECT_EQ((TwoBitTopKLayout{10, 4, 0.01}.kept()), 3);  // chunks of 4, 4, 2: one each
  EXPECT_EQ((TwoBitTopKLayout{10, 4, 0.01}.chunks()), 3);
}

// --- the DCT blocks ---

// The closed form of the orthonormal DCT-II coefficient (k, l) of an n x m block, in float64.
double dctCoefficient(const at::Tensor& block, int64_t k, int64_t l) {
  const auto n = block.size(0), m = block.size(1);
  const double s_k = std::sqrt((k == 0 ? 1.0 : 2.0) / n), s_l = std::sqrt((l == 0 ? 1.0 : 2.0) / m);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      sum += block[i][j].item<double>() * std::cos(M_PI * (2 * i + 1) * k / (2.0 * n)) *
             std::cos(M_PI * (2 * j + 1) * l / (2.0 * m));
    }
  }
  return s_k * s_l * sum;
}

TEST(DctBlocks, TheDctMatrixIsOrthogonal) {
  for (int64_t n : {1, 3, 8, 64}) {
    const auto c = dctMatrix(n, torch::kFloat64);
    EXPECT_TRUE(torch::allclose(c.mm(c.t()), torch::eye(n, torch::kFloat64), 0, 1e-12)) << n;
  }
}

TEST(DctBlocks, BlockSidesAreTheLargestDivisorsUpToTheLimit) {
  EXPECT_EQ(largestDivisorUpTo(6, 4), 3);
  EXPECT_EQ(largestDivisorUpTo(7, 4), 1);
  EXPECT_EQ(largestDivisorUpTo(128, 64), 64);
  EXPECT_EQ(largestDivisorUpTo(3, 64), 3);
}

TEST(DctBlocks, ABlocksCoefficientsAreTheClosedForm) {
  const auto x = torch::randn({3, 5}, at::detail::createCPUGenerator(7), torch::kFloat64);
  const auto coefficients = DctBlocks(x.sizes(), 64, torch::kFloat64).forward(x);
  ASSERT_EQ(coefficients.sizes(), (std::vector<int64_t>{1, 15}));
  for (int64_t k = 0; k < 3; ++k) {
    for (int64_t l = 0; l < 5; ++l)
      EXPECT_NEAR(coefficients[0][k * 5 + l].item<double>(), dctCoefficient(x, k, l), 1e-12);
  }
}

TEST(DctBlocks, BlocksTileTheMatrixRowMajorAndRoundTrip) {
  // (6, 2, 4) is a 6 x 8 matrix in blocks of 3 x 4: block 1 is rows 0-2, columns 4-7.
  const auto x = torch::randn({6, 2, 4}, at::detail::createCPUGenerator(8), torch::kFloat64);
  const DctBlocks dct(x.sizes(), 4, torch::kFloat64);
  EXPECT_EQ(dct.blocks(), 4);
  const auto coefficients = dct.forward(x);
  const auto block = x.reshape({6, 8}).narrow(0, 0, 3).narrow(1, 4, 4);
  EXPECT_NEAR(coefficients[1][1 * 4 + 2].item<double>(), dctCoefficient(block, 1, 2), 1e-12);
  EXPECT_TRUE(torch::allclose(dct.inverse(coefficients), x, 0, 1e-12));
}

TEST(DctBlocks, AVectorIsTransformedAlongItsOnlyRow) {
  const auto x = torch::randn({6}, at::detail::createCPUGenerator(9), torch::kFloat64);
  const DctBlocks dct(x.sizes(), 4, torch::kFloat64);
  const auto coefficients = dct.forward(x);
  ASSERT_EQ(coefficients.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_NEAR(coefficients[1][2].item<double>(), dctCoefficient(x.narrow(0, 3, 3).view({1, 3}), 0, 2), 1e-12);
  EXPECT_TRUE(torch::allclose(dct.inverse(coefficients), x, 0, 1e-12));
}

// --- the reducers over two ranks ---

ReducerOptions withSettings(SettingValues settings) {
  ReducerOptions options;
  options.settings = std::move(settings);
  return options;
}

// Each rank sends the hand example (rank 1 negated): the average of +x and -x's decodes is zero
// where both kept the same positions, and each rank's memory is its send minus its own decode.
TEST(TwoBitTopKReducer, AveragesTheDecodesAndKeepsWhatItsOwnSendLost) {
  testing::runRanks(2, [&](Communicator& comm) {
    auto reducer = testing::buildReducer("two-bit-topk", comm, withSettings({{"chunk", int64_t{8}}, {"density", 0.5}}));
    const double sign = comm.rank() == 0 ? 1 : -1;
    auto send = torch::tensor(kChunkValues, torch::kFloat).mul(sign);
    const auto sent = send.clone();
    auto out = torch::full({10}, 123.0f), memory = torch::empty({10});
    const uint64_t bits = reducer->reduce({send}, {out}, {memory});
    EXPECT_EQ(bits, 8u * 20);
    EXPECT_TRUE(torch::equal(out, torch::zeros({10})));
    const std::vector<float> decoded = {0, -5, 0, 2.5, -2.5, 0, 5, 0, -7, 0};
    EXPECT_TRUE(torch::equal(memory, sent - torch::tensor(decoded).mul(sign)));
    ASSERT_EQ(reducer->lastCosts().size(), 1u);
    EXPECT_EQ(reducer->lastCosts()[0].bits, bits);
  });
}

// Two ranks, a 4 x 6 tensor in 4 x 3 blocks keeping 5 of 12 coefficients: the average of the
// ranks' inverse DCTs of their kept coefficients; the positions go as int64 and the values as
// float32, 96 bits a coefficient, as bloc97/DeMo's all-gathers send them.
TEST(DctTopKReducer, AveragesTheKeptCoefficientsInverseTransformed) {
  testing::runRanks(2, [&](Communicator& comm) {
    auto reducer = testing::buildReducer("dct-topk", comm, withSettings({{"block", int64_t{4}}, {"topk", int64_t{5}}}));
    const DctBlocks dct({4, 6}, 4, torch::kFloat64);
    std::vector<at::Tensor> decoded;
    for (int w = 0; w < 2; ++w) {
      const auto x = torch::randn({4, 6}, at::detail::createCPUGenerator(20 + w), torch::kFloat64);
      const auto coefficients = dct.forward(x);
      const auto top = std::get<1>(coefficients.abs().topk(5, 1));
      decoded.push_back(dct.inverse(torch::zeros_like(coefficients).scatter_(1, top, coefficients.gather(1, top))));
    }
    auto send =
        torch::randn({4, 6}, at::detail::createCPUGenerator(20 + comm.rank()), torch::kFloat64).to(torch::kFloat);
    const auto sent = send.clone();
    auto out = torch::full({4, 6}, 123.0f), memory = torch::empty({4, 6});
    EXPECT_EQ(reducer->reduce({send}, {out}, {memory}), 2u * 5 * 96);
    EXPECT_TRUE(torch::allclose(out.to(torch::kFloat64), (decoded[0] + decoded[1]) / 2, 0, 1e-5));
    EXPECT_TRUE(torch::allclose(memory.to(torch::kFloat64), sent.to(torch::kFloat64) - decoded[comm.rank()], 0, 1e-5));
  });
}

}  // namespace
}  // namespace gcrun::reducers
