//===- ConfigSection.cpp - typed fields of one YAML mapping ---------------===//

#include "ir/frontend/ConfigSection.h"
#include "ir/frontend/ConfigDiagnostics.h"

#include <charconv>
#include <system_error>

namespace sharc::frontend {

const SectionEntry *Section::find(std::string_view key) const {
  for (const SectionEntry &entry : entries)
    if (entry.key == key)
      return &entry;
  return nullptr;
}

SourceLoc Section::valueLoc(const SectionEntry &entry) const {
  if (entry.value.IsNull())
    return locFromMark(file, entry.keyNode.Mark());
  return locFromMark(file, entry.value.Mark());
}

static ConfigError makeError(SourceLoc loc, std::string message) {
  return ConfigError{std::move(loc), std::move(message)};
}

MaybeError collectSection(const YAML::Node &node, const std::string &name,
                          std::span<const std::string_view> knownKeys,
                          Section &section) {
  if (node.IsNull())
    return std::nullopt;
  if (!node.IsMap())
    return makeError(locFromMark(section.file, node.Mark()),
                     name + " must be a mapping, got " + describeNode(node));
  for (const auto &pair : node) {
    YAML::Node keyNode = pair.first;
    SourceLoc keyLoc = locFromMark(section.file, keyNode.Mark());
    if (!keyNode.IsScalar())
      return makeError(keyLoc, "keys " + section.where +
                                   " must be names, got " +
                                   describeNode(keyNode));
    const std::string &key = keyNode.Scalar();
    bool isKnown = false;
    for (std::string_view known : knownKeys)
      isKnown = isKnown || known == key;
    if (!isKnown)
      return makeError(keyLoc, "unknown key '" + key + "' " + section.where +
                                   didYouMean(key, knownKeys));
    // yaml-cpp keeps both pairs of a repeated key; the YAML spec forbids it
    // and silently taking either one would hide a mistake.
    if (const SectionEntry *first = section.find(key)) {
      SourceLoc firstLoc = locFromMark(section.file, first->keyNode.Mark());
      return makeError(keyLoc, "duplicate key '" + key + "' " + section.where +
                                   " (first at line " +
                                   std::to_string(firstLoc.line) + ")");
    }
    section.entries.push_back(SectionEntry{key, keyNode, pair.second});
  }
  return std::nullopt;
}

MaybeError requireKeys(const Section &section,
                       std::span<const std::string_view> requiredKeys) {
  for (std::string_view key : requiredKeys)
    if (!section.find(key))
      return makeError(section.loc, "missing required key '" +
                                        std::string(key) + "' " +
                                        section.where);
  return std::nullopt;
}

/// A plain (unquoted) scalar: the only kind that may be a number or bool.
static bool isPlainScalar(const YAML::Node &node) {
  return node.IsScalar() && node.Tag() == "?";
}

static bool isDigit(char c) { return c >= '0' && c <= '9'; }

/// YAML 1.2 core schema's decimal int: [-+]?[0-9]+.
static bool looksLikeInt(std::string_view text) {
  size_t pos = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (pos == text.size())
    return false;
  for (; pos < text.size(); ++pos)
    if (!isDigit(text[pos]))
      return false;
  return true;
}

/// YAML 1.2 core schema's float without .inf/.nan:
/// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
static bool looksLikeFloat(std::string_view text) {
  size_t pos = 0;
  auto digits = [&] {
    size_t start = pos;
    while (pos < text.size() && isDigit(text[pos]))
      ++pos;
    return pos - start;
  };
  if (pos < text.size() && (text[pos] == '-' || text[pos] == '+'))
    ++pos;
  size_t intDigits = digits();
  size_t fracDigits = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    fracDigits = digits();
  }
  if (intDigits == 0 && fracDigits == 0)
    return false;
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    ++pos;
    if (pos < text.size() && (text[pos] == '-' || text[pos] == '+'))
      ++pos;
    if (digits() == 0)
      return false;
  }
  return pos == text.size();
}

/// from_chars takes no leading '+', which YAML allows.
static std::string_view withoutPlus(std::string_view text) {
  return !text.empty() && text[0] == '+' ? text.substr(1) : text;
}

