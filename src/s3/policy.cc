#include "s3/policy.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace aq::s3 {
namespace {

struct Named {
  const char* name;
  uint8_t actions;
};
constexpr Named kNames[] = {
    {"read", kRead}, {"write", kWrite}, {"delete", kDelete}, {"list", kList}, {"admin", kAdmin},
};
constexpr Named kAliases[] = {
    {"ro", kRead | kList},
    {"rw", kRead | kWrite | kDelete | kList},
    {"all", kAllActions},
};

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool BucketMatches(const Grant& g, std::string_view bucket) { return g.bucket == "*" || g.bucket == bucket; }

}  // namespace

Result<uint8_t> ParseActions(std::string_view text) {
  uint8_t out = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view word = text.substr(pos, comma - pos);
    bool known = false;
    for (const auto& n : kNames) {
      if (word == n.name) out |= n.actions, known = true;
    }
    for (const auto& n : kAliases) {
      if (word == n.name) out |= n.actions, known = true;
    }
    if (!known) {
      return InvalidArgument(
          fmt::format("'{}': not an action (read, write, delete, list, admin; or ro, rw, all), comma-separated", word));
    }
    pos = comma + 1;
  }
  return out;
}

std::string ActionsToString(uint8_t actions) {
  if (actions == kAllActions) return "all";
  std::string out;
  for (const auto& n : kNames) {
    if (actions & n.actions) out += (out.empty() ? "" : ",") + std::string(n.name);
  }
  return out.empty() ? "none" : out;
}

Result<Grant> ParseScope(std::string_view scope, uint8_t actions) {
  Grant g;
  g.actions = actions;
  if (scope == "*") return g;
  const size_t slash = scope.find('/');
  g.bucket = std::string(scope.substr(0, slash));
  if (slash != std::string_view::npos) g.prefix = std::string(scope.substr(slash + 1));
  if (!g.prefix.empty() && g.prefix.back() == '*') g.prefix.pop_back();
  if (g.bucket.empty() || g.bucket == "*" || g.bucket.find('*') != std::string::npos ||
      g.prefix.find('*') != std::string::npos) {
    return InvalidArgument(fmt::format("'{}': a scope is '*', BUCKET or BUCKET/PREFIX", scope));
  }
  return g;
}

std::string ScopeToString(const Grant& g) {
  if (g.bucket == "*") return "*";
  return g.prefix.empty() ? g.bucket : g.bucket + "/" + g.prefix;
}

bool Allows(const std::vector<Grant>& grants, Action action, std::string_view bucket, std::string_view key) {
  for (const auto& g : grants) {
    if ((g.actions & action) && BucketMatches(g, bucket) && StartsWith(key, g.prefix)) return true;
  }
  return false;
}

bool AllowsList(const std::vector<Grant>& grants, std::string_view bucket, std::string_view prefix) {
  return Allows(grants, kList, bucket, prefix);
}

bool AllowsBucket(const std::vector<Grant>& grants, Action action, std::string_view bucket) {
  for (const auto& g : grants) {
    if ((g.actions & action) && BucketMatches(g, bucket) && g.prefix.empty()) return true;
  }
  return false;
}

bool AllowsSome(const std::vector<Grant>& grants, Action action, std::string_view bucket) {
  for (const auto& g : grants) {
    if ((g.actions & action) && BucketMatches(g, bucket)) return true;
  }
  return false;
}

bool Touches(const std::vector<Grant>& grants, std::string_view bucket) {
  for (const auto& g : grants) {
    if (g.actions != 0 && BucketMatches(g, bucket)) return true;
  }
  return false;
}

std::string KeysToJson(const std::vector<StoredKey>& keys) {
  nlohmann::json out = {{"keys", nlohmann::json::array()}};
  for (const auto& k : keys) {
    nlohmann::json grants = nlohmann::json::array();
    for (const auto& g : k.grants) {
      nlohmann::json actions = nlohmann::json::array();
      for (const auto& n : kNames) {
        if (g.actions & n.actions) actions.push_back(n.name);
      }
      grants.push_back({{"bucket", g.bucket}, {"prefix", g.prefix}, {"actions", actions}});
    }
    out["keys"].push_back({{"access_key", k.key.access_key},
                           {"secret", k.key.secret},
                           {"name", k.name},
                           {"created_ns", k.created_ns},
                           {"grants", grants}});
  }
  return out.dump();
}

Result<std::vector<StoredKey>> KeysFromJson(const std::string& json) {
  std::vector<StoredKey> out;
  if (json.empty()) return out;
  const auto j = nlohmann::json::parse(json, nullptr, false);
  auto bad = [](const std::string& why) { return Corruption("the stored keys (setting auth/keys): " + why); };
  if (!j.is_object() || !j.contains("keys") || !j["keys"].is_array()) return bad("not {\"keys\": [...]}");
  for (const auto& e : j["keys"]) {
    if (!e.is_object() || !e.contains("access_key") || !e["access_key"].is_string() || !e.contains("secret") ||
        !e["secret"].is_string()) {
      return bad("a key without access_key and secret");
    }
    StoredKey k;
    k.key.access_key = e["access_key"].get<std::string>();
    k.key.secret = e["secret"].get<std::string>();
    if (e.contains("name") && e["name"].is_string()) k.name = e["name"].get<std::string>();
    if (e.contains("created_ns") && e["created_ns"].is_number_integer()) k.created_ns = e["created_ns"].get<int64_t>();
    if (e.contains("grants")) {
      if (!e["grants"].is_array()) return bad(k.key.access_key + ": grants is not a list");
      for (const auto& ge : e["grants"]) {
        if (!ge.is_object() || !ge.contains("bucket") || !ge["bucket"].is_string() || !ge.contains("actions") ||
            !ge["actions"].is_array()) {
          return bad(k.key.access_key + ": a grant without bucket and actions");
        }
        Grant g;
        g.bucket = ge["bucket"].get<std::string>();
        if (ge.contains("prefix") && ge["prefix"].is_string()) g.prefix = ge["prefix"].get<std::string>();
        for (const auto& a : ge["actions"]) {
          // An action this version does not know grants nothing (never more).
          if (!a.is_string()) continue;
          for (const auto& n : kNames) {
            if (a.get<std::string>() == n.name) g.actions |= n.actions;
          }
        }
        k.grants.push_back(std::move(g));
      }
    }
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace aq::s3
