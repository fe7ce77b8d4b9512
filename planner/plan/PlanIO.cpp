//===- PlanIO.cpp - read and write plan files -----------------------------===//
//
// The reader walks yaml-cpp nodes with non-throwing accessors and converts
// every scalar itself, so each message can carry the node's position; the
// only try blocks catch what yaml-cpp's parser throws. Sections are read in
// dependency order (mesh, regions, buffers, then the tables that refer to
// them) whatever order the file lists them in.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/PlanIO.h"
#include "planner/plan/FileText.h"
#include "planner/plan/PlanContract.h"
#include "planner/plan/PlanText.h"
#include "planner/plan/YamlFields.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>

namespace sharc::plan {
namespace {

using yaml::describe;
using yaml::Fields;

using text::formatInts;
using text::isIntegerSyntax;
using text::parseDouble;

constexpr Region kRegions[] = {
    Region::Param,      Region::OptState, Region::Input, Region::Output,
    Region::Activation, Region::Gradient, Region::Cache};

constexpr const char *kRegionNames =
    "param, opt_state, input, output, activation, gradient or cache";
constexpr const char *kDTypes = "f32, bf16, i32 or f64";

// Upper bounds of header numbers (see readHeader).
constexpr int64_t kMaxTokens = INT32_MAX;
constexpr int64_t kMaxStreams = 64;
constexpr int64_t kMaxEvents = int64_t{1} << 24;
constexpr int64_t kMaxRanks = 65536;
constexpr int64_t kMaxRegionBytes = int64_t{1} << 50; // 1 PiB

std::optional<Region> parseRegion(std::string_view name) {
  for (Region region : kRegions)
    if (name == regionName(region))
      return region;
  return std::nullopt;
}

template <typename Entry>
bool hasName(const std::vector<Entry> &entries, const std::string &name) {
  return std::any_of(entries.begin(), entries.end(),
                     [&](const Entry &entry) { return entry.name == name; });
}

class Reader : public yaml::FieldReader {
public:
  using FieldReader::FieldReader;

  Status readPlan(const YAML::Node &root, Plan &plan) {
    if (!root.IsMap() || root.size() == 0 || !root.begin()->first.IsScalar() ||
        root.begin()->first.Scalar() != "sharc_plan")
      return fail(root.IsMap() && root.size() ? root.begin()->first : root,
                  "a plan must start with 'sharc_plan: " +
                      std::to_string(kPlanVersion) + "'");
    // The version is checked before any other key, so that a plan from a newer
    // sharc fails on its version rather than on a key this one does not know.
    YAML::Node versionNode = root.begin()->second;
    SHARC_TRY(readInt(versionNode, plan.version));
    if (plan.version != kPlanVersion)
      return fail(versionNode, "plan version " + std::to_string(plan.version) +
                                   " is not supported (expected " +
                                   std::to_string(kPlanVersion) + ")");

    Fields top;
    SHARC_TRY(
        readFields(root, "the plan",
                   {"sharc_plan", "model", "mode", "mesh", "seq_len",
                    "batch_size", "vocab_size", "compute_dtype", "num_streams",
                    "num_events", "regions", "buffers", "params", "inputs",
                    "outputs", "instructions", "lr_schedule"},
                   top));
    SHARC_TRY(readHeader(top, plan));

    SHARC_TRY(readTable(top, "buffers", [&](const YAML::Node &item) {
      return readBuffer(item, plan);
    }));
    SHARC_TRY(readTable(top, "params", [&](const YAML::Node &item) {
      return readParam(item, plan);
    }));
    // Tied names may point forward, so they are checked once all are read.
    if (auto params = top.find("params"))
      for (size_t i = 0; i < plan.params.size(); ++i) {
        const std::string &tiedTo = plan.params[i].tiedTo;
        if (!tiedTo.empty() &&
            (tiedTo == plan.params[i].name || !plan.findParam(tiedTo)))
          return fail(std::as_const(*params)[i]["tied_to"],
                      "tied_to '" + tiedTo + "' names no other parameter");
      }
    SHARC_TRY(readTable(top, "inputs", [&](const YAML::Node &item) {
      return readIo(item, plan, plan.inputs, "an input");
    }));
    SHARC_TRY(readTable(top, "outputs", [&](const YAML::Node &item) {
      return readIo(item, plan, plan.outputs, "an output");
    }));
    return readTable(top, "instructions", [&](const YAML::Node &item) {
      return readInstruction(item, plan);
    });
  }

