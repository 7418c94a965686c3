#include "format/index_text.h"

#include <fmt/format.h>

#include <charconv>

namespace aq::format {

Status ForEachIndexLine(std::string_view text, std::string_view name, std::string_view expected,
                        const std::function<Status(size_t line_no, uint64_t a, uint64_t b)>& fn) {
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) continue;
    uint64_t a = 0, b = 0;
    const char* end = line.data() + line.size();
    auto r1 = std::from_chars(line.data(), end, a);
    const char* p = r1.ptr;
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    auto r2 = std::from_chars(p, end, b);
    if (r1.ec != std::errc() || p == r1.ptr || r2.ec != std::errc() || r2.ptr != end) {
      return Corruption(
          fmt::format("{}: line {}: expected '{}', got '{}'", name, line_no, expected, line.substr(0, 80)));
    }
    AQ_TRY(fn(line_no, a, b));
  }
  return Status::Ok();
}

}  // namespace aq::format
