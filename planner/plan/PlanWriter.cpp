//===- PlanWriter.cpp - write plan files ----------------------------------===//
//
// One instruction per line in flow style, doubles in their shortest exact
// form, empty fields left out; PlanIO.cpp reads it back.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/PlanIO.h"
#include "planner/plan/PlanText.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

namespace sharc::plan {

std::string text::formatDouble(double value) {
  if (std::isnan(value))
    return ".nan";
  if (std::isinf(value))
    return value > 0 ? ".inf" : "-.inf";
  char text[64];
  auto [end, error] = std::to_chars(text, text + sizeof(text), value);
  std::string result(text, error == std::errc() ? end : text);
  if (result.find_first_of(".e") == std::string::npos)
    result += ".0";
  return result;
}

std::string text::quoted(std::string_view text) {
  std::string result = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      result += '\\';
      result += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\x%02x", c);
      result += escape;
    } else {
      result += static_cast<char>(c);
    }
  }
  return result + "\"";
}

std::string text::identifier(std::string_view text) {
  static const std::set<std::string> kReserved = {
      "null", "true", "false", "yes", "no", "on", "off", "y", "n"};
  bool bare = !text.empty() && !std::isdigit(static_cast<uint8_t>(text[0]));
  for (char c : text)
    bare = bare && (std::isalnum(static_cast<uint8_t>(c)) || c == '_');
  std::string lower(text);
  for (char &c : lower)
    c = static_cast<char>(std::tolower(static_cast<uint8_t>(c)));
  if (bare && !kReserved.count(lower))
    return std::string(text);
  return quoted(text);
}

std::string text::formatInts(const std::vector<int64_t> &values) {
  std::string result = "[";
  for (size_t i = 0; i < values.size(); ++i)
    result += (i ? ", " : "") + std::to_string(values[i]);
  return result + "]";
}

namespace {

using namespace text;

std::string formatSharding(const Sharding &sharding) {
  std::string result = "{";
  for (const auto &[axis, dim] : sharding.dimOfAxis)
    result += (result.size() > 1 ? ", " : "") + identifier(axis) + ": " +
              std::to_string(dim);
  return result + "}";
}

std::string formatAttr(const AttrValue &value) {
  if (const auto *integer = std::get_if<int64_t>(&value))
    return std::to_string(*integer);
  if (const auto *real = std::get_if<double>(&value))
    return formatDouble(*real);
  if (const auto *text = std::get_if<std::string>(&value))
    return quoted(*text);
  return formatInts(std::get<std::vector<int64_t>>(value));
}

} // namespace

std::string writePlan(const Plan &plan) {
  std::string out = "sharc_plan: " + std::to_string(plan.version) + "\n";
  out += "model: " + quoted(plan.modelName) + "\n";
  out += "mode: " + quoted(plan.mode) + "\n";
  out += "mesh: [";
  for (size_t i = 0; i < plan.mesh.size(); ++i)
    out += std::string(i ? ", " : "") +
           "{name: " + identifier(plan.mesh[i].name) +
           ", size: " + std::to_string(plan.mesh[i].size) + "}";
  out += "]\n";
  out += "seq_len: " + std::to_string(plan.seqLen) + "\n";
  out += "batch_size: " + std::to_string(plan.batchSize) + "\n";
  out += "vocab_size: " + std::to_string(plan.vocabSize) + "\n";
  out += "compute_dtype: " + std::string(dtypeName(plan.computeDType)) + "\n";
  out += "num_streams: " + std::to_string(plan.numStreams) + "\n";
  out += "num_events: " + std::to_string(plan.numEvents) + "\n";
  out += "regions: {";
  for (const auto &[region, numBytes] : plan.regionBytes)
    out += std::string(out.back() == '{' ? "" : ", ") + regionName(region) +
           ": " + std::to_string(numBytes);
  out += "}\n";

  out += plan.buffers.empty() ? "buffers: []\n" : "buffers:\n";
  for (const Buffer &buffer : plan.buffers)
    out += "  - {id: " + std::to_string(buffer.id) +
           ", name: " + quoted(buffer.name) +
           ", region: " + regionName(buffer.region) +
           ", offset: " + std::to_string(buffer.offset) +
           ", bytes: " + std::to_string(buffer.numBytes) +
           ", dtype: " + dtypeName(buffer.dtype) +
           ", shape: " + formatInts(buffer.shape) + "}\n";

  out += plan.params.empty() ? "params: []\n" : "params:\n";
  for (const ParamEntry &param : plan.params) {
    out += "  - {name: " + quoted(param.name) +
           ", buffer: " + std::to_string(param.buffer) +
           ", global_shape: " + formatInts(param.globalShape) +
           ", sharding: " + formatSharding(param.sharding) +
           ", init: {kind: " + identifier(param.init.kind) +
           ", stddev: " + formatDouble(param.init.stddev) + "}";
    if (!param.tiedTo.empty())
      out += ", tied_to: " + quoted(param.tiedTo);
    if (!param.state.empty())
      out += ", state: " + formatInts(param.state);
    out += "}\n";
  }

  for (const auto *table : {&plan.inputs, &plan.outputs}) {
    const char *key = table == &plan.inputs ? "inputs" : "outputs";
    out += std::string(key) + (table->empty() ? ": []\n" : ":\n");
    for (const IoEntry &entry : *table)
      out += "  - {name: " + quoted(entry.name) +
             ", buffer: " + std::to_string(entry.buffer) +
             ", global_shape: " + formatInts(entry.globalShape) +
             ", sharding: " + formatSharding(entry.sharding) + "}\n";
  }

  out += plan.instructions.empty() ? "instructions: []\n" : "instructions:\n";
  for (const Instruction &instruction : plan.instructions) {
    out += "  - {op: " + identifier(instruction.op) +
           ", in: " + formatInts(instruction.operands) +
           ", out: " + formatInts(instruction.results) +
           ", stream: " + std::to_string(instruction.stream);
    if (!instruction.waits.empty())
      out += ", waits: " + formatInts(instruction.waits);
    if (!instruction.signals.empty())
      out += ", signals: " + formatInts(instruction.signals);
    if (!instruction.attrs.empty()) {
      out += ", attrs: {";
      for (const auto &[key, value] : instruction.attrs)
        out += std::string(out.back() == '{' ? "" : ", ") + identifier(key) +
               ": " + formatAttr(value);
      out += "}";
    }
    if (!instruction.loc.empty())
      out += ", loc: " + quoted(instruction.loc);
    out += "}\n";
  }
  return out;
}

Status writePlanFile(const Plan &plan, const std::string &path) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file)
    return Status::runtimeError("cannot write plan '" + path +
                                "': " + std::strerror(errno));
  file << writePlan(plan);
  file.close();
  if (!file)
    return Status::runtimeError("cannot write plan '" + path + "'");
  return Status::ok();
}

} // namespace sharc::plan
