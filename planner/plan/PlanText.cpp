//===- PlanText.cpp - how plan files spell values -------------------------===//
//
// Shared by PlanWriter.cpp and PlanIO.cpp, so that what one writes the other
// reads back exactly.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/PlanText.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

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

bool text::isIntegerSyntax(std::string_view text) {
  if (!text.empty() && text.front() == '-')
    text.remove_prefix(1);
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
}

std::optional<double> text::parseDouble(std::string_view text) {
  bool negative = false;
  std::string_view body = text;
  if (!body.empty() && (body.front() == '+' || body.front() == '-')) {
    negative = body.front() == '-';
    body.remove_prefix(1);
  }
  if (body == ".inf" || body == ".Inf" || body == ".INF")
    return negative ? -HUGE_VAL : HUGE_VAL;
  if (body == ".nan" || body == ".NaN" || body == ".NAN")
    return std::nan("");
  if (body.empty() || body.front() == '+' || body.front() == '-')
    return std::nullopt;
  double value = 0;
  auto [end, error] =
      std::from_chars(body.data(), body.data() + body.size(), value);
  if (error != std::errc() || end != body.data() + body.size())
    return std::nullopt;
  return negative ? -value : value;
}

} // namespace sharc::plan
