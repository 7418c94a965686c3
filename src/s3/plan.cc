#include "s3/plan.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace aq::s3 {

std::string PlanToJson(const std::vector<PlanRead>& reads) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : reads) {
    nlohmann::json e = {{"bucket", r.bucket}, {"key", r.key}};
    if (r.offset != 0) e["offset"] = r.offset;
    if (r.length != UINT64_MAX) e["length"] = r.length;
    a.push_back(std::move(e));
  }
  return nlohmann::json{{"reads", std::move(a)}}.dump();
}

Result<std::vector<PlanRead>> PlanFromJson(std::string_view json) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("reads") || !doc["reads"].is_array()) {
    return InvalidArgument(R"(a plan is {"reads": [{"bucket", "key", "offset", "length"}, ...]})");
  }
  const auto& reads = doc["reads"];
  if (reads.size() > kMaxPlanReads) return InvalidArgument(fmt::format("a plan names at most {} reads", kMaxPlanReads));
  std::vector<PlanRead> out;
  out.reserve(reads.size());
  for (size_t i = 0; i < reads.size(); ++i) {
    const auto& e = reads[i];
    PlanRead r;
    bool ok =
        e.is_object() && e.contains("bucket") && e["bucket"].is_string() && e.contains("key") && e["key"].is_string();
    if (ok) {
      r.bucket = e["bucket"].get<std::string>();
      r.key = e["key"].get<std::string>();
      for (auto [name, field] : {std::pair{"offset", &r.offset}, std::pair{"length", &r.length}}) {
        if (!e.contains(name)) continue;
        if (!e[name].is_number_unsigned()) {
          ok = false;
        } else {
          *field = e[name].get<uint64_t>();
        }
      }
    }
    if (!ok || r.bucket.empty() || r.key.empty()) {
      return InvalidArgument(fmt::format(
          "read {} of the plan: expected bucket and key (strings) and optional offset and length (unsigned integers)",
          i));
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace aq::s3
