#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hyperparams/config.h"
#include "outputs/metric_sink.h"
#include "outputs/timer.h"
#include "reducers/communicator.h"
#include "reducers/reducer.h"
#include "tasks/task.h"

namespace gcrun::experiments {

struct TrainingResult {
  int64_t steps = 0;
  double epochs = 0;   // fractional when training.max_steps stopped it mid-epoch
  uint64_t bits = 0;   // sent by this worker, all steps
  std::map<std::string, double> last_train;  // reduced over workers, last epoch
  std::map<std::string, double> last_test;
};

// The reference's training loop (powersgd.md 1.3) for one worker. Every worker runs it in
// lockstep; `sinks` is empty on all ranks but 0.
class Trainer {
 public:
  Trainer(const ExperimentConfig& config, tasks::Task& task, reducers::Communicator& comm,
          reducers::Reducer& reducer, outputs::Timer& timer,
          std::vector<std::unique_ptr<outputs::MetricSink>>& sinks);
  ~Trainer();

  TrainingResult run();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gcrun::experiments
