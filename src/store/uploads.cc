#include "store/uploads.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace aq::store {

namespace {

std::string SettingName(const std::string& bucket) { return "lifecycle/" + bucket; }

}  // namespace

Result<std::vector<UploadRule>> LoadUploadRules(MetaStore& meta, const std::string& bucket) {
  auto text = meta.GetSetting(SettingName(bucket));
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return std::vector<UploadRule>{};
    return text.status();
  }
  if (text->empty()) return std::vector<UploadRule>{};
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) {
    return Corruption(fmt::format("the lifecycle rules of bucket '{}' are not a JSON array", bucket));
  }
  std::vector<UploadRule> out;
  for (const auto& r : j) {
    if (!r.is_object() || !r.contains("days") || !r["days"].is_number_unsigned()) {
      return Corruption(fmt::format("a lifecycle rule of bucket '{}' is malformed: {}", bucket, r.dump()));
    }
    UploadRule u;
    u.id = r.value("id", "");
    u.prefix = r.value("prefix", "");
    u.enabled = r.value("enabled", true);
    u.days = r["days"].get<uint32_t>();
    out.push_back(std::move(u));
  }
  return out;
}

Status SaveUploadRules(MetaStore& meta, const std::string& bucket, const std::vector<UploadRule>& rules) {
  if (rules.empty()) return meta.PutSetting(SettingName(bucket), "");
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : rules) {
    j.push_back({{"id", r.id}, {"prefix", r.prefix}, {"enabled", r.enabled}, {"days", r.days}});
  }
  return meta.PutSetting(SettingName(bucket), j.dump());
}

double UploadAgeLimit(const std::vector<UploadRule>& rules, const std::string& key, const UploadExpiryOptions& o) {
  double limit = o.max_age_s;
  for (const auto& r : rules) {
    if (!r.enabled || key.compare(0, r.prefix.size(), r.prefix) != 0) continue;
    const double age = r.days * o.day_s;
    if (limit <= 0 || age < limit) limit = age;
  }
  return limit;
}

Result<UploadSweep> ExpireUploads(ObjectStore& objects, const UploadExpiryOptions& o, int64_t now_ns) {
  MetaStore& meta = objects.meta();
  UploadSweep sweep;
  for (const auto& bucket : AQ_TRY(meta.ListBuckets())) {
    auto rules = LoadUploadRules(meta, bucket.name);
    if (!rules.ok()) {  // the node's limit still applies
      ++sweep.errors;
      sweep.last_error = std::string(rules.status().message());
      rules = std::vector<UploadRule>{};
    }
    auto uploads = meta.ListUploads(bucket.name);
    if (!uploads.ok()) {
      if (uploads.status().code() == StatusCode::kNotFound) continue;  // deleted meanwhile
      return uploads.status();
    }
    for (const auto& u : *uploads) {
      const double age = static_cast<double>(now_ns - u.created_ns) / 1e9;
      const double limit = UploadAgeLimit(*rules, u.key, o);
      // Its parts, for the stats and the bytes an abort frees.
      uint64_t parts = 0, bytes = 0;
      if (auto full = meta.GetUpload(u.id); full.ok()) {
        parts = full->parts.size();
        for (const auto& p : full->parts) bytes += p.size;
      }
      if (limit > 0 && age > limit) {
        Status s = objects.AbortUpload(u.id, u.bucket, u.key);
        if (s.ok()) {
          ++sweep.expired;
          sweep.expired_bytes += bytes;
          continue;
        }
        if (s.code() == StatusCode::kNotFound) continue;  // completed or aborted meanwhile
        ++sweep.errors;
        sweep.last_error = fmt::format("abort upload {} of {}/{}: {}", u.id, u.bucket, u.key, s.message());
      }
      ++sweep.in_progress;
      sweep.parts += parts;
      sweep.part_bytes += bytes;
      sweep.oldest_age_s = std::max(sweep.oldest_age_s, age);
    }
  }
  return sweep;
}

}  // namespace aq::store
