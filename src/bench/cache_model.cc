#include "bench/cache_model.h"

#include <fmt/format.h>

#include <algorithm>

namespace aq::bench {

Result<CacheModel> ModelCache(const CacheModelInput& in) {
  if (!(in.dataset_bytes > 0)) return InvalidArgument("--dataset must be a positive size");
  if (in.client_cache_bytes < 0 || in.storage_cache_bytes < 0) return InvalidArgument("cache sizes must be >= 0");
  CacheModel m;
  m.client_hit = std::min(1.0, in.client_cache_bytes / in.dataset_bytes);
  m.storage_hit = std::min(1.0, in.storage_cache_bytes / in.dataset_bytes);
  m.storage_media = 1 - m.storage_hit;
  m.media_of_all = (1 - m.client_hit) * m.storage_media;
  return m;
}

Result<CacheMeasurement> MeasureCacheFromResult(const nlohmann::json& r, const std::string& where) {
  CacheMeasurement m;
  m.source = where;
  const auto& summary = r.at("summary");
  // Bytes the bench read: storage bench counts "bytes" in its window; other
  // benches report MB/s over "seconds".
  double seconds = 0;
  if (summary.contains("total_bytes")) {
    m.bench_bytes = summary["total_bytes"].get<double>();
  } else if (summary.contains("bytes_read")) {
    m.bench_bytes = summary["bytes_read"].get<double>();
  } else {
    return InvalidArgument(
        fmt::format("{}: the summary has no byte count (bench storage or bench train results)", where));
  }
  (void)seconds;
  if (!r.contains("series") || !r["series"].is_object()) {
    return InvalidArgument(fmt::format("{}: no monitor series in the result", where));
  }
  const auto& s = r["series"];
  const auto& t = s.at("t");
  for (const auto& c : s.at("columns")) {
    const std::string name = c.at("name").get<std::string>();
    if (name.rfind("disk.", 0) != 0 || name.size() < 10 || name.compare(name.size() - 5, 5, ".read") != 0) continue;
    const auto& v = c.at("values");
    double prev = 0;
    for (size_t i = 0; i < v.size() && i < t.size(); ++i) {
      double ti = t[i].get<double>();
      m.disk_bytes += v[i].get<double>() * 1e6 * (ti - prev);
      prev = ti;
    }
  }
  m.client_hit = m.bench_bytes > 0 ? std::clamp(1 - m.disk_bytes / m.bench_bytes, 0.0, 1.0) : 0;
  if (summary.contains("page_cache_before")) m.residency_before = summary["page_cache_before"].get<double>();
  if (summary.contains("page_cache_after")) m.residency_after = summary["page_cache_after"].get<double>();
  return m;
}

nlohmann::json ToJson(const CacheModelInput& in, const CacheModel& m) {
  return {{"dataset_bytes", in.dataset_bytes},
          {"client_cache_bytes", in.client_cache_bytes},
          {"storage_cache_bytes", in.storage_cache_bytes},
          {"client_hit", m.client_hit},
          {"storage_hit", m.storage_hit},
          {"storage_media", m.storage_media},
          {"media_of_all", m.media_of_all}};
}

}  // namespace aq::bench
