#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace aq::report {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"};

// Axis and bar numbers: short, and never in exponent notation.
std::string Num(double v) {
  if (!std::isfinite(v)) return "";
  double a = std::fabs(v);
  static const char* kPrefix[] = {"k", "M", "G", "T", "P"};
  if (a >= 1e4) {
    int i = -1;
    while (a >= 1e3 && i < 4) {
      a /= 1e3;
      v /= 1e3;
      ++i;
    }
    std::string n = fmt::format("{:.{}f}", v, a < 10 ? 2 : (a < 100 ? 1 : 0));
    if (n.find('.') != std::string::npos) {  // "10.0k" -> "10k", "2.50M" -> "2.5M"
      while (n.back() == '0') n.pop_back();
      if (n.back() == '.') n.pop_back();
    }
    return n + kPrefix[i];
  }
  if (a >= 100 || v == std::floor(v)) return fmt::format("{:.0f}", v);
  if (a >= 0.01) return fmt::format("{:.3g}", v);
  if (a < 1e-9) return "0";
  // Enough decimals for two significant digits.
  int decimals = static_cast<int>(std::ceil(-std::log10(a))) + 1;
  return fmt::format("{:.{}f}", v, decimals);
}

// Width of a text in pixels at a font size, estimated on the wide side
// (system-ui averages about 0.55 em a character; digits and capitals more),
// so that layout leaves room rather than clipping. UTF-8 continuation bytes
// do not count.
double TextWidth(const std::string& s, double font_px) {
  double n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) == 0x80) continue;
    n += (c >= 'A' && c <= 'Z') || c == 'm' || c == 'w' || c == 'M' || c == 'W' ? 0.85 : 0.6;
  }
  return n * font_px;
}

}  // namespace

std::string EscapeXml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!std::isfinite(lo)) lo = 0;
  if (!std::isfinite(hi)) hi = lo + 1;
  if (!(hi > lo)) hi = lo + 1;
  double raw = (hi - lo) / std::max(1, target);
  double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> t;
  // Values so large (or a range so narrow) that steps vanish in rounding get
  // just their ends.
  if (!std::isfinite(step) || step <= 0 || lo + step == lo || hi + step == hi) return {lo, hi};
  for (double v = std::floor(lo / step) * step; v <= hi + step * 1e-9 && t.size() < 100; v += step) t.push_back(v);
  if (t.empty()) return {lo, hi};
  if (t.back() < hi) t.push_back(t.back() + step);
  return t;
}

namespace {

// Where everything of a line chart goes: the data's range rounded to its
// ticks, the margins the texts around the plot need (the widest y tick,
// half the last x tick, the title and the legend's rows) and each legend
// entry's place.
struct LineLayout {
  std::vector<double> xt, yt;  // ticks; their ends are the axes' ranges
  double W = 640, H = 0, L = 0, R = 0, T = 0, B = 48;
  struct Point {
    double x, y;
  };
  std::vector<Point> legend;

  double Px(double x) const { return L + (x - xt.front()) / (xt.back() - xt.front()) * (W - L - R); }
  double Py(double y) const { return H - B - (y - yt.front()) / (yt.back() - yt.front()) * (H - T - B); }
};

bool Finite(const Line& l, size_t i) { return std::isfinite(l.x[i]) && std::isfinite(l.y[i]); }

LineLayout LayOut(const LineChart& c) {
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const auto& l : c.lines) {
    for (size_t i = 0; i < l.x.size() && i < l.y.size(); ++i) {
      if (!Finite(l, i)) continue;
      xmin = std::min(xmin, l.x[i]);
      xmax = std::max(xmax, l.x[i]);
      ymin = std::min(ymin, l.y[i]);
      ymax = std::max(ymax, l.y[i]);
    }
  }
  if (!std::isfinite(xmin)) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  if (c.y_from_zero) ymin = std::min(0.0, ymin);
  LineLayout g;
  g.xt = NiceTicks(xmin, xmax);
  g.yt = NiceTicks(ymin, ymax);
  double widest_tick = 0;
  for (double v : g.yt) widest_tick = std::max(widest_tick, TextWidth(Num(v), 11));
  g.W = std::max(640.0, 16 + TextWidth(c.title, 13));
  g.L = 30 + widest_tick;
  g.R = std::max(16.0, TextWidth(Num(g.xt.back()), 11) / 2 + 6);
  double lx = g.L, ly = 36;
  for (const auto& l : c.lines) {
    double w = 20 + TextWidth(l.name, 11);
    if (lx > g.L && lx + w > g.W - 4) lx = g.L, ly += 16;
    g.legend.push_back({lx, ly});
    lx += w + 14;
  }
  g.T = g.legend.empty() ? 30 : ly + 12;
  g.H = g.T + 226 + g.B;
  return g;
}

