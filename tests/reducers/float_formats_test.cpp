// The low-precision reducers fp8, fp4 and int8: their formats against closed forms in double, their
// rounding at midpoints, saturation and non-finite inputs, their bits as packed, and the
// all-gather's float32 sum in rank order.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "reducers/float_formats.h"
#include "reducers/reducer.h"
#include "tests/support/compressor_fixtures.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"

namespace gcrun::reducers {
namespace {

using testing::buildReducer;
using testing::runRanks;

// A code's value from the format's definition, in double: sign, exponent field e, mantissa m.
double closedForm(int code, int exponent_bits, int mantissa_bits, int bias) {
  const int sign = code >> (exponent_bits + mantissa_bits);
  const int e = (code >> mantissa_bits) & ((1 << exponent_bits) - 1);
  const double m = code & ((1 << mantissa_bits) - 1);
  const double fraction = m / std::pow(2.0, mantissa_bits);
  const double magnitude = e == 0 ? fraction * std::pow(2.0, 1 - bias) : (1 + fraction) * std::pow(2.0, e - bias);
  return sign != 0 ? -magnitude : magnitude;
}

// Every code decodes to its closed form (specials as `special` says) and encodes back to itself.
template <class Special>
void expectEveryCode(const Minifloat& format, const Special& special, const std::string& name) {
  for (int code = 0; code < (1 << format.bits()); ++code) {
    const float decoded = format.decode(static_cast<uint32_t>(code));
    const double expected = special(code, closedForm(code, format.exponent_bits, format.mantissa_bits, format.bias));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(decoded)) << name << " code " << code;
      continue;
    }
    EXPECT_EQ(static_cast<double>(decoded), expected) << name << " code " << code;
    EXPECT_EQ(std::signbit(decoded), std::signbit(expected)) << name << " code " << code;
    if (std::isfinite(expected)) {
      EXPECT_EQ(format.encode(decoded), static_cast<uint32_t>(code)) << name << " code " << code;
    }
  }
}

TEST(Minifloat, E4M3EveryCodeIsItsClosedFormAndRoundTrips) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // OCP E4M3 FN: S.1111.111 is NaN; S.1111.110 is 448; no infinity.
  expectEveryCode(
      e4m3(), [&](int code, double value) { return (code & 0x7F) == 0x7F ? nan : value; }, "e4m3");
  EXPECT_EQ(e4m3().maxFinite(), 448.0f);
  EXPECT_EQ(e4m3().decode(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
}

TEST(Minifloat, E5M2EveryCodeIsItsClosedFormAndRoundTrips) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  expectEveryCode(
      e5m2(),
      [&](int code, double value) {
        if ((code & 0x7C) != 0x7C) return value;
        if ((code & 0x03) != 0) return nan;
        return (code & 0x80) != 0 ? -inf : inf;
      },
      "e5m2");
  EXPECT_EQ(e5m2().maxFinite(), 57344.0f);
  EXPECT_EQ(e5m2().decode(0x01), std::ldexp(1.0f, -16));
}

TEST(Minifloat, E3M0IsZeroAndSignedPowersOfTwo) {
  expectEveryCode(
      e3m0(), [](int, double value) { return value; }, "e3m0");
  const std::vector<float> magnitudes = {0, 0.25f, 0.5f, 1, 2, 4, 8, 16};
  for (uint32_t code = 0; code < 8; ++code) {
    EXPECT_EQ(e3m0().decode(code), magnitudes[code]);
    EXPECT_EQ(e3m0().decode(code | 8), -magnitudes[code]);
  }
}

TEST(Minifloat, RoundsMidpointsToTheEvenCode) {
  const float sub = std::ldexp(1.0f, -9);                          // E4M3's subnormal step
  EXPECT_EQ(e4m3().encode(1.0625f), 0x38u);                        // 1 | 1.125: to 1 (mantissa 000)
  EXPECT_EQ(e4m3().encode(1.1875f), 0x3Au);                        // 1.125 | 1.25: to 1.25 (mantissa 010)
  EXPECT_EQ(e4m3().encode(std::nextafter(1.0625f, 2.0f)), 0x39u);  // just above: up
  EXPECT_EQ(e4m3().encode(0.5f * sub), 0x00u);                     // 0 | smallest subnormal
  EXPECT_EQ(e4m3().encode(1.5f * sub), 0x02u);
  EXPECT_EQ(e4m3().encode(2.5f * sub), 0x02u);
  EXPECT_EQ(e4m3().encode(7.5f * sub), 0x08u);  // largest subnormal | smallest normal
  EXPECT_EQ(e4m3().encode(-1.0625f), 0xB8u);
  EXPECT_EQ(e5m2().encode(1.125f), 0x3Cu);  // 1 | 1.25
  EXPECT_EQ(e5m2().encode(1.375f), 0x3Eu);  // 1.25 | 1.5
  EXPECT_EQ(e3m0().encode(1.5f), 4u);       // 1 | 2: exponent fields 3 | 4
  EXPECT_EQ(e3m0().encode(3.0f), 4u);       // 2 | 4: fields 4 | 5
  EXPECT_EQ(e3m0().encode(0.125f), 0u);     // 0 | 1/4
  EXPECT_EQ(e3m0().encode(0.375f), 2u);     // 1/4 | 1/2: fields 1 | 2
  EXPECT_EQ(e3m0().encode(-0.375f), 10u);
}

