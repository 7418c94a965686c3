// A latency histogram as JSON, in the units results and /stats use.
//
// Thread safety: reads the histogram; the caller owns it.
#pragma once

#include <nlohmann/json.hpp>

#include "common/latency.h"

namespace aq::monitor {

// {"count", "mean_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us"}
nlohmann::json LatencyJson(const LatencyHistogram& h);

}  // namespace aq::monitor
