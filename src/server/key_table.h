// Who a request's key is and what it may do: the node's credentials-file
// keys (administrators: every action), the cluster's node key (node-to-node
// traffic only) and the keys stored with the metadata (s3/policy.h: their
// grants), read again from the metadata every `refresh_s`, and at once when
// a request names a key not yet known (one such read per `miss_refresh_s`
// on average, in bursts of 10), so `aquifer key add` works at once and
// `key rm|grant|revoke` within seconds on every node, without a restart.
// If the metadata cannot be read the last keys read stay in force.
// SetAdminKeys swaps the credentials file's keys (the node's SIGHUP).
//
// Thread safety: every method may be called from any thread; a snapshot is
// immutable and stays valid while held.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "s3/auth.h"
#include "s3/policy.h"
#include "store/meta_store.h"

namespace aq::server {

struct KeyEntry {
  enum class Kind { kAdmin, kNode, kStored };
  s3::Credential credential;
  Kind kind = Kind::kStored;
  std::vector<s3::Grant> grants;  // kStored only
};

struct KeySnapshot {
  std::map<std::string, KeyEntry, std::less<>> keys;  // by access key id
  const KeyEntry* Find(const std::string& access_key) const {
    auto it = keys.find(access_key);
    return it == keys.end() ? nullptr : &it->second;
  }
};

class KeyTable {
 public:
  // `meta` may be null (no stored keys); it must outlive the table.
  KeyTable(std::vector<s3::Credential> admin_keys, s3::Credential node_key, store::MetaStore* meta,
           double refresh_s = 2, double miss_refresh_s = 0.1);
  // The keys now; read again first when older than refresh_s.
  std::shared_ptr<const KeySnapshot> Current();
  // As Current(), after reading again if `access_key` is unknown (within
  // the budget for such reads).
  std::shared_ptr<const KeySnapshot> ForKey(const std::string& access_key);
  // Replaces the credentials file's keys: requests signed with a removed
  // key are refused from now on, a new key is accepted at once.
  void SetAdminKeys(std::vector<s3::Credential> admin_keys);

 private:
  // Reads the keys again when stale (one thread at a time, outside the
  // lock: the others go on with the current keys meanwhile).
  std::shared_ptr<const KeySnapshot> Get(const std::string* access_key);
  // The credentials file's keys and the node key, over any stored key of
  // the same id (`aquifer key add` never makes one; a stale record must not
  // demote an administrator or give a user the node's key).
  void AddFixedKeys(KeySnapshot& snap, const std::vector<s3::Credential>& admin_keys) const;
  // The keys as the metadata has them now, with `admin_keys`; null if the
  // metadata cannot be read.
  std::shared_ptr<const KeySnapshot> Read(const std::vector<s3::Credential>& admin_keys);

  Mutex mu_;
  std::shared_ptr<const std::vector<s3::Credential>> admin_keys_ AQ_GUARDED_BY(mu_);
  uint64_t admin_generation_ AQ_GUARDED_BY(mu_) = 0;  // counts SetAdminKeys
  const s3::Credential node_key_;
  store::MetaStore* const meta_;
  const double refresh_s_, miss_refresh_s_;
  std::shared_ptr<const KeySnapshot> current_ AQ_GUARDED_BY(mu_);
  double read_at_ AQ_GUARDED_BY(mu_) = 0;   // Clock::Real().Now() of the last read
  bool reread_ AQ_GUARDED_BY(mu_) = false;  // a read is due at once (new admin keys)
  bool reloading_ AQ_GUARDED_BY(mu_) = false;
  static constexpr double kMissBurst = 10;
  double miss_budget_ AQ_GUARDED_BY(mu_) = kMissBurst;
  double budget_at_ AQ_GUARDED_BY(mu_) = Clock::Real().Now();
  std::atomic<bool> warned_{false};
};

}  // namespace aq::server
