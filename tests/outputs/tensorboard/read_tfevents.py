#!/usr/bin/env python3
"""An independent reader of gcrun's TensorBoard event files, sharing no code with gcrun.

It parses the TFRecord framing, checks both masked CRC-32Cs of every record (Python's crc32c
package, or a bitwise loop here when that is missing), decodes every record with protobuf's own
parser from message types declared here by the published field numbers (tensorflow's event.proto
and summary.proto, TensorBoard's hparams plugin_data.proto; google.protobuf.Value from struct.proto),
and insists on the canonical encoding: each record must re-serialize to exactly its bytes, so an
unknown or misnumbered field fails.

  read_tfevents.py --prefix FILE               framing and file version only; prints the record count
  read_tfevents.py RUN_DIR [--hparam K=V]...   the whole run against RUN_DIR/metrics.jsonl and,
                                               when there is one, RUN_DIR/layers.csv

Exit codes: 0 checked, 1 a check failed, 77 python3-protobuf is missing.
"""
import csv
import json
import math
import os
import re
import struct
import sys
import time

try:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, struct_pb2
except ImportError:
    print("python3-protobuf is missing")
    sys.exit(77)

try:
    from crc32c import crc32c
except ImportError:
    def crc32c(data):
        crc = 0xFFFFFFFF
        for byte in data:
            crc ^= byte
            for _ in range(8):
                crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        return crc ^ 0xFFFFFFFF


def fail(message):
    print("read_tfevents: " + message)
    sys.exit(1)


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


F = descriptor_pb2.FieldDescriptorProto


