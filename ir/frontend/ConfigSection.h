//===- ConfigSection.h - typed fields of one YAML mapping -------*- C++ -*-===//
// defines: MaybeError, Section, collectSection, requireKeys, IntBounds,
//          DoubleBounds, readInt, readDouble, parseDouble, readBool,
//          readString
//
// The layer between yaml-cpp nodes and the schema in ModelConfig.cpp: it
// checks a mapping's keys (unknown, duplicated, not a name) and converts
// scalars strictly, so that "768" in quotes, 7.5 or a list is an error where
// an integer is expected rather than a silent conversion. Every reader leaves
// its Field untouched when the key is absent, so that the caller's default
// (and its location) stays.
#pragma once

#include "ir/frontend/ModelConfig.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sharc::frontend {

using MaybeError = std::optional<ConfigError>;

struct SectionEntry {
  std::string key;
  YAML::Node keyNode;
  YAML::Node value;
};

/// One mapping of the file, e.g. `model:` or `run.optimizer:`.
struct Section {
  std::string file;
  std::string where; ///< for messages: "in model", "at top level"
  SourceLoc loc;     ///< the section's key, or the document's start
  std::vector<SectionEntry> entries;

  const SectionEntry *find(std::string_view key) const;
  /// Where a value was written; an empty value has no reliable mark of its
  /// own in yaml-cpp, so it points at its key.
  SourceLoc valueLoc(const SectionEntry &entry) const;
};

/// Fills section from node, a mapping (or an empty value, read as an empty
/// mapping). Rejects a non-mapping, keys that are not plain names, keys not
/// in knownKeys (with a did-you-mean) and keys written twice.
MaybeError collectSection(const YAML::Node &node, const std::string &name,
                          std::span<const std::string_view> knownKeys,
                          Section &section);

/// "missing required key 'vocab_size' in model", at the section's key.
MaybeError requireKeys(const Section &section,
                       std::span<const std::string_view> requiredKeys);

/// An inclusive range, with an optional reason appended when the value is
/// below min ("the shifted loss needs two tokens").
struct IntBounds {
  int64_t min;
  int64_t max;
  const char *whyMin = nullptr;
};

enum class DoubleBounds { Positive, NonNegative, UnitInterval };

MaybeError readInt(const Section &section, std::string_view key,
                   IntBounds bounds, Field<int64_t> &field);
MaybeError readDouble(const Section &section, std::string_view key,
                      DoubleBounds bounds, Field<double> &field);
/// The node-level form of readDouble, for list elements ("betas[1]").
MaybeError parseDouble(const YAML::Node &node, const SourceLoc &loc,
                       std::string_view name, DoubleBounds bounds,
                       Field<double> &field);
/// Only YAML 1.2's true/false spellings; "yes" is an error, not a bool.
MaybeError readBool(const Section &section, std::string_view key,
                    Field<bool> &field);
/// Any scalar, quoted or plain.
MaybeError readString(const Section &section, std::string_view key,
                      Field<std::string> &field);

} // namespace sharc::frontend
