// aquifer report: one self-contained HTML file from result JSON files, with
// the plots people would rather look at than read: throughput over time,
// scaling curves, accelerator utilisation, stage utilisation, cache
// fractions, the sizing answer and the machine's monitor series. Charts are
// inline SVG (report/svg.h); nothing is fetched when the file is opened.
//
// Thread safety: reentrant.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace aq::report {

struct Input {
  std::string path;  // shown as the source
  nlohmann::json result;
};

// REQUIRES: each result passed bench::ValidateResult.
std::string RenderHtml(const std::vector<Input>& inputs, const std::string& title);

// The same results as a one-screen text summary: one line per result with
// its key figure and verdict (what `aquifer report` prints).
std::string TextSummary(const std::vector<Input>& inputs);

// Number of <svg class="chart"> elements in a rendered report.
size_t CountCharts(const std::string& html);

}  // namespace aq::report