  Status readHeader(const Fields &top, Plan &plan) const {
    YAML::Node node;
    SHARC_TRY(require(top, "buffers", "the plan", node));
    SHARC_TRY(require(top, "instructions", "the plan", node));
    if (auto found = top.find("model"))
      SHARC_TRY(readString(*found, plan.modelName));
    if (auto found = top.find("mode"))
      SHARC_TRY(readString(*found, plan.mode));
    if (auto found = top.find("mesh"))
      SHARC_TRY(readMesh(*found, plan));
    // Every count is bounded by what a run could hold, so that no header
    // number turns into a huge allocation or a wrap: token ids and token
    // counts are int32, a stream is a thread or a CUDA stream, an event a
    // cudaEvent per rank.
    for (auto [key, field, minimum, maximum] :
         {std::tuple{"seq_len", &plan.seqLen, 0, kMaxTokens},
          {"batch_size", &plan.batchSize, 0, kMaxTokens},
          {"vocab_size", &plan.vocabSize, 0, kMaxTokens},
          {"num_streams", &plan.numStreams, 1, kMaxStreams},
          {"num_events", &plan.numEvents, 0, kMaxEvents}})
      if (auto found = top.find(key))
        SHARC_TRY(readInt(*found, *field, minimum, maximum));
    if (plan.seqLen * plan.batchSize > kMaxTokens)
      return fail(top.find("seq_len") ? *top.find("seq_len") : node,
                  "seq_len x batch_size = " +
                      std::to_string(plan.seqLen * plan.batchSize) +
                      " tokens exceed the limit of " +
                      std::to_string(kMaxTokens) + " (int32 token counts)");
    if (auto found = top.find("compute_dtype"))
      SHARC_TRY(
          readName(*found, parseDType, "dtype", kDTypes, plan.computeDType));
    if (auto found = top.find("regions"))
      SHARC_TRY(readRegions(*found, plan));
    if (auto found = top.find("lr_schedule"))
      SHARC_TRY(readLrSchedule(*found, plan.lrSchedule));
    return Status::ok();
  }

  /// Every field is required, so a hand edit cannot half-change the
  /// schedule; the bounds are those the compiler's run-file reader keeps.
  Status readLrSchedule(const YAML::Node &node, LrSchedule &schedule) const {
    Fields fields;
    SHARC_TRY(readFields(node, "lr_schedule",
                         {"decay", "warmup_steps", "total_steps", "min_factor"},
                         fields));
    YAML::Node value;
    SHARC_TRY(require(fields, "decay", "lr_schedule", value));
    SHARC_TRY(readString(value, schedule.decay));
    if (schedule.decay != "constant" && schedule.decay != "linear" &&
        schedule.decay != "cosine")
      return fail(value, "unknown decay '" + schedule.decay +
                             "' (expected constant, linear or cosine)");
    constexpr int64_t kMaxSteps = 1'000'000'000;
    SHARC_TRY(require(fields, "warmup_steps", "lr_schedule", value));
    SHARC_TRY(readInt(value, schedule.warmupSteps, 0, kMaxSteps));
    SHARC_TRY(require(fields, "total_steps", "lr_schedule", value));
    SHARC_TRY(readInt(value, schedule.totalSteps, 0, kMaxSteps));
    if (schedule.decay != "constant" &&
        schedule.totalSteps <= schedule.warmupSteps)
      return fail(value, "total_steps " + std::to_string(schedule.totalSteps) +
                             " must exceed warmup_steps " +
                             std::to_string(schedule.warmupSteps));
    SHARC_TRY(require(fields, "min_factor", "lr_schedule", value));
    SHARC_TRY(readDouble(value, schedule.minFactor));
    if (!(schedule.minFactor >= 0.0 && schedule.minFactor <= 1.0))
      return fail(value, "min_factor must be in [0, 1], got " +
                             text::formatDouble(schedule.minFactor));
    return Status::ok();
  }

