#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace gcrun::testing {

// One worker's trace of steps 1-8 as gcrun's recorder writes it (rank 0 of 2, exact, Gloo): each
// step 1 ms, forward 0.1, backward 0.4, reduce 0.4 and optimizer 0.1; a step for which
// `bytes_of(step)` is above 0 holds a blocking all-reduce of that many bytes within its reduce.
// For tests that run `gcrun predict` on run directories written by hand.
inline std::string craftedTrace(const std::function<int64_t(int64_t step)>& bytes_of) {
  const std::string where = "\"pid\": 0, \"tid\": 0";
  std::string events = "{\"name\": \"thread_name\", \"ph\": \"M\", " + where + ", \"args\": {\"name\": \"w\"}}";
  for (int64_t step = 1; step <= 8; ++step) {
    const int64_t base = 1000 * (step - 1);
    const auto span = [&](const char* name, int64_t from, int64_t to) {
      events += ",\n{\"name\": \"" + std::string(name) + "\", \"cat\": \"phase\", \"ph\": \"X\", " + where +
                ", \"ts\": " + std::to_string(base + from) + ", \"dur\": " + std::to_string(to - from) +
                ", \"args\": {\"step\": " + std::to_string(step) + "}}";
    };
    span("batch", 0, 1000);
    span("forward", 0, 100);
    span("backward", 100, 500);
    span("reduce", 500, 900);
    span("optimizer", 900, 1000);
    const int64_t bytes = bytes_of(step);
    if (bytes <= 0) continue;
    const std::string ts = std::to_string(base + 510), id = std::to_string(step);
    events += ",\n{\"name\": \"c\", \"cat\": \"collective\", \"ph\": \"b\", " + where + ", \"ts\": " + ts +
              ", \"id\": " + id + ", \"args\": {\"kind\": \"all-reduce\", \"bytes\": " + std::to_string(bytes) +
              ", \"group_size\": 2, \"step\": " + id + ", \"async\": false, \"wait_us\": " + ts + "}}";
    events += ",\n{\"name\": \"c\", \"cat\": \"collective\", \"ph\": \"e\", " + where +
              ", \"ts\": " + std::to_string(base + 520) + ", \"id\": " + id + "}";
  }
  return "{\"traceEvents\": [" + events +
         "],\n\"otherData\": {\"gcrun_trace\": 1, \"rank\": 0, \"world_size\": 2, \"reducer\": \"exact\", "
         "\"backend\": \"gloo\"}}\n";
}

}  // namespace gcrun::testing
