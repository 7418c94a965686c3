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

// Where a result's bytes came from: the title every card carries, so two
// runs of one command (page cache vs a node, say) cannot be mistaken for
// each other, and the warning that page-cache figures are memory speeds.
// The benches print the same on the terminal.
struct DataPath {
  std::string kind;           // "local disk", "page cache", "storage node", "aquifer mount", ...
  std::string where;          // the path or URL and what it is on
  std::string note;           // a caveat to show as a banner; may be empty
  bool memory_speed = false;  // the figures are mostly the page cache's (or RAM's), not the storage's
};
DataPath DescribeDataPath(const nlohmann::json& result);

// Number of <svg class="chart"> elements in a rendered report.
size_t CountCharts(const std::string& html);

}  // namespace aq::report
