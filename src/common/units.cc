#include "common/units.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace aq::units {

namespace {
std::string Scaled(double v, const char* suffix) {
  static const char* kPrefix[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (std::fabs(v) >= 1000.0 && i < 5) {
    v /= 1000.0;
    ++i;
  }
  if (i == 0) return fmt::format("{:.0f} {}{}", v, kPrefix[i], suffix);
  return fmt::format("{:.{}f} {}{}", v, v < 10 ? 2 : (v < 100 ? 1 : 0), kPrefix[i], suffix);
}
}  // namespace

std::string Bytes(double bytes) { return Scaled(bytes, "B"); }
std::string Rate(double bps) { return Scaled(bps, "B/s"); }

std::string IecBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return v == std::floor(v) ? fmt::format("{:.0f} {}", v, kUnits[u]) : fmt::format("{:.3g} {}", v, kUnits[u]);
}

std::string Count(double n) {
  std::string s = Scaled(n, "");
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string Duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--";
  if (s < 60) return fmt::format("{:.1f}s", s);
  auto total = static_cast<uint64_t>(s);
  if (total < 3600) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
}

Result<uint64_t> ParseBytes(std::string_view text) {
  std::string t(text);
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  if (i == 0) return InvalidArgument(fmt::format("not a size: '{}'", text));
  double v = std::strtod(t.substr(0, i).c_str(), nullptr);
  std::string suf = t.substr(i);
  for (auto& c : suf) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double mult = 1;
  if (suf.empty() || suf == "b") {
    mult = 1;
  } else {
    static const std::string kUnits = "kmgtp";
    auto pos = kUnits.find(suf[0]);
    if (pos == std::string::npos) return InvalidArgument(fmt::format("unknown size unit in '{}'", text));
    std::string rest = suf.substr(1);
    double base = (rest == "b") ? 1000.0 : 1024.0;  // "MB" is SI; "M" and "MiB" are binary
    if (!(rest.empty() || rest == "b" || rest == "ib")) {
      return InvalidArgument(fmt::format("unknown size unit in '{}'", text));
    }
    mult = std::pow(base, static_cast<double>(pos + 1));
  }
  return static_cast<uint64_t>(v * mult + 0.5);
}

Result<double> ParseDuration(std::string_view text) {
  std::string t(text);
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  char* end = nullptr;
  const std::string number = t.substr(0, i);
  const double v = number.empty() ? 0 : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size()) {
    return InvalidArgument(fmt::format("not a duration: '{}' (e.g. 90s, 15m, 12h, 7d)", text));
  }
  const std::string unit = t.substr(i);
  double mult;
  if (unit.empty() || unit == "s") {
    mult = 1;
  } else if (unit == "us") {
    mult = 1e-6;
  } else if (unit == "ms") {
    mult = 1e-3;
  } else if (unit == "m") {
    mult = 60;
  } else if (unit == "h") {
    mult = 3600;
  } else if (unit == "d") {
    mult = 86400;
  } else if (unit == "w") {
    mult = 7 * 86400;
  } else {
    return InvalidArgument(fmt::format("unknown duration unit in '{}' (us, ms, s, m, h, d or w)", text));
  }
  return v * mult;
}

}  // namespace aq::units
