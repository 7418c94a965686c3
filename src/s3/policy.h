// Per-key permissions: what a user's key may do, to which buckets and key
// prefixes. A key is granted actions on scopes:
//   read    GET and HEAD objects (their tags and ACL too), copy from them
//   write   PUT objects, copy to them, multipart uploads
//   delete  DELETE objects (one by one and in ?delete batches)
//   list    list objects, versions and uploads (the listed prefix must lie
//           inside the scope)
//   admin   create and delete the bucket, its lifecycle rules
// on "*" (every bucket, present and future), "BUCKET" (all of it) or
// "BUCKET/PREFIX" (keys starting with PREFIX). A key may do what any of its
// grants allows and nothing else. The keys a node's credentials file holds
// are its administrators (every action everywhere); the cluster's node key
// is for node-to-node traffic only. Stored keys live in the metadata
// (setting kKeysSetting, JSON) next to the objects they guard: SQLite under
// a node's data directory (0600), a cluster's etcd.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "s3/auth.h"

namespace aq::s3 {

enum Action : uint8_t {
  kRead = 1,
  kWrite = 2,
  kDelete = 4,
  kList = 8,
  kAdmin = 16,
};
inline constexpr uint8_t kAllActions = kRead | kWrite | kDelete | kList | kAdmin;

// "read,list", "ro" (read,list), "rw" (read,write,delete,list), "all".
Result<uint8_t> ParseActions(std::string_view text);
// "read,write,list", "all" for every action, "none".
std::string ActionsToString(uint8_t actions);

struct Grant {
  std::string bucket = "*";  // a bucket name or "*"
  std::string prefix;        // "" = the whole bucket
  uint8_t actions = 0;
  bool operator==(const Grant&) const = default;
};
// "*", "BUCKET", "BUCKET/PREFIX" ("BUCKET/PREFIX*" the same).
Result<Grant> ParseScope(std::string_view scope, uint8_t actions);
std::string ScopeToString(const Grant& g);

// May `grants` do `action` on the object `key` of `bucket`?
bool Allows(const std::vector<Grant>& grants, Action action, std::string_view bucket, std::string_view key);
// May `grants` list keys starting with `prefix` in `bucket`? (The listed
// prefix must start with a granted one.)
bool AllowsList(const std::vector<Grant>& grants, std::string_view bucket, std::string_view prefix);
// Bucket-wide actions (admin): only a grant on the whole bucket or "*".
bool AllowsBucket(const std::vector<Grant>& grants, Action action, std::string_view bucket);
// May `grants` do `action` on some keys of `bucket`?
bool AllowsSome(const std::vector<Grant>& grants, Action action, std::string_view bucket);
// Does any grant name `bucket` (or "*")? Such a key sees the bucket in
// ListBuckets, HEAD and its location.
bool Touches(const std::vector<Grant>& grants, std::string_view bucket);

// A key kept with the metadata.
struct StoredKey {
  Credential key;
  std::string name;  // who or what it is for (free text)
  int64_t created_ns = 0;
  std::vector<Grant> grants;
};

inline constexpr const char* kKeysSetting = "auth/keys";
// {"keys":[{"access_key","secret","name","created_ns","grants":[{"bucket","prefix","actions":[..]}]}]}
std::string KeysToJson(const std::vector<StoredKey>& keys);
// "" = no keys. Corruption naming the problem for a malformed document.
Result<std::vector<StoredKey>> KeysFromJson(const std::string& json);

}  // namespace aq::s3
