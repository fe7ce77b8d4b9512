//===- CostModel.cpp - seconds per node on a described machine ------------===//
//
// The reader validates as it goes and reports the first problem at the YAML
// node that caused it. yaml-cpp throws on malformed text; the one try block
// in parseMachine converts that on the spot.
//
//===----------------------------------------------------------------------===//

#include "planner/CostModel.h"
#include "planner/plan/FileText.h"

#include "planner/plan/DType.h"
#include "planner/plan/YamlFields.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>

namespace sharc {
namespace {

/// The machine file's reader: plan::yaml::FieldReader's maps, keys and
/// FILE:LINE:COL messages, with the machine's own numbers and the maps
/// whose keys the file names (dtypes, axes, ops).
class MachineReader : public plan::yaml::FieldReader {
public:
  using FieldReader::FieldReader;

  /// Fails unless `node` is a map of names (scalar keys), none twice.
  Status checkNames(const YAML::Node &node, const std::string &what) const {
    if (!node.IsMap())
      return fail(node, "expected a map for " + what + ", got " +
                            plan::yaml::describe(node));
    std::vector<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar())
        return fail(it->first, "expected a name as key in " + what);
      const std::string &key = it->first.Scalar();
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        return fail(it->first, "duplicate key '" + key + "' in " + what);
      seen.push_back(key);
    }
    return Status::ok();
  }

  /// A finite number, > 0 or (with allowZero) >= 0.
  Status readNumber(const YAML::Node &node, const std::string &what,
                    bool allowZero, double &value) const {
    std::string text = node.IsScalar() ? node.Scalar() : "";
    char *end = nullptr;
    errno = 0;
    value = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(value))
      return fail(node,
                  "expected a number for " + what + ", got '" + text + "'");
    if (value < 0.0 || (!allowZero && value == 0.0))
      return fail(node, what + " must be " +
                            (allowZero ? "non-negative" : "positive") +
                            ", got " + text);
    return Status::ok();
  }

  Status readRequiredNumber(const plan::yaml::Fields &fields,
                            const std::string &key, const std::string &what,
                            bool allowZero, double &value) const {
    YAML::Node node;
    SHARC_TRY(require(fields, key, what, node));
    return readNumber(node, key, allowZero, value);
  }

  Status readPeakFlops(const YAML::Node &node, Machine &machine) const {
    SHARC_TRY(checkNames(node, "peak_flops"));
    if (node.size() == 0)
      return fail(node, "peak_flops lists no dtype");
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string &dtype = it->first.Scalar();
      if (!parseDType(dtype))
        return fail(it->first, "unknown dtype '" + dtype +
                                   "' in peak_flops (expected f32, bf16, "
                                   "i32 or f64)");
      SHARC_TRY(readNumber(it->second, "peak_flops." + dtype,
                           /*allowZero=*/false, machine.peakFlops[dtype]));
    }
    return Status::ok();
  }

  Status readLinks(const YAML::Node &node, Machine &machine) const {
    SHARC_TRY(checkNames(node, "links"));
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string axis = it->first.Scalar();
      const std::string what = "link '" + axis + "'";
      plan::yaml::Fields fields;
      SHARC_TRY(readFields(it->second, what, {"alpha", "beta"}, fields));
      Link &link = machine.links[axis];
      SHARC_TRY(readRequiredNumber(fields, "alpha", what,
                                   /*allowZero=*/true, link.alpha));
      SHARC_TRY(readRequiredNumber(fields, "beta", what,
                                   /*allowZero=*/false, link.beta));
    }
    return Status::ok();
  }

  /// op name -> efficiency in (0, kMaxEfficiency]: above 1 only where the
  /// roofline's launch term overstates a short kernel.
  Status readOpEfficiency(const YAML::Node &node, Machine &machine) const {
    SHARC_TRY(checkNames(node, "op_efficiency"));
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string op = it->first.Scalar();
      double &efficiency = machine.opEfficiency[op];
      SHARC_TRY(readNumber(it->second, "op_efficiency." + op,
                           /*allowZero=*/false, efficiency));
      if (efficiency > kMaxEfficiency)
        return fail(it->second, "op_efficiency." + op + " must be at most " +
                                    std::to_string(int(kMaxEfficiency)) +
                                    ", got " + it->second.Scalar());
    }
    return Status::ok();
  }

  /// op name -> seconds per launch, at least 0.
  Status readOpOverhead(const YAML::Node &node, Machine &machine) const {
    SHARC_TRY(checkNames(node, "op_overhead"));
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string op = it->first.Scalar();
      SHARC_TRY(readNumber(it->second, "op_overhead." + op,
                           /*allowZero=*/true, machine.opOverhead[op]));
    }
    return Status::ok();
  }

  Status readMachine(const YAML::Node &root, Machine &machine) const {
    const std::string what = "the machine";
    plan::yaml::Fields fields;
    SHARC_TRY(
        readFields(root, what,
                   {"name", "peak_flops", "memory_bandwidth", "launch_overhead",
                    "links", "op_efficiency", "op_overhead", "gpu_memory"},
                   fields));
    YAML::Node node;
    SHARC_TRY(require(fields, "name", what, node));
    if (!node.IsScalar() || node.Scalar().empty())
      return fail(node, "expected a non-empty string for name");
    machine.name = node.Scalar();
    SHARC_TRY(require(fields, "peak_flops", what, node));
    SHARC_TRY(readPeakFlops(node, machine));
    SHARC_TRY(readRequiredNumber(fields, "memory_bandwidth", what,
                                 /*allowZero=*/false, machine.memoryBandwidth));
    SHARC_TRY(readRequiredNumber(fields, "launch_overhead", what,
                                 /*allowZero=*/true, machine.launchOverhead));
    SHARC_TRY(require(fields, "links", what, node));
    SHARC_TRY(readLinks(node, machine));
    if (std::optional<YAML::Node> found = fields.find("op_efficiency"))
      SHARC_TRY(readOpEfficiency(*found, machine));
    if (std::optional<YAML::Node> found = fields.find("op_overhead"))
      SHARC_TRY(readOpOverhead(*found, machine));
    if (std::optional<YAML::Node> found = fields.find("gpu_memory"))
      SHARC_TRY(readNumber(*found, "gpu_memory", /*allowZero=*/false,
                           machine.gpuMemoryBytes));
    return Status::ok();
  }