TEST(Minifloat, SaturatesAndSendsNaNAsItsCode) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(e4m3().encode(464.0f), 0x7Eu);  // would round to 480, past 448 (and onto NaN's code)
  EXPECT_EQ(e4m3().encode(1e30f), 0x7Eu);
  EXPECT_EQ(e4m3().encode(-inf), 0xFEu);
  EXPECT_EQ(e4m3().encode(nan), 0x7Fu);
  EXPECT_EQ(e5m2().encode(65536.0f), 0x7Bu);
  EXPECT_EQ(e5m2().encode(inf), 0x7Bu);
  EXPECT_EQ(e5m2().encode(nan), 0x7Fu);
  EXPECT_EQ(e3m0().encode(100.0f), 7u);
  EXPECT_EQ(e3m0().encode(-inf), 15u);
  EXPECT_EQ(e3m0().encode(nan), 0u);  // no NaN in E3M0: the group's NaN scale carries it
}

// One rank's reduce of `values` (one tensor) with `settings`: what it delivers and keeps.
struct Reduced {
  at::Tensor out, memory;
  uint64_t bits;
};

Reduced reduceAlone(const std::string& name, const std::vector<float>& values, const SettingValues& settings = {}) {
  Reduced r;
  runRanks(1, [&](Communicator& comm) {
    ReducerOptions options;
    options.settings = settings;
    auto reducer = buildReducer(name, comm, options);
    auto send = torch::tensor(values);
    r.out = torch::full_like(send, 123.0);
    r.memory = torch::full_like(send, 456.0);
    r.bits = reducer->reduce({send}, {r.out}, {r.memory});
  });
  return r;
}

void expectEqualFloats(const at::Tensor& actual, const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size())) << what;
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(actual[i].item<float>(), expected[i]) << what << " [" << i << "]";
}

TEST(Fp8Reducer, ScalesByAmaxPerBlockAndDeliversRepresentableValuesExactly) {
  // amax 896 -> m = 448 / 896 = 0.5: 896 -> 448, 2 -> 1, -1 -> -0.5, all E4M3 values, back exactly.
  const auto r = reduceAlone("fp8", {896, 2, -1, 0}, {{"scale", std::string("tensor")}});
  expectEqualFloats(r.out, {896, 2, -1, 0}, "out");
  expectEqualFloats(r.memory, {0, 0, 0, 0}, "memory");
  EXPECT_EQ(r.bits, 4u * 8 + 32);
  // Blocks of 2: {3, 1} has m = 448 / 3, its own scale; {0, 0} has m = 1 and stays 0.
  const auto blocks = reduceAlone("fp8", {3, 1, 0, 0}, {{"scale", std::string("block")}, {"scale_block", int64_t{2}}});
  EXPECT_EQ(blocks.bits, 4u * 8 + 2 * 32);
  const float m = 448.0f / 3.0f;
  const float one = e4m3().decode(e4m3().encode(1.0f * m)) / m;
  expectEqualFloats(blocks.out, {e4m3().decode(e4m3().encode(3.0f * m)) / m, one, 0, 0}, "blocks");
  EXPECT_EQ(blocks.memory[1].item<float>(), 1.0f - one);
}

TEST(Fp8Reducer, ANonFiniteElementMakesItsWholeGroupNaNAndOnlyIt) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const float bad : {nan, inf, -inf}) {
    for (const std::string name : {"fp8", "fp4"}) {
      const auto r = reduceAlone(name, {1, bad, 2, 4}, {{"scale_block", int64_t{2}}});
      EXPECT_TRUE(std::isnan(r.out[0].item<float>()) && std::isnan(r.out[1].item<float>())) << name << " " << bad;
      EXPECT_EQ(r.out[2].item<float>(), 2.0f) << name << " " << bad;
      EXPECT_EQ(r.out[3].item<float>(), 4.0f) << name << " " << bad;
    }
  }
}

TEST(Fp4Reducer, SendsPowersOfTwoOfTheScaleAndPacksTwoCodesAByte) {
  // amax 32 -> m = 16 / 32: 32 -> 16; 3 -> 1.5, the midpoint of 1 and 2, to 2 (even field 4) -> 4;
  // -0.2 -> -0.1, below 1/8, to -0; 0.75 -> 0.375, the midpoint of 1/4 and 1/2, to 1/2 -> 1.
  const auto r = reduceAlone("fp4", {32, 3, -0.2f, 0.75f, 1}, {{"scale", std::string("tensor")}});
  expectEqualFloats(r.out, {32, 4, -0.0f, 1, 1}, "out");
  EXPECT_EQ(r.bits, 8u * 3 + 32);  // five 4-bit codes in 3 bytes, one scale
}