  Status readMesh(const YAML::Node &node, Plan &plan) const {
    if (!node.IsSequence())
      return fail(node, "expected a list of mesh axes, got " + describe(node));
    for (const YAML::Node &item : node) {
      Fields fields;
      SHARC_TRY(readFields(item, "a mesh axis", {"name", "size"}, fields));
      MeshAxis axis;
      YAML::Node value;
      SHARC_TRY(require(fields, "name", "a mesh axis", value));
      SHARC_TRY(readString(value, axis.name));
      if (axis.name.empty() || hasName(plan.mesh, axis.name))
        return fail(value, "name '" + axis.name +
                               "' of a mesh axis is empty or repeated");
      SHARC_TRY(require(fields, "size", "a mesh axis", value));
      SHARC_TRY(readInt(value, axis.size, 1, kMaxRanks));
      int64_t worldSize = axis.size;
      for (const MeshAxis &other : plan.mesh)
        worldSize *= other.size; // each <= kMaxRanks: no overflow
      if (worldSize > kMaxRanks)
        return fail(value, "the mesh's " + std::to_string(worldSize) +
                               " ranks exceed the limit of " +
                               std::to_string(kMaxRanks));
      plan.mesh.push_back(axis);
    }
    return Status::ok();
  }

  Status readRegions(const YAML::Node &node, Plan &plan) const {
    Fields fields;
    SHARC_TRY(readFields(node, "regions",
                         {"param", "opt_state", "input", "output", "activation",
                          "gradient", "cache"},
                         fields));
    for (const auto &[name, value] : fields.entries)
      SHARC_TRY(readInt(value, plan.regionBytes[*parseRegion(name)], 0,
                        kMaxRegionBytes));
    return Status::ok();
  }

  Status readBuffer(const YAML::Node &node, Plan &plan) const {
    Fields fields;
    const std::string what = "a buffer";
    SHARC_TRY(readFields(node, what,
                         {"id", "name", "region", "offset", "bytes", "dtype",
                          "shape", "view_of", "row_stride"},
                         fields));
    Buffer buffer;
    YAML::Node value, offsetNode;
    SHARC_TRY(require(fields, "id", what, value));
    SHARC_TRY(readInt(value, buffer.id));
    int64_t expected = static_cast<int64_t>(plan.buffers.size());
    if (buffer.id != expected)
      return fail(value, "buffer id " + std::to_string(buffer.id) +
                             " out of order (expected " +
                             std::to_string(expected) +
                             ": ids count up from 0)");
    if (auto found = fields.find("name"))
      SHARC_TRY(readString(*found, buffer.name));
    SHARC_TRY(require(fields, "region", what, value));
    SHARC_TRY(
        readName(value, parseRegion, "region", kRegionNames, buffer.region));
    SHARC_TRY(require(fields, "dtype", what, value));
    SHARC_TRY(readName(value, parseDType, "dtype", kDTypes, buffer.dtype));
    SHARC_TRY(require(fields, "shape", what, value));
    SHARC_TRY(readInts(value, buffer.shape, 0));
    SHARC_TRY(require(fields, "bytes", what, value));
    SHARC_TRY(readInt(value, buffer.numBytes, 0));
    if (auto found = fields.find("row_stride")) {
      SHARC_TRY(readInt(*found, buffer.rowStride, 1));
      if (!fields.find("view_of") || buffer.shape.empty() ||
          buffer.rowStride < buffer.shape.back())
        return fail(*found, "row_stride " + std::to_string(buffer.rowStride) +
                                " needs a view whose rows (the last "
                                "dimension) fit in it");
    }
    std::optional<int64_t> needed = buffer.extentBytes();
    if (!needed || *needed > buffer.numBytes)
      return fail(value, "buffer " + std::to_string(buffer.id) + " holds " +
                             std::to_string(buffer.numBytes) +
                             " bytes, too few for shape " +
                             formatInts(buffer.shape) + " of " +
                             dtypeName(buffer.dtype));
    SHARC_TRY(require(fields, "offset", what, offsetNode));
    SHARC_TRY(readInt(offsetNode, buffer.offset, 0));
    int64_t regionSize = 0;
    if (auto it = plan.regionBytes.find(buffer.region);
        it != plan.regionBytes.end())
      regionSize = it->second;
    if (buffer.offset > regionSize ||
        buffer.numBytes > regionSize - buffer.offset)
      return fail(offsetNode, "buffer " + std::to_string(buffer.id) + " at [" +
                                  std::to_string(buffer.offset) + ", +" +
                                  std::to_string(buffer.numBytes) +
                                  ") lies outside region " +
                                  regionName(buffer.region) + " of " +
                                  std::to_string(regionSize) + " bytes");
    // Only a backward reference, so views never form a cycle; the contract
    // checks that the view lies inside what it views.
    if (auto found = fields.find("view_of")) {
      SHARC_TRY(readInt(*found, buffer.viewOf));
      if (buffer.viewOf < 0 || buffer.viewOf >= buffer.id)
        return fail(*found, "view_of " + std::to_string(buffer.viewOf) +
                                " names no earlier buffer (a view follows "
                                "the buffer it views)");
    }
    plan.buffers.push_back(std::move(buffer));
    return Status::ok();
  }

