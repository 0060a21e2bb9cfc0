#pragma once

#include <optional>
#include <string>
#include <vector>

#include "outputs/network/network_profile.h"
#include "outputs/planning/plan_model.h"

namespace gcrun::planning {

// One configuration at one worker count on one network.
struct PlanPoint {
  size_t method = 0;  // into Plan::methods
  int workers = 0;
  std::string network;
  StepEstimate estimate;
};

// The bandwidth one configuration needs at one worker count to reach one CU.
struct PlanTarget {
  size_t method = 0;
  int workers = 0;
  double cu = 0;
  std::optional<double> bit_per_s;  // nothing: unreachable below 100 Tbit/s
};

// What `gcrun plan` answers, and what it answered it from.
struct Plan {
  std::string title;                     // "gpt-shakespeare-char: 1.2e9 parameters"
  std::vector<std::string> assumptions;  // plan.md's last section
  std::vector<PlannedMethod> methods;
  ComputeModel compute;
  double target_latency_s = 0;  // the link latency of the CU targets' searches and the plots
  std::vector<int> workers;
  std::vector<double> cu_targets;
  std::vector<PlanPoint> points;
  std::vector<PlanTarget> targets;
};

// Every method at every worker count on every network, and every CU target's bandwidth.
void computePlan(Plan& plan, const std::vector<network::NetworkProfile>& networks);

// The matrix (configurations x CU targets, one block per worker count), as Markdown.
std::string matrixMarkdown(const Plan& plan);

struct PlanFiles {
  std::vector<std::string> files;  // written, in order
  std::string note;                // why a plot is missing, if one is
};

// plan.md (the matrix, the per-network table, the assumptions), plan.csv and plots/ in
// `output_dir`, never through a symlink.
PlanFiles writePlan(const Plan& plan, const std::string& output_dir);

}  // namespace gcrun::planning