TEST(Int8Reducer, SendsMinMaxLevelsRoundedHalfToEven) {
  // min 0, max 255: level = x exactly; 0.5 -> 0 and 2.5 -> 2 (half away from zero would give 1, 3).
  const auto r = reduceAlone("int8", {0, 0.5f, 1.5f, 2.5f, 255, 100.25f});
  expectEqualFloats(r.out, {0, 0, 2, 2, 255, 100}, "out");
  expectEqualFloats(r.memory, {0, 0.5f, -0.5f, 0.5f, 0, 0.25f}, "memory");
  EXPECT_EQ(r.bits, 6u * 8 + 64);
  // min -1, max 1: levels 0, 127.5 -> 128, 255; decoded as -1 + q * (2 / 255).
  const auto signed_range = reduceAlone("int8", {-1, 0, 1});
  const float step = 2.0f / 255.0f;
  expectEqualFloats(signed_range.out, {-1, -1 + 128 * step, -1 + 255 * step}, "signed");
}

TEST(Int8Reducer, AConstantTensorIsExactAndANonFiniteOneIsNaN) {
  expectEqualFloats(reduceAlone("int8", {-3.5f, -3.5f, -3.5f}).out, {-3.5f, -3.5f, -3.5f}, "constant");
  const float inf = std::numeric_limits<float>::infinity();
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), inf, -inf}) {
    const auto r = reduceAlone("int8", {1, bad, 2});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(r.out[i].item<float>())) << bad << " [" << i << "]";
  }
}

TEST(LowPrecisionReducers, CountTheirBitsAsPackedAndSplitThemByTensor) {
  const Shapes shapes = {{7}, {3, 3}, {1}, {0}};  // 17 elements: 4-bit codes fill 8.5 bytes -> 9
  const std::vector<std::tuple<std::string, SettingValues, uint64_t>> cases = {
      {"fp8", {{"scale", std::string("tensor")}}, 17 * 8 + 3 * 32},
      {"fp8", {{"scale_block", int64_t{4}}}, 17 * 8 + (2 + 3 + 1) * 32},
      {"fp4", {{"scale", std::string("tensor")}}, 9 * 8 + 3 * 32},
      {"fp4", {{"scale_block", int64_t{4}}}, 9 * 8 + (2 + 3 + 1) * 32},
      {"int8", {}, 17 * 8 + 3 * 64},
  };
  runRanks(2, [&](Communicator& comm) {
    for (const auto& [name, settings, bits] : cases) {
      ReducerOptions options;
      options.settings = settings;
      auto reducer = buildReducer(name, comm, options);
      auto b = buffersFor(inputsOf(shapes, comm.rank()));
      EXPECT_EQ(reducer->reduce(b.send, b.out, b.memory), bits) << name;
      uint64_t total = 0;
      for (const auto& cost : reducer->lastCosts()) total += cost.bits;
      EXPECT_EQ(total, bits) << name;
      EXPECT_EQ(reducer->lastCosts().back().bits, 0u) << name << ": the empty tensor";
    }
  });
}

// What `name` delivers at W workers is the float32 sum, in rank order from zero, of what each
// worker's message decodes to (its output alone), times 1 / W; each worker keeps send - its own.
TEST(LowPrecisionReducers, AverageTheDecodedMessagesInFloat32InRankOrder) {
  const Shapes shapes = {{33}, {5, 7}};
  for (const std::string name : {"fp8", "fp4", "int8"}) {
    for (int world_size : {2, 3}) {
      std::vector<std::vector<at::Tensor>> decoded;
      for (int w = 0; w < world_size; ++w) {
        runRanks(1, [&](Communicator& comm) {
          auto b = buffersFor(inputsOf(shapes, w));
          buildReducer(name, comm)->reduce(b.send, b.out, b.memory);
          decoded.push_back(b.out);
        });
      }
      runRanks(world_size, [&](Communicator& comm) {
        auto b = buffersFor(inputsOf(shapes, comm.rank()));
        buildReducer(name, comm)->reduce(b.send, b.out, b.memory);
        for (size_t i = 0; i < shapes.size(); ++i) {
          auto sum = torch::zeros_like(b.out[i]);
          for (int w = 0; w < world_size; ++w) sum = sum + decoded[w][i];
          EXPECT_TRUE(torch::equal(b.out[i], sum * static_cast<float>(1.0 / world_size)))
              << name << " W " << world_size;
          EXPECT_TRUE(torch::equal(b.memory[i], inputsOf(shapes, comm.rank())[i] - decoded[comm.rank()][i])) << name;
        }
      });
    }
  }
}

}  // namespace
}  // namespace gcrun::reducers
