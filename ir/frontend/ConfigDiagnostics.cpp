//===- ConfigDiagnostics.cpp - wording and places of config errors --------===//

#include "ir/frontend/ConfigDiagnostics.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>
#include <vector>

namespace sharc::frontend {

size_t editDistance(std::string_view a, std::string_view b) {
  // dist[i][j]: distance between the first i chars of a and first j of b.
  size_t width = b.size() + 1;
  std::vector<size_t> dist((a.size() + 1) * width);
  auto at = [&](size_t i, size_t j) -> size_t & { return dist[i * width + j]; };
  for (size_t i = 0; i <= a.size(); ++i)
    at(i, 0) = i;
  for (size_t j = 0; j <= b.size(); ++j)
    at(0, j) = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      at(i, j) = std::min(
          {at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        at(i, j) = std::min(at(i, j), at(i - 2, j - 2) + 1);
    }
  }
  return at(a.size(), b.size());
}

static std::string toLower(std::string_view text) {
  std::string lower(text);
  for (char &c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

std::string didYouMean(std::string_view word,
                       std::span<const std::string_view> candidates) {
  std::string lowerWord = toLower(word);
  std::string_view best;
  size_t bestDistance = SIZE_MAX;
  for (std::string_view candidate : candidates) {
    size_t distance = editDistance(lowerWord, toLower(candidate));
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  // A third of the name (at least 1, at most 3) still reads as a typo of
  // it; more than that suggests names that merely share a few letters.
  size_t limit = std::clamp<size_t>(best.size() / 3, 1, 3);
  if (best.empty() || bestDistance > limit)
    return "";
  return " (did you mean '" + std::string(best) + "'?)";
}

SourceLoc locFromMark(const std::string &file, const YAML::Mark &mark) {
  if (mark.is_null() || mark.line < 0 || mark.column < 0)
    return SourceLoc{file, 0, 0};
  return SourceLoc{file, mark.line + 1, mark.column + 1};
}

/// Cuts long scalars so that one bad value cannot flood the terminal,
/// without splitting a UTF-8 sequence.
static std::string shorten(const std::string &text) {
  constexpr size_t maxBytes = 40;
  if (text.size() <= maxBytes)
    return text;
  size_t cut = maxBytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  return text.substr(0, cut) + "...";
}

std::string describeNode(const YAML::Node &node) {
  switch (node.Type()) {
  case YAML::NodeType::Null:
  case YAML::NodeType::Undefined:
    return "an empty value";
  case YAML::NodeType::Sequence:
    return "a list";
  case YAML::NodeType::Map:
    return "a mapping";
  case YAML::NodeType::Scalar:
    break;
  }
  // yaml-cpp tags quoted scalars "!" and plain ones "?".
  if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str")
    return "a quoted string \"" + shorten(node.Scalar()) + "\"";
  return "'" + shorten(node.Scalar()) + "'";
}

namespace {
/// Walks the text once, tracking line and byte column.
class EncodingChecker {
public:
  EncodingChecker(std::string_view text, const std::string &file)
      : text(text), file(file) {}

  std::optional<ConfigError> run() {
    while (pos < text.size()) {
      unsigned char lead = byteAt(pos);
      if (lead < 0x80) {
        if (auto error = checkAscii(lead))
          return error;
        if (lead == '\n') {
          ++line;
          lineStart = pos + 1;
        }
        ++pos;
        continue;
      }
      std::optional<uint32_t> codePoint = decode();
      if (!codePoint)
        return errorHere("invalid UTF-8 (byte " + hex(lead) + ")");
      // C1 controls and the two noncharacters are outside YAML's printable
      // set; U+0085 (next line) is the one C1 code it allows.
      uint32_t cp = *codePoint;
      if ((cp >= 0x80 && cp <= 0x9F && cp != 0x85) || cp == 0xFFFE ||
          cp == 0xFFFF)
        return errorHere("non-printable character " + unicodeName(cp) +
                         " in input (expected UTF-8 YAML text)");
      pos += sequenceLength;
    }
    return std::nullopt;
  }

private:
  unsigned char byteAt(size_t index) const {
    return static_cast<unsigned char>(text[index]);
  }

  std::optional<ConfigError> checkAscii(unsigned char byte) const {
    if (byte == 0)
      return errorHere("NUL byte in input (expected UTF-8 YAML text)");
    bool isControl = byte < 0x20 || byte == 0x7F;
    if (isControl && byte != '\t' && byte != '\n' && byte != '\r')
      return errorHere("control character " + hex(byte) +
                       " in input (expected UTF-8 YAML text)");
    return std::nullopt;
  }

  /// Decodes the multi-byte sequence at pos (RFC 3629 table 3-7: no
  /// overlong forms, no surrogates, nothing past U+10FFFF).
  std::optional<uint32_t> decode() {
    unsigned char lead = byteAt(pos);
    unsigned char minSecond = 0x80, maxSecond = 0xBF;
    uint32_t cp;
    if (lead >= 0xC2 && lead <= 0xDF) {
      sequenceLength = 2;
      cp = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      sequenceLength = 3;
      cp = lead & 0x0F;
      minSecond = lead == 0xE0 ? 0xA0 : 0x80;
      maxSecond = lead == 0xED ? 0x9F : 0xBF;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      sequenceLength = 4;
      cp = lead & 0x07;
      minSecond = lead == 0xF0 ? 0x90 : 0x80;
      maxSecond = lead == 0xF4 ? 0x8F : 0xBF;
    } else {
      return std::nullopt;
    }
    if (pos + sequenceLength > text.size())
      return std::nullopt;
    for (size_t i = 1; i < sequenceLength; ++i) {
      unsigned char next = byteAt(pos + i);
      unsigned char lo = i == 1 ? minSecond : 0x80;
      unsigned char hi = i == 1 ? maxSecond : 0xBF;
      if (next < lo || next > hi)
        return std::nullopt;
      cp = (cp << 6) | (next & 0x3F);
    }
    return cp;
  }

  ConfigError errorHere(std::string message) const {
    int col = static_cast<int>(pos - lineStart) + 1;
    return ConfigError{SourceLoc{file, line, col}, std::move(message)};
  }

  static std::string hex(unsigned char byte) {
    char buffer[8];
    std::snprintf(buffer, sizeof(buffer), "0x%02x", byte);
    return buffer;
  }

  static std::string unicodeName(uint32_t cp) {
    char buffer[16];
    std::snprintf(buffer, sizeof(buffer), "U+%04X", cp);
    return buffer;
  }

  std::string_view text;
  const std::string &file;
  size_t pos = 0;
  size_t lineStart = 0;
  int line = 1;
  size_t sequenceLength = 0;
};
} // namespace

std::optional<ConfigError> findEncodingError(std::string_view text,
                                             const std::string &file) {
  return EncodingChecker(text, file).run();
}

/// Where yaml-cpp 0.7's parser stops making progress, if it does: on a
/// stray flow indicator at the top level (a file holding only ",") it
/// yields an empty document at the same place forever, so YAML::LoadAll
/// never returns and fills memory. A document that starts where the
/// previous one did is that loop (found by the config fuzzer).
std::optional<YAML::Mark> findStuckParser(const std::string &text) {
  struct DocumentStarts : YAML::EventHandler {
    std::optional<YAML::Mark> previous, stuck;
    void OnDocumentStart(const YAML::Mark &mark) override {
      if (previous && previous->pos == mark.pos)
        stuck = mark;
      previous = mark;
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark &, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark &, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark &, const std::string &, YAML::anchor_t,
                  const std::string &) override {}
    void OnSequenceStart(const YAML::Mark &, const std::string &,
                         YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark &, const std::string &, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  };
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts starts;
  while (!starts.stuck && parser.HandleNextDocument(starts)) {
  }
  return starts.stuck;
}

} // namespace sharc::frontend
