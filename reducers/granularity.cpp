#include "reducers/granularity.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include <ATen/ATen.h>

#include "reducers/tensor_costs.h"

namespace gcrun::reducers {
namespace {

using Grouping = std::function<TensorGroups(const std::vector<at::Tensor>&, const ReducerOptions&)>;

TensorGroups wholeModel(const std::vector<at::Tensor>& tensors, const ReducerOptions&) {
  TensorGroups groups(1);
  for (size_t i = 0; i < tensors.size(); ++i) {
    TORCH_CHECK(tensors[i].options().type_equal(tensors[0].options()),
                "reducer.granularity=model needs every gradient of one dtype and device");
    groups[0].push_back(i);
  }
  return groups;
}

TensorGroups buckets(const std::vector<at::Tensor>& tensors, const ReducerOptions& options) {
  return bucketGroups(tensors, bucketBytes(options));
}

// The granularities that regroup tensors; `layer` needs no wrapper.
const std::map<Granularity, Grouping>& groupings() {
  static const std::map<Granularity, Grouping> table = {{Granularity::model, wholeModel},
                                                        {Granularity::bucket, buckets}};
  return table;
}

// Reduces one zero-padded square per group through `inner`. The flat buffers are allocated on the
// first call; every call copies send in, reduces, and copies out and memory back.
class GroupedReducer : public Reducer {
 public:
  GroupedReducer(std::unique_ptr<Reducer> inner, Grouping grouping, ReducerOptions options)
      : inner_(std::move(inner)), grouping_(std::move(grouping)), options_(std::move(options)) {}

  uint64_t reduce(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& out,
                  const std::vector<at::Tensor>& memory) override {
    if (!allocated_) allocate(send);
    for (size_t g = 0; g < groups_.size(); ++g) {
      const auto& group = groups_[g];
      auto flat = flat_send_[g];
      for (size_t k = 0; k < group.size(); ++k) {
        slice(flat, g, k).copy_(send[group[k]].reshape({-1}));
      }
      // The inner reducer may have used last call's buffer as scratch.
      flat.narrow(0, offsets_[g].back(), flat.numel() - offsets_[g].back()).zero_();
    }
    const uint64_t bits = inner_->reduce(square_send_, square_out_, square_memory_);
    for (size_t g = 0; g < groups_.size(); ++g) {
      const auto& group = groups_[g];
      for (size_t k = 0; k < group.size(); ++k) {
        const size_t i = group[k];
        out[i].copy_(slice(flat_out_[g], g, k).view(out[i].sizes()));
        memory[i].copy_(slice(flat_memory_[g], g, k).view(memory[i].sizes()));
      }
    }
    return bits;
  }

  // A group's cost shared by its tensors in proportion to their elements (the padding's included),
  // each at the group's rank.
  std::vector<TensorCost> lastCosts() const override {
    const auto group_costs = inner_->lastCosts();
    if (group_costs.empty()) return {};
    std::vector<TensorCost> costs(tensors_);
    for (size_t g = 0; g < groups_.size(); ++g) {
      std::vector<int64_t> counts;
      for (size_t k = 0; k < groups_[g].size(); ++k) counts.push_back(offsets_[g][k + 1] - offsets_[g][k]);
      const auto shares = splitInProportion(group_costs[g].bits, counts);
      for (size_t k = 0; k < groups_[g].size(); ++k) costs[groups_[g][k]] = {shares[k], group_costs[g].rank};
    }
    return costs;
  }

  // The wrapper keeps no state between calls; the inner reducer's is the checkpoint's.
  void saveState(State& state) const override { inner_->saveState(state); }
  void loadState(const State& state) override { inner_->loadState(state); }

 private:
  void allocate(const std::vector<at::Tensor>& like) {
    tensors_ = like.size();
    for (auto& group : grouping_(like, options_)) {
      std::vector<int64_t> offsets{0};
      for (size_t i : group) offsets.push_back(offsets.back() + like[i].numel());
      if (offsets.back() == 0) continue;  // nothing to reduce; Gloo can hang on empty tensors
      const int64_t side = squareSide(offsets.back());
      const auto options = like[group.front()].options();
      for (auto* buffers : {&flat_send_, &flat_out_, &flat_memory_}) {
        buffers->push_back(at::zeros({side * side}, options));
      }
      square_send_.push_back(flat_send_.back().view({side, side}));
      square_out_.push_back(flat_out_.back().view({side, side}));
      square_memory_.push_back(flat_memory_.back().view({side, side}));
      groups_.push_back(std::move(group));
      offsets_.push_back(std::move(offsets));
    }
    allocated_ = true;
  }

  at::Tensor slice(const at::Tensor& flat, size_t g, size_t k) const {
    return flat.narrow(0, offsets_[g][k], offsets_[g][k + 1] - offsets_[g][k]);
  }

  std::unique_ptr<Reducer> inner_;
  Grouping grouping_;
  ReducerOptions options_;
  bool allocated_ = false;
  size_t tensors_ = 0;
  TensorGroups groups_;
  std::vector<std::vector<int64_t>> offsets_;  // per group: where each tensor starts, then the end
  std::vector<at::Tensor> flat_send_, flat_out_, flat_memory_;
  std::vector<at::Tensor> square_send_, square_out_, square_memory_;  // [side, side] views of those
};

}  // namespace

int64_t bucketBytes(const ReducerOptions& options) { return std::llround(options.bucket_mb * 1024.0 * 1024.0); }

TensorGroups ddpBuckets(const std::vector<int64_t>& tensor_bytes, int64_t bucket_bytes) {
  TensorGroups buckets;
  int64_t bytes = 0;
  for (size_t k = tensor_bytes.size(); k-- > 0;) {
    const int64_t cap = buckets.size() <= 1 ? std::min(kDdpFirstBucketBytes, bucket_bytes) : bucket_bytes;
    if (buckets.empty() || bytes >= cap) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(k);
    bytes += tensor_bytes[k];
  }
  return buckets;
}

TensorGroups bucketGroups(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes) {
  TensorGroups groups;
  int64_t bytes = 0;
  for (size_t n = tensors.size(); n-- > 0;) {
    const auto& t = tensors[n];
    const bool other_kind =
        !groups.empty() && !groups.back().empty() && !t.options().type_equal(tensors[groups.back().front()].options());
    if (groups.empty() || bytes >= bucket_bytes || other_kind) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(n);
    bytes += t.numel() * static_cast<int64_t>(t.element_size());
  }
  return groups;
}

int64_t squareSide(int64_t numel) {
  auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(numel)));
  while (side * side < numel) ++side;
  while (side > 0 && (side - 1) * (side - 1) >= numel) --side;
  return side;
}

std::unique_ptr<Reducer> withGranularity(std::unique_ptr<Reducer> inner, const ReducerOptions& options) {
  if (options.granularity == Granularity::layer) return inner;
  return std::make_unique<GroupedReducer>(std::move(inner), groupings().at(options.granularity), options);
}

}  // namespace gcrun::reducers