  /// A pipeline stage: a coordinate of the mesh's kStageAxis.
  Status readStage(const YAML::Node &node, const Plan &plan,
                   int64_t &stage) const {
    SHARC_TRY(readInt(node, stage));
    int64_t numStages = plan.axisSize(kStageAxis);
    if (stage < 0 || stage >= numStages)
      return fail(node, "stage " + std::to_string(stage) +
                            " out of range (the mesh has " +
                            std::to_string(numStages) + " on " + kStageAxis +
                            ")");
    return Status::ok();
  }

  Status readSharding(const YAML::Node &node, const Plan &plan, size_t rank,
                      Sharding &sharding) const {
    if (!node.IsMap())
      return fail(node, "expected a map from mesh axis to dimension, got " +
                            describe(node));
    YAML::Node balancedNode, orderNode;
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string axis;
      SHARC_TRY(readString(it->first, axis));
      if (axis == "order") {
        orderNode = it->second;
        if (!orderNode.IsSequence())
          return fail(orderNode, "order: expected a list of mesh axes, got " +
                                     describe(orderNode));
        for (const YAML::Node &item : orderNode) {
          std::string name;
          SHARC_TRY(readString(item, name));
          sharding.order.push_back(name);
        }
        continue;
      }
      if (axis == "stage") {
        SHARC_TRY(readStage(it->second, plan, sharding.stage));
        continue;
      }
      if (axis == "balanced") {
        SHARC_TRY(readString(it->second, sharding.balancedAxis));
        balancedNode = it->second;
        continue;
      }
      bool known = false;
      std::string axes;
      for (const MeshAxis &meshAxis : plan.mesh) {
        known = known || meshAxis.name == axis;
        axes += (axes.empty() ? "" : ", ") + meshAxis.name;
      }
      if (!known)
        return fail(it->first, "unknown mesh axis '" + axis + "' (mesh axes: " +
                                   (axes.empty() ? "none" : axes) + ")");
      if (sharding.dimOfAxis.count(axis))
        return fail(it->first, "duplicate key '" + axis + "' in a sharding");
      int64_t dim = 0;
      SHARC_TRY(readInt(it->second, dim, -1));
      if (dim >= static_cast<int64_t>(rank))
        return fail(it->second, "dimension " + std::to_string(dim) +
                                    " out of range for a tensor of rank " +
                                    std::to_string(rank));
      sharding.dimOfAxis[axis] = dim;
    }
    // The order nests axes that split a dimension, each once.
    for (size_t i = 0; i < sharding.order.size(); ++i) {
      const std::string &name = sharding.order[i];
      auto it = sharding.dimOfAxis.find(name);
      if (it == sharding.dimOfAxis.end() || it->second < 0)
        return fail(orderNode, "order names '" + name +
                                   "', which splits no dimension of this "
                                   "sharding");
      for (size_t j = 0; j < i; ++j)
        if (sharding.order[j] == name)
          return fail(orderNode, "order names '" + name + "' twice");
    }
    // The balanced split cuts the dimension its axis splits.
    if (!sharding.balancedAxis.empty()) {
      auto it = sharding.dimOfAxis.find(sharding.balancedAxis);
      if (it == sharding.dimOfAxis.end() || it->second < 0)
        return fail(balancedNode, "balanced names '" + sharding.balancedAxis +
                                      "', which splits no dimension of "
                                      "this sharding");
    }
    return Status::ok();
  }

