#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>

namespace gcrun::outputs::tensorboard {

// The serialized `Event` messages (tensorflow/core/util/event.proto, core/framework/summary.proto)
// a gcrun event file holds, each to be framed by tfRecord(). `wall_time` is in seconds since the
// Unix epoch.

// The first record of every file: Event{wall_time, file_version = "brain.Event:2"}.
std::string fileVersionEvent(double wall_time);

// Event{wall_time, step, summary{value{tag, simple_value}}}: the scalar form every TensorBoard
// version and `wandb sync --sync-tensorboard` read.
std::string scalarEvent(double wall_time, int64_t step, const std::string& tag, float value);

// The HParams plugin's records (tensorboard/plugins/hparams/plugin_data.proto and api.proto): a
// Summary.Value tagged `_hparams_/session_start_info` or `_hparams_/session_end_info` whose
// metadata.plugin_data is {plugin_name "hparams", content = HParamsPluginData}. No
// `_hparams_/experiment` record is written: without one, TensorBoard infers the experiment from
// the session start infos of all runs and takes every scalar tag as a metric, which is what a
// study of runs needs (one experiment record per run would each describe only their own run).
using HParamValue = std::variant<double, bool, std::string>;
std::string sessionStartEvent(double wall_time, const std::map<std::string, HParamValue>& hparams,
                              const std::string& group_name, double start_time_secs);

// api.proto's Status.
enum class SessionStatus { unknown = 0, success = 1, failure = 2, running = 3 };
std::string sessionEndEvent(double wall_time, SessionStatus status, double end_time_secs);

// The tags of the HParams records.
inline constexpr char kSessionStartTag[] = "_hparams_/session_start_info";
inline constexpr char kSessionEndTag[] = "_hparams_/session_end_info";

}  // namespace gcrun::outputs::tensorboard
