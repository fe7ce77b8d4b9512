//===- PlanText.h - how plan files spell values -----------------*- C++ -*-===//
// defines: text::formatDouble, text::quoted, text::identifier,
//          text::formatInts
//
// Shared by the plan writer and the reader's messages; not a public API.
#pragma once

#include <cstdint>
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

} // namespace sharc::plan::text
