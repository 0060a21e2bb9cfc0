// The fused encoders and decoders (issue #14) against the whole-tensor versions they replaced, kept
// here verbatim as oracles: on seeded inputs every message put on the wire, every output, every
// memory and every bit count must be identical, at 1 and 2 workers.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include <torch/torch.h>

#include "reducers/quantized_reducer.h"
#include "reducers/reducer.h"
#include "reducers/tensor_buffer.h"
#include "reducers/top_magnitudes.h"
#include "tests/support/bit_packing.h"
#include "tests/support/multi_rank.h"
#include "tests/support/reducer_fixtures.h"
#include "tests/support/reducer_inputs.h"

namespace gcrun::reducers {
namespace {

using testing::buildReducer;
using testing::clones;
using testing::runRanks;

// Passes every collective on and keeps a copy of what this rank put on the wire.
class RecordingCommunicator : public testing::ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  void allreduceSum(at::Tensor& tensor) override {
    sent.push_back(tensor.clone());
    ForwardingCommunicator::allreduceSum(tensor);
  }
  std::unique_ptr<PendingCollective> allreduceSumAsync(at::Tensor& tensor) override {
    sent.push_back(tensor.clone());
    return ForwardingCommunicator::allreduceSumAsync(tensor);
  }
  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override {
    sent.push_back(tensor.clone());
    return ForwardingCommunicator::allgather(tensor);
  }
  std::vector<at::Tensor> sent;
};

// ---------------------------------------------------------------------------------------------
// The oracles: the code as it was before the fused versions.

at::Tensor oldPackBits(const at::Tensor& codes, int64_t bits) {
  const int64_t count = codes.numel();
  const int64_t bytes = packedBytes(count, bits);
  auto stream = at::zeros({bytes * 8}, codes.options().dtype(at::kByte));
  auto fields = stream.narrow(0, 0, count * bits).view({count, bits});
  for (int64_t j = 0; j < bits; ++j) fields.select(1, j).copy_(codes.bitwise_right_shift(j).bitwise_and(1));
  auto octets = stream.view({bytes, 8});
  auto packed = at::zeros({bytes}, codes.options().dtype(at::kByte));
  for (int64_t k = 0; k < 8; ++k) packed.bitwise_or_(octets.select(1, k).bitwise_left_shift(k));
  return packed;
}

at::Tensor oldUnpackBits(const at::Tensor& bytes, int64_t count, int64_t bits) {
  auto stream = at::empty({bytes.numel(), 8}, bytes.options());
  for (int64_t k = 0; k < 8; ++k) stream.select(1, k).copy_(bytes.bitwise_right_shift(k).bitwise_and(1));
  auto fields = stream.view({-1}).narrow(0, 0, count * bits).view({count, bits}).to(at::kLong);
  auto codes = at::zeros({count}, fields.options());
  for (int64_t j = 0; j < bits; ++j) codes.bitwise_or_(fields.select(1, j).bitwise_left_shift(j));
  return codes;
}

using OldQuantizer = std::function<at::Tensor(const at::Tensor& g, const at::Tensor& uniform, at::Tensor scale)>;

at::Tensor oldEncode(const std::vector<at::Tensor>& tensors, at::Generator& generator, int64_t bits,
                     const OldQuantizer& quantize) {
  int64_t count = 0;
  for (const auto& t : tensors) count += t.numel();
  const auto uniform = at::rand({count}, generator, at::TensorOptions().dtype(at::kFloat));
  auto scales = at::zeros({static_cast<int64_t>(tensors.size())});
  auto codes = at::empty({count}, at::kLong);
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t n = tensors[i].numel();
    if (n == 0) continue;
    codes.narrow(0, offset, n).copy_(quantize(tensors[i], uniform.narrow(0, offset, n), scales[i]));
    offset += n;
  }
  return at::cat({floatsAsBytes(scales), oldPackBits(codes, bits)});
}

void oldDecode(const at::Tensor& message, const std::vector<at::Tensor>& tensors, int64_t bits,
               const std::function<at::Tensor(const at::Tensor&)>& values, double divisor) {
  const int64_t header = 4 * static_cast<int64_t>(tensors.size());
  int64_t count = 0;
  for (const auto& t : tensors) count += t.numel();
  const auto scales = bytesAsFloats(message.narrow(0, 0, header));
  const auto decoded = values(oldUnpackBits(message.narrow(0, header, message.numel() - header), count, bits));
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t n = tensors[i].numel();
    auto target = tensors[i];
    at::mul_out(target, decoded.narrow(0, offset, n), scales[i] / divisor);
    offset += n;
  }
}

