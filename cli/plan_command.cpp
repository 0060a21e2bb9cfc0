#include <algorithm>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/network_flags.h"
#include "cli/plan_methods.h"
#include "experiments/bench/reducer_benchmark.h"
#include "hyperparams/base/decimal.h"
#include "hyperparams/base/errors.h"
#include "hyperparams/base/sync_schedule.h"
#include "hyperparams/base/text.h"
#include "hyperparams/base/units.h"
#include "outputs/network/network_profile.h"
#include "outputs/performance/predict_options.h"
#include "outputs/planning/plan.h"

namespace gcrun::cli {
namespace {

// `gcrun plan`'s flags as given; parsed and checked whole before anything is planned.
struct PlanFlags {
  PlanRequest request;
  std::vector<std::string> workers = {"2,8,64"};
  std::vector<std::string> networks;
  std::vector<std::string> bandwidths;
  std::string latency = units::kDefaultLatency;
  std::string step_time = "100ms";
  std::string device_flops;
  std::string mfu;
  std::string backward_ratio = "2";
  std::string codec_scale = "1";
  bool no_codec_time = false;
  std::vector<std::string> cu_targets = {"0.5,0.8,0.9,0.95,0.99"};
  std::string output_dir = ".";
};

// A number in (low, high] (or (low, high) when `below_high`), else one line naming the flag.
double planNumber(const std::string& text, const std::string& flag, double low, double high, bool below_high,
                  const std::string& expected) {
  const auto value = parseDecimal(text);
  if (!value || !(*value > low) || (below_high ? !(*value < high) : !(*value <= high))) {
    throw UserError(flag + ": '" + clipForMessage(text, 60) + "' is not " + expected);
  }
  return *value;
}

void addPlanFlags(CLI::App& command, PlanFlags& flags) {
  auto& request = flags.request;
  command.add_option("preset", request.preset, "The experiment to plan (a preset, as `gcrun experiment` takes it)")
      ->required();
  command.add_option("--config", request.config_file, "A YAML file of settings over the preset's");
  command.add_option("--set", request.assignments, "key=value over the preset and --config; repeatable");
  command.add_option("--configurations", request.configurations_file,
                     "A YAML list of {name, set: {key: value}} (or a study file's runs) to compare; default: "
                     "every-step exact, bf16, powersgd rank 4, diloco and streaming-diloco with exact, bf16, fp8, "
                     "fp4, int8");
  command.add_option("--sync-every", request.sync_every, "H of the default grid's diloco and streaming-diloco")
      ->check(CLI::Range(int64_t{1}, kMaxSyncEvery));
  command.add_option("--workers", flags.workers, "Worker counts, comma-separated (default 2,8,64)");
  command.add_option("--network", flags.networks, "A network profile (gcrun bench network, or by hand); repeatable");
  command.add_option("--bandwidth", flags.bandwidths, "Links, comma-separated (default 1gbit,10gbit,100gbit)");
  command.add_option("--latency", flags.latency, "The links' latency, also of the CU targets' search (default 20us)");
  command.add_option("--step-time", flags.step_time, "Compute per step (forward, backward, optimizer; default 100ms)");
  command.add_option("--device-flops", flags.device_flops,
                     "Instead of --step-time: the device's peak FLOP/s (989e12: H100 bf16), with --mfu");
  command.add_option("--mfu", flags.mfu, "Model FLOPs utilisation with --device-flops, above 0 up to 1");
  command.add_option("--backward-ratio", flags.backward_ratio, "Backward time over forward time (default 2)");
  command.add_option("--codec-scale", flags.codec_scale,
                     "The codecs' encode and decode time on the planned devices over this machine's, timed here "
                     "(gcrun bench reducers' per-element cost; default 1)");
  command.add_flag("--no-codec-time", flags.no_codec_time, "Leave the codecs' encode and decode time out");
  command.add_option("--cu-targets", flags.cu_targets,
                     "Compute utilisations to find the bandwidth for, each in (0, 1) (default 0.5,0.8,0.9,0.95,0.99)");
  command.add_option("--output", flags.output_dir, "Where plan.md, plan.csv and plots/ go (default: .)");
}

// Seconds of compute per step: --step-time, or a language model's FLOPs per step over
// --device-flops x --mfu: per token 6 N (N without the embeddings) plus attention's 12 L T d
// (Kaplan et al. 2020, Table 1), B T tokens a worker a step.
double stepSeconds(const PlanFlags& flags, const PlannedModel& model, std::string& basis) {
  if (flags.device_flops.empty() && flags.mfu.empty()) {
    const double seconds = units::parseDuration(flags.step_time, "--step-time");
    if (!(seconds > 0)) throw UserError("--step-time: '" + clipForMessage(flags.step_time, 60) + "' must be above 0");
    basis = "compute per step " + units::durationText(seconds) + " (--step-time)";
    return seconds;
  }
  const double flops = planNumber(flags.device_flops, "--device-flops", 0, 1e21, false, "a FLOP/s above 0");
  const double mfu = planNumber(flags.mfu, "--mfu", 0, 1, false, "a utilisation above 0 up to 1");
  if (model.layers == 0) {
    throw UserError("--device-flops: FLOPs per step are modelled for the language-model task; give --step-time for " +
                    model.task);
  }
  const double tokens = double(model.batch_size) * double(model.context);
  const double per_token = 6 * model.non_embedding_parameters + 12.0 * model.layers * model.context * model.width;
  basis = fmt::format(
      "compute per step from {:.3g} FLOPs ({} tokens x (6 N + 12 L T d), Kaplan et al. 2020) at "
      "{:.3g} FLOP/s x MFU {:g}",
      tokens * per_token, tokens, flops, mfu);
  return tokens * per_token / (flops * mfu);
}

std::vector<std::string> planAssumptions(const std::string& basis, double backward_share, const std::string& codec) {
  return {basis,
          fmt::format("forward then backward ({:.0f}% of the compute); every step's gradients are ready in reverse "
                      "order during backward, in the exact reducer's (DDP's) buckets: at most 1 MiB first, then "
                      "reducer.bucket_mb; each exchanged as soon as it is ready and the one before it is done "
                      "(DDP's overlap, gcrun's exact's; gcrun's other reducers reduce after backward)",
                      backward_share * 100),
          "diloco's and sparseloco's syncs block; streaming-diloco's fragments (the strategy's own: modules dealt "
          "round-robin) are sent on their schedule and overlap the next sync.delay steps, queued behind each other "
          "on one link; demo's messages leave once backward is done",
          "local-sgd in its steady state after sync.warmup_steps: the parameters averaged exactly in float32 every "
          "sync.every steps, blocking",
          "messages: each reducer's own bit accounting for the model's tensor shapes (float32 gradients)",
          "collectives: ring all-reduce and all-gather, binomial broadcast, as gcrun predict costs them",
          codec,
          "not modelled: the optimizer's time beyond --step-time, contention for a node's link, stragglers, "
          "evaluation"};
}

// Each method's codec time per element: this machine's (gcrun bench reducers' cost, timed once for
// each reducer and its settings) x --codec-scale; returns the assumption it makes.
std::string timeCodecs(const PlanFlags& flags, PlannedConfigurations& planned) {
  const double scale = planNumber(flags.codec_scale, "--codec-scale", 0, 1e6, false, "a factor above 0");
  if (flags.no_codec_time) return "not modelled: the codecs' encode and decode time (--no-codec-time)";
  std::vector<std::pair<ReducerOptions, double>> timed;
  std::vector<std::string> costs;
  for (size_t i = 0; i < planned.methods.size(); ++i) {
    // Sends that are not the reducer's messages (local-sgd's parameter average) run no codec.
    if (planned.methods[i].message_elements.empty()) continue;
    const auto& reducer = planned.reducers[i];
    auto found = std::find_if(timed.begin(), timed.end(), [&](const auto& entry) {
      return entry.first.name == reducer.name && entry.first.settings == reducer.settings;
    });
    if (found == timed.end()) {
      std::fprintf(stderr, "timing %s's codec on this machine (ResNet-18's gradient shapes)\n", reducer.name.c_str());
      timed.emplace_back(reducer, experiments::codecSecondsPerElement(reducer));
      found = std::prev(timed.end());
      costs.push_back(fmt::format("{} {:.3g} ns", reducer.name, found->second * 1e9));
    }
    planned.methods[i].codec_s_per_element = found->second * scale;
  }
  return fmt::format(
      "codec time: each exchange takes its transfer plus its elements x the codec's encode and decode time per "
      "element, as one worker's reduce() of ResNet-18's gradients took here beyond exact's ({}), x --codec-scale "
      "{:g}",
      fmt::join(costs, ", "), scale);
}

void printPlan(const planning::Plan& plan, const planning::PlanFiles& files) {
  std::printf("%s\n\n%s\n", oneLine(plan.title).c_str(), planning::matrixMarkdown(plan).c_str());
  for (const auto& file : files.files) std::printf("  %s\n", oneLine(file).c_str());
  if (!files.note.empty()) std::printf("note: %s\n", oneLine(files.note).c_str());
}

}  // namespace

void addPlanCommand(CLI::App& app) {
  auto flags = std::make_shared<PlanFlags>();
  auto* command = app.add_subcommand(
      "plan", "Time per step, compute utilisation and the bandwidth each method needs, for a described model at scale");
  addPlanFlags(*command, *flags);
  command->callback([flags] {
    planning::Plan plan;
    for (const auto& w : commaItems(flags->workers, "--workers")) {
      plan.workers.push_back(performance::parseWorkerCount(w, "--workers"));
    }
    for (const auto& cu : commaItems(flags->cu_targets, "--cu-targets")) {
      plan.cu_targets.push_back(planNumber(cu, "--cu-targets", 0, 1, true, "a compute utilisation above 0 below 1"));
    }
    const double ratio = planNumber(flags->backward_ratio, "--backward-ratio", 0, 1e6, false, "a ratio above 0");
    plan.compute.backward_share = ratio / (1 + ratio);
    plan.target_latency_s = units::parseDuration(flags->latency, "--latency");
    const auto networks = networksFromFlags(flags->networks, flags->bandwidths, flags->latency);
    auto planned = planConfigurations(flags->request);
    std::string basis;
    plan.compute.step_s = stepSeconds(*flags, planned.model, basis);
    plan.title = fmt::format("{}: {:.0f} parameters ({:.3g})", flags->request.preset, planned.model.parameters,
                             planned.model.parameters);
    const auto codec = timeCodecs(*flags, planned);
    plan.assumptions = planAssumptions(basis, plan.compute.backward_share, codec);
    plan.methods = std::move(planned.methods);
    planning::computePlan(plan, networks);
    printPlan(plan, planning::writePlan(plan, flags->output_dir));
    // This machine's CPU codecs are far slower than a GPU's: the user should see what was assumed.
    if (!flags->no_codec_time) {
      std::printf(
          "%s; for other devices give --codec-scale (their codec time over this machine's) or "
          "--no-codec-time\n",
          codec.c_str());
    }
  });
}

}  // namespace gcrun::cli
