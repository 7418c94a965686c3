#include "monitor/latency_json.h"

namespace aq::monitor {

nlohmann::json LatencyJson(const LatencyHistogram& h) {
  return {{"count", h.count()},
          {"mean_us", h.mean_ns() / 1e3},
          {"p50_us", h.Quantile(0.50) / 1e3},
          {"p90_us", h.Quantile(0.90) / 1e3},
          {"p99_us", h.Quantile(0.99) / 1e3},
          {"p999_us", h.Quantile(0.999) / 1e3},
          {"max_us", static_cast<double>(h.max_ns()) / 1e3}};
}

}  // namespace aq::monitor