const OldQuantizer oldQsgd = [](const at::Tensor& g, const at::Tensor& uniform, at::Tensor norm) {
  const int64_t levels = 256;
  norm.copy_(g.norm());
  auto scaled = g.abs().div_(norm.clamp_min(std::numeric_limits<float>::min())).mul_(levels);
  auto level = scaled.add_(uniform).floor_().clamp_max_(levels).to(at::kLong);
  return level.mul_(2).add_(g.lt(0).to(at::kLong));
};
at::Tensor oldQsgdValues(const at::Tensor& codes) {
  return codes.bitwise_right_shift(1).mul(codes.bitwise_and(1).mul(-2).add_(1)).to(at::kFloat);
}

const OldQuantizer oldTernGrad = [](const at::Tensor& g, const at::Tensor& uniform, at::Tensor scale) {
  scale.copy_(g.abs().max());
  auto probability = g.abs().div_(scale.clamp_min(std::numeric_limits<float>::min()));
  auto kept = uniform.lt(probability).to(at::kLong);
  return kept.mul_(g.lt(0).to(at::kLong).add_(1));
};
at::Tensor oldTernaryValues(const at::Tensor& codes) {
  return codes.eq(1).to(at::kFloat).sub_(codes.eq(2).to(at::kFloat));
}

std::vector<at::Tensor> slices(const TensorBuffer& buffer, size_t count) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < count; ++i) out.push_back(buffer.slice(i));
  return out;
}

// The all-gather reducer (unchanged) around the old codec.
uint64_t oldAllGather(Communicator& comm, Buffers& b, at::Generator& generator, int64_t bits, const OldQuantizer& q,
                      const std::function<at::Tensor(const at::Tensor&)>& values, double divisor) {
  TensorBuffer own(b.send), decoded(b.send), sum(b.send);
  own.pack(b.send);
  const auto message = oldEncode(slices(own, b.send.size()), generator, bits, q);
  const auto messages = comm.allgather(message);
  sum.flat().zero_();
  for (int w = 0; w < comm.size(); ++w) {
    oldDecode(messages[w], slices(decoded, b.send.size()), bits, values, divisor);
    sum.flat().add_(decoded.flat());
    if (w == comm.rank()) own.flat().sub_(decoded.flat());
  }
  sum.unpack(b.out, 1.0 / comm.size());
  own.unpack(b.memory);
  return 8ull * static_cast<uint64_t>(message.numel());
}

at::Tensor oldPackSigns(const at::Tensor& flat) {
  auto negative = at::zeros({(flat.numel() + 31) / 32 * 32}, flat.options().dtype(at::kLong));
  negative.narrow(0, 0, flat.numel()).copy_(flat.lt(0));
  return oldPackBits(negative, 1);
}
at::Tensor oldUnpackSigns(const at::Tensor& bytes, int64_t count) {
  return oldUnpackBits(bytes, count, 1).to(at::kFloat).mul_(-2).add_(1);
}

uint64_t oldSignNorm(Communicator& comm, Buffers& b) {
  TensorBuffer flat(b.send);
  flat.pack(b.send);
  const auto signs = oldPackSigns(flat.flat());
  auto scales = at::empty({static_cast<int64_t>(b.send.size())});
  for (size_t i = 0; i < b.send.size(); ++i) {
    scales[static_cast<int64_t>(i)].copy_(b.send[i].abs().sum() / std::max<int64_t>(b.send[i].numel(), 1));
  }
  const auto all_signs = comm.allgather(signs);
  const auto all_scales = comm.allgather(scales);
  for (const auto& o : b.out) o.zero_();
  for (size_t w = 0; w < all_signs.size(); ++w) {
    flat.flat().copy_(oldUnpackSigns(all_signs[w], flat.numel()));
    for (size_t i = 0; i < b.out.size(); ++i) {
      auto decoded = flat.slice(i).view(b.out[i].sizes()) * all_scales[w][static_cast<int64_t>(i)];
      b.out[i].add_(decoded);
      if (static_cast<int>(w) != comm.rank()) continue;
      auto error = b.memory[i];
      at::sub_out(error, b.send[i], decoded);
    }
  }
  for (const auto& o : b.out) o.div_(comm.size());
  return bitsOf(signs) + bitsOf(scales);
}