  Status readParam(const YAML::Node &node, Plan &plan) const {
    Fields fields;
    const std::string what = "a parameter";
    SHARC_TRY(readFields(node, what,
                         {"name", "buffer", "global_shape", "sharding", "init",
                          "tied_to", "state", "state_sharding"},
                         fields));
    ParamEntry param;
    SHARC_TRY(readTensorKeys(fields, what, plan, plan.params, param));
    if (auto found = fields.find("init")) {
      Fields init;
      SHARC_TRY(readFields(*found, "init", {"kind", "stddev"}, init));
      if (auto kind = init.find("kind")) {
        SHARC_TRY(readString(*kind, param.init.kind));
        if (param.init.kind != "normal" && param.init.kind != "ones" &&
            param.init.kind != "zeros")
          return fail(*kind, "unknown init kind '" + param.init.kind +
                                 "' (expected normal, ones or zeros)");
      }
      if (auto stddev = init.find("stddev")) {
        SHARC_TRY(readDouble(*stddev, param.init.stddev));
        if (!(param.init.stddev >= 0) || std::isinf(param.init.stddev))
          return fail(*stddev, "stddev must be finite and >= 0, got " +
                                   stddev->Scalar());
      }
    }
    if (auto found = fields.find("tied_to"))
      SHARC_TRY(readString(*found, param.tiedTo));
    if (auto found = fields.find("state"))
      SHARC_TRY(readIds(*found, param.state, plan.buffers.size(), "buffer"));
    if (auto found = fields.find("state_sharding")) {
      Sharding state;
      SHARC_TRY(readSharding(*found, plan, param.globalShape.size(), state));
      state.stage = param.sharding.stage;
      param.stateSharding = std::move(state);
    }
    plan.params.push_back(std::move(param));
    return Status::ok();
  }

  Status readIo(const YAML::Node &node, const Plan &plan,
                std::vector<IoEntry> &entries, const std::string &what) const {
    Fields fields;
    SHARC_TRY(readFields(
        node, what, {"name", "buffer", "global_shape", "sharding"}, fields));
    IoEntry entry;
    SHARC_TRY(readTensorKeys(fields, what, plan, entries, entry));
    entries.push_back(std::move(entry));
    return Status::ok();
  }

  /// The keys that parameters, inputs and outputs share.
  template <typename Entry>
  Status readTensorKeys(const Fields &fields, const std::string &what,
                        const Plan &plan, const std::vector<Entry> &siblings,
                        Entry &entry) const {
    YAML::Node value;
    SHARC_TRY(require(fields, "name", what, value));
    SHARC_TRY(readString(value, entry.name));
    if (entry.name.empty() || hasName(siblings, entry.name))
      return fail(value, "name '" + entry.name + "' of " + what +
                             " is empty or repeated");
    SHARC_TRY(require(fields, "buffer", what, value));
    SHARC_TRY(readId(value, entry.buffer, plan.buffers.size(), "buffer"));
    SHARC_TRY(require(fields, "global_shape", what, value));
    SHARC_TRY(readInts(value, entry.globalShape, 0));
    if (auto found = fields.find("sharding"))
      SHARC_TRY(
          readSharding(*found, plan, entry.globalShape.size(), entry.sharding));
    return Status::ok();
  }

