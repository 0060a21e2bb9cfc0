#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "reducers/comm/communicator.h"
#include "tasks/task.h"

namespace gcrun::experiments {

// Adds up every worker's metric sums (one all-reduce) and returns the task's finalized means.
std::map<std::string, double> reduceMetrics(const tasks::MetricSums& local, const tasks::Task& task,
                                            comm::Communicator& comm);

// The 2-norm of all the tensors together, in float64.
double globalNorm(const std::vector<at::Tensor>& tensors);

}  // namespace gcrun::experiments