uint64_t oldSignum(Communicator& comm, Buffers& b) {
  TensorBuffer flat(b.send);
  flat.pack(b.send);
  const auto message = oldPackSigns(flat.flat());
  auto votes = at::zeros_like(flat.flat());
  for (const auto& m : comm.allgather(message)) votes.add_(oldUnpackSigns(m, flat.numel()));
  flat.flat().copy_(votes.sign_());
  flat.unpack(b.out);
  for (size_t i = 0; i < b.send.size(); ++i) {
    auto error = b.memory[i];
    at::sub_out(error, b.send[i], b.out[i]);
  }
  return bitsOf(message);
}

// `backend_sums`: the probe's answer (LibTorch 1.13's Gloo refuses bfloat16 sums between 2 ranks).
uint64_t oldLowPrecision(Communicator& comm, Buffers& b, at::ScalarType wire_type, bool backend_sums) {
  std::vector<at::Tensor> like;
  for (const auto& t : b.send) like.push_back(at::empty({t.numel()}, at::TensorOptions().dtype(wire_type)));
  TensorBuffer wire(like);
  const int world = comm.size();
  for (size_t i = 0; i < b.send.size(); ++i) {
    b.send[i].div_(world);
    auto cast = wire.slice(i);
    cast.copy_(b.send[i].reshape({-1}));
    auto error = b.memory[i];
    at::sub_out(error, b.send[i], cast.view(b.send[i].sizes()).to(b.send[i].scalar_type())).mul_(world);
  }
  if (backend_sums) {
    comm.allreduceSum(wire.flat());
    wire.unpack(b.out);
  } else {
    std::vector<at::Tensor> floats;
    for (const auto& t : b.send) floats.push_back(at::empty({t.numel()}));
    TensorBuffer sum(floats);
    sum.flat().zero_();
    for (const auto& bytes : comm.allgather(wire.flat().view(at::kByte))) sum.flat().add_(bytes.view(wire_type));
    sum.unpack(b.out);
  }
  return bitsOf(wire.flat());
}

// ---------------------------------------------------------------------------------------------

// Every kind of shape, a larger matrix, zeros of both signs and an all-zero tensor (the last).
Buffers seededInputs(int rank, int step) {
  auto b = makeInputs({{}, {7}, {5, 3}, {300, 37}, {4, 3, 3, 3}, {1, 1}, {6, 4}}, rank, step);
  b.send[3].view({-1}).narrow(0, 0, 20).zero_();
  b.send[3].view({-1}).narrow(0, 20, 20).fill_(-0.0f);
  return b;
}

// Bitwise: NaN-free and -0 distinguished from +0.
void expectSameBits(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type()) << what;
  const auto a = actual.contiguous().view({-1}).view(at::kByte);
  const auto e = expected.contiguous().view({-1}).view(at::kByte);
  EXPECT_TRUE(torch::equal(a, e)) << what;
}

using Oracle = std::function<uint64_t(Communicator&, Buffers&)>;

void expectSameAsOracle(const std::string& name, int world_size, const std::function<Oracle(int rank)>& oracle_for) {
  runRanks(world_size, [&](Communicator& comm) {
    RecordingCommunicator recorder(comm);
    auto reducer = buildReducer(name, recorder);
    RecordingCommunicator oracle_recorder(comm);
    const auto oracle = oracle_for(comm.rank());
    for (int step = 0; step < 3; ++step) {
      auto fused = seededInputs(comm.rank(), step);
      auto old = seededInputs(comm.rank(), step);
      const uint64_t bits = reducer->reduce(fused.send, fused.out, fused.memory);
      EXPECT_EQ(bits, oracle(oracle_recorder, old)) << name << " step " << step;
      for (size_t i = 0; i < fused.out.size(); ++i) {
        expectSameBits(fused.out[i], old.out[i], name + " out " + std::to_string(i));
        expectSameBits(fused.memory[i], old.memory[i], name + " memory " + std::to_string(i));
      }
    }
    // The probe and every message, in order.
    ASSERT_EQ(recorder.sent.size(), oracle_recorder.sent.size()) << name;
    // As bytes: a 16-bit payload may now travel by all-gather as bytes rather than be all-reduced.
    for (size_t k = 0; k < recorder.sent.size(); ++k) {
      const auto bytes = [](const at::Tensor& t) { return t.contiguous().view({-1}).view(at::kByte); };
      expectSameBits(bytes(recorder.sent[k]), bytes(oracle_recorder.sent[k]), name + " message " + std::to_string(k));
    }
  });
}

class FusedCodec : public ::testing::TestWithParam<int> {};

