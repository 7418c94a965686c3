// Administration of users' keys (what `aquifer key` does): each key's id,
// secret, name and grants (s3/policy.h), kept as one setting with the
// metadata, a single node's or a cluster's (etcd), which every node reads
// again within seconds. Every change is a read-modify-write of that setting
// through SwapSetting, done again from the start when another writer got in
// between, so two administrators at once never lose each other's change.
//
// Thread safety: one KeyAdmin per thread; any number of KeyAdmins (and
// processes) may change the same keys at once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "s3/policy.h"
#include "store/meta_store.h"

namespace aq::node {

class KeyAdmin {
 public:
  explicit KeyAdmin(std::unique_ptr<store::MetaStore> meta, Clock& clock = Clock::Real())
      : meta_(std::move(meta)), clock_(&clock) {}

  // The stored keys (none: only the credentials file's administrators).
  Result<std::vector<s3::StoredKey>> List();
  // A new key named `name` that may do `grants` (grants on one scope
  // joined). `before_store` runs with the new key before it is stored (the
  // CLI writes its credentials file there): an error there stores nothing.
  Result<s3::StoredKey> Add(const std::string& name, const std::vector<s3::Grant>& grants,
                            const std::function<Status(const s3::StoredKey&)>& before_store = {});
  // NotFound for a key that is not stored.
  Status Remove(const std::string& access_key);
  // Adds `grant` to what the key may do (its actions join a grant on the
  // same scope); the key's grants after. NotFound for an unknown key.
  Result<std::vector<s3::Grant>> Grant(const std::string& access_key, const s3::Grant& grant);
  // Takes `revoke.actions` away on exactly `revoke`'s scope (a grant left
  // with no action goes); the key's grants after. NotFound for an unknown
  // key or a scope the key has no grant on.
  Result<std::vector<s3::Grant>> Revoke(const std::string& access_key, const s3::Grant& revoke);
  // The buckets `grants` name that do not exist (yet): a key may be made
  // ready for a bucket, but a typo would grant nothing.
  std::vector<std::string> MissingBuckets(const std::vector<s3::Grant>& grants);

 private:
  // Applies `change` to the stored keys and writes them back.
  Status Update(const std::function<Status(std::vector<s3::StoredKey>&)>& change);

  std::unique_ptr<store::MetaStore> meta_;
  Clock* clock_;
};

// "read,list on imagenet/train/; write on scratch" ("nothing" for none).
std::string DescribeGrants(const std::vector<s3::Grant>& grants);
// Adds `g` to `grants`: its actions join those of a grant on the same scope.
void AddGrant(std::vector<s3::Grant>& grants, const s3::Grant& g);

}  // namespace aq::node
