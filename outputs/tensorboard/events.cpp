#include "outputs/tensorboard/events.h"

#include "outputs/tensorboard/protobuf_writer.h"

namespace gcrun::outputs::tensorboard {
namespace {

// Field numbers, from the published .proto files named in events.h.
namespace event {  // tensorflow.Event
constexpr int kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5;
}
namespace summary {  // tensorflow.Summary and Summary.Value
constexpr int kValue = 1;
constexpr int kTag = 1, kSimpleValue = 2, kTensor = 8, kMetadata = 9;
}  // namespace summary
namespace metadata {  // tensorflow.SummaryMetadata and its PluginData
constexpr int kPluginData = 1;
constexpr int kPluginName = 1, kContent = 2;
}  // namespace metadata
namespace tensor {  // tensorflow.TensorProto, DataType DT_FLOAT
constexpr int kDtype = 1, kShape = 2, kFloatVal = 5;
constexpr uint64_t kDtFloat = 1;
}  // namespace tensor
namespace hparams {  // tensorboard.hparams.HParamsPluginData, SessionStartInfo, SessionEndInfo
// HParamsPluginData.version (field 1) is metadata.PLUGIN_DATA_VERSION of
// tensorboard/plugins/hparams/metadata.py, 0: proto3's default, so it is left out like every
// default below (the canonical encoding, which protobuf's own serializer would produce too).
constexpr int kSessionStartInfo = 3, kSessionEndInfo = 4;
constexpr int kHParams = 1, kGroupName = 4, kStartTimeSecs = 5;
constexpr int kStatus = 1, kEndTimeSecs = 2;
constexpr int kMapKey = 1, kMapValue = 2;
}  // namespace hparams
namespace value {  // google.protobuf.Value
constexpr int kNumber = 2, kString = 3, kBool = 4;
}

ProtoMessage eventAt(double wall_time) { return ProtoMessage().float64(event::kWallTime, wall_time); }

ProtoMessage protobufValue(const HParamValue& hparam) {
  ProtoMessage out;
  if (const auto* number = std::get_if<double>(&hparam)) out.float64(value::kNumber, *number);
  if (const auto* flag = std::get_if<bool>(&hparam)) out.varint(value::kBool, *flag ? 1 : 0);
  if (const auto* text = std::get_if<std::string>(&hparam)) out.bytes(value::kString, *text);
  return out;
}

// TensorBoard's own HParams summaries carry this 0-d float tensor (0) as their value beside the
// plugin data; writing it too spares the loader from supplying one.
ProtoMessage nullTensor() {
  std::string zero(4, '\0');
  return ProtoMessage()
      .varint(tensor::kDtype, tensor::kDtFloat)
      .bytes(tensor::kShape, "")
      .bytes(tensor::kFloatVal, zero);  // packed repeated float: one 0.0f
}

std::string hparamsEvent(double wall_time, const std::string& tag, const ProtoMessage& plugin_data) {
  const auto plugin =
      ProtoMessage().bytes(metadata::kPluginName, "hparams").bytes(metadata::kContent, plugin_data.data());
  const auto entry = ProtoMessage()
                         .bytes(summary::kTag, tag)
                         .message(summary::kTensor, nullTensor())
                         .message(summary::kMetadata, ProtoMessage().message(metadata::kPluginData, plugin));
  return eventAt(wall_time).message(event::kSummary, ProtoMessage().message(summary::kValue, entry)).data();
}

}  // namespace

std::string fileVersionEvent(double wall_time) {
  return eventAt(wall_time).bytes(event::kFileVersion, "brain.Event:2").data();
}

std::string scalarEvent(double wall_time, int64_t step, const std::string& tag, float value) {
  const auto entry = ProtoMessage().bytes(summary::kTag, tag).float32(summary::kSimpleValue, value);
  auto out = eventAt(wall_time);
  if (step != 0) out.varint(event::kStep, static_cast<uint64_t>(step));
  return out.message(event::kSummary, ProtoMessage().message(summary::kValue, entry)).data();
}

std::string sessionStartEvent(double wall_time, const std::map<std::string, HParamValue>& hparams,
                              const std::string& group_name, double start_time_secs) {
  ProtoMessage info;
  for (const auto& [name, hparam] : hparams) {
    info.message(hparams::kHParams,
                 ProtoMessage().bytes(hparams::kMapKey, name).message(hparams::kMapValue, protobufValue(hparam)));
  }
  info.bytes(hparams::kGroupName, group_name).float64(hparams::kStartTimeSecs, start_time_secs);
  const auto plugin_data = ProtoMessage().message(hparams::kSessionStartInfo, info);
  return hparamsEvent(wall_time, kSessionStartTag, plugin_data);
}

std::string sessionEndEvent(double wall_time, SessionStatus status, double end_time_secs) {
  const auto info = ProtoMessage()
                        .varint(hparams::kStatus, static_cast<uint64_t>(status))
                        .float64(hparams::kEndTimeSecs, end_time_secs);
  const auto plugin_data = ProtoMessage().message(hparams::kSessionEndInfo, info);
  return hparamsEvent(wall_time, kSessionEndTag, plugin_data);
}

}  // namespace gcrun::outputs::tensorboard
