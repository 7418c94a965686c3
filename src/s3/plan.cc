#include "s3/plan.h"

#include <fmt/format.h>

#include <cctype>
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

std::string PiecesToJson(const std::vector<PlanPiece>& pieces) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : pieces) a.push_back({{"id", p.id}, {"pool", p.pool}, {"size", p.size}, {"crc", p.crc32c}});
  return nlohmann::json{{"pieces", std::move(a)}}.dump();
}

Result<std::vector<PlanPiece>> PiecesFromJson(std::string_view json) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("pieces") || !doc["pieces"].is_array()) {
    return InvalidArgument(R"(a node's share of a plan is {"pieces": [{"id", "pool", "size", "crc"}, ...]})");
  }
  const auto& pieces = doc["pieces"];
  if (pieces.size() > kMaxPlanReads) {
    return InvalidArgument(fmt::format("a plan names at most {} pieces", kMaxPlanReads));
  }
  auto id_ok = [](const std::string& id) {
    if (id.empty() || id.size() > 128) return false;
    for (const unsigned char c : id) {
      if (!std::isalnum(c) && c != '.' && c != '_' && c != '-') return false;
    }
    return true;
  };
  std::vector<PlanPiece> out;
  out.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto& e = pieces[i];
    const bool ok = e.is_object() && e.contains("id") && e["id"].is_string() && e.contains("pool") &&
                    e["pool"].is_string() && e.contains("size") && e["size"].is_number_unsigned() &&
                    e.contains("crc") && e["crc"].is_number_unsigned() && e["crc"].get<uint64_t>() <= UINT32_MAX;
    PlanPiece p;
    if (ok) {
      p.id = e["id"].get<std::string>();
      p.pool = e["pool"].get<std::string>();
      p.size = e["size"].get<uint64_t>();
      p.crc32c = static_cast<uint32_t>(e["crc"].get<uint64_t>());
    }
    if (!ok || !id_ok(p.id)) {
      return InvalidArgument(fmt::format(
          "piece {} of the plan: expected id ([0-9A-Za-z._-], 1 to 128), pool (string), size and crc (unsigned)", i));
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace aq::s3
