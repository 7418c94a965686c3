#include "cluster/cluster_blocks.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>

#include "cluster/placement.h"
#include "common/crc32c.h"
#include "common/mutex.h"
#include "s3/sigv4.h"
#include "s3/xml.h"

namespace aq::cluster {
namespace {

std::string BlockPath(const store::BlockRef& ref) { return "/_aquifer/blocks/" + ref.id; }
std::string BlockQuery(const store::BlockRef& ref) {
  return fmt::format("crc={}&pool={}&size={}", ref.crc32c, s3::UriEncode(ref.pool, true), ref.size);
}

Status HttpFailure(const std::string& what, const http::ClientResponse& res) {
  const auto [code, message] = s3::ParseErrorXml(res.body);
  const std::string msg = fmt::format("{}: HTTP {}{}", what, res.status, code.empty() ? "" : " " + code);
  if (res.status == 404) return NotFound(Subject::kBlock, msg);
  if (code == "BlockCorrupt") return Corruption(msg);
  if (res.status == 507) return Status(StatusCode::kNoSpace, msg);
  if (res.status == 403) return Status(StatusCode::kPermissionDenied, msg);
  if (res.status == 503) return Unavailable(msg);
  return IoError(msg);
}

}  // namespace

// ---- BlockClient ----

BlockClient::BlockClient(s3::Credential node_key, int timeout_seconds) : key_(std::move(node_key)) {
  http::ClientOptions o;
  o.connect_timeout_s = 2;
  o.io_timeout_s = timeout_seconds;
  o.max_idle_per_host = 16;
  pool_ = std::make_unique<http::Pool>(o);
}
BlockClient::~BlockClient() = default;

Result<http::ClientResponse> BlockClient::Send(const std::string& address, const std::string& method,
                                               const store::BlockRef& ref, std::string_view body, char* into) {
  const std::string path = BlockPath(ref), query = BlockQuery(ref);
  http::ClientRequest r;
  r.method = method;
  r.target = path + "?" + query;
  r.body = body;
  if (!key_.access_key.empty()) {
    for (auto& [k, v] :
         s3::SignRequest(key_.access_key, key_.secret, address, method, path, query, "UNSIGNED-PAYLOAD")) {
      r.headers.Add(k, v);
    }
  }
  if (into != nullptr) return pool_->SendInto(address, r, into, ref.size);
  return pool_->Send(address, r, 1 << 20);
}

Status BlockClient::Put(const std::string& address, const store::BlockRef& ref, std::string_view data) {
  const std::string what = fmt::format("write block {} to {}", ref.id, address);
  auto res = Send(address, "PUT", ref, data, nullptr);
  if (!res.ok()) return res.status().WithContext(what);
  if (res->status != 200) return HttpFailure(what, *res);
  return Status::Ok();
}

Result<std::string> BlockClient::Get(const std::string& address, const store::BlockRef& ref) {
  const std::string what = fmt::format("read block {} from {}", ref.id, address);
  std::string body(ref.size, '\0');
  auto res = Send(address, "GET", ref, {}, body.data());
  if (!res.ok()) return res.status().WithContext(what);
  if (res->status != 200) return HttpFailure(what, *res);
  // Verified here too: a replica is trusted only once its bytes check out.
  if (res->received != ref.size || crc32c::Value(body) != ref.crc32c) {
    return Corruption(
        fmt::format("block {} from {}: {} bytes that do not match its checksum", ref.id, address, res->received));
  }
  return body;
}

Status BlockClient::Delete(const std::string& address, const store::BlockRef& ref) {
  const std::string what = fmt::format("remove block {} on {}", ref.id, address);
  auto res = Send(address, "DELETE", ref, {}, nullptr);
  if (!res.ok()) return res.status().WithContext(what);
  if (res->status != 204 && res->status != 200) return HttpFailure(what, *res);
  return Status::Ok();
}

Result<std::vector<std::string>> BlockClient::Inventory(const std::string& address) {
  http::ClientRequest r;
  r.target = "/_aquifer/inventory";
  if (!key_.access_key.empty()) {
    for (auto& [k, v] :
         s3::SignRequest(key_.access_key, key_.secret, address, "GET", r.target, "", "UNSIGNED-PAYLOAD")) {
      r.headers.Add(k, v);
    }
  }
  auto res = pool_->Send(address, r, 1ull << 30);
  if (!res.ok()) return res.status().WithContext(fmt::format("block inventory of {}", address));
  if (res->status != 200) return HttpFailure(fmt::format("block inventory of {}", address), *res);
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (!j.is_array()) return Corruption(fmt::format("block inventory of {}: not a JSON array", address));
  std::vector<std::string> ids;
  for (const auto& e : j) {
    if (e.is_string()) ids.push_back(e.get<std::string>());
  }
  return ids;
}

// ---- ClusterBlockService ----

bool ClusterBlockService::Available(const store::BlockRef& ref) {
  if (local_.Available(ref)) return true;
  Membership* m = membership_.load();
  if (m == nullptr) return false;
  const auto map = Map();
  for (const auto& holder : ref.nodes) {
    auto it = map.find(holder);
    if (holder != self_ && it != map.end() && it->second.up) return true;
  }
  return false;
}

ClusterBlockService::ClusterBlockService(std::string self, store::LocalBlockService& local, BlockClient& client,
                                         size_t replicas)
    : self_(std::move(self)), local_(local), client_(client), replicas_(std::max<size_t>(1, replicas)) {}

std::vector<NodeInfo> ClusterBlockService::Nodes() const {
  Membership* m = membership_.load();
  return m != nullptr ? m->Nodes() : std::vector<NodeInfo>();
}

std::map<std::string, NodeInfo> ClusterBlockService::Map() const {
  std::map<std::string, NodeInfo> m;
  for (auto& n : Nodes()) m.emplace(n.id, std::move(n));
  return m;
}

size_t ClusterBlockService::ReplicasFor(const std::string& bucket) {
  if (Membership* m = membership_.load()) {
    // One refresh at a time, and callers wait for it: nobody answers from
    // a map that a refresh in flight is about to replace.
    MutexLock refreshing(refresh_mu_);
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    if (buckets_read_at_ < 0 || now - buckets_read_at_ > 2) {
      auto r = BucketReplicas(m->etcd(), m->prefix());
      if (r.ok()) {
        MutexLock lock(mu_);
        bucket_replicas_ = std::move(*r);
        buckets_read_at_ = now;
      }
    }
  }
  MutexLock lock(mu_);
  auto it = bucket_replicas_.find(bucket);
  return it != bucket_replicas_.end() && it->second > 0 ? it->second : replicas_;
}

Result<store::BlockRef> ClusterBlockService::Write(const std::string& pool, std::string_view data,
                                                   const std::string& bucket) {
  const size_t replicas = ReplicasFor(bucket);
  auto nodes = Nodes();
  store::BlockRef ref{store::NewBlockId(), data.size(), crc32c::Value(data), pool, {}};
  if (Place(ref.id, nodes, nodes.size()).size() < replicas) {
    // The map is at most a second old; a node that just joined may be missing.
    if (Membership* m = membership_.load(); m != nullptr && m->Refresh().ok()) nodes = Nodes();
  }
  if (ref.pool.empty()) ref.pool = local_.store().pools().front().name;
  // Every eligible node in placement order: the first `replicas` are where
  // the block belongs; if one of them fails (down but not yet known to be),
  // the next takes its replica and repair moves it home later.
  const auto ranked = Place(ref.id, nodes, nodes.size());  // (nodes: maybe refreshed above)
  if (ranked.size() < replicas) {
    return IoError(
        fmt::format("a block needs {} replicas on nodes that are up and active; {} are", replicas, ranked.size()));
  }
  std::map<std::string, std::string> address;
  for (const auto& n : nodes) address[n.id] = n.address;
  auto write_one = [&](const std::string& t) -> Status {
    if (t == self()) return local_.store().WriteWithId(ref.id, ref.pool, data).status();
    remote_writes_++;
    return client_.Put(address[t], ref, data);
  };
  std::vector<std::string> done;
  Status first;
  size_t next = replicas;
  std::vector<std::string> batch(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(replicas));
  while (!batch.empty()) {
    // A batch's replicas are written at once; the block is acknowledged
    // when `replicas` of them are durable.
    std::vector<std::future<Status>> writes;
    for (const auto& t : batch) writes.push_back(std::async(std::launch::async, write_one, t));
    size_t failed = 0;
    for (size_t i = 0; i < writes.size(); ++i) {
      Status s = writes[i].get();
      if (s.ok()) {
        done.push_back(batch[i]);
      } else {
        ++failed;
        if (first.ok()) first = s;
      }
    }
    batch.clear();
    for (; failed > 0 && next < ranked.size(); --failed) batch.push_back(ranked[next++]);
  }
  ref.nodes = done;
  if (done.size() < replicas) {
    (void)Remove(ref);  // nothing under-replicated is acknowledged
    ref.nodes.clear();
    return Status(first.code(), fmt::format("block {}: {} of {} replicas written; {}", ref.id, done.size(), replicas,
                                            first.message()));
  }
  written_ += done.size();
  return ref;
}

std::string ClusterBlockService::Owner(const store::BlockRef& ref, const std::map<std::string, NodeInfo>& map) {
  std::string best;
  uint64_t best_w = 0;
  for (const auto& n : ref.nodes) {
    auto it = map.find(n);
    if (it == map.end() || !it->second.up) continue;
    const uint64_t w = PlacementWeight(ref.id, n);
    if (best.empty() || w > best_w) {
      best = n;
      best_w = w;
    }
  }
  return best;
}

Result<std::shared_ptr<const std::string>> ClusterBlockService::Read(const store::BlockRef& ref) {
  if (ref.nodes.empty()) {  // written before the node joined a cluster: it is local
    local_reads_++;
    return local_.Read(ref);
  }
  const auto map = Map();
  // The block's owner (its live holder of highest placement weight) is the
  // one node that caches it: ask it first, so the cluster's RAM holds each
  // block once. Then the other holders by fewest requests in flight (ties
  // round-robin), nodes known to be down last.
  const std::string owner = Owner(ref, map);
  std::vector<std::string> order;
  for (const auto& n : ref.nodes) {
    if (n != owner) order.push_back(n);
  }
  {
    MutexLock lock(mu_);
    const uint64_t rr = round_robin_++;
    std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) AQ_REQUIRES(mu_) {
      auto up = [&](const std::string& id) {
        auto it = map.find(id);
        return it != map.end() && it->second.up;
      };
      if (up(a) != up(b)) return up(a);
      const int oa = outstanding_[a], ob = outstanding_[b];
      if (oa != ob) return oa < ob;
      return (PlacementWeight(ref.id, a) ^ rr) < (PlacementWeight(ref.id, b) ^ rr);
    });
  }
  if (!owner.empty()) order.insert(order.begin(), owner);
  Status last = NotFound(fmt::format("block {}: no replica holder known", ref.id));
  bool local_bad = false;
  for (const auto& node : order) {
    if (node == self()) {
      // This node's replica: through the cache when it owns the block,
      // straight from the pool when it is a stand-in.
      auto r = [&]() -> Result<std::shared_ptr<const std::string>> {
        if (node == owner) return local_.Read(ref);
        auto bytes = AQ_TRY(local_.store().Read(ref));
        return std::make_shared<const std::string>(std::move(bytes));
      }();
      if (r.ok()) {
        local_reads_++;
        return r;
      }
      last = r.status();
      local_bad = r.status().code() == StatusCode::kCorruption || r.status().code() == StatusCode::kNotFound;
      failovers_++;
      continue;
    }
    auto it = map.find(node);
    if (it == map.end()) continue;
    {
      MutexLock lock(mu_);
      outstanding_[node]++;
    }
    auto r = client_.Get(it->second.address, ref);
    {
      MutexLock lock(mu_);
      outstanding_[node]--;
    }
    if (!r.ok()) {
      last = r.status();
      failovers_++;
      continue;
    }
    remote_reads_++;
    auto block = std::make_shared<const std::string>(std::move(*r));
    if (local_bad) {
      // Replace this node's damaged or missing copy with the good bytes.
      (void)local_.Remove(ref);
      if (local_.store().WriteWithId(ref.id, ref.pool, *block).ok()) repaired_++;
    }
    return block;
  }
  return Status(last.code(), fmt::format("block {}: no replica could be read (last: {})", ref.id, last.message()));
}

