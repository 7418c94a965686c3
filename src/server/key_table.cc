#include "server/key_table.h"

#include <algorithm>

#include "common/log.h"

namespace aq::server {

KeyTable::KeyTable(std::vector<s3::Credential> admin_keys, s3::Credential node_key, store::MetaStore* meta,
                   double refresh_s, double miss_refresh_s)
    : node_key_(std::move(node_key)), meta_(meta), refresh_s_(refresh_s), miss_refresh_s_(miss_refresh_s) {
  auto admin = std::make_shared<const std::vector<s3::Credential>>(std::move(admin_keys));
  auto first = Read(*admin);
  if (!first) {
    // Unreadable at start: only the file's and the node's keys.
    auto snap = std::make_shared<KeySnapshot>();
    AddFixedKeys(*snap, *admin);
    first = snap;
  }
  MutexLock lock(mu_);
  admin_keys_ = std::move(admin);
  current_ = std::move(first);
  read_at_ = Clock::Real().Now();
}

void KeyTable::SetAdminKeys(std::vector<s3::Credential> admin_keys) {
  auto admin = std::make_shared<const std::vector<s3::Credential>>(std::move(admin_keys));
  MutexLock lock(mu_);
  // The stored keys as last read, the old file's keys out, the new ones in.
  // A stored key an old file key hid comes back at the next read, which is
  // due at once.
  auto snap = std::make_shared<KeySnapshot>(*current_);
  std::erase_if(snap->keys, [](const auto& kv) { return kv.second.kind == KeyEntry::Kind::kAdmin; });
  AddFixedKeys(*snap, *admin);
  admin_keys_ = std::move(admin);
  ++admin_generation_;
  current_ = std::move(snap);
  reread_ = true;  // not read_at_ = 0: the clock's zero is the boot, maybe minutes ago
}

void KeyTable::AddFixedKeys(KeySnapshot& snap, const std::vector<s3::Credential>& admin_keys) const {
  for (const auto& c : admin_keys) snap.keys[c.access_key] = KeyEntry{c, KeyEntry::Kind::kAdmin, {}};
  if (!node_key_.access_key.empty()) snap.keys[node_key_.access_key] = KeyEntry{node_key_, KeyEntry::Kind::kNode, {}};
}

std::shared_ptr<const KeySnapshot> KeyTable::Read(const std::vector<s3::Credential>& admin_keys) {
  auto snap = std::make_shared<KeySnapshot>();
  if (meta_ != nullptr) {
    auto text = meta_->GetSetting(s3::kKeysSetting);
    Result<std::vector<s3::StoredKey>> stored = std::vector<s3::StoredKey>{};
    if (text.ok()) {
      stored = s3::KeysFromJson(*text);
    } else if (text.status().code() != StatusCode::kNotFound) {
      stored = text.status();
    }
    if (!stored.ok()) {
      // Keep what was in force: an etcd outage must not lock every user
      // out, nor a damaged record let anyone in.
      if (!warned_.exchange(true)) {
        log::warn("stored keys unreadable, the last ones read stay in force: {}", stored.status().ToString());
      }
      return nullptr;
    }
    warned_ = false;
    for (auto& k : *stored)
      snap->keys[k.key.access_key] = KeyEntry{k.key, KeyEntry::Kind::kStored, std::move(k.grants)};
  }
  AddFixedKeys(*snap, admin_keys);  // last: they win over a stored key of the same id
  return snap;
}

std::shared_ptr<const KeySnapshot> KeyTable::Get(const std::string* access_key) {
  const double now = Clock::Real().Now();
  std::shared_ptr<const std::vector<s3::Credential>> admin;
  uint64_t generation = 0;
  {
    MutexLock lock(mu_);
    const double age = now - read_at_;
    // A key not known yet is looked up at once (it may have been added a
    // moment ago), from a budget refilled at one per miss_refresh_s (burst
    // kMissBurst), so a flood of made-up keys cannot hammer the metadata.
    miss_budget_ = std::min(kMissBurst, miss_budget_ + (now - budget_at_) / std::max(miss_refresh_s_, 1e-3));
    budget_at_ = now;
    bool miss = false;
    if (access_key != nullptr && current_->Find(*access_key) == nullptr && miss_budget_ >= 1) {
      miss = true;
      miss_budget_ -= 1;
    }
    const bool stale = meta_ != nullptr && (age >= refresh_s_ || miss || reread_);
    if (!stale || reloading_) return current_;
    reloading_ = true;
    reread_ = false;
    read_at_ = now;
    admin = admin_keys_;
    generation = admin_generation_;
  }
  auto snap = Read(*admin);
  MutexLock lock(mu_);
  reloading_ = false;
  // Read with the file's keys of before a SetAdminKeys meanwhile: dropped
  // (the next request reads again).
  if (snap && generation == admin_generation_) current_ = std::move(snap);
  return current_;
}

std::shared_ptr<const KeySnapshot> KeyTable::Current() { return Get(nullptr); }

std::shared_ptr<const KeySnapshot> KeyTable::ForKey(const std::string& access_key) { return Get(&access_key); }

}  // namespace aq::server
