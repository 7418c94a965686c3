#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace aq::report {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"};

std::string Num(double v) {
  double a = std::fabs(v);
  if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:.3g}k", v / 1e3);
  if (a >= 100 || v == std::floor(v)) return fmt::format("{:.0f}", v);
  return fmt::format("{:.3g}", v);
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

std::string RenderSvg(const LineChart& c) {
  const double W = 640, H = 300, L = 64, R = 16, T = 30, B = 44;
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const auto& l : c.lines) {
    for (size_t i = 0; i < l.x.size() && i < l.y.size(); ++i) {
      if (!std::isfinite(l.x[i]) || !std::isfinite(l.y[i])) continue;
      xmin = std::min(xmin, l.x[i]);
      xmax = std::max(xmax, l.x[i]);
      ymin = std::min(ymin, l.y[i]);
      ymax = std::max(ymax, l.y[i]);
    }
  }
  if (!std::isfinite(xmin)) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  if (c.y_from_zero) ymin = std::min(0.0, ymin);
  auto xt = NiceTicks(xmin, xmax), yt = NiceTicks(ymin, ymax);
  xmin = xt.front(), xmax = xt.back(), ymin = yt.front(), ymax = yt.back();
  auto px = [&](double x) { return L + (x - xmin) / (xmax - xmin) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - ymin) / (ymax - ymin) * (H - T - B); };
  std::string s = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
      "role=\"img\" aria-label=\"{}\">\n",
      W, H, W, H, EscapeXml(c.title));
  s += fmt::format("<text x=\"{}\" y=\"18\" class=\"title\">{}</text>\n", L, EscapeXml(c.title));
  for (double v : yt) {
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>", L, W - R, py(v), py(v));
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>\n", L - 6, py(v) + 4,
                     Num(v));
  }
  for (double v : xt) {
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n", px(v), H - B + 16,
                     Num(v));
  }
  s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" class=\"axis\"/>\n", L, W - R, H - B, H - B);
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"label\" text-anchor=\"middle\">{}</text>\n", (L + W - R) / 2, H - 6,
                   EscapeXml(c.x_label));
  s += fmt::format(
      "<text x=\"14\" y=\"{}\" class=\"label\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{}"
      "</text>\n",
      (T + H - B) / 2, (T + H - B) / 2, EscapeXml(c.y_label));
  double lx = L + 8;
  for (size_t k = 0; k < c.lines.size(); ++k) {
    const auto& l = c.lines[k];
    const char* color = kColors[k % std::size(kColors)];
    std::string pts;
    for (size_t i = 0; i < l.x.size() && i < l.y.size(); ++i) {
      if (!std::isfinite(l.x[i]) || !std::isfinite(l.y[i])) continue;
      pts += fmt::format("{:.1f},{:.1f} ", px(l.x[i]), py(l.y[i]));
    }
    s += fmt::format("<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n",
                     color, l.dashed ? " stroke-dasharray=\"5 4\"" : "", pts);
    if (l.x.size() <= 12) {
      for (size_t i = 0; i < l.x.size() && i < l.y.size(); ++i) {
        if (!std::isfinite(l.x[i]) || !std::isfinite(l.y[i])) continue;
        s += fmt::format(
            "<circle class=\"series\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{}: {}</title></circle>",
            px(l.x[i]), py(l.y[i]), color, Num(l.x[i]), Num(l.y[i]));
      }
    }
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{}\" width=\"12\" height=\"3\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{}\" class=\"legend\">{}</text>\n",
        lx, T - 4, color, lx + 16, T, EscapeXml(l.name));
    lx += 26 + 6.5 * static_cast<double>(l.name.size());
  }
  return s + "</svg>\n";
}

std::string RenderSvg(const BarChart& c) {
  const double W = 640, L = 180, R = 90, row = 26, T = 30;
  const double H = T + row * static_cast<double>(c.bars.size()) + 10;
  double max = c.max;
  for (const auto& b : c.bars) max = std::max(max, b.value);
  if (!(max > 0)) max = 1;
  std::string s = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
      "role=\"img\" aria-label=\"{}\">\n",
      W, H, W, H, EscapeXml(c.title));
  s += fmt::format("<text x=\"8\" y=\"18\" class=\"title\">{}</text>\n", EscapeXml(c.title));
  for (size_t i = 0; i < c.bars.size(); ++i) {
    const auto& b = c.bars[i];
    double y = T + row * static_cast<double>(i);
    double w = std::max(0.0, b.value) / max * (W - L - R);
    std::string text = b.text.empty() ? Num(b.value) + (c.unit.empty() ? "" : " " + c.unit) : b.text;
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>", L - 8, y + 15,
                     EscapeXml(b.label));
    s += fmt::format("<rect class=\"series\" x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"18\" fill=\"{}\"/>", L,
                     y + 2, std::max(w, 1.0), kColors[i % std::size(kColors)]);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\">{}</text>\n", L + w + 6, y + 15, EscapeXml(text));
  }
  return s + "</svg>\n";
}

}  // namespace aq::report
