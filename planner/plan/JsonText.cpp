//===- JsonText.cpp - JSON strings and trace names ------------------------===//

#include "planner/plan/JsonText.h"

#include <cstdio>

namespace sharc::plan {

std::string jsonString(std::string_view text) {
  std::string result = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      result += '\\';
      result += static_cast<char>(c);
    } else if (c < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\u%04x", c);
      result += escape;
    } else {
      result += static_cast<char>(c);
    }
  }
  return result + "\"";
}

std::string traceStreamName(int64_t stream) {
  // Stream 0 computes and stream 1 communicates in every plan
  // (planner/Streams.h: kComputeStream, kCommStream).
  if (stream == 0)
    return "compute";
  if (stream == 1)
    return "communication";
  return "stream " + std::to_string(stream);
}

std::string activationCounterEvent(std::string_view pid,
                                   std::string_view tsMicros, int64_t bytes) {
  char mib[32];
  std::snprintf(mib, sizeof(mib), "%.3f",
                static_cast<double>(bytes) / (1 << 20));
  return "{\"name\":\"activations MiB\",\"ph\":\"C\",\"pid\":" +
         std::string(pid) + ",\"ts\":" + std::string(tsMicros) +
         ",\"args\":{\"live\":" + mib + "}},\n";
}

std::string closeTraceEvents(std::string json) {
  if (json.size() >= 2 && json.compare(json.size() - 2, 2, ",\n") == 0)
    json.erase(json.size() - 2, 1);
  return json + "]}\n";
}

} // namespace sharc::plan