MaybeError readInt(const Section &section, std::string_view key,
                   IntBounds bounds, Field<int64_t> &field) {
  const SectionEntry *entry = section.find(key);
  if (!entry)
    return std::nullopt;
  SourceLoc loc = section.valueLoc(*entry);
  const YAML::Node &node = entry->value;
  std::string name(key);
  if (!isPlainScalar(node) || !looksLikeInt(node.Scalar()))
    return makeError(loc,
                     name + " must be an integer, got " + describeNode(node));
  const std::string &text = node.Scalar();
  std::string_view digits = withoutPlus(text);
  int64_t value = 0;
  auto [end, errc] =
      std::from_chars(digits.data(), digits.data() + digits.size(), value);
  bool isNegative = text[0] == '-';
  bool tooSmall =
      errc == std::errc::result_out_of_range ? isNegative : value < bounds.min;
  bool tooLarge =
      errc == std::errc::result_out_of_range ? !isNegative : value > bounds.max;
  if (tooSmall) {
    std::string expected = bounds.min == 1 ? "positive"
                           : bounds.min == 0
                               ? "non-negative"
                               : "at least " + std::to_string(bounds.min);
    std::string why =
        bounds.whyMin ? std::string(" (") + bounds.whyMin + ")" : std::string();
    return makeError(loc,
                     name + " must be " + expected + why + ", got " + text);
  }
  if (tooLarge)
    return makeError(loc, name + " must be at most " +
                              std::to_string(bounds.max) + ", got " + text);
  field = Field<int64_t>{value, loc};
  return std::nullopt;
}

MaybeError parseDouble(const YAML::Node &node, const SourceLoc &loc,
                       std::string_view name, DoubleBounds bounds,
                       Field<double> &field) {
  std::string nameText(name);
  if (!isPlainScalar(node) || !looksLikeFloat(node.Scalar()))
    return makeError(loc,
                     nameText + " must be a number, got " + describeNode(node));
  const std::string &text = node.Scalar();
  std::string_view number = withoutPlus(text);
  double value = 0;
  auto [end, errc] =
      std::from_chars(number.data(), number.data() + number.size(), value);
  // Past double's range either way (1e999, 1e-999) is no real setting.
  if (errc == std::errc::result_out_of_range)
    return makeError(loc, nameText + " is out of range, got " + text);
  if (errc != std::errc() || end != number.data() + number.size())
    return makeError(loc,
                     nameText + " must be a number, got " + describeNode(node));
  switch (bounds) {
  case DoubleBounds::Positive:
    if (!(value > 0))
      return makeError(loc, nameText + " must be positive, got " + text);
    break;
  case DoubleBounds::NonNegative:
    if (!(value >= 0))
      return makeError(loc, nameText + " must be non-negative, got " + text);
    break;
  case DoubleBounds::UnitInterval:
    if (!(value >= 0 && value < 1))
      return makeError(loc, nameText + " must be in [0, 1), got " + text);
    break;
  }
  field = Field<double>{value, loc};
  return std::nullopt;
}

MaybeError readDouble(const Section &section, std::string_view key,
                      DoubleBounds bounds, Field<double> &field) {
  const SectionEntry *entry = section.find(key);
  if (!entry)
    return std::nullopt;
  return parseDouble(entry->value, section.valueLoc(*entry), key, bounds,
                     field);
}

MaybeError readBool(const Section &section, std::string_view key,
                    Field<bool> &field) {
  const SectionEntry *entry = section.find(key);
  if (!entry)
    return std::nullopt;
  SourceLoc loc = section.valueLoc(*entry);
  const YAML::Node &node = entry->value;
  if (isPlainScalar(node)) {
    const std::string &text = node.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") {
      field = Field<bool>{true, loc};
      return std::nullopt;
    }
    if (text == "false" || text == "False" || text == "FALSE") {
      field = Field<bool>{false, loc};
      return std::nullopt;
    }
  }
  return makeError(loc, std::string(key) + " must be true or false, got " +
                            describeNode(node));
}

MaybeError readString(const Section &section, std::string_view key,
                      Field<std::string> &field) {
  const SectionEntry *entry = section.find(key);
  if (!entry)
    return std::nullopt;
  SourceLoc loc = section.valueLoc(*entry);
  if (!entry->value.IsScalar())
    return makeError(loc, std::string(key) + " must be a string, got " +
                              describeNode(entry->value));
  field = Field<std::string>{entry->value.Scalar(), loc};
  return std::nullopt;
}

} // namespace sharc::frontend