Status ClusterBlockService::Remove(const store::BlockRef& ref) {
  if (ref.nodes.empty()) return local_.Remove(ref);
  const auto map = Map();
  Status first;
  for (const auto& n : ref.nodes) {
    Status s;
    if (n == self()) {
      s = local_.Remove(ref);
    } else if (auto it = map.find(n); it != map.end() && it->second.up) {
      s = client_.Delete(it->second.address, ref);
    }
    // A replica on a node that is down stays until that node's garbage collection.
    if (!s.ok() && s.code() != StatusCode::kNotFound && first.ok()) first = s;
  }
  return first;
}

Status ClusterBlockService::Replicate(const store::BlockRef& ref, const std::string& node) {
  auto block = AQ_TRY(Read(ref));
  if (node == self()) return local_.store().WriteWithId(ref.id, ref.pool, *block).status();
  const auto map = Map();
  auto it = map.find(node);
  if (it == map.end()) return NotFound(fmt::format("no node '{}'", node));
  remote_writes_++;
  return client_.Put(it->second.address, ref, *block);
}

ClusterBlockStats ClusterBlockService::Stats() const {
  ClusterBlockStats s;
  s.local_reads = local_reads_;
  s.remote_reads = remote_reads_;
  s.failovers = failovers_;
  s.repaired_on_read = repaired_;
  s.replicas_written = written_;
  s.remote_writes = remote_writes_;
  return s;
}

}  // namespace aq::cluster