TEST_P(FusedCodec, QsgdSendsAndDecodesWhatTheTensorOpsDid) {
  expectSameAsOracle("qsgd", GetParam(), [](int rank) -> Oracle {
    auto generator = std::make_shared<at::Generator>(workerGenerator(42, rank));
    return [generator](Communicator& comm, Buffers& b) {
      return oldAllGather(comm, b, *generator, 10, oldQsgd, oldQsgdValues, 256.0);
    };
  });
}

TEST_P(FusedCodec, TernGradSendsAndDecodesWhatTheTensorOpsDid) {
  expectSameAsOracle("terngrad", GetParam(), [](int rank) -> Oracle {
    auto generator = std::make_shared<at::Generator>(workerGenerator(42, rank));
    return [generator](Communicator& comm, Buffers& b) {
      return oldAllGather(comm, b, *generator, 2, oldTernGrad, oldTernaryValues, 1.0);
    };
  });
}

TEST_P(FusedCodec, SignNormMatchesTheTensorOps) {
  expectSameAsOracle("sign-norm", GetParam(), [](int) -> Oracle { return oldSignNorm; });
}

TEST_P(FusedCodec, SignumMatchesTheTensorOps) {
  expectSameAsOracle("signum", GetParam(), [](int) -> Oracle { return oldSignum; });
}

struct Probe {
  bool done = false, sums = true;
};

uint64_t probeThenCast(Communicator& comm, Buffers& b, at::ScalarType type, Probe& probe) {
  if (!probe.done) {  // the reducer's one-element probe, on its first call
    auto one = at::zeros({1}, at::TensorOptions().dtype(type));
    try {
      comm.allreduceSum(one);
    } catch (const c10::Error&) {
      probe.sums = false;
    }
    probe.done = true;
  }
  return oldLowPrecision(comm, b, type, probe.sums);
}

TEST_P(FusedCodec, Fp16AndBf16CastAsTheTensorOpsDid) {
  for (auto type : {at::kHalf, at::kBFloat16}) {
    expectSameAsOracle(type == at::kHalf ? "fp16" : "bf16", GetParam(), [type](int) -> Oracle {
      auto probe = std::make_shared<Probe>();
      return [type, probe](Communicator& comm, Buffers& b) { return probeThenCast(comm, b, type, *probe); };
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, FusedCodec, ::testing::Values(1, 2));

TEST(PackBits, MatchesTheTensorOpsForEveryWidth) {
  auto generator = at::detail::createCPUGenerator(7);
  for (int64_t bits : {1, 2, 3, 7, 8, 9, 10, 17, 33, 63}) {
    for (int64_t count : {0, 1, 5, 8, 101}) {
      const int64_t top = bits >= 62 ? std::numeric_limits<int64_t>::max() : int64_t{1} << bits;
      auto codes = at::randint(0, top, {count}, generator, at::kLong);
      expectSameBits(packBits(codes, bits), oldPackBits(codes, bits), std::to_string(bits) + " bits");
      expectSameBits(unpackBits(oldPackBits(codes, bits), count, bits), codes, std::to_string(bits) + " bits");
    }
  }
}

// The top-k reducers' selection against at::topk itself, ties included (the replay keeps their
// order); NaNs and the nth_element regime fall back.
TEST(TopMagnitudePositions, AreAtTopkIndicesInItsOrder) {
  auto generator = at::detail::createCPUGenerator(11);
  const auto expectTopk = [](const at::Tensor& flat, int64_t k, const std::string& what) {
    const auto expected = std::get<1>(at::topk(flat.abs(), k, 0, /*largest=*/true, /*sorted=*/false));
    expectSameBits(topMagnitudePositions(flat, k), expected, what);
  };
  const auto distinct = at::randn({100000}, generator);
  for (int64_t k : {1, 2, 500, 1562, 1563, 5000}) expectTopk(distinct, k, "distinct, k " + std::to_string(k));
  expectTopk(at::randn({10}, generator), 3, "nth_element regime");
  auto ties = at::randint(-50, 50, {20000}, generator).to(at::kFloat);
  for (int64_t k : {1, 100, 300}) expectTopk(ties, k, "ties, k " + std::to_string(k));
  // Float32 magnitudes of a large N(0, 1) tensor collide among its top 1% (the LSTM's embedding).
  const auto large = at::randn({2359296}, generator);
  for (int64_t k : {11796, 36864}) expectTopk(large, k, "large, k " + std::to_string(k));
  auto with_nan = distinct.clone();
  with_nan[123] = std::nanf("");
  expectTopk(with_nan, 500, "nan");
  expectTopk(at::zeros({1000}), 5, "all zero");
}

}  // namespace
}  // namespace gcrun::reducers
