//===- PlanText.h - how plan files spell values -----------------*- C++ -*-===//
// defines: text::formatDouble, text::quoted, text::identifier,
//          text::formatInts, text::isIntegerSyntax, text::parseDouble
//
// Shared by the plan writer and the reader's messages; not a public API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sharc::plan::text {

/// The shortest text that reads back as the same double, always marked as a
/// float ('.', 'e', inf or nan) so that it never reads back as an integer.
std::string formatDouble(double value);
/// A double-quoted YAML string with control characters escaped.
std::string quoted(std::string_view text);
/// Names the format defines (ops, regions, dtypes, axes, attribute keys) are
/// written bare when no YAML reader could mistake them for null or a bool.
std::string identifier(std::string_view text);
/// "[1, 2, 3]".
std::string formatInts(const std::vector<int64_t> &values);
/// An optional '-' and one or more digits: what reads as an integer.
bool isIntegerSyntax(std::string_view text);
/// A float as formatDouble writes it (.inf, -.inf, .nan) or as from_chars
/// reads it; the whole text must be consumed.
std::optional<double> parseDouble(std::string_view text);

} // namespace sharc::plan::text
