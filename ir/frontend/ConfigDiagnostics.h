//===- ConfigDiagnostics.h - how config errors read -------------*- C++ -*-===//
// defines: editDistance, didYouMean, locFromMark, describeNode,
//          findEncodingError, findStuckParser
//
// The pieces every configuration error is made of, kept apart from the
// schema so that the schema reads as a list of fields.
#pragma once

#include "ir/frontend/ModelConfig.h"

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace sharc::frontend {

/// Optimal-string-alignment distance: insertions, deletions, substitutions
/// and swaps of two neighbours each cost 1, because a swap ("hidden_szie")
/// is as common a typo as a missing letter.
size_t editDistance(std::string_view a, std::string_view b);

/// " (did you mean 'hidden_size'?)" for the closest candidate, or "" when
/// none is close enough to be a plausible typo.
std::string didYouMean(std::string_view word,
                       std::span<const std::string_view> candidates);

/// yaml-cpp counts lines and columns (bytes) from 0; a null mark (-1) has no
/// place, which SourceLoc spells as line 0.
SourceLoc locFromMark(const std::string &file, const YAML::Mark &mark);

/// What the user wrote, for "must be an integer, got ...": 'abc', a quoted
/// string "768", a list, a mapping or an empty value.
std::string describeNode(const YAML::Node &node);

/// The first byte that makes the text something other than YAML's printable
/// UTF-8 (NUL, control characters, malformed or overlong sequences), or
/// nothing. yaml-cpp silently drops or mangles such bytes, so they are
/// rejected before parsing. Columns count bytes, as yaml-cpp's do.
std::optional<ConfigError> findEncodingError(std::string_view text,
                                             const std::string &file);

/// Where yaml-cpp 0.7's parser would loop forever without moving on (a
/// stray flow indicator at the top level), or nothing; see the .cpp.
std::optional<YAML::Mark> findStuckParser(const std::string &text);

} // namespace sharc::frontend
