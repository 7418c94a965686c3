#include "bench/cache_model.h"

#include <fmt/format.h>

#include <algorithm>

namespace aq::bench {

Result<CacheModel> ModelCache(const CacheModelInput& in) {
  if (!(in.dataset_bytes > 0)) return InvalidArgument("the dataset size must be positive");
  if (in.client_cache_bytes < 0 || in.storage_cache_bytes < 0 || in.storage_l3_bytes < 0) {
    return InvalidArgument("cache sizes must be >= 0");
  }
  if (in.staging_reads_per_second < 0 || in.demand_reads_per_second < 0) {
    return InvalidArgument("staging and demand rates must be >= 0");
  }
  CacheModel m;
  m.client_hit = std::min(1.0, in.client_cache_bytes / in.dataset_bytes);
  m.storage_hit = std::min(1.0, in.storage_cache_bytes / in.dataset_bytes);
  m.storage_l3 = std::min(1.0 - m.storage_hit, in.storage_l3_bytes / in.dataset_bytes);
  m.storage_media = 1 - m.storage_hit - m.storage_l3;
  m.media_of_all = (1 - m.client_hit) * m.storage_media;
  if (in.staging_reads_per_second > 0) {
    const double need = in.demand_reads_per_second * m.storage_media;  // media reads per second
    m.storage_staged = need > 0 ? m.storage_media * std::min(1.0, in.staging_reads_per_second / need) : m.storage_media;
  }
  m.storage_waited = m.storage_media - m.storage_staged;
  return m;
}

Result<CacheMeasurement> MeasureCacheFromResult(const nlohmann::json& r, const std::string& where) {
  // A result file is input: every field is checked before use.
  auto number = [](const nlohmann::json& j, const char* key) -> std::optional<double> {
    if (j.is_object() && j.contains(key) && j[key].is_number()) return j[key].get<double>();
    return std::nullopt;
  };
  CacheMeasurement m;
  m.source = where;
  if (!r.is_object() || !r.contains("summary") || !r["summary"].is_object()) {
    return InvalidArgument(fmt::format("{}: no summary object", where));
  }
  const auto& summary = r["summary"];
  // Bytes the bench read: storage bench's total_bytes, train's bytes_read.
  auto bytes = number(summary, "total_bytes");
  if (!bytes) bytes = number(summary, "bytes_read");
  if (!bytes) {
    return InvalidArgument(
        fmt::format("{}: the summary has no byte count (bench storage or bench train results)", where));
  }
  m.bench_bytes = *bytes;
  if (!r.contains("series") || !r["series"].is_object() || !r["series"].contains("t") || !r["series"]["t"].is_array() ||
      !r["series"].contains("columns") || !r["series"]["columns"].is_array()) {
    return InvalidArgument(fmt::format("{}: no monitor series in the result", where));
  }
  const auto& t = r["series"]["t"];
  for (const auto& c : r["series"]["columns"]) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("values") ||
        !c["values"].is_array()) {
      continue;
    }
    const std::string name = c["name"].get<std::string>();
    if (name.rfind("disk.", 0) != 0 || name.size() < 10 || name.compare(name.size() - 5, 5, ".read") != 0) continue;
    const auto& v = c["values"];
    double prev = 0;
    for (size_t i = 0; i < v.size() && i < t.size(); ++i) {
      if (!v[i].is_number() || !t[i].is_number()) continue;
      double ti = t[i].get<double>();
      m.disk_bytes += v[i].get<double>() * 1e6 * (ti - prev);
      prev = ti;
    }
  }
  m.client_hit = m.bench_bytes > 0 ? std::clamp(1 - m.disk_bytes / m.bench_bytes, 0.0, 1.0) : 0;
  m.residency_before = number(summary, "page_cache_before");
  m.residency_after = number(summary, "page_cache_after");
  return m;
}

nlohmann::json ToJson(const CacheModelInput& in, const CacheModel& m) {
  return {{"dataset_bytes", in.dataset_bytes},
          {"client_cache_bytes", in.client_cache_bytes},
          {"storage_cache_bytes", in.storage_cache_bytes},
          {"storage_l3_bytes", in.storage_l3_bytes},
          {"client_hit", m.client_hit},
          {"storage_hit", m.storage_hit},
          {"storage_l3", m.storage_l3},
          {"storage_media", m.storage_media},
          {"media_of_all", m.media_of_all},
          {"staging_reads_per_second", in.staging_reads_per_second},
          {"demand_reads_per_second", in.demand_reads_per_second},
          {"storage_staged", m.storage_staged},
          {"storage_waited", m.storage_waited}};
}

}  // namespace aq::bench
