#include "node/key_admin.h"

#include <fmt/format.h>

#include <algorithm>

#include "cluster/membership.h"
#include "s3/auth.h"

namespace aq::node {
namespace {

s3::StoredKey* FindKey(std::vector<s3::StoredKey>& keys, const std::string& id) {
  for (auto& k : keys) {
    if (k.key.access_key == id) return &k;
  }
  return nullptr;
}

Status NoSuchKey(const std::string& id) {
  return NotFound(
      fmt::format("no stored key '{}' (aquifer key list shows them; the keys of a node's credentials "
                  "file are not stored keys)",
                  id));
}

}  // namespace

void AddGrant(std::vector<s3::Grant>& grants, const s3::Grant& g) {
  for (auto& x : grants) {
    if (x.bucket == g.bucket && x.prefix == g.prefix) {
      x.actions |= g.actions;
      return;
    }
  }
  grants.push_back(g);
}

std::string DescribeGrants(const std::vector<s3::Grant>& grants) {
  if (grants.empty()) return "nothing";
  std::string out;
  for (const auto& g : grants) {
    out += fmt::format("{}{} on {}", out.empty() ? "" : "; ", s3::ActionsToString(g.actions), s3::ScopeToString(g));
  }
  return out;
}

Status KeyAdmin::Update(const std::function<Status(std::vector<s3::StoredKey>&)>& change) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    std::string before;
    if (auto v = meta_->GetSetting(s3::kKeysSetting); v.ok()) {
      before = *v;
    } else if (v.status().code() != StatusCode::kNotFound) {
      return v.status();
    }
    auto keys = AQ_TRY(s3::KeysFromJson(before));
    AQ_TRY(change(keys));
    if (AQ_TRY(meta_->SwapSetting(s3::kKeysSetting, before, keys.empty() ? "" : s3::KeysToJson(keys)))) {
      return Status::Ok();
    }
  }
  return Conflict("the stored keys kept changing under this command (another administrator?); try again");
}

Result<std::vector<s3::StoredKey>> KeyAdmin::List() {
  auto v = meta_->GetSetting(s3::kKeysSetting);
  if (!v.ok() && v.status().code() == StatusCode::kNotFound) return std::vector<s3::StoredKey>{};
  if (!v.ok()) return v.status();
  return s3::KeysFromJson(*v);
}

Result<s3::StoredKey> KeyAdmin::Add(const std::string& name, const std::vector<s3::Grant>& grants,
                                    const std::function<Status(const s3::StoredKey&)>& before_store) {
  s3::StoredKey k;
  k.key = AQ_TRY(s3::NewCredential());
  if (k.key.access_key == cluster::kNodeAccessKey) return Internal("a new key collided with the node key's id");
  k.name = name;
  k.created_ns = clock_->WallNanos();
  for (const auto& g : grants) AddGrant(k.grants, g);
  if (before_store) AQ_TRY(before_store(k));
  AQ_TRY(Update([&](std::vector<s3::StoredKey>& keys) {
    keys.push_back(k);
    return Status::Ok();
  }));
  return k;
}

Status KeyAdmin::Remove(const std::string& access_key) {
  return Update([&](std::vector<s3::StoredKey>& keys) {
    if (FindKey(keys, access_key) == nullptr) return NoSuchKey(access_key);
    std::erase_if(keys, [&](const s3::StoredKey& k) { return k.key.access_key == access_key; });
    return Status::Ok();
  });
}

Result<std::vector<s3::Grant>> KeyAdmin::Grant(const std::string& access_key, const s3::Grant& grant) {
  std::vector<s3::Grant> now;
  AQ_TRY(Update([&](std::vector<s3::StoredKey>& keys) {
    auto* k = FindKey(keys, access_key);
    if (k == nullptr) return NoSuchKey(access_key);
    AddGrant(k->grants, grant);
    now = k->grants;
    return Status::Ok();
  }));
  return now;
}

Result<std::vector<s3::Grant>> KeyAdmin::Revoke(const std::string& access_key, const s3::Grant& revoke) {
  std::vector<s3::Grant> now;
  AQ_TRY(Update([&](std::vector<s3::StoredKey>& keys) {
    auto* k = FindKey(keys, access_key);
    if (k == nullptr) return NoSuchKey(access_key);
    bool found = false;
    for (auto& x : k->grants) {
      if (x.bucket == revoke.bucket && x.prefix == revoke.prefix) {
        x.actions &= static_cast<uint8_t>(~revoke.actions);
        found = true;
      }
    }
    if (!found) {
      return NotFound(fmt::format("key {} has no grant on {} (it may do {})", access_key, s3::ScopeToString(revoke),
                                  DescribeGrants(k->grants)));
    }
    std::erase_if(k->grants, [](const s3::Grant& x) { return x.actions == 0; });
    now = k->grants;
    return Status::Ok();
  }));
  return now;
}

std::vector<std::string> KeyAdmin::MissingBuckets(const std::vector<s3::Grant>& grants) {
  std::vector<std::string> out;
  auto buckets = meta_->ListBuckets();
  if (!buckets.ok()) return out;  // a note, not a verdict: nothing to say when the list fails
  for (const auto& g : grants) {
    if (g.bucket == "*") continue;
    const bool found = std::any_of(buckets->begin(), buckets->end(), [&](const auto& b) { return b.name == g.bucket; });
    if (!found && std::find(out.begin(), out.end(), g.bucket) == out.end()) out.push_back(g.bucket);
  }
  return out;
}

}  // namespace aq::node
