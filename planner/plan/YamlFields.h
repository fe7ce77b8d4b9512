//===- YamlFields.h - typed YAML fields with FILE:LINE:COL ------*- C++ -*-===//
// defines: describe, Fields, FieldReader (plan::yaml::)
//
// The plan reader's typed accessors over yaml-cpp nodes, none of which
// throws: each converts a scalar itself and, when it is not what the plan
// allows, returns bad input naming the node's FILE:LINE:COL (yaml-cpp's
// marks count from 0). PlanIO.cpp derives its Reader from FieldReader.
//
//   FieldReader reader("plan.yaml");
//   Fields fields;
//   SHARC_TRY(reader.readFields(node, "a buffer", {"id", "name"}, fields));
#pragma once

#include "planner/plan/PlanText.h"
#include "planner/plan/Status.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sharc::plan::yaml {

/// How a node that is not what was expected reads in a message.
inline std::string describe(const YAML::Node &node) {
  switch (node.Type()) {
  case YAML::NodeType::Scalar:
    return "'" + node.Scalar() + "'";
  case YAML::NodeType::Sequence:
    return "a list";
  case YAML::NodeType::Map:
    return "a map";
  default:
    return "nothing";
  }
}

/// The keys of one YAML map, checked against the keys its table allows.
struct Fields {
  YAML::Node map;
  std::vector<std::pair<std::string, YAML::Node>> entries;

  std::optional<YAML::Node> find(std::string_view key) const {
    for (const auto &[name, value] : entries)
      if (name == key)
        return value;
    return std::nullopt;
  }
};

class FieldReader {
public:
  explicit FieldReader(const std::string &fileName) : fileName(fileName) {}

  Status fail(const YAML::Node &node, const std::string &message) const {
    YAML::Mark mark = node.Mark();
    int line = mark.is_null() ? 1 : mark.line + 1;
    int column = mark.is_null() ? 1 : mark.column + 1;
    return Status::invalidInput(fileName + ":" + std::to_string(line) + ":" +
                                std::to_string(column) + ": " + message);
  }

  Status readFields(const YAML::Node &node, const std::string &what,
                    std::initializer_list<std::string_view> keys,
                    Fields &fields) const {
    if (!node.IsMap())
      return fail(node,
                  "expected a map for " + what + ", got " + describe(node));
    fields.map.reset(node);
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar())
        return fail(it->first, "expected a key in " + what + ", got " +
                                   describe(it->first));
      std::string key = it->first.Scalar();
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string allowed;
        for (std::string_view name : keys)
          allowed += (allowed.empty() ? "" : ", ") + std::string(name);
        return fail(it->first, "unknown key '" + key + "' in " + what +
                                   " (expected one of: " + allowed + ")");
      }
      if (fields.find(key))
        return fail(it->first, "duplicate key '" + key + "' in " + what);
      fields.entries.emplace_back(key, it->second);
    }
    return Status::ok();
  }

  Status require(const Fields &fields, std::string_view key,
                 const std::string &what, YAML::Node &value) const {
    std::optional<YAML::Node> found = fields.find(key);
    if (!found)
      return fail(fields.map,
                  "missing key '" + std::string(key) + "' in " + what);
    // reset, not operator=: assigning to a yaml-cpp Node rewrites the node it
    // refers to, which would corrupt the tree when value is reused.
    value.reset(*found);
    return Status::ok();
  }

  /// Reads a name of a closed set (region, dtype) through its parser.
  template <typename T>
  Status readName(const YAML::Node &node,
                  std::optional<T> (*parse)(std::string_view), const char *kind,
                  const char *expected, T &value) const {
    std::string name;
    SHARC_TRY(readString(node, name));
    std::optional<T> parsed = parse(name);
    if (!parsed)
      return fail(node, "unknown " + std::string(kind) + " '" + name +
                            "' (expected " + expected + ")");
    value = *parsed;
    return Status::ok();
  }

  Status readInt(const YAML::Node &node, int64_t &value,
                 int64_t minimum = INT64_MIN,
                 int64_t maximum = INT64_MAX) const {
    std::string text = node.IsScalar() ? node.Scalar() : "";
    if (!node.IsScalar() || !text::isIntegerSyntax(text))
      return fail(node, "expected an integer, got " + describe(node));
    auto [end, error] =
        std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc())
      return fail(node, "integer " + text + " out of range");
    if (value < minimum)
      return fail(node, "expected an integer >= " + std::to_string(minimum) +
                            ", got " + text);
    if (value > maximum)
      return fail(node, "expected an integer <= " + std::to_string(maximum) +
                            ", got " + text);
    return Status::ok();
  }

  Status readDouble(const YAML::Node &node, double &value) const {
    std::optional<double> parsed;
    if (node.IsScalar())
      parsed = text::parseDouble(node.Scalar());
    if (!parsed)
      return fail(node, "expected a number, got " + describe(node));
    value = *parsed;
    return Status::ok();
  }

  Status readString(const YAML::Node &node, std::string &value) const {
    if (!node.IsScalar())
      return fail(node, "expected a string, got " + describe(node));
    value = node.Scalar();
    return Status::ok();
  }

  Status readInts(const YAML::Node &node, std::vector<int64_t> &values,
                  int64_t minimum = INT64_MIN) const {
    if (!node.IsSequence())
      return fail(node, "expected a list of integers, got " + describe(node));
    values.clear();
    for (const YAML::Node &item : node) {
      int64_t value = 0;
      SHARC_TRY(readInt(item, value, minimum));
      values.push_back(value);
    }
    return Status::ok();
  }

  /// Reads an id that indexes a table of `count` entries (buffers, events),
  /// so that the executor can index without checking.
  Status readId(const YAML::Node &node, int64_t &id, int64_t count,
                const char *what) const {
    SHARC_TRY(readInt(node, id));
    if (id < 0 || id >= count)
      return fail(node, std::string(what) + " " + std::to_string(id) +
                            " out of range (the plan has " +
                            std::to_string(count) + " " + what + "s)");
    return Status::ok();
  }

  Status readIds(const YAML::Node &node, std::vector<int64_t> &ids,
                 int64_t count, const char *what) const {
    if (!node.IsSequence())
      return fail(node, "expected a list of ids, got " + describe(node));
    ids.clear();
    for (const YAML::Node &item : node) {
      int64_t id = 0;
      SHARC_TRY(readId(item, id, count, what));
      ids.push_back(id);
    }
    return Status::ok();
  }

  /// Reads each entry of an optional top-level list.
  template <typename ReadEntry>
  Status readTable(const Fields &top, std::string_view key,
                   ReadEntry readEntry) const {
    std::optional<YAML::Node> found = top.find(key);
    if (found && !found->IsSequence())
      return fail(*found, "expected a list for '" + std::string(key) +
                              "', got " + describe(*found));
    if (found)
      for (const YAML::Node &item : *found)
        SHARC_TRY(readEntry(item));
    return Status::ok();
  }

protected:
  const std::string &fileName;
};

} // namespace sharc::plan::yaml
