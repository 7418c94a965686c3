// Charts as inline SVG, generated here so a report is one self-contained
// HTML file that renders anywhere without a network or a script: line
// charts (time series, scaling curves) and horizontal bar charts.
//
// Thread safety: reentrant.
#pragma once

#include <string>
#include <vector>

namespace aq::report {

struct Line {
  std::string name;
  std::vector<double> x, y;
  bool dashed = false;  // reference lines (ideal scaling, thresholds)
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Line> lines;
  bool y_from_zero = true;
};

struct Bar {
  std::string label;
  double value = 0;
  std::string text;  // shown after the bar; default: the value
};

struct BarChart {
  std::string title, unit;
  std::vector<Bar> bars;
  double max = 0;  // axis maximum; 0 = from the data
};

std::string RenderSvg(const LineChart& chart);
std::string RenderSvg(const BarChart& chart);

// "Nice" axis ticks (1, 2, 5 x 10^k) covering [lo, hi].
std::vector<double> NiceTicks(double lo, double hi, int target = 5);
std::string EscapeXml(const std::string& s);

}  // namespace aq::report