def message_types():
    proto = descriptor_pb2.FileDescriptorProto(name="gcrun_test_tfevents.proto", package="check", syntax="proto3")
    proto.dependency.append("google/protobuf/struct.proto")

    def message(name, fields):
        m = proto.message_type.add(name=name)
        for field_name, number, kind, type_name, label in fields:
            f = m.field.add(name=field_name, number=number, type=kind, label=label or F.LABEL_OPTIONAL)
            if type_name:
                f.type_name = type_name
        return m

    message("Event", [("wall_time", 1, F.TYPE_DOUBLE, None, None), ("step", 2, F.TYPE_INT64, None, None),
                      ("file_version", 3, F.TYPE_STRING, None, None), ("summary", 5, F.TYPE_MESSAGE, ".check.Summary", None)])
    message("Summary", [("value", 1, F.TYPE_MESSAGE, ".check.Value", F.LABEL_REPEATED)])
    value = message("Value", [("tag", 1, F.TYPE_STRING, None, None), ("simple_value", 2, F.TYPE_FLOAT, None, None),
                              ("tensor", 8, F.TYPE_MESSAGE, ".check.TensorProto", None),
                              ("metadata", 9, F.TYPE_MESSAGE, ".check.SummaryMetadata", None)])
    value.oneof_decl.add(name="value")
    for f in value.field:
        if f.name in ("simple_value", "tensor"):
            f.oneof_index = 0
    message("TensorProto", [("dtype", 1, F.TYPE_INT32, None, None),
                            ("tensor_shape", 2, F.TYPE_MESSAGE, ".check.TensorShapeProto", None),
                            ("float_val", 5, F.TYPE_FLOAT, None, F.LABEL_REPEATED)])
    message("TensorShapeProto", [])
    message("SummaryMetadata", [("plugin_data", 1, F.TYPE_MESSAGE, ".check.PluginData", None)])
    message("PluginData", [("plugin_name", 1, F.TYPE_STRING, None, None), ("content", 2, F.TYPE_BYTES, None, None)])
    plugin = message("HParamsPluginData", [("version", 1, F.TYPE_INT32, None, None),
                                           ("session_start_info", 3, F.TYPE_MESSAGE, ".check.SessionStartInfo", None),
                                           ("session_end_info", 4, F.TYPE_MESSAGE, ".check.SessionEndInfo", None)])
    plugin.oneof_decl.add(name="data")
    plugin.field[1].oneof_index = 0
    plugin.field[2].oneof_index = 0
    start = message("SessionStartInfo", [("hparams", 1, F.TYPE_MESSAGE, ".check.SessionStartInfo.HparamsEntry", F.LABEL_REPEATED),
                                         ("group_name", 4, F.TYPE_STRING, None, None),
                                         ("start_time_secs", 5, F.TYPE_DOUBLE, None, None)])
    entry = start.nested_type.add(name="HparamsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".google.protobuf.Value")
    message("SessionEndInfo", [("status", 1, F.TYPE_INT32, None, None), ("end_time_secs", 2, F.TYPE_DOUBLE, None, None)])

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(struct_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(proto.SerializeToString())
    get = getattr(message_factory, "GetMessageClass", None) or message_factory.MessageFactory(pool).GetPrototype
    return {name: get(pool.FindMessageTypeByName("check." + name)) for name in ("Event", "HParamsPluginData")}


TYPES = message_types()


def parse(kind, data, what):
    message = TYPES[kind]()
    message.ParseFromString(data)
    if message.SerializeToString(deterministic=True) != data:
        fail(what + ": not the canonical encoding of a " + kind + " (an unknown or misnumbered field)")
    return message


def records(path):
    data = open(path, "rb").read()
    out, at = [], 0
    while at < len(data):
        if len(data) - at < 12:
            fail("%s: a partial record header at byte %d" % (path, at))
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if masked(header) != length_crc:
            fail("%s: bad length CRC at byte %d" % (path, at))
        if len(data) - at < 16 + length:
            fail("%s: a partial record at byte %d" % (path, at))
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if masked(body) != body_crc:
            fail("%s: bad data CRC at byte %d" % (path, at))
        out.append(parse("Event", body, "%s record %d" % (path, len(out))))
        at += 16 + length
    if not out or out[0].file_version != "brain.Event:2" or out[0].HasField("summary"):
        fail(path + ": the first record is not the file version brain.Event:2")
    return out


def expected_tag(line):
    name, split, window = line["name"], line["split"], line.get("window", 0)
    if name in ("grad_norm", "memory_norm", "rel_compression_error"):
        return "compression/" + name, line["value"]
    if name == "time_per_batch":
        return "time/batch_ms", line["value"] * 1000
    if name == "elapsed_s":
        return "time/elapsed_s", line["value"]
    if not split:
        return "other/" + name, line["value"]
    if split == "train" and window == 0:
        return "train/epoch_" + name, line["value"]
    return split + "/" + name, line["value"]


def as_float32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def expected_layer_scalars(run_dir):
    path = os.path.join(run_dir, "layers.csv")
    if not os.path.exists(path):
        return []
    out = []
    for row in csv.DictReader(open(path, newline="")):
        prefix = "layers/" + row["parameter"] + "/"
        out.append((prefix + "grad_norm", int(row["step"]), float(row["grad_norm"])))
        for column in ("rel_compression_error", "bits"):
            if row[column]:
                out.append((prefix + column, int(row["step"]), float(row[column])))
    return out


def check_layers(run_dir, layer_scalars):
    expected = expected_layer_scalars(run_dir)
    if len(layer_scalars) != len(expected):
        fail("%d layers/ scalars for %d values of layers.csv" % (len(layer_scalars), len(expected)))
    for (tag, step, value), (want_tag, want_step, want_value) in zip(layer_scalars, expected):
        if (tag, step) != (want_tag, want_step) or not math.isclose(value, as_float32(want_value), rel_tol=1e-6, abs_tol=1e-30):
            fail("scalar %s step %d = %r; layers.csv says %s step %d = %r" % (tag, step, value, want_tag, want_step, want_value))


def check_run(run_dir, hparam_args):
    tb = os.path.join(run_dir, "tb")
    names = os.listdir(tb)
    if len(names) != 1 or not re.fullmatch(r"events\.out\.tfevents\.\d+\.[^/]+\.gcrun", names[0]):
        fail("expected one events.out.tfevents.<seconds>.<host>.gcrun in %s, found %s" % (tb, names))
    events = records(os.path.join(tb, names[0]))
    created = int(names[0].split(".")[3])

    scalars, starts, ends, last_wall = [], [], [], 0
    for event in events[1:]:
        if event.wall_time < last_wall or not created - 1 <= event.wall_time <= time.time() + 1:
            fail("wall time %f out of order or range" % event.wall_time)
        last_wall = event.wall_time
        if len(event.summary.value) != 1:
            fail("an event with %d summary values" % len(event.summary.value))
        value = event.summary.value[0]
        if value.tag.startswith("_hparams_/"):
            if value.metadata.plugin_data.plugin_name != "hparams":
                fail(value.tag + " without the hparams plugin name")
            data = parse("HParamsPluginData", value.metadata.plugin_data.content, value.tag)
            if data.version != 0:
                fail("hparams plugin data version %d" % data.version)
            if value.tag == "_hparams_/session_start_info" and data.HasField("session_start_info"):
                starts.append(data.session_start_info)
            elif value.tag == "_hparams_/session_end_info" and data.HasField("session_end_info"):
                ends.append((data.session_end_info, event is events[-1]))
            else:
                fail("unexpected hparams record " + value.tag)
        elif value.WhichOneof("value") == "simple_value":
            scalars.append((value.tag, event.step, value.simple_value))
        else:
            fail("a value that is neither a scalar nor hparams: " + value.tag)

    if len(starts) != 1 or len(ends) != 1 or not ends[0][1]:
        fail("expected one session start and one session end, the last record")
    start = starts[0]
    if abs(start.start_time_secs - created) > 1.5:
        fail("session start time %f, file created %d" % (start.start_time_secs, created))
    for arg in hparam_args:
        key, text = arg.split("=", 1)
        if key not in start.hparams:
            fail("hparam %s missing; have %s" % (key, sorted(start.hparams)))
        got = start.hparams[key]
        kind = got.WhichOneof("kind")
        shown = {"number_value": lambda v: "%g" % v.number_value, "string_value": lambda v: v.string_value,
                 "bool_value": lambda v: "true" if v.bool_value else "false"}[kind](got)
        if shown != text:
            fail("hparam %s is %s, expected %s" % (key, shown, text))
    if "seed=" in start.group_name or "reducer.name=" not in start.group_name:
        fail("group name " + start.group_name)
    if ends[0][0].status != 1:
        fail("session end status %d, expected 1 (STATUS_SUCCESS)" % ends[0][0].status)

    lines = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    check_layers(run_dir, [s for s in scalars if s[0].startswith("layers/")])
    metric_scalars = [s for s in scalars if s[0] != "comm/mib_sent" and not s[0].startswith("layers/")]
    if len(metric_scalars) != len(lines):
        fail("%d scalars besides comm/mib_sent for %d lines of metrics.jsonl" % (len(metric_scalars), len(lines)))
    for line, (tag, step, value) in zip(lines, metric_scalars):
        want_tag, want_value = expected_tag(line)
        if (tag, step) != (want_tag, line["step"]) or not math.isclose(value, as_float32(want_value), rel_tol=1e-6, abs_tol=1e-30):
            fail("scalar %s step %d = %r; metrics.jsonl says %s step %d = %r" % (tag, step, value, want_tag, line["step"], want_value))
    mib = [(step, value) for tag, step, value in scalars if tag == "comm/mib_sent"]
    steps = []
    for line in lines:
        if not steps or steps[-1][0] != line["step"]:
            steps.append((line["step"], line["bits"] / 8 / 2**20))
    if len(mib) != len(steps) or any(a[0] != b[0] or not math.isclose(a[1], b[1], rel_tol=1e-6) for a, b in zip(mib, steps)):
        fail("comm/mib_sent %s, expected %s" % (mib, steps))
    tags = sorted({s[0] for s in scalars})
    print("read_tfevents: ok, %d records, %d scalars, tags %s, hparams %s" % (len(events), len(scalars), tags, sorted(start.hparams)))


def main(argv):
    if len(argv) == 2 and argv[0] == "--prefix":
        print(len(records(argv[1])))
        return
    if not argv:
        fail("usage: read_tfevents.py RUN_DIR [--hparam K=V]... | --prefix FILE")
    hparams = [argv[i + 1] for i in range(1, len(argv) - 1) if argv[i] == "--hparam"]
    check_run(argv[0], hparams)


main(sys.argv[1:])
