#include "s3/metadata.h"

#include <fmt/format.h>

#include <cctype>
#include <optional>

#include "common/utf8.h"
#include "s3/checksum.h"

namespace aq::s3 {
namespace {

std::string Latin1ToUtf8(std::string_view s) {
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out += ch;
    } else {
      out += static_cast<char>(0xc0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  return out;
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// One encoded word "=?charset?enc?text?=" decoded to UTF-8; nullopt when
// `word` is not one this decoder knows (it is then kept as text).
std::optional<std::string> DecodeWord(std::string_view word) {
  if (word.size() < 8 || word.substr(0, 2) != "=?" || word.substr(word.size() - 2) != "?=") return std::nullopt;
  const std::string_view inner = word.substr(2, word.size() - 4);
  const size_t q1 = inner.find('?');
  if (q1 == std::string_view::npos || q1 + 2 >= inner.size() || inner[q1 + 2] != '?') return std::nullopt;
  std::string charset(inner.substr(0, q1));
  for (auto& c : charset) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const char enc = static_cast<char>(std::toupper(static_cast<unsigned char>(inner[q1 + 1])));
  const std::string_view text = inner.substr(q1 + 3);
  if (text.find('?') != std::string_view::npos) return std::nullopt;
  std::string bytes;
  if (enc == 'B') {
    auto d = Base64Decode(text);
    if (!d.ok()) return std::nullopt;
    bytes = std::move(*d);
  } else if (enc == 'Q') {
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '_') {
        bytes += ' ';
      } else if (text[i] == '=' && i + 2 < text.size() && Hex(text[i + 1]) >= 0 && Hex(text[i + 2]) >= 0) {
        bytes += static_cast<char>(Hex(text[i + 1]) * 16 + Hex(text[i + 2]));
        i += 2;
      } else if (text[i] == '=') {
        return std::nullopt;
      } else {
        bytes += text[i];
      }
    }
  } else {
    return std::nullopt;
  }
  if (charset == "utf-8" || charset == "utf8" || charset == "us-ascii") {
    if (!IsUtf8(bytes)) return std::nullopt;
    return bytes;
  }
  if (charset == "iso-8859-1" || charset == "latin1") return Latin1ToUtf8(bytes);
  return std::nullopt;
}

}  // namespace

Result<std::string> MetadataValueIn(std::string_view raw) {
  for (size_t i = 0; i < raw.size(); ++i) {
    const auto c = static_cast<unsigned char>(raw[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return InvalidArgument(fmt::format("control character 0x{:02x} at byte {}", c, i));
    }
  }
  std::string text = IsUtf8(raw) ? std::string(raw) : Latin1ToUtf8(raw);
  // Encoded words, separated by white space (which is dropped between two words).
  std::string out;
  size_t i = 0;
  bool last_was_word = false;
  std::string pending_space;
  while (i < text.size()) {
    if (text.compare(i, 2, "=?") == 0) {
      // An encoded word ends at the "?=" after its charset and encoding fields.
      size_t q = text.find('?', i + 2);
      if (q != std::string::npos) q = text.find('?', q + 1);
      const size_t end = q == std::string::npos ? std::string::npos : text.find("?=", q + 1);
      if (end != std::string::npos) {
        if (auto word = DecodeWord(std::string_view(text).substr(i, end + 2 - i))) {
          if (!last_was_word) out += pending_space;
          pending_space.clear();
          out += *word;
          last_was_word = true;
          i = end + 2;
          continue;
        }
      }
    }
    if (text[i] == ' ' || text[i] == '\t') {
      pending_space += text[i++];
      continue;
    }
    out += pending_space;
    pending_space.clear();
    out += text[i++];
    last_was_word = false;
  }
  out += pending_space;
  for (size_t k = 0; k < out.size(); ++k) {
    const auto c = static_cast<unsigned char>(out[k]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return InvalidArgument(fmt::format("control character 0x{:02x} in the decoded value", c));
    }
  }
  return out;
}

std::string MetadataValueOut(std::string_view stored) {
  for (char c : stored) {
    if (static_cast<unsigned char>(c) > 0x7e) return "=?UTF-8?B?" + Base64Encode(stored) + "?=";
  }
  return std::string(stored);
}

}  // namespace aq::s3