  Status readInstruction(const YAML::Node &node, Plan &plan) const {
    Fields fields;
    const std::string what = "an instruction";
    SHARC_TRY(readFields(node, what,
                         {"op", "in", "out", "stream", "waits", "signals",
                          "attrs", "loc", "stage", "recompute"},
                         fields));
    Instruction instruction;
    YAML::Node value;
    SHARC_TRY(require(fields, "op", what, value));
    SHARC_TRY(readString(value, instruction.op));
    if (instruction.op.empty())
      return fail(value, "an instruction needs an op name");
    int64_t numBuffers = static_cast<int64_t>(plan.buffers.size());
    if (auto found = fields.find("in"))
      SHARC_TRY(readIds(*found, instruction.operands, numBuffers, "buffer"));
    if (auto found = fields.find("out"))
      SHARC_TRY(readIds(*found, instruction.results, numBuffers, "buffer"));
    if (auto found = fields.find("stream")) {
      SHARC_TRY(readInt(*found, instruction.stream));
      if (instruction.stream < 0 || instruction.stream >= plan.numStreams)
        return fail(*found, "stream " + std::to_string(instruction.stream) +
                                " out of range (the plan has " +
                                std::to_string(plan.numStreams) + " streams)");
    }
    if (auto found = fields.find("waits"))
      SHARC_TRY(readIds(*found, instruction.waits, plan.numEvents, "event"));
    if (auto found = fields.find("signals"))
      SHARC_TRY(readIds(*found, instruction.signals, plan.numEvents, "event"));
    if (auto found = fields.find("attrs")) {
      if (!found->IsMap())
        return fail(*found,
                    "expected a map of attributes, got " + describe(*found));
      for (auto it = found->begin(); it != found->end(); ++it) {
        std::string key;
        SHARC_TRY(readString(it->first, key));
        if (instruction.attrs.count(key))
          return fail(it->first, "duplicate attribute '" + key + "'");
        SHARC_TRY(readAttr(it->second, key, instruction.attrs[key]));
      }
    }
    if (auto found = fields.find("loc"))
      SHARC_TRY(readString(*found, instruction.loc));
    if (auto found = fields.find("stage"))
      SHARC_TRY(readStage(*found, plan, instruction.stage));
    if (auto found = fields.find("recompute")) {
      SHARC_TRY(readString(*found, instruction.recompute));
      if (instruction.recompute != "full" &&
          instruction.recompute != "selective" &&
          instruction.recompute != "sp-allgather")
        return fail(*found, "recompute is full, selective or sp-allgather, "
                            "not '" +
                                instruction.recompute + "'");
    }
    plan.instructions.push_back(std::move(instruction));
    return Status::ok();
  }

  /// Attribute kinds follow the text: a quoted scalar is a string, a plain one
  /// an integer or else a float, a list a list of integers.
  Status readAttr(const YAML::Node &node, const std::string &key,
                  AttrValue &value) const {
    if (node.IsSequence()) {
      std::vector<int64_t> values;
      SHARC_TRY(readInts(node, values));
      value = std::move(values);
      return Status::ok();
    }
    if (!node.IsScalar())
      return fail(node, "attribute '" + key +
                            "' must be an integer, a float, a quoted string or "
                            "a list of integers, got " +
                            describe(node));
    const std::string &text = node.Scalar();
    if (node.Tag() == "!") {
      value = text;
    } else if (isIntegerSyntax(text)) {
      int64_t integer = 0;
      SHARC_TRY(readInt(node, integer));
      value = integer;
    } else if (std::optional<double> real = parseDouble(text)) {
      value = *real;
    } else {
      return fail(node, "attribute '" + key + "' value '" + text +
                            "' is not a number (strings are quoted: \"" + text +
                            "\")");
    }
    return Status::ok();
  }

  /// Where a broken contract shows: the attribute, else the entry at fault.
  YAML::Node locate(const YAML::Node &root, const ContractViolation &v) const {
    bool isBuffer = v.site == ContractViolation::Site::Buffer;
    const YAML::Node table = root[isBuffer ? "buffers" : "instructions"];
    // A rule about the whole table (an empty program) points at its key.
    if (!table.IsSequence() || v.index >= static_cast<int64_t>(table.size()))
      return table;
    const YAML::Node entry = table[v.index];
    if (v.attr.empty())
      return entry;
    const YAML::Node value = entry["attrs"][v.attr];
    return value.IsDefined() ? value : entry;
  }
};

} // namespace

Result<Plan> parsePlan(const std::string &text, const std::string &fileName,
                       PlanChecks checks) {
  Plan plan;
  SHARC_TRY(readYaml(text, fileName, [&](const YAML::Node &root) {
    Reader reader(fileName);
    SHARC_TRY(reader.readPlan(root, plan));
    std::optional<ContractViolation> violation;
    if (checks == PlanChecks::All && (violation = findContractViolation(plan)))
      return reader.fail(reader.locate(root, *violation), violation->message);
    return Status::ok();
  }));
  return plan;
}

Result<Plan> readPlanFile(const std::string &path, PlanChecks checks) {
  Result<std::string> text = readWholeFile(path, "plan");
  if (!text.isOk())
    return text.status();
  return parsePlan(*text, path, checks);
}

} // namespace sharc::plan