private:
  static constexpr double kMaxEfficiency = 4.0;
};

double peakRate(const Machine &machine, const std::string &dtype) {
  if (auto it = machine.peakFlops.find(dtype); it != machine.peakFlops.end())
    return it->second;
  double slowest = 0.0;
  for (const auto &[name, rate] : machine.peakFlops)
    slowest = slowest == 0.0 ? rate : std::min(slowest, rate);
  return slowest > 0.0 ? slowest : 1.0;
}

/// `op`'s figure in `figures`, or that of the op whose kernels it runs:
/// ring attention's blocks are the attention library's calls
/// (kernels/AttentionRuns.h) with attention's flop count, so without
/// figures of their own they take attention's and attention_grad's.
std::optional<double> figureOf(const std::map<std::string, double> &figures,
                               const std::string &op) {
  if (auto it = figures.find(op); it != figures.end())
    return it->second;
  static const std::map<std::string, std::string> kRunsAs = {
      {"attention_block", "attention"},
      {"attention_block_grad", "attention_grad"}};
  if (auto as = kRunsAs.find(op); as != kRunsAs.end())
    if (auto it = figures.find(as->second); it != figures.end())
      return it->second;
  return std::nullopt;
}

double computeSeconds(const Machine &machine, const ScheduleNode &node) {
  double mathSeconds =
      static_cast<double>(node.flops) / peakRate(machine, node.dtype);
  double memorySeconds =
      static_cast<double>(node.memBytes) / machine.memoryBandwidth;
  double efficiency = figureOf(machine.opEfficiency, node.op).value_or(1.0);
  return launchSeconds(machine, node.op) +
         std::max(mathSeconds, memorySeconds) / efficiency;
}

} // namespace

double launchSeconds(const Machine &machine, const std::string &op) {
  return machine.launchOverhead +
         figureOf(machine.opOverhead, op).value_or(0.0);
}

Result<Machine> parseMachine(const std::string &text,
                             const std::string &fileName) {
  Machine machine;
  SHARC_TRY(readYaml(text, fileName, [&](const YAML::Node &root) {
    return MachineReader(fileName).readMachine(root, machine);
  }));
  return machine;
}

Result<Machine> readMachineFile(const std::string &path) {
  Result<std::string> text = readWholeFile(path, "machine file");
  if (!text.isOk())
    return text.status();
  return parseMachine(*text, path);
}

namespace {

/// The link a collective over `axisList` runs at: its axis's, or for a
/// reduction over several axes at once ("dp,tp") the slowest of theirs,
/// which bounds it. nullptr when the machine lacks one of them.
const Link *linkOf(const Machine &machine, const std::string &axisList) {
  const Link *slowest = nullptr;
  for (size_t start = 0; start <= axisList.size();) {
    size_t end = std::min(axisList.find(',', start), axisList.size());
    auto it = machine.links.find(axisList.substr(start, end - start));
    if (it == machine.links.end())
      return nullptr;
    if (!slowest || it->second.beta < slowest->beta)
      slowest = &it->second;
    start = end + 1;
  }
  return slowest;
}

} // namespace

double nodeSeconds(const Machine &machine, const ScheduleNode &node) {
  if (node.kind == NodeKind::Collective)
    if (const Link *link = linkOf(machine, node.axis))
      return link->alpha + static_cast<double>(node.commBytes) / link->beta;
  return computeSeconds(machine, node);
}

Status checkMachineCovers(const Machine &machine, const ScheduleGraph &graph) {
  for (size_t index = 0; index < graph.size(); ++index) {
    const ScheduleNode &node = graph[index];
    std::string where = "node " + std::to_string(index) + " (" + node.op + ")";
    if (node.kind == NodeKind::Collective && node.commBytes > 0 &&
        !linkOf(machine, node.axis))
      return Status::invalidInput(where + ": machine '" + machine.name +
                                  "' has no link for axis '" + node.axis + "'");
    if (node.kind == NodeKind::Compute && node.flops > 0 &&
        !machine.peakFlops.count(node.dtype))
      return Status::invalidInput(where + ": machine '" + machine.name +
                                  "' has no peak_flops for dtype '" +
                                  node.dtype + "'");
  }
  return Status::ok();
}

} // namespace sharc