// The title, grid, ticks, axis and axis labels.
std::string Frame(const LineChart& c, const LineLayout& g) {
  const double W = g.W, H = g.H, L = g.L, R = g.R, T = g.T, B = g.B;
  std::string s = fmt::format(
      "<svg class=\"chart line\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"{}\" "
      "height=\"{}\" role=\"img\" aria-label=\"{}\">\n",
      W, H, W, H, EscapeXml(c.title));
  s += fmt::format("<text x=\"8\" y=\"18\" class=\"title\">{}</text>\n", EscapeXml(c.title));
  for (double v : g.yt) {
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>", L, W - R, g.Py(v),
                     g.Py(v));
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>\n", L - 6, g.Py(v) + 4,
                     Num(v));
  }
  for (double v : g.xt) {
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n", g.Px(v),
                     H - B + 20, Num(v));
  }
  s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" class=\"axis\"/>\n", L, W - R, H - B, H - B);
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"label\" text-anchor=\"middle\">{}</text>\n", (L + W - R) / 2, H - 6,
                   EscapeXml(c.x_label));
  s += fmt::format(
      "<text x=\"14\" y=\"{}\" class=\"label\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{}"
      "</text>\n",
      (T + H - B) / 2, (T + H - B) / 2, EscapeXml(c.y_label));
  return s;
}

// One line: its polyline, its points when few enough to mark (with their
// values as tooltips) and its legend entry.
std::string Series(const Line& l, const char* color, const LineLayout& g, LineLayout::Point at) {
  std::string pts;
  for (size_t i = 0; i < l.x.size() && i < l.y.size(); ++i) {
    if (Finite(l, i)) pts += fmt::format("{:.1f},{:.1f} ", g.Px(l.x[i]), g.Py(l.y[i]));
  }
  std::string s =
      fmt::format("<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n",
                  color, l.dashed ? " stroke-dasharray=\"5 4\"" : "", pts);
  if (l.x.size() <= 12) {
    for (size_t i = 0; i < l.x.size() && i < l.y.size(); ++i) {
      if (!Finite(l, i)) continue;
      s += fmt::format(
          "<circle class=\"series\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{}: {}</title></circle>",
          g.Px(l.x[i]), g.Py(l.y[i]), color, Num(l.x[i]), Num(l.y[i]));
    }
  }
  s += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"3\" fill=\"{}\"/>"
      "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"legend\">{}</text>\n",
      at.x, at.y - 4, color, at.x + 20, at.y, EscapeXml(l.name));
  return s;
}

}  // namespace

std::string RenderSvg(const LineChart& c) {
  const LineLayout g = LayOut(c);
  std::string s = Frame(c, g);
  for (size_t k = 0; k < c.lines.size(); ++k) {
    s += Series(c.lines[k], kColors[k % std::size(kColors)], g, g.legend[k]);
  }
  return s + "</svg>\n";
}

std::string RenderSvg(const BarChart& c) {
  double max = c.max;
  for (const auto& b : c.bars) max = std::max(max, b.value);
  if (!(max > 0)) max = 1;
  std::vector<std::string> texts;
  double label_w = 0, text_w = 0;
  for (const auto& b : c.bars) {
    texts.push_back(b.text.empty() ? Num(b.value) + (c.unit.empty() ? "" : " " + c.unit) : b.text);
    label_w = std::max(label_w, TextWidth(b.label, 11));
    text_w = std::max(text_w, TextWidth(texts.back(), 11));
  }
  // The label column and the space after the longest bar fit their texts.
  const double L = 16 + label_w, R = 14 + text_w, row = 26, T = 30;
  const double W = std::max({640.0, L + R + 280, 16 + TextWidth(c.title, 13)});
  const double H = T + row * static_cast<double>(c.bars.size()) + 10;
  std::string s = fmt::format(
      "<svg class=\"chart bar\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"{}\" "
      "height=\"{}\" role=\"img\" aria-label=\"{}\">\n",
      W, H, W, H, EscapeXml(c.title));
  s += fmt::format("<text x=\"8\" y=\"18\" class=\"title\">{}</text>\n", EscapeXml(c.title));
  for (size_t i = 0; i < c.bars.size(); ++i) {
    const auto& b = c.bars[i];
    double y = T + row * static_cast<double>(i);
    double w = (std::isfinite(b.value) ? std::max(0.0, std::min(b.value, max)) : 0) / max * (W - L - R);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>", L - 8, y + 15,
                     EscapeXml(b.label));
    s += fmt::format("<rect class=\"series\" x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"18\" fill=\"{}\"/>", L,
                     y + 2, std::max(w, 1.0), kColors[i % std::size(kColors)]);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\">{}</text>\n", L + w + 6, y + 15,
                     EscapeXml(texts[i]));
  }
  return s + "</svg>\n";
}

}  // namespace aq::report
