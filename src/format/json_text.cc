#include "format/json_text.h"

#include <fmt/format.h>

#include <string_view>

#include "common/utf8.h"

namespace aq::format {
namespace {

// Each byte b that breaks a string's UTF-8 stands in the tree as the code
// point kMark + b, a private-use character in U+10FF80..U+10FFFF, which
// the text then turns into "\udcXX". A name that really holds one of
// those characters has its bytes escaped too, so the marks are never
// ambiguous, and Python's fsencode still gives the same bytes.
constexpr uint32_t kMark = 0x10FF00;

bool IsMark(std::string_view s, size_t i, size_t n) {
  return n == 4 && static_cast<unsigned char>(s[i]) == 0xF4 && static_cast<unsigned char>(s[i + 1]) == 0x8F &&
         static_cast<unsigned char>(s[i + 2]) >= 0xBE;
}

void AppendMark(unsigned char b, std::string* out) {
  const uint32_t cp = kMark + b;
  *out += static_cast<char>(0xF0 | (cp >> 18));
  *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  *out += static_cast<char>(0x80 | (cp & 0x3F));
}

// The string with its offending bytes as marks; false when none was.
bool Marked(std::string_view s, std::string* out) {
  bool any = false;
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8Sequence(s, i);
    if (n == 0 || IsMark(s, i, n)) {
      if (!any) *out = std::string(s.substr(0, i));
      any = true;
      const size_t bad = n == 0 ? 1 : n;
      for (size_t k = 0; k < bad; ++k) AppendMark(static_cast<unsigned char>(s[i + k]), out);
      i += bad;
      continue;
    }
    if (any) out->append(s.substr(i, n));
    i += n;
  }
  return any;
}

nlohmann::json MarkTree(const nlohmann::json& j, bool* any) {
  if (j.is_string()) {
    std::string m;
    if (!Marked(j.get_ref<const std::string&>(), &m)) return j;
    *any = true;
    return m;
  }
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& x : j) out.push_back(MarkTree(x, any));
    return out;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      std::string key;
      if (Marked(it.key(), &key)) {
        *any = true;
      } else {
        key = it.key();
      }
      out[key] = MarkTree(it.value(), any);
    }
    return out;
  }
  return j;
}

bool Valid(const nlohmann::json& j) {
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    for (size_t i = 0; i < s.size();) {
      const size_t n = Utf8Sequence(s, i);
      if (n == 0 || IsMark(s, i, n)) return false;
      i += n;
    }
    return true;
  }
  if (j.is_array()) {
    for (const auto& x : j) {
      if (!Valid(x)) return false;
    }
    return true;
  }
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      std::string ignored;
      if (Marked(it.key(), &ignored) || !Valid(it.value())) return false;
    }
  }
  return true;
}

// Marks back to the bytes they stand for, in every string and key.
std::string Unmarked(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8Sequence(s, i);
    if (IsMark(s, i, n)) {
      const uint32_t cp =
          ((s[i] & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
      out += static_cast<char>(cp - kMark);
      i += 4;
    } else {
      out += s[i];
      ++i;
    }
  }
  return out;
}

nlohmann::json UnmarkTree(const nlohmann::json& j) {
  if (j.is_string()) return Unmarked(j.get_ref<const std::string&>());
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& x : j) out.push_back(UnmarkTree(x));
    return out;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[Unmarked(it.key())] = UnmarkTree(it.value());
    return out;
  }
  return j;
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

nlohmann::json ParseJson(std::string_view text) {
  // Lone \udc80..\udcff escapes inside strings become marks (raw UTF-8 of
  // U+10FF80..), which nlohmann accepts, then bytes again after parsing.
  std::string marked;
  bool any = false, in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!in_string) {
      if (c == '"') in_string = true;
      if (any) marked += c;
      continue;
    }
    if (c == '"') {
      in_string = false;
    } else if (c == '\\' && i + 1 < text.size()) {
      if (text[i + 1] == 'u' && i + 5 < text.size() && (text[i + 2] == 'd' || text[i + 2] == 'D') &&
          (text[i + 3] == 'c' || text[i + 3] == 'C') && Hex(text[i + 4]) >= 8 && Hex(text[i + 5]) >= 0) {
        if (!any) marked.assign(text.substr(0, i));
        any = true;
        AppendMark(static_cast<unsigned char>(Hex(text[i + 4]) * 16 + Hex(text[i + 5])), &marked);
        i += 5;
        continue;
      }
      if (any) marked += text.substr(i, 2);
      ++i;
      continue;
    }
    if (any) marked += c;
  }
  auto j = nlohmann::json::parse(any ? std::string_view(marked) : text, nullptr, /*allow_exceptions=*/false);
  return any && !j.is_discarded() ? UnmarkTree(j) : j;
}

std::string DumpJson(const nlohmann::json& j, int indent) {
  if (Valid(j)) return j.dump(indent);
  bool any = false;
  const std::string text = MarkTree(j, &any).dump(indent);
  // Marks appear in the text only inside strings, as their raw UTF-8.
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8Sequence(text, i);
    if (IsMark(text, i, n)) {
      const uint32_t cp = ((text[i] & 0x07u) << 18) | ((text[i + 1] & 0x3Fu) << 12) | ((text[i + 2] & 0x3Fu) << 6) |
                          (text[i + 3] & 0x3Fu);
      out += fmt::format("\\udc{:02x}", cp - kMark);
      i += 4;
      continue;
    }
    out += text[i];
    ++i;
  }
  return out;
}

}  // namespace aq::format
