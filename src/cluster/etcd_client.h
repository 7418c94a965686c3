// A client for etcd's v3 API through its JSON gateway (HTTP POST /v3/...,
// keys and values base64): ranges, puts, deletes, transactions and leases,
// which is all the cluster needs from etcd. Several endpoints may be given;
// a request goes to the first that answers.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "http/client.h"

namespace aq::cluster {

// Where a cluster's keys live in etcd: its map, members, settings and
// metadata are under this prefix.
inline constexpr const char* kClusterPrefix = "/aquifer/";

struct KeyValue {
  std::string key, value;
  int64_t create_revision = 0, mod_revision = 0, version = 0, lease = 0;
};

// One comparison of a transaction's guard.
struct Compare {
  enum class Target { kVersion, kCreateRevision, kModRevision, kValue };
  enum class Op { kEqual, kGreater, kLess, kNotEqual };
  std::string key;
  std::string range_end;  // non-empty: compare every key in [key, range_end)
  Target target = Target::kVersion;
  Op op = Op::kEqual;
  int64_t number = 0;  // for the revision and version targets
  std::string value;   // for kValue
};

// One operation of a transaction's branch.
struct TxnOp {
  enum class Kind { kGet, kPut, kDelete };
  Kind kind = Kind::kGet;
  std::string key;
  std::string range_end;  // non-empty: the range [key, range_end) (get, delete)
  std::string value;      // put
  int64_t lease = 0;      // put
};

struct TxnResult {
  bool succeeded = false;
  int64_t revision = 0;
  // For every kGet of the branch taken, in order: the keys it found.
  std::vector<std::vector<KeyValue>> ranges;
};

class EtcdClient {
 public:
  // "etcd://HOST:PORT[,HOST:PORT...]" (or http://...); "etcds://..." (or
  // https://...) over TLS. As etcdctl, the environment gives the TLS files
  // (ETCDCTL_CACERT, and a client certificate ETCDCTL_CERT/ETCDCTL_KEY for
  // an etcd run with --client-cert-auth) and the etcd user (ETCDCTL_USER,
  // "NAME:PASSWORD" or NAME with ETCDCTL_PASSWORD): the client
  // authenticates and sends the token with every request, again when etcd
  // says it expired. Checks that one endpoint answers.
  // `timeout_s` bounds each request (a stalled etcd fails it after that).
  static Result<std::unique_ptr<EtcdClient>> Connect(const std::string& url, double timeout_s = 10);
  ~EtcdClient();

  Result<std::optional<KeyValue>> Get(const std::string& key);
  // Keys in [start, end), ascending; limit 0 = all.
  Result<std::vector<KeyValue>> Range(const std::string& start, const std::string& end, int64_t limit = 0,
                                      bool keys_only = false);
  Result<std::vector<KeyValue>> Prefix(const std::string& prefix, int64_t limit = 0, bool keys_only = false) {
    return Range(prefix, PrefixEnd(prefix), limit, keys_only);
  }
  Status Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // Returns how many keys were deleted.
  Result<int64_t> Delete(const std::string& key, const std::string& range_end = "");
  Result<TxnResult> Txn(const std::vector<Compare>& compares, const std::vector<TxnOp>& success,
                        const std::vector<TxnOp>& failure = {});

  // Leases: a key put with a lease disappears when the lease expires.
  Result<int64_t> LeaseGrant(int64_t ttl_seconds);
  // Renews the lease; returns its TTL, 0 when it has already expired.
  Result<int64_t> LeaseKeepAlive(int64_t id);
  Status LeaseRevoke(int64_t id);

  // The current revision of the store (a cheap health check).
  Result<int64_t> Revision();

  const std::vector<std::string>& endpoints() const { return endpoints_; }
  // The first key after every key that starts with `prefix`.
  static std::string PrefixEnd(const std::string& prefix);

 private:
  EtcdClient(std::vector<std::string> endpoints, double timeout_s, std::shared_ptr<http::TlsClient> tls);
  // A new auth token for user_ (POST /v3/auth/authenticate).
  Status Authenticate();
  // POSTs `body` (JSON) to `path` and returns the answer. When no endpoint
  // answers: kUnavailable or kTimedOut (a request that changes keys may or
  // may not have been applied).
  Result<std::string> Call(const std::string& path, const std::string& body);

  std::vector<std::string> endpoints_;  // host:port
  Mutex mu_;
  size_t preferred_ AQ_GUARDED_BY(mu_) = 0;  // the endpoint that answered last
  std::string user_, password_;              // etcd authentication ("" = none)
  std::string token_ AQ_GUARDED_BY(mu_);
  std::unique_ptr<http::Pool> pool_;
};

std::string Base64Encode(std::string_view bytes);
Result<std::string> Base64Decode(std::string_view text);

}  // namespace aq::cluster
