// One result format for every bench (docs/results-format.md): what was run
// (command line, version, time), where (machine facts, file system of each
// data root), how (config), what came out (summary) and how it went over
// time (series from the monitor). `--out DIR` writes it as JSON plus CSV
// (the summary flattened to key,value, and the series one row per second),
// and `aquifer report` reads the JSON back.
//
// Thread safety: reentrant.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "monitor/sampler.h"

namespace aq::bench {

inline constexpr const char* kResultSchema = "aquifer-result/1";

struct ResultInfo {
  std::string command;             // "bench storage", "bench train", ...
  std::vector<std::string> argv;   // as typed
  std::vector<std::string> roots;  // data roots, for machine facts
};

// The envelope; `series` may be null (commands that do not sample).
nlohmann::json MakeResult(const ResultInfo& info, nlohmann::json config, nlohmann::json summary,
                          const monitor::Series* series);

// Writes DIR/<stem>.json, DIR/<stem>.csv and, with a series,
// DIR/<stem>-series.csv, where stem is the command and the start time
// ("bench-storage-20261122-173000"). Returns the JSON path.
Result<std::string> WriteResult(const std::string& dir, const nlohmann::json& result);

// Checks the fields every result has; names the first one missing.
Status ValidateResult(const nlohmann::json& result, const std::string& where);

// The series as CSV: t,<column>,... one row per sample.
std::string SeriesCsv(const nlohmann::json& series);
// A JSON object flattened to "a.b.c,value" lines (arrays of scalars joined by ';').
std::string FlatCsv(const nlohmann::json& object);

std::string Version();

}  // namespace aq::bench
