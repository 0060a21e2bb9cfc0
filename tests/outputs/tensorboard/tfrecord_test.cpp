// The event file's encoding against values computed outside gcrun: the CRC-32C check value of the
// catalogue of parametrised CRC algorithms, masked CRCs and framed records from Python's crc32c
// package, and protobuf messages spelled out byte by byte from the wire format's rules.
#include <gtest/gtest.h>

#include <string>

#include "outputs/tensorboard/events.h"
#include "outputs/tensorboard/protobuf_writer.h"
#include "outputs/tensorboard/tensorboard_sink.h"
#include "outputs/tensorboard/tfrecord.h"

namespace gcrun::outputs::tensorboard {
namespace {

std::string bytes(std::initializer_list<unsigned char> values) { return std::string(values.begin(), values.end()); }

TEST(Crc32c, MatchesTheCheckValueAndIndependentValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // CRC-32C's published check value
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c(std::string(8, '\0')), 0x8C28B28Au);
  EXPECT_EQ(maskedCrc32c("123456789"), 0xC78AB0E5u);
  EXPECT_EQ(maskedCrc32c(std::string(8, '\0')), 0x07980329u);
}

TEST(TfRecord, FramesDataWithLengthAndMaskedCrcs) {
  // Length 3 as uint64 LE, masked CRC of those 8 bytes (0x0E4999B0), "abc", masked CRC of "abc" (0x21F1576E).
  const std::string expected =
      bytes({3, 0, 0, 0, 0, 0, 0, 0, 0xB0, 0x99, 0x49, 0x0E, 'a', 'b', 'c', 0x6E, 0x57, 0xF1, 0x21});
  EXPECT_EQ(tfRecord("abc"), expected);
  EXPECT_EQ(tfRecord("").size(), 16u);
}

TEST(ProtoMessage, EncodesEachWireType) {
  ProtoMessage message;
  message.varint(1, 300).float64(2, 1.5).float32(3, 2.0f).bytes(4, "hi").varint(16, 1);
  const std::string expected = bytes({0x08, 0xAC, 0x02,                               // 1: varint 300
                                      0x11, 0,    0,    0,   0,    0, 0, 0xF8, 0x3F,  // 2: double 1.5
                                      0x1D, 0,    0,    0,   0x40,                    // 3: float 2.0
                                      0x22, 0x02, 'h',  'i',                          // 4: "hi"
                                      0x80, 0x01, 0x01});                             // 16: key is two bytes
  EXPECT_EQ(message.data(), expected);
}

TEST(Events, ScalarEventHasWallTimeStepAndSimpleValue) {
  const std::string expected = bytes({0x09, 0,    0,   0, 0,   0, 0, 0xF8, 0x3F,  // wall_time 1.5
                                      0x10, 0x03,                                 // step 3
                                      0x2A, 0x0A,                                 // summary, 10 bytes
                                      0x0A, 0x08,                                 // value, 8 bytes
                                      0x0A, 0x01, 'a',                            // tag "a"
                                      0x15, 0,    0,   0, 0x40});                 // simple_value 2.0
  EXPECT_EQ(scalarEvent(1.5, 3, "a", 2.0f), expected);
}

TEST(Events, FileVersionEventComesAsTensorFlowWritesIt) {
  EXPECT_EQ(fileVersionEvent(1.5), bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x1A, 13}) + "brain.Event:2");
}

TEST(Events, SessionEndCarriesTheStatus) {
  const std::string event = sessionEndEvent(1.5, SessionStatus::success, 2.0);
  EXPECT_NE(event.find(kSessionEndTag), std::string::npos);
  EXPECT_NE(event.find("hparams"), std::string::npos);
  // SessionEndInfo{status 1, end_time_secs 2.0} inside HParamsPluginData field 4.
  EXPECT_NE(event.find(bytes({0x22, 0x0B, 0x08, 0x01, 0x11, 0, 0, 0, 0, 0, 0, 0, 0x40})), std::string::npos);
}

MetricEvent eventOf(const std::string& name, const std::string& split, int64_t window, double value = 0.5) {
  MetricEvent event;
  event.name = name;
  event.split = split;
  event.window = window;
  event.value = value;
  return event;
}

TEST(TensorboardSink, TagsFollowOneScheme) {
  EXPECT_EQ(scalarOf(eventOf("cross_entropy", "train", 50))->tag, "train/cross_entropy");
  EXPECT_EQ(scalarOf(eventOf("cross_entropy", "train", 0))->tag, "train/epoch_cross_entropy");
  EXPECT_EQ(scalarOf(eventOf("accuracy", "test", 0))->tag, "test/accuracy");
  EXPECT_EQ(scalarOf(eventOf("perplexity", "validation", 0))->tag, "validation/perplexity");
  EXPECT_EQ(scalarOf(eventOf("rel_compression_error", "train", 0))->tag, "compression/rel_compression_error");
  EXPECT_EQ(scalarOf(eventOf("elapsed_s", "train", 0))->tag, "time/elapsed_s");
  EXPECT_EQ(scalarOf(eventOf("custom", "", 0))->tag, "other/custom");
  const auto batch = scalarOf(eventOf("time_per_batch", "train", 0, 0.25));
  EXPECT_EQ(batch->tag, "time/batch_ms");
  EXPECT_DOUBLE_EQ(batch->value, 250.0);
}

TEST(TensorboardSink, GroupNameLeavesTheSeedOut) {
  const std::map<std::string, HParamValue> hparams{
      {"reducer.name", std::string("powersgd")}, {"reducer.rank", 2.0}, {"seed", 7.0}, {"optimizer.memory", true}};
  EXPECT_EQ(groupNameOf(hparams), "optimizer.memory=true,reducer.name=powersgd,reducer.rank=2");
  EXPECT_EQ(eventFileName(1700000000, "node1"), "events.out.tfevents.1700000000.node1.gcrun");
}

}  // namespace
}  // namespace gcrun::outputs::tensorboard
