#include "outputs/planning/plan_model.h"

#include <algorithm>
#include <cmath>

#include "hyperparams/base/sync_schedule.h"
#include "outputs/performance/collective_cost.h"

namespace gcrun::planning {
namespace {

// Periods simulated before the one measured: enough for the link's queue to settle.
constexpr int64_t kPeriodsBeforeMeasured = 3;

double transferSeconds(const PlannedMethod& method, const network::NetworkProfile& network, int workers, double bits) {
  return performance::collectiveSeconds(network, method.collective, bits / 8, workers, method.dtype);
}

// Message i's exchange: its transfer, then the codec's time for its elements.
double exchangeSeconds(const PlannedMethod& method, const network::NetworkProfile& network, int workers, size_t i) {
  const double codec = i < method.message_elements.size() ? method.codec_s_per_element * method.message_elements[i] : 0;
  return transferSeconds(method, network, workers, method.message_bits[i]) + codec;
}

// Every step: bucket i's exchange starts once its gradients are ready (during backward) and the
// one before it is done: one link, one queue, as DDP's buckets. The step ends when backward and
// the last exchange have.
double everyStepSeconds(const PlannedMethod& method, const ComputeModel& compute,
                        const network::NetworkProfile& network, int workers) {
  const double backward = compute.step_s * compute.backward_share;
  const double forward = compute.step_s - backward;
  double link_free = 0;
  for (size_t i = 0; i < method.message_bits.size(); ++i) {
    const double start = std::max(forward + backward * method.ready[i], link_free);
    link_free = start + exchangeSeconds(method, network, workers, i);
  }
  return std::max(compute.step_s, link_free);
}

// A worker's clock over periodic sends. Each fragment's exchange joins the link's queue after its
// send step; the worker waits for it after the step it is applied at, `delay` steps later (0: at
// once). A fragment's result lands before the next send (sync.delay < H / F), so at most one is
// in flight.
class PeriodicClock {
 public:
  PeriodicClock(const PlannedMethod& method, const ComputeModel& compute, const network::NetworkProfile& network,
                int workers)
      : method_(method), compute_(compute), network_(network), workers_(workers) {}

  // The mean step of the period after kPeriodsBeforeMeasured.
  double meanStep() {
    const int64_t every = method_.sync_every;
    double measured_from = 0;
    for (int64_t period = 0; period <= kPeriodsBeforeMeasured; ++period) {
      if (period == kPeriodsBeforeMeasured) {
        advanceTo(period * every);
        measured_from = time_;
      }
      for (int64_t p = 0; p < method_.fragments; ++p) {
        const int64_t offset = sendOffset(p, method_.fragments, every);
        send(period * every + (offset == 0 ? every : offset), static_cast<size_t>(p));
      }
    }
    advanceTo((kPeriodsBeforeMeasured + 1) * every);
    return (time_ - measured_from) / static_cast<double>(every);
  }

 private:
  void advanceTo(int64_t step) {
    if (due_step_ >= 0 && due_step_ <= step) {
      time_ += static_cast<double>(due_step_ - step_) * compute_.step_s;
      step_ = due_step_;
      time_ = std::max(time_, due_time_);
      due_step_ = -1;
    }
    time_ += static_cast<double>(step - step_) * compute_.step_s;
    step_ = step;
  }

  void send(int64_t step, size_t fragment) {
    advanceTo(step);
    const double start = std::max(time_, link_free_);
    link_free_ = start + exchangeSeconds(method_, network_, workers_, fragment);
    if (method_.delay == 0) {
      time_ = link_free_;
    } else {
      due_step_ = step + method_.delay;
      due_time_ = link_free_;
    }
  }

  const PlannedMethod& method_;
  const ComputeModel& compute_;
  const network::NetworkProfile& network_;
  int workers_;
  int64_t step_ = 0;
  double time_ = 0, link_free_ = 0;
  int64_t due_step_ = -1;
  double due_time_ = 0;
};

double totalBits(const PlannedMethod& method) {
  double total = 0;
  for (double bits : method.message_bits) total += bits;
  return total;
}

}  // namespace

StepEstimate estimateStep(const PlannedMethod& method, const ComputeModel& compute,
                          const network::NetworkProfile& network, int workers) {
  StepEstimate estimate;
  estimate.step_s = method.periodic ? PeriodicClock(method, compute, network, workers).meanStep()
                                    : everyStepSeconds(method, compute, network, workers);
  estimate.cu = compute.step_s / estimate.step_s;
  const double total = totalBits(method);
  estimate.bits_per_step = method.periodic ? total / static_cast<double>(method.sync_every) : total;
  estimate.bits_per_sync = method.periodic ? total / static_cast<double>(method.fragments) : total;
  const double wire = performance::costFactors(method.collective, workers).bytes;
  estimate.average_bit_per_s = wire * estimate.bits_per_step / estimate.step_s;
  for (double bits : method.message_bits) {
    const double seconds = transferSeconds(method, network, workers, bits);
    if (seconds > 0) estimate.peak_bit_per_s = std::max(estimate.peak_bit_per_s, wire * bits / seconds);
  }
  return estimate;
}

std::optional<double> bandwidthFor(double cu, const PlannedMethod& method, const ComputeModel& compute,
                                   double latency_s, int workers) {
  const auto cu_at = [&](double log_bit_per_s) {
    return estimateStep(method, compute, network::linkProfile(std::exp(log_bit_per_s) / 8, latency_s), workers).cu;
  };
  double low = std::log(kLowestBitPerS), high = std::log(kHighestBitPerS);
  if (cu_at(high) < cu) return std::nullopt;
  if (cu_at(low) >= cu) return kLowestBitPerS;
  // CU grows with the bandwidth: bisect its logarithm to well within a percent.
  for (int i = 0; i < 32; ++i) {
    const double middle = (low + high) / 2;
    (cu_at(middle) >= cu ? high : low) = middle;
  }
  return std::exp(high);
}

}  // namespace gcrun::planning
