#include "cluster/cluster_blocks.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <nlohmann/json.hpp>

#include "cluster/placement.h"
#include "common/buffer.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/mutex.h"
#include "ec/erasure.h"
#include "s3/internal_routes.h"
#include "s3/plan.h"
#include "s3/sigv4.h"
#include "s3/xml.h"

namespace aq::cluster {
namespace {

s3::internal::BlockTarget TargetOf(const store::BlockRef& ref) {
  return {.id = ref.id, .pool = ref.pool, .crc32c = ref.crc32c, .size = ref.size};
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

BlockClient::BlockClient(s3::Credential node_key, int timeout_seconds, std::shared_ptr<http::TlsClient> tls)
    : key_(std::move(node_key)) {
  http::ClientOptions o;
  o.tls = std::move(tls);
  o.connect_timeout_s = 2;
  o.io_timeout_s = timeout_seconds;
  o.max_idle_per_host = 16;
  pool_ = std::make_unique<http::Pool>(o);
}
BlockClient::~BlockClient() = default;

Result<http::ClientResponse> BlockClient::Send(const std::string& address, const std::string& method,
                                               const store::BlockRef& ref, std::string_view body, char* into) {
  const auto target = TargetOf(ref);
  const std::string path = target.Path(), query = target.Query();
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
  std::string body = ReadBuffer(ref.size);  // fresh memory the cache may keep: huge pages where it can
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

Result<http::ClientResponse> BlockClient::Signed(const std::string& address, const std::string& method,
                                                 const std::string& path, const std::string& query,
                                                 std::string_view body, uint64_t max_body) {
  http::ClientRequest r;
  r.method = method;
  r.target = query.empty() ? path : path + "?" + query;
  r.body = body;
  if (!body.empty()) r.headers.Add("Content-Type", "application/json");
  if (!key_.access_key.empty()) {
    for (auto& [k, v] :
         s3::SignRequest(key_.access_key, key_.secret, address, method, path, query, "UNSIGNED-PAYLOAD")) {
      r.headers.Add(k, v);
    }
  }
  return pool_->Send(address, r, max_body);
}

Result<std::vector<std::string>> BlockClient::Inventory(const std::string& address) {
  auto res = Signed(address, "GET", s3::internal::InventoryPath(), "", {}, 1ull << 30);
  if (!res.ok()) return res.status().WithContext(fmt::format("block inventory of {}", address));
  if (res->status != 200) return HttpFailure(fmt::format("block inventory of {}", address), *res);
  auto ids = s3::internal::InventoryFromJson(res->body);
  if (!ids.ok()) return ids.status().WithContext(fmt::format("block inventory of {}", address));
  return ids;
}

Result<size_t> BlockClient::Plan(const std::string& address, const std::string& stream,
                                 const std::vector<store::BlockRef>& pieces) {
  std::vector<s3::PlanPiece> doc;
  doc.reserve(pieces.size());
  for (const auto& p : pieces) doc.push_back({p.id, p.pool, p.size, p.crc32c});
  const std::string what = fmt::format("pass {} planned pieces to {}", pieces.size(), address);
  auto res = Signed(address, "POST", s3::internal::PlanPath(), s3::internal::PlanQuery(stream, true),
                    s3::PiecesToJson(doc), 1 << 16);
  if (!res.ok()) return res.status().WithContext(what);
  if (res->status != 200) return HttpFailure(what, *res);
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (!j.is_object() || !j.contains("queued") || !j["queued"].is_number_unsigned()) {
    return Corruption(fmt::format("{}: the answer names no count queued", what));
  }
  return j["queued"].get<size_t>();
}

Status BlockClient::CancelPlan(const std::string& address, const std::string& stream) {
  const std::string what = fmt::format("cancel plan {} on {}", stream, address);
  auto res = Signed(address, "DELETE", s3::internal::PlanPath(), s3::internal::PlanQuery(stream, true), {}, 1 << 16);
  if (!res.ok()) return res.status().WithContext(what);
  if (res->status != 204 && res->status != 200) return HttpFailure(what, *res);
  return Status::Ok();
}

// ---- ClusterBlockService ----

bool ClusterBlockService::Available(const store::BlockRef& ref) {
  if (!ref.erasure_coded() && local_.Available(ref)) return true;
  if (ref.erasure_coded() && local_.cache() != nullptr && local_.cache()->Contains(ref.id)) return true;
  Membership* m = membership_.load();
  if (m == nullptr) return !ref.erasure_coded() && local_.Available(ref);
  const auto map = Map();
  size_t readable = 0;
  for (const auto& [holder, piece] : store::StoredPieces(ref)) {
    auto it = map.find(holder);
    if (holder == self_ ? local_.Available(piece) : (it != map.end() && it->second.up)) ++readable;
  }
  return readable >= (ref.erasure_coded() ? static_cast<size_t>(ref.ec_k) : 1);
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

Policy ClusterBlockService::PolicyFor(const std::string& bucket) {
  if (Membership* m = membership_.load()) {
    // One refresh at a time, and callers wait for it: nobody answers from
    // a map that a refresh in flight is about to replace.
    MutexLock refreshing(refresh_mu_);
    const double now = Clock::Real().Now();
    if (buckets_read_at_ < 0 || now - buckets_read_at_ > 2) {
      auto r = ReadPolicies(m->etcd(), m->prefix());
      if (r.ok()) {
        MutexLock lock(mu_);
        policies_ = std::move(*r);
        policies_read_ = true;
        buckets_read_at_ = now;
      }
    }
  }
  MutexLock lock(mu_);
  if (!policies_read_) {
    Policy p;
    p.replicas = replicas_;
    return p;
  }
  Policy p = policies_.For(bucket);
  if (!p.set()) p.replicas = replicas_;
  return p;
}

Policies ClusterBlockService::CurrentPolicies() {
  const Policy cluster = PolicyFor("");  // (re-reads them when due)
  MutexLock lock(mu_);
  Policies p = policies_;
  p.cluster = cluster;
  return p;
}

Status ClusterBlockService::PutPiece(const std::string& node, const store::BlockRef& piece, std::string_view data,
                                     const std::map<std::string, NodeInfo>& map) {
  if (node == self()) return local_.store().WriteWithId(piece.id, piece.pool, data).status();
  auto it = map.find(node);
  if (it == map.end()) return NotFound(fmt::format("no node '{}'", node));
  remote_writes_++;
  return client_.Put(it->second.address, piece, data);
}

Result<std::string> ClusterBlockService::GetPiece(const std::string& node, const store::BlockRef& piece,
                                                  const std::map<std::string, NodeInfo>& map) {
  if (node == self()) {
    auto r = reads().Read(piece);  // a fragment held here is cached (and staged) here
    if (!r.ok()) return r.status();
    local_reads_++;
    return std::string(**r);
  }
  auto it = map.find(node);
  if (it == map.end()) return NotFound(fmt::format("block {}: its holder '{}' is not in the cluster", piece.id, node));
  if (!it->second.up) return Unavailable(fmt::format("block {}: its holder {} is down", piece.id, node));
  {
    MutexLock lock(mu_);
    outstanding_[node]++;
  }
  auto r = client_.Get(it->second.address, piece);
  {
    MutexLock lock(mu_);
    outstanding_[node]--;
  }
  if (r.ok()) remote_reads_++;
  return r;
}

Status ClusterBlockService::RemovePiece(const std::string& node, const store::BlockRef& piece) {
  if (node == self()) return local_.Remove(piece);
  const auto map = Map();
  auto it = map.find(node);
  if (it == map.end() || !it->second.up) return Status::Ok();  // its garbage collection drops it
  return client_.Delete(it->second.address, piece);
}

Result<store::BlockRef> ClusterBlockService::Write(const std::string& pool, std::string_view data,
                                                   const std::string& bucket) {
  store::BlockRef ref{store::NewBlockId(), data.size(), crc32c::Value(data), pool, {}};
  if (ref.pool.empty()) ref.pool = local_.store().pools().front().name;
  return WriteAs(std::move(ref), data, PolicyFor(bucket).ForBlock(data.size()));
}

Result<store::BlockRef> ClusterBlockService::WriteAs(store::BlockRef ref, std::string_view data, const Policy& form) {
  const size_t width = form.width();
  auto nodes = Nodes();
  if (Place(ref.id, nodes, nodes.size(), ref.pool).size() < width) {
    // The map is at most a second old; a node that just joined may be missing.
    if (Membership* m = membership_.load(); m != nullptr && m->Refresh().ok()) nodes = Nodes();
  }
  if (form.erasure_coded()) return WriteStripe(std::move(ref), data, form.ec, nodes);
  const size_t replicas = width;
  ref.ec_k = ref.ec_m = 0;
  ref.fragment_crcs.clear();
  // Every eligible node in placement order: the first `replicas` are where
  // the block belongs; if one of them fails (down but not yet known to be),
  // the next takes its replica and repair moves it home later.
  const auto ranked = Place(ref.id, nodes, nodes.size(), ref.pool);  // (nodes: maybe refreshed above)
  if (ranked.size() < replicas) {
    // Too few nodes now is a state the cluster leaves (a node restarts, a
    // lease runs out): retryable, 503 with Retry-After.
    return Unavailable(fmt::format("a block needs {} replicas on nodes that are up and active with pool '{}'; {} are",
                                   replicas, ref.pool, ranked.size()));
  }
  std::map<std::string, NodeInfo> map;
  for (const auto& n : nodes) map[n.id] = n;
  std::vector<std::string> done;
  Status first;
  size_t next = replicas;
  std::vector<std::string> batch(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(replicas));
  while (!batch.empty()) {
    // A batch's replicas are written at once; the block is acknowledged
    // when `replicas` of them are durable.
    std::vector<std::future<Status>> writes;
    for (const auto& t : batch) {
      writes.push_back(std::async(std::launch::async, [&, t] { return PutPiece(t, ref, data, map); }));
    }
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

Result<store::BlockRef> ClusterBlockService::WriteStripe(store::BlockRef ref, std::string_view data,
                                                         const ec::Scheme& scheme, const std::vector<NodeInfo>& nodes) {
  const auto codec = AQ_TRY(ec::Codec::Get(scheme));
  const size_t width = static_cast<size_t>(scheme.k + scheme.m);
  const auto ranked = Place(ref.id, nodes, nodes.size(), ref.pool);
  if (ranked.size() < width) {
    return Unavailable(fmt::format("erasure code {} needs {} nodes that are up and active with pool '{}'; {} are",
                                   scheme.ToString(), width, ref.pool, ranked.size()));
  }
  const auto fragments = codec->Encode(data);
  ref.ec_k = static_cast<uint8_t>(scheme.k);
  ref.ec_m = static_cast<uint8_t>(scheme.m);
  ref.fragment_crcs.clear();
  for (const auto& f : fragments) ref.fragment_crcs.push_back(crc32c::Value(f));
  ref.nodes.assign(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(width));
  std::map<std::string, NodeInfo> map;
  for (const auto& n : nodes) map[n.id] = n;
  // Fragment i goes to the i-th node of the placement; a node that fails
  // is replaced by the next unused one (repair moves it home later).
  std::vector<bool> stored(width, false);
  size_t next = width;
  Status first;
  std::vector<size_t> pending(width);
  for (size_t i = 0; i < width; ++i) pending[i] = i;
  while (!pending.empty()) {
    std::vector<std::future<Status>> writes;
    for (size_t i : pending) {
      writes.push_back(std::async(std::launch::async, [&, i] {
        return PutPiece(ref.nodes[i], store::FragmentRef(ref, static_cast<int>(i)), fragments[i], map);
      }));
    }
    std::vector<size_t> again;
    bool stuck = false;
    for (size_t j = 0; j < pending.size(); ++j) {
      Status s = writes[j].get();
      if (s.ok()) {
        stored[pending[j]] = true;
        continue;
      }
      if (first.ok()) first = s;
      if (next < ranked.size()) {
        ref.nodes[pending[j]] = ranked[next++];
        again.push_back(pending[j]);
      } else {
        stuck = true;  // no node left to take this fragment
      }
    }
    if (stuck) break;
    pending = std::move(again);
  }
  const size_t ok = static_cast<size_t>(std::count(stored.begin(), stored.end(), true));
  if (ok < width) {
    // Nothing less than a full stripe is acknowledged.
    for (size_t i = 0; i < width; ++i) {
      if (stored[i]) (void)RemovePiece(ref.nodes[i], store::FragmentRef(ref, static_cast<int>(i)));
    }
    return Status(first.code(), fmt::format("block {}: {} of {} fragments ({}) written; {}", ref.id, ok, width,
                                            scheme.ToString(), first.message()));
  }
  fragments_written_ += width;
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

std::vector<ClusterBlockService::PlanShare> ClusterBlockService::RoutePlan(
    const std::vector<store::BlockRef>& blocks, const std::vector<store::BlockSpan>& spans) const {
  const auto map = Map();
  std::vector<PlanShare> shares;
  std::map<std::string, size_t> index;  // node -> its share
  auto add = [&](const std::string& node, const store::BlockRef& piece) {
    auto [it, fresh] = index.try_emplace(node, shares.size());
    if (fresh) {
      PlanShare s;
      s.node = node;
      if (node != self_) s.address = map.at(node).address;
      shares.push_back(std::move(s));
    }
    shares[it->second].pieces.push_back(piece);
  };
  auto up = [&](const std::string& node) {
    if (node == self_) return true;
    auto it = map.find(node);
    return it != map.end() && it->second.up && !it->second.address.empty();
  };
  for (size_t j = 0; j < blocks.size(); ++j) {
    const auto& b = blocks[j];
    if (b.nodes.empty()) {
      add(self_, b);
    } else if (b.erasure_coded()) {
      // Fragment i holds bytes [i * size, (i + 1) * size) of the block.
      int first = 0, last = b.ec_k - 1;
      if (const uint64_t fs = b.FragmentSize(); j < spans.size() && fs > 0 && spans[j].length > 0) {
        first = static_cast<int>(std::min<uint64_t>(spans[j].offset / fs, last));
        last = static_cast<int>(std::min<uint64_t>((spans[j].offset + spans[j].length - 1) / fs, last));
      }
      for (int i = first; i <= last && static_cast<size_t>(i) < b.nodes.size(); ++i) {
        if (up(b.nodes[i])) add(b.nodes[i], store::FragmentRef(b, i));
      }
    } else if (const std::string owner = Owner(b, map); !owner.empty() && up(owner)) {
      add(owner, b);
    }
  }
  return shares;
}

void ClusterBlockService::RewriteLostFragments(const store::BlockRef& ref, const std::map<std::string, NodeInfo>& map,
                                               const ec::StripeReadReport& report) {
  for (const auto& r : report.rebuilt) {
    const auto code = report.why[r.index].code();
    // Damaged or missing on a holder that answered: write it back. (A
    // holder out of reach keeps its copy; repair moves it if it stays away.)
    if (code != StatusCode::kCorruption && code != StatusCode::kNotFound) continue;
    if (r.offset != 0 || r.bytes.size() != ec::FragmentSize(ref.size, ref.ec_k)) continue;  // only whole ones
    const auto piece = store::FragmentRef(ref, r.index);
    (void)RemovePiece(ref.nodes[r.index], piece);
    if (PutPiece(ref.nodes[r.index], piece, r.bytes, map).ok()) repaired_++;
  }
}

// A healthy stripe is read from its k data fragments; a degraded one
// through the one degraded-read path (ec/stripe_read.h), reconstructed,
// kept in the cache and its lost fragments rewritten.
Result<std::shared_ptr<const std::string>> ClusterBlockService::ReadStripe(const store::BlockRef& ref) {
  store::BlockCache* cache = local_.cache();
  if (cache != nullptr) {
    if (auto hit = cache->Get(ref.id)) return hit;  // reconstructed here before
  }
  stripe_reads_++;
  const int k = ref.ec_k, n = ref.ec_k + ref.ec_m;
  const auto codec = AQ_TRY(ec::Codec::Get({k, ref.ec_m}));
  if (ref.nodes.size() != static_cast<size_t>(n) || ref.fragment_crcs.size() != static_cast<size_t>(n)) {
    return Corruption(
        fmt::format("block {}: erasure-code record lists {} holders for {} fragments", ref.id, ref.nodes.size(), n));
  }
  const auto map = Map();
  const uint64_t frag = ec::FragmentSize(ref.size, k);
  std::vector<std::string> data;
  for (int i = 0; i < k; ++i) data.push_back(ReadBuffer(frag));
  std::vector<ec::Slice> wanted;
  for (int i = 0; i < k; ++i) wanted.push_back({i, 0, frag, data[i].data()});
  ec::StripeIo io;
  io.fetch = [&](int i, uint64_t offset, size_t len, char* into) -> Status {
    const auto piece = store::FragmentRef(ref, i);
    const std::string bytes = AQ_TRY(GetPiece(ref.nodes[i], piece, map));
    if (offset + len > bytes.size()) {
      return Corruption(fmt::format("block {}: {} holds {} bytes, not {}", piece.id, ref.nodes[i], bytes.size(), frag));
    }
    std::memcpy(into, bytes.data() + offset, len);
    return Status::Ok();
  };
  ec::StripeReadReport report;
  const Status read = ec::ReadStripeSlices(*codec, wanted, io, &report);
  const bool degraded = report.wanted_lost > 0;
  if (degraded) {
    degraded_reads_++;
    failovers_ += static_cast<uint64_t>(report.wanted_lost);
  }
  if (!read.ok()) return Status(read.code(), fmt::format("block {}: {}", ref.id, read.message()));
  auto block = std::make_shared<const std::string>(codec->Join(data, ref.size));
  if (crc32c::Value(*block) != ref.crc32c) {
    return Corruption(fmt::format("block {}: reassembled from fragments, its bytes do not match its checksum", ref.id));
  }
  if (degraded) {
    if (cache != nullptr) cache->Put(ref.id, block);
    RewriteLostFragments(ref, map, report);
  }
  return block;
}

Result<std::shared_ptr<const std::string>> ClusterBlockService::Read(const store::BlockRef& ref) {
  if (ref.nodes.empty()) {  // written before the node joined a cluster: it is local
    local_reads_++;
    return reads().Read(ref);
  }
  if (ref.erasure_coded()) return ReadStripe(ref);
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
        if (node == owner) return reads().Read(ref);
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
    // A holder the membership knows is down is not waited for (a frozen
    // or cut-off node would hold the read until the connect timeout).
    if (!it->second.up) {
      last = Unavailable(fmt::format("node {} is down", node));
      continue;
    }
    auto r = GetPiece(node, ref, map);
    if (!r.ok()) {
      last = r.status();
      failovers_++;
      continue;
    }
    auto block = std::make_shared<const std::string>(std::move(*r));
    if (local_bad) {
      // Replace this node's damaged or missing copy with the good bytes.
      (void)local_.Remove(ref);
      if (local_.store().WriteWithId(ref.id, ref.pool, *block).ok()) repaired_++;
    }
    return block;
  }
  // A copy the layout no longer names (left here by a rebalance, not yet
  // collected) is as good as any: its checksum is checked as it is read.
  if (std::find(ref.nodes.begin(), ref.nodes.end(), self()) == ref.nodes.end()) {
    auto bytes = local_.store().Read(ref);
    if (bytes.ok()) {
      local_reads_++;
      stray_reads_++;
      return std::make_shared<const std::string>(std::move(*bytes));
    }
  }
  // No holder could give it now: the client may try again, or another node.
  return Unavailable(fmt::format("block {}: no replica could be read (last: {})", ref.id, last.message()));
}

Status ClusterBlockService::Remove(const store::BlockRef& ref) {
  if (ref.nodes.empty()) return local_.Remove(ref);
  if (ref.erasure_coded() && local_.cache() != nullptr) local_.cache()->Erase(ref.id);
  Status first;
  for (const auto& [node, piece] : store::StoredPieces(ref)) {
    // A piece on a node that is down stays until that node's garbage collection.
    Status s = RemovePiece(node, piece);
    if (!s.ok() && s.code() != StatusCode::kNotFound && first.ok()) first = s;
  }
  return first;
}

Status ClusterBlockService::Replicate(const store::BlockRef& ref, const std::string& node) {
  auto block = AQ_TRY(Read(ref));
  const auto map = Map();
  store::BlockRef piece = ref;
  piece.nodes = {node};
  return PutPiece(node, piece, *block, map);
}

Status ClusterBlockService::RebuildFragment(const store::BlockRef& ref, int i, const std::string& node) {
  if (!ref.erasure_coded() || i < 0 || i >= ref.ec_k + ref.ec_m) {
    return InvalidArgument(fmt::format("block {} has no fragment {}", ref.id, i));
  }
  const auto map = Map();
  const auto piece = store::FragmentRef(ref, i);
  auto direct = GetPiece(ref.nodes[i], piece, map);
  std::string bytes;
  if (direct.ok()) {
    bytes = std::move(*direct);
  } else {
    // Its holder is gone: any K others give the block, and the block its fragments.
    auto block = AQ_TRY(ReadStripe(ref));
    const auto codec = AQ_TRY(ec::Codec::Get({ref.ec_k, ref.ec_m}));
    auto all = codec->Encode(*block);
    bytes = std::move(all[i]);
    if (crc32c::Value(bytes) != piece.crc32c) {
      return Corruption(fmt::format("block {}: fragment {} rebuilt with the wrong checksum", ref.id, i));
    }
  }
  AQ_TRY(PutPiece(node, piece, bytes, map));
  fragments_written_++;
  return Status::Ok();
}

Result<store::BlockRef> ClusterBlockService::Rewrite(const store::BlockRef& ref, const Policy& form,
                                                     const std::string& pool) {
  auto block = AQ_TRY(Read(ref));
  store::BlockRef out;
  out.id = ref.id;
  out.size = ref.size;
  out.crc32c = ref.crc32c;
  out.pool = pool.empty() ? ref.pool : pool;
  // Fragments are stored under their own ids and replicas under the
  // block's, so the new pieces never overwrite the old ones.
  return WriteAs(std::move(out), *block, form);
}

ClusterBlockStats ClusterBlockService::Stats() const {
  ClusterBlockStats s;
  s.local_reads = local_reads_;
  s.remote_reads = remote_reads_;
  s.failovers = failovers_;
  s.repaired_on_read = repaired_;
  s.stray_reads = stray_reads_;
  s.replicas_written = written_;
  s.remote_writes = remote_writes_;
  s.stripe_reads = stripe_reads_;
  s.degraded_reads = degraded_reads_;
  s.fragments_written = fragments_written_;
  return s;
}

}  // namespace aq::cluster
