#include "node/node.h"

#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <nlohmann/json.hpp>

#include "cluster/cluster_blocks.h"
#include "cluster/etcd_client.h"
#include "cluster/etcd_meta_store.h"
#include "cluster/membership.h"
#include "cluster/placement.h"
#include "cluster/repair.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/units.h"
#include "http/client.h"
#include "http/server.h"
#include "http/tls.h"
#include "s3/endpoint.h"
#include "s3/internal_routes.h"
#include "s3/layout.h"
#include "server/node_stats.h"
#include "server/s3_server.h"
#include "store/object_store.h"
#include "store/prefetch.h"
#include "store/stager.h"

namespace aq::node {
namespace {

// Whether something accepts TCP connections at HOST:PORT within
// `timeout_ms` (a member killed a moment ago refuses at once; its lease
// says so only when it expires).
bool Answers(const std::string& address, int timeout_ms) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) return false;
  bool ok = false;
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      ok = ::poll(&p, 1, timeout_ms) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return ok;
}

}  // namespace

Status NodeOptions::Validate() const {
  if (block_size < 4096 || block_size > (1ull << 30)) {
    return InvalidArgument(fmt::format("block size {} is outside 4 KiB to 1 GiB", units::IecBytes(block_size)));
  }
  if (credentials.empty() && !anonymous) {
    return InvalidArgument("a node needs credentials (AWS Signature V4 keys) or anonymous access enabled");
  }
  if (prefetch_window > 0 && prefetch_memory < block_size) {
    return InvalidArgument(fmt::format("prefetch memory {} is less than one block ({})",
                                       units::IecBytes(prefetch_memory), units::IecBytes(block_size)));
  }
  if (stage_memory > 0 && stage_memory < block_size) {
    return InvalidArgument(fmt::format("staging memory {} is less than one block ({}); 0 turns staging off",
                                       units::IecBytes(stage_memory), units::IecBytes(block_size)));
  }
  if (stage_threads < 1 || stage_threads > 1024) return InvalidArgument("staging reads 1 to 1024 blocks at once");
  if (port < 0 || port > 65535) return InvalidArgument(fmt::format("port {} is outside 0..65535", port));
  if (threads < 1 || threads > 4096) return InvalidArgument("a node needs 1 to 4096 request threads");
  if (send_bytes_per_second < 0) return InvalidArgument("a link rate must be >= 0 (0 = unlimited)");
  if (!etcd.empty()) {
    if (etcd.rfind("etcd://", 0) != 0 && etcd.rfind("etcds://", 0) != 0) {
      return InvalidArgument(
          fmt::format("metadata '{}': expected etcd://HOST:PORT[,HOST:PORT...] (etcds:// over TLS)", etcd));
    }
    if (replicas < 1 || replicas > 16) return InvalidArgument("a cluster keeps 1 to 16 replicas per block");
    if (lease_ttl_s < 1) return InvalidArgument("a membership lease lasts at least 1 s");
    if (etcd_timeout_s <= 0) return InvalidArgument("the etcd request timeout must be > 0 s");
    if (!advertise.empty()) AQ_TRY(s3::ParseHostPort(advertise, false));
    // A shared block is removed only when no layout names it: SQLite's
    // layouts are indexed by block, etcd's are not.
    for (const auto& p : pools) {
      if (p.dedup) {
        return Unsupported(
            fmt::format("pool '{}': dedup needs a single node's metadata; a cluster's (etcd) does not "
                        "track shared blocks yet",
                        p.name));
      }
    }
  }
  if (reclaim_max_s <= 0) return InvalidArgument("the bound on holding freed blocks must be > 0 s");
  if (lifecycle_day_s <= 0) return InvalidArgument("a lifecycle day must be > 0 s");
  return Status::Ok();
}

Result<std::string> NodeId(io::FileSystem& fs, const std::string& data, const std::string& given) {
  const std::string path = io::JoinPath(data, "node-id");
  if (!given.empty()) {
    for (char c : given) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
        return InvalidArgument(fmt::format("node id '{}': letters, digits, '-' and '_' only", given));
      }
    }
    return given;
  }
  if (auto f = fs.OpenRead(path, io::AccessHint::kSequential); f.ok()) {
    std::string id((*f)->size(), '\0');
    AQ_TRY((*f)->ReadAt(0, id.size(), id.data()));
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    if (!id.empty()) return id;
  }
  const std::string id = "node-" + store::NewBlockId().substr(0, 8);
  AQ_TRY(io::WriteFileAtomic(fs, path, id + "\n"));
  return id;
}

Node::Node() = default;

namespace {

s3::ScrubStatsDoc ScrubDoc(const store::Scrubber& scrubber) {
  const auto s = scrubber.Stats();
  s3::ScrubStatsDoc d;
  d.enabled = s.enabled;
  d.bytes_per_second = scrubber.options().bytes_per_second;
  d.interval_seconds = scrubber.options().interval_s;
  d.running = s.running;
  d.passes = s.passes;
  d.last_pass_seconds = s.last_pass_seconds;
  d.last_pass_ended_seconds_ago = s.last_pass_ended_s_ago;
  d.pieces_in_pass = s.pieces_in_pass;
  d.pieces_done_in_pass = s.pieces_done_in_pass;
  d.pieces_verified = s.pieces_verified;
  d.bytes_verified = s.bytes_verified;
  d.corrupt = s.corrupt;
  d.missing = s.missing;
  d.repaired = s.repaired;
  d.repair_errors = s.repair_errors;
  d.unrepaired = s.unrepaired;
  d.objects_at_risk = s.objects_at_risk;
  d.quarantined = s.quarantined;
  d.quarantined_bytes = s.quarantined_bytes;
  for (const auto& [path, bytes] : s.quarantine) d.quarantine.push_back({.path = path, .bytes = bytes});
  for (const auto& f : s.last_findings) {
    d.findings.push_back({.object = f.object,
                          .piece = f.piece,
                          .problem = f.problem,
                          .repaired = f.repaired,
                          .repair_error = f.repair_error,
                          .quarantined = f.quarantined,
                          .also = f.also});
  }
  return d;
}

}  // namespace

Node::~Node() { Stop(); }

Result<std::unique_ptr<Node>> Node::Start(NodeOptions options, std::unique_ptr<io::FileSystem> fs) {
  AQ_TRY(options.Validate());
  std::unique_ptr<Node> n(new Node());
  n->o_ = std::move(options);
  n->fs_ = fs ? std::move(fs) : io::NewPosixFileSystem();
  Status s = n->StartImpl();
  if (!s.ok()) {
    n->Stop();
    return s;
  }
  return n;
}

// Long by design: the start order is the contract (metadata, pools, garbage
// collection, caches, object store, tiering, prefetch, HTTP, cluster, repair,
// scrub), read top to bottom; Stop undoes it in reverse.
std::function<bool()> Node::Busy() const {
  if (!stager_) return nullptr;
  return [s = stager_.get()] { return s->Busy(); };
}

store::BlockService& Node::Staged(store::BlockService& inner) {
  if (o_.stage_memory == 0) return inner;
  store::StagerOptions so;
  so.memory_bytes = o_.stage_memory;
  so.threads = o_.stage_threads;
  std::function<bool(const std::string&)> resident;
  if (cache_) resident = [c = cache_.get()](const std::string& id) { return c->Contains(id); };
  stager_ = std::make_unique<store::Stager>(inner, so, std::move(resident));
  return *stager_;
}

size_t Node::RoutePlan(const std::string& stream, const std::vector<store::BlockRef>& blocks,
                       const std::vector<store::BlockSpan>& spans) {
  size_t queued = 0;
  for (const auto& share : cluster_blocks_->RoutePlan(blocks, spans)) {
    if (share.address.empty()) {
      queued += stager_->Plan(stream, share.pieces);
      continue;
    }
    // Advice: a node that does not take its share is read as without a plan.
    auto n = block_client_->Plan(share.address, stream, share.pieces);
    if (n.ok()) {
      queued += *n;
    } else {
      log::warn("plan {}: {} (those reads go unstaged)", stream, n.status().message());
    }
  }
  return queued;
}

void Node::CancelPlan(const std::string& stream) {
  if (stager_) stager_->Cancel(stream);
  for (const auto& n : cluster_blocks_->Nodes()) {
    if (n.id == node_id_ || !n.up || n.address.empty()) continue;
    if (Status s = block_client_->CancelPlan(n.address, stream); !s.ok())
      log::debug("plan {}: {}", stream, s.message());
  }
}

s3::internal::ClusterMapDoc Node::ClusterMap() {
  s3::internal::ClusterMapDoc map;
  map.replicas = cluster_blocks_->replicas();
  if (membership_) {
    map.self = membership_->self().id;
    for (const auto& n : membership_->Nodes()) {
      map.nodes.push_back({n.id, n.address, std::string(cluster::NodeStateName(n.state)), n.up});
    }
  }
  return map;
}

s3::Layout Node::LayoutOf(const store::ObjectMeta& object) {
  return cluster::LayoutFor(object, membership_ ? membership_->Nodes() : std::vector<cluster::NodeInfo>());
}

Status Node::StartImpl() {
  io::FileSystem& fs = *fs_;
  const bool cluster = !o_.etcd.empty();
  http::RaiseOpenFileLimit();
  std::vector<store::PoolConfig> pools = o_.pools;
  if (pools.empty()) pools.push_back({"default", io::JoinPath(o_.data_dir, "pool-default"), store::Media::kSsd});
  AQ_TRY(fs.MakeDirs(o_.data_dir));
  // Objects, metadata and keys are the node's users', not this machine's:
  // the data directory and every pool are private to the node's account.
  AQ_TRY(fs.MakePrivate(o_.data_dir));
  for (const auto& p : pools) {
    AQ_TRY(fs.MakeDirs(p.path));
    AQ_TRY(fs.MakePrivate(p.path));
  }
  const std::string lock_path = io::JoinPath(o_.data_dir, "LOCK");
  auto lock =
      fs.TryLock(lock_path, o_.port > 0 ? fmt::format("aquifer node pid {} serving {}:{}", ::getpid(), o_.host, o_.port)
                                        : fmt::format("aquifer node pid {}", ::getpid()));
  if (!lock.ok()) {
    if (lock.status().code() != StatusCode::kConflict) return lock.status();
    return Status(StatusCode::kConflict,
                  fmt::format("data directory '{}' is in use by another node ({}): stop that node, or give this one "
                              "a data directory of its own",
                              o_.data_dir, lock.status().message()));
  }
  data_lock_ = std::move(*lock);
  if (cluster) {
    etcd_ = AQ_TRY(cluster::EtcdClient::Connect(o_.etcd, o_.etcd_timeout_s));
    meta_ = cluster::NewEtcdMetaStore(etcd_);
    node_id_ = AQ_TRY(NodeId(fs, o_.data_dir, o_.node_id));
  } else {
    meta_ = AQ_TRY(store::OpenSqliteMetaStore(io::JoinPath(o_.data_dir, "meta.db")));
  }
  blocks_ = AQ_TRY(store::BlockStore::Open(fs, pools));
  // Before serving: blocks no object refers to are leftovers of interrupted
  // writes. (On a cluster's node: the blocks the layouts place on this node;
  // a replica moved elsewhere while it was down is a leftover too.)
  std::vector<std::string> keep =
      cluster ? AQ_TRY(cluster::BlocksHeldBy(*meta_, node_id_)) : AQ_TRY(meta_->ReferencedBlocks());
  gc_ = AQ_TRY(blocks_->CollectGarbage(keep));
  // Copies a mover left in a pool their layout no longer names.
  if (const uint64_t strays = AQ_TRY(store::RemoveStrayCopies(*meta_, *blocks_, cluster ? node_id_ : "")); strays > 0) {
    log::info("removed {} stray block copies left by an interrupted move between pools", strays);
  }
  if (o_.cache_bytes > 0) cache_ = std::make_unique<store::BlockCache>(o_.cache_bytes, o_.cache_policy, o_.block_size);
  if (!o_.l3_dir.empty()) {
    l3_ = AQ_TRY(store::L3Cache::Open(fs, {o_.l3_dir, o_.l3_bytes}, cache_.get()));
    AQ_TRY(fs.MakePrivate(o_.l3_dir));  // copies of the pools' blocks
    l3_->Retain(keep);                  // copies of blocks freed while the node was down
  }
  local_ = std::make_unique<store::LocalBlockService>(*blocks_, cache_.get(), l3_.get());
  // An emulated link (--net-limit) stands for a network between node and
  // clients: nothing goes around it.
  if (cache_ && o_.same_host_memory > 0 && o_.send_bytes_per_second == 0) {
    server::SameHostOptions sh;
    sh.memory_bytes = o_.same_host_memory;
    same_host_ = AQ_TRY(server::SameHostReads::Start(*cache_, sh, blocks_.get(), cluster ? node_id_ : ""));
  }

  store::ObjectStoreOptions oo;
  oo.block_size = o_.block_size;
  oo.reclaim.min_delay_s = o_.reclaim_delay_s >= 0 ? o_.reclaim_delay_s : (cluster ? 60 : 2);
  oo.reclaim.max_hold_s = o_.reclaim_max_s;
  oo.reclaim.free_early_when_full = !cluster;  // one node's readers all pin
  oo.reclaim.clock = &clock();
  server::S3ServerOptions so;
  cluster::ClusterConfig config;
  if (cluster) {
    config = AQ_TRY(cluster::EnsureClusterConfig(*etcd_, cluster::kClusterPrefix, o_.replicas));
    so.s3.internal.node_credential = {cluster::kNodeAccessKey, config.node_secret};
    std::shared_ptr<http::TlsClient> peer_tls;  // the other nodes serve HTTPS too
    if (o_.tls) peer_tls = AQ_TRY(http::TlsClient::Create(o_.tls_ca));
    block_client_ = std::make_unique<cluster::BlockClient>(so.s3.internal.node_credential, 10, peer_tls);
    cluster_blocks_ = std::make_unique<cluster::ClusterBlockService>(node_id_, *local_, *block_client_, o_.replicas);
    // Plans are staged where the blocks are stored: the stager sits over
    // this node's own pools, and every read of a piece held here (this
    // node's for its clients, other nodes', aquifer:// clients' from the
    // layout) passes through it.
    Staged(*local_);
    if (stager_) {
      cluster_blocks_->set_local_reads(stager_.get());
      so.s3.internal.block_reads = stager_.get();
    }
    objects_ = std::make_unique<store::ObjectStore>(*meta_, *blocks_, *cluster_blocks_, oo, cache_.get());
    so.s3.internal.node_blocks = local_.get();
    so.s3.internal.cluster = this;
    so.s3.open_first_block = cluster;
  } else {
    objects_ = std::make_unique<store::ObjectStore>(*meta_, *blocks_, Staged(*local_), oo, cache_.get());
  }
  objects_->set_l3(l3_.get());
  objects_->set_stager(stager_.get());
  access_ = std::make_unique<store::AccessClock>(o_.atime_granularity_s);
  objects_->set_access_clock(access_.get());
  // New objects go straight to their tiering policy's pool.
  std::function<std::string(store::Media)> resolve;
  std::function<bool(const std::string&, const std::string&)> usable;
  if (cluster) {
    resolve = [this](store::Media media) {
      return store::PoolForMedia(cluster::MemberPools(cluster_blocks_->Nodes()), media);
    };
    usable = [this](const std::string& bucket, const std::string& pool) {
      size_t eligible = 0;
      for (const auto& n : cluster_blocks_->Nodes())
        eligible += n.up && n.state == cluster::NodeState::kActive && cluster::HasPool(n, pool);
      return eligible >= cluster_blocks_->PolicyFor(bucket).width();
    };
  } else {
    resolve = [this](store::Media media) { return store::PoolForMedia(blocks_->pools(), media); };
    usable = [this](const std::string&, const std::string& pool) {
      for (const auto& p : blocks_->pools()) {
        if (p.name == pool) return true;
      }
      return false;
    };
  }
  placer_ = std::make_unique<store::TierPlacer>(*meta_, std::move(resolve), std::move(usable));
  objects_->set_pool_chooser([p = placer_.get()](const std::string& bucket, const std::string& key, uint64_t size) {
    return p->PoolFor(bucket, key, size);
  });
  if (!cluster) {
    mover_ = std::make_unique<store::Mover>(*meta_, *blocks_, objects_->reclaimer());
    // The pools, for tools that check a policy's pool before the mover does.
    AQ_TRY(store::PublishPools(*meta_, blocks_->pools()));
  }
  tier_thread_ = std::thread([this] { TierLoop(); });
  if (o_.prefetch_window > 0) {
    store::PrefetchOptions po;
    po.max_window_blocks = o_.prefetch_window;
    po.memory_bytes = o_.prefetch_memory;
    prefetch_ = std::make_unique<store::Prefetcher>(objects_->service(), po);
    objects_->set_prefetcher(prefetch_.get());
  }
  stats_ = std::make_unique<server::NodeStats>();
  so.http.host = o_.host;
  so.http.port = o_.port;
  so.http.threads = o_.threads;
  so.http.max_connections = o_.max_connections;
  so.http.header_timeout_s = o_.header_timeout_s;
  so.http.idle_timeout_s = o_.idle_timeout_s;
  so.http.io_timeout_s = o_.io_timeout_s;
  so.http.tls = o_.tls;
  so.s3.credentials = o_.credentials;
  so.s3.keys_meta = meta_.get();  // users' keys and their grants (aquifer key)
  so.s3.anonymous = o_.anonymous;
  so.s3.stats = stats_.get();
  so.s3.send_bytes_per_second = o_.send_bytes_per_second;
  so.s3.same_host = same_host_.get();
  s3_ = AQ_TRY(server::S3Server::Start(*objects_, std::move(so)));
  if (cluster) AQ_TRY(JoinCluster());
  AQ_TRY(StartScrubber());

  if (o_.metrics_port >= 0) {
    std::function<void(s3::NodeStatsDoc&)> extra = [this](s3::NodeStatsDoc& doc) {
      if (same_host_) {
        const auto s = same_host_->Stats();
        doc.same_host = s3::SameHostStatsDoc{.grants = s.grants,
                                             .granted_blocks = s.granted_blocks,
                                             .fetches = s.fetches,
                                             .blocks_sent = s.blocks_sent,
                                             .files_sent = s.files_sent,
                                             .blocks_gone = s.blocks_gone,
                                             .refused = s.refused,
                                             .created = s.created,
                                             .evicted = s.evicted,
                                             .shared = s.shared,
                                             .shared_bytes = s.shared_bytes,
                                             .memory_bytes = same_host_->options().memory_bytes};
      }
      doc.scrub = ScrubDoc(*scrubber_);
      const http::ServerStats h = s3_->Stats();
      doc.connections = s3::ConnectionStatsDoc{.open = h.open,
                                               .accepted = h.accepted,
                                               .requests = h.requests,
                                               .refused_overload = h.refused_overload,
                                               .header_timeouts = h.header_timeouts,
                                               .idle_closed = h.idle_closed,
                                               .bad_heads = h.bad_heads,
                                               .tls_failures = h.tls_failures};
      MutexLock lock(uploads_mu_);
      doc.uploads = s3::UploadStatsDoc{.in_progress = uploads_.in_progress,
                                       .parts = uploads_.parts,
                                       .part_bytes = uploads_.part_bytes,
                                       .expired = uploads_expired_,
                                       .expired_bytes = uploads_expired_bytes_,
                                       .sweep_errors = uploads_.errors,
                                       .oldest_age_seconds = uploads_.oldest_age_s,
                                       .expiry_seconds = o_.upload_expiry_s,
                                       .last_error = uploads_.last_error};
    };
    if (cluster) {
      extra = [this, single = extra](s3::NodeStatsDoc& doc) {
        single(doc);
        const auto b = cluster_blocks_->Stats();
        const auto r = repairer_->Stats();
        s3::ClusterStatsDoc& c = doc.cluster.emplace();
        c.node = node_id_;
        c.replicas = o_.replicas;
        const auto policies = cluster_blocks_->CurrentPolicies();
        c.policy = policies.cluster.ToString();
        for (const auto& [bucket, p] : policies.buckets) c.bucket_policies[bucket] = p.ToString();
        c.nodes_known = membership_->Nodes().size();
        c.rejoins = membership_->rejoins();
        c.blocks = {.local_reads = b.local_reads,
                    .remote_reads = b.remote_reads,
                    .failovers = b.failovers,
                    .repaired_on_read = b.repaired_on_read,
                    .stray_reads = b.stray_reads,
                    .replicas_written = b.replicas_written,
                    .remote_writes = b.remote_writes,
                    .stripe_reads = b.stripe_reads,
                    .degraded_reads = b.degraded_reads,
                    .fragments_written = b.fragments_written};
        c.repair = {.passes = r.passes,
                    .objects = r.objects,
                    .blocks = r.blocks,
                    .under_protected = r.under_protected,
                    .misplaced = r.misplaced,
                    .copied = r.copied,
                    .bytes_copied = r.bytes_copied,
                    .dropped = r.dropped,
                    .drops_pending = r.drops_pending,
                    .reprotected = r.reprotected,
                    .tiered = r.tiered,
                    .bytes_tiered = r.bytes_tiered,
                    .tier_misplaced = r.tier_misplaced,
                    .tier_blocked = r.tier_blocked,
                    .layouts_committed = r.layouts_committed,
                    .conflicts = r.conflicts,
                    .errors = r.errors,
                    .fully_protected = r.fully_protected,
                    .last_pass_seconds = r.last_pass_seconds,
                    .last_error = r.last_error};
      };
    }
    // The scrubber's findings as Prometheus series too.
    store::Scrubber* sc = scrubber_.get();
    auto scrub = [sc](uint64_t store::ScrubStats::*field) {
      return [sc, field] { return static_cast<double>(sc->Stats().*field); };
    };
    std::vector<server::MetricsServer::Series> series = {
        {"node.scrub.verified", "pieces/s", scrub(&store::ScrubStats::pieces_verified), true},
        {"node.scrub.verified_bytes", "MB/s", [sc] { return static_cast<double>(sc->Stats().bytes_verified) / 1e6; },
         true},
        {"node.scrub.corrupt", "pieces/s", scrub(&store::ScrubStats::corrupt), true},
        {"node.scrub.missing", "pieces/s", scrub(&store::ScrubStats::missing), true},
        {"node.scrub.repaired", "pieces/s", scrub(&store::ScrubStats::repaired), true},
        {"node.scrub.unrepaired", "pieces", scrub(&store::ScrubStats::unrepaired), false},
        {"node.scrub.objects_at_risk", "objects",
         [sc] { return static_cast<double>(sc->Stats().objects_at_risk.size()); }, false}};
    // The S3 port's connections, and those its limits cut or refused (a
    // slowloris shows as heads timed out, a flood as refusals).
    auto http = [this](uint64_t http::ServerStats::*field) {
      return [this, field] { return static_cast<double>(s3_->Stats().*field); };
    };
    for (server::MetricsServer::Series s : std::vector<server::MetricsServer::Series>{
             {"node.http.connections_open", "connections", http(&http::ServerStats::open), false},
             {"node.http.connections_accepted", "connections/s", http(&http::ServerStats::accepted), true},
             {"node.http.connections_timed_out", "connections/s", http(&http::ServerStats::header_timeouts), true},
             {"node.http.connections_refused", "connections/s", http(&http::ServerStats::refused_overload), true},
             {"node.http.bad_heads", "requests/s", http(&http::ServerStats::bad_heads), true},
             {"node.http.tls_failures", "handshakes/s", http(&http::ServerStats::tls_failures), true}}) {
      series.push_back(std::move(s));
    }
    if (cluster) {
      // Protection and repair as this node's last pass over the namespace
      // saw them (every node passes over all of it: take the max across
      // nodes), the members it knows up and down, and the work it did.
      auto repair = [this](auto field) {
        return [this, field] { return repairer_ ? static_cast<double>(repairer_->Stats().*field) : 0.0; };
      };
      auto members = [this](bool up) {
        return [this, up] {
          if (!membership_) return 0.0;
          double n = 0;
          for (const auto& m : membership_->Nodes()) {
            if (m.state != cluster::NodeState::kRemoved && m.up == up) ++n;
          }
          return n;
        };
      };
      auto blocks = [this](uint64_t cluster::ClusterBlockStats::*field) {
        return [this, field] { return static_cast<double>(cluster_blocks_->Stats().*field); };
      };
      for (server::MetricsServer::Series s : std::vector<server::MetricsServer::Series>{
               {"node.cluster.nodes_up", "nodes", members(true), false},
               {"node.cluster.nodes_down", "nodes", members(false), false},
               {"node.repair.under_protected", "blocks", repair(&cluster::RepairStats::under_protected), false},
               {"node.repair.misplaced", "blocks", repair(&cluster::RepairStats::misplaced), false},
               {"node.repair.fully_protected", "", repair(&cluster::RepairStats::fully_protected), false},
               {"node.repair.tier_misplaced", "blocks", repair(&cluster::RepairStats::tier_misplaced), false},
               {"node.repair.drops_pending", "pieces", repair(&cluster::RepairStats::drops_pending), false},
               {"node.repair.last_pass_seconds", "", repair(&cluster::RepairStats::last_pass_seconds), false},
               {"node.repair.passes", "passes/s", repair(&cluster::RepairStats::passes), true},
               {"node.repair.copied", "blocks/s", repair(&cluster::RepairStats::copied), true},
               {"node.repair.copied_bytes", "MB/s",
                [this] { return repairer_ ? static_cast<double>(repairer_->Stats().bytes_copied) / 1e6 : 0.0; }, true},
               {"node.repair.reprotected", "blocks/s", repair(&cluster::RepairStats::reprotected), true},
               {"node.repair.tiered_bytes", "MB/s",
                [this] { return repairer_ ? static_cast<double>(repairer_->Stats().bytes_tiered) / 1e6 : 0.0; }, true},
               {"node.repair.errors", "errors/s", repair(&cluster::RepairStats::errors), true},
               {"node.cluster.remote_reads", "blocks/s", blocks(&cluster::ClusterBlockStats::remote_reads), true},
               {"node.cluster.degraded_reads", "blocks/s", blocks(&cluster::ClusterBlockStats::degraded_reads), true},
               {"node.cluster.failovers", "blocks/s", blocks(&cluster::ClusterBlockStats::failovers), true},
               {"node.cluster.repaired_on_read", "pieces/s", blocks(&cluster::ClusterBlockStats::repaired_on_read),
                true}}) {
        series.push_back(std::move(s));
      }
    }
    if (server::SameHostReads* sh = same_host_.get()) {
      series.push_back({"node.same_host.blocks_sent", "blocks/s",
                        [sh] { return static_cast<double>(sh->Stats().blocks_sent); }, true});
      series.push_back({"node.same_host.files_sent", "blocks/s",
                        [sh] { return static_cast<double>(sh->Stats().files_sent); }, true});
      series.push_back(
          {"node.same_host.shared", "bytes", [sh] { return static_cast<double>(sh->Stats().shared_bytes); }, false});
    }
    std::function<nlohmann::json()> dashboard = [this]() -> nlohmann::json {
      if (!membership_) return {{"node", s3::HostPort{o_.host, s3_->port()}.ToString()}};  // a single node
      return DashboardMembers();
    };
    metrics_ = AQ_TRY(server::MetricsServer::Start(*stats_, *objects_, o_.metrics_host, o_.metrics_port, extra,
                                                   std::move(series), o_.tls, std::move(dashboard)));
  }
  return Status::Ok();
}

nlohmann::json Node::DashboardMembers() {
  const std::vector<cluster::NodeInfo> nodes = membership_->Nodes();
  // Who answers, probed at most once a second however many pages poll.
  std::map<std::string, bool> answers;
  {
    MutexLock lock(dashboard_mu_);
    const double now = Clock::Real().Now();
    if (now - dashboard_probed_ >= 1) {
      std::vector<std::pair<std::string, std::future<bool>>> probes;
      for (const auto& n : nodes) {
        probes.emplace_back(n.address, std::async(std::launch::async, Answers, n.address, 300));
      }
      dashboard_answers_.clear();
      for (auto& [address, f] : probes) dashboard_answers_[address] = f.get();
      dashboard_probed_ = Clock::Real().Now();
    }
    answers = dashboard_answers_;
  }
  nlohmann::json members = nlohmann::json::array();
  for (const auto& n : nodes) {
    nlohmann::json pools = nlohmann::json::array();
    for (size_t i = 0; i < n.pools.size(); ++i) {
      pools.push_back({{"name", n.pools[i]},
                       {"media", i < n.pool_media.size() ? store::MediaName(n.pool_media[i]) : std::string_view()}});
    }
    auto status = s3::ParseMemberStatusDoc(n.status_json);  // a record it cannot read shows as empty
    const auto a = answers.find(n.address);
    members.push_back({{"id", n.id},
                       {"address", n.address},
                       {"state", cluster::NodeStateName(n.state)},
                       {"up", n.up},
                       {"answers", a != answers.end() && a->second},
                       {"self", n.id == node_id_},
                       {"pools", std::move(pools)},
                       {"capacity_bytes", n.capacity_bytes},
                       {"status", s3::ToJson(status.ok() ? *status : s3::MemberStatusDoc{})}});
  }
  return {{"node", node_id_}, {"members", std::move(members)}};
}

Status Node::JoinCluster() {
  // Listening: now the cluster may send this node blocks and requests.
  cluster::NodeInfo self;
  self.id = node_id_;
  self.address = o_.advertise.empty() ? s3::HostPort{o_.host, s3_->port()}.ToString() : o_.advertise;
  self.tls = o_.tls != nullptr;
  // Nodes copy blocks to each other through their S3 ports: all speak TLS,
  // or none does.
  const auto members = AQ_TRY(cluster::ReadClusterMap(*etcd_, cluster::kClusterPrefix));
  for (const auto& n : members) {
    if (n.id == node_id_ || n.state == cluster::NodeState::kRemoved || n.tls == self.tls) continue;
    return InvalidArgument(fmt::format(
        "node {} ({}) serves {}, this node {}: a cluster's nodes all serve TLS (--tls-cert/--tls-key, --tls-ca) or "
        "none does",
        n.id, n.address, n.tls ? "TLS" : "plain HTTP", self.tls ? "TLS" : "plain HTTP"));
  }
  // Over TLS this node must trust the others' certificates (its --tls-ca
  // signed them): with a wrong CA it would join, show active, and fail
  // every block copy and forwarded read. One handshake with each member
  // that is up; one that cannot be reached now is not held against it.
  if (o_.tls) {
    http::ClientOptions co;
    co.connect_timeout_s = 3;
    co.io_timeout_s = 5;
    co.tls = AQ_TRY(http::TlsClient::Create(o_.tls_ca));
    http::Pool pool(co);
    for (const auto& n : members) {
      if (n.id == node_id_ || n.state == cluster::NodeState::kRemoved || !n.up) continue;
      auto res =
          pool.Send(n.address, http::ClientRequest{"GET", s3::internal::ClusterPath(), {}, {}, 0, nullptr}, 1 << 20);
      if (!res.ok() && res.status().code() == StatusCode::kPermissionDenied) {
        return Status(StatusCode::kPermissionDenied,
                      fmt::format("not joining: this node cannot verify node {}'s certificate with --tls-ca {}: {}",
                                  n.id, o_.tls_ca.empty() ? "(the system's CAs)" : o_.tls_ca, res.status().message()));
      }
    }
  }
  for (const auto& p : blocks_->pools()) {
    self.pools.push_back(p.name);
    self.pool_media.push_back(p.media);
  }
  struct statvfs vfs {};
  if (::statvfs(blocks_->pools().front().path.c_str(), &vfs) == 0) {
    self.capacity_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
  membership_ = AQ_TRY(cluster::Membership::Join(etcd_, self, cluster::kClusterPrefix, o_.lease_ttl_s, clock()));
  cluster_blocks_->Attach(membership_.get());
  // Load and cache, published with the alive key for `aquifer cluster status`.
  membership_->SetStatusProvider([this, last = std::make_shared<std::pair<double, uint64_t>>(0.0, 0),
                                  last_usage = std::make_shared<std::pair<double, std::pair<uint64_t, uint64_t>>>()]() {
    const double now = Clock::Real().Now();
    const uint64_t gets = stats_->requests(server::Op::kGet);
    const double rate = last->first > 0 ? (gets - last->second) / (now - last->first) : 0;
    *last = {now, gets};
    s3::MemberStatusDoc doc;
    doc.get_per_second = rate;
    doc.bytes_out = stats_->bytes_out();
    if (cache_) {
      auto c = cache_->Stats();
      doc.cache_hits = c.hits;
      doc.cache_misses = c.misses;
      doc.cache_bytes = c.bytes;
    }
    doc.remote_reads = cluster_blocks_->Stats().remote_reads;
    // Physical and logical bytes of this node's pools (`cluster status`'s
    // data reduction); a pool listing at most every 10 s.
    if (now - last_usage->first >= 10 || last_usage->first == 0) {
      if (auto usage = blocks_->Usage(); usage.ok()) {
        uint64_t physical = 0, logical = 0;
        for (const auto& u : *usage) {
          physical += u.bytes;
          logical += u.logical_bytes;
        }
        *last_usage = {now, {physical, logical}};
      }
    }
    doc.pool_bytes = last_usage->second.first;
    doc.pool_logical_bytes = last_usage->second.second;
    if (repairer_) {  // what the dashboard sums over the members
      const auto r = repairer_->Stats();
      auto& d = doc.repair.emplace();
      d.passes = r.passes;
      d.under_protected = r.under_protected;
      d.misplaced = r.misplaced;
      d.copied = r.copied;
      d.bytes_copied = r.bytes_copied;
      d.reprotected = r.reprotected;
      d.tiered = r.tiered;
      d.bytes_tiered = r.bytes_tiered;
      d.tier_misplaced = r.tier_misplaced;
      d.tier_blocked = r.tier_blocked;
      d.fully_protected = r.fully_protected;
    }
    if (scrubber_) {  // what `aquifer cluster status` reports as found on disk
      const auto sc = scrubber_->Stats();
      auto& d = doc.scrub.emplace();
      d.enabled = sc.enabled;
      d.passes = sc.passes;
      d.pieces_verified = sc.pieces_verified;
      d.corrupt = sc.corrupt;
      d.missing = sc.missing;
      d.repaired = sc.repaired;
      d.unrepaired = sc.unrepaired;
      d.objects_at_risk = sc.objects_at_risk;
      d.quarantined = sc.quarantined;
      d.quarantined_bytes = sc.quarantined_bytes;
    }
    return s3::ToJson(doc).dump();
  });
  cluster::RepairOptions ro;
  ro.bytes_per_second = o_.repair_bytes_per_second;
  ro.interval_seconds = o_.repair_interval_s;
  ro.drop_delay_seconds = o_.reclaim_delay_s >= 0 ? o_.reclaim_delay_s : 60;
  ro.tier_bytes_per_second = o_.tier_bytes_per_second;
  ro.busy = Busy();
  repairer_ = std::make_unique<cluster::Repairer>(*membership_, *meta_, *cluster_blocks_, ro);
  return Status::Ok();
}

void Node::TierLoop() {
  // Records access times every few seconds. On a single node, also runs
  // the tier-run protocol (store::TierRuns: a mover pass when one is due or
  // asked for), checking every 200 ms.
  auto seconds = [this] { return clock().Now(); };
  double flushed = seconds();
  auto flush = [&] {
    if (Status s = access_->Flush(*meta_); !s.ok())
      log::warn("tiering: access times not recorded yet: {}", s.message());
  };
  std::optional<store::TierRuns> runs;
  if (mover_) {
    store::TierOptions to;
    to.bytes_per_second = o_.tier_bytes_per_second;
    to.busy = Busy();
    runs.emplace(*meta_, *mover_, o_.tier_interval_s, std::move(to), flushed);
  }
  SweepUploads();  // the counts are there from the start
  while (!tier_stop_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double now = seconds();
    SweepUploads();
    if (now - flushed >= std::min(2.0, std::max(0.2, o_.atime_granularity_s))) {
      flush();
      flushed = now;
    }
    if (!runs) continue;
    auto report = runs->Tick(now, flush, &tier_stop_);
    if (report && report->ok() && (*report)->blocks_moved > 0) {
      const auto& r = **report;
      log::info("tiering: moved {} blocks of {} objects ({} MB) in {:.1f} s", r.blocks_moved, r.objects_moved,
                r.bytes_moved / 1000000, r.seconds);
    }
  }
  flush();
}

// Every so often (a quarter of the shortest limit, between 0.5 and 60 s):
// abort the multipart uploads past their age limit, and count the rest.
void Node::SweepUploads() {
  const double now = clock().Now();
  double every = std::min(60.0, o_.lifecycle_day_s / 4);
  if (o_.upload_expiry_s > 0) every = std::min(every, o_.upload_expiry_s / 4);
  if (uploads_swept_at_ > 0 && now - uploads_swept_at_ < std::max(0.5, every)) return;
  uploads_swept_at_ = now;
  store::UploadExpiryOptions uo;
  uo.max_age_s = o_.upload_expiry_s;
  uo.day_s = o_.lifecycle_day_s;
  const int64_t now_ns = clock().WallNanos();
  auto sweep = store::ExpireUploads(*objects_, uo, now_ns);
  if (!sweep.ok()) {
    log::warn("uploads: the sweep for abandoned multipart uploads failed: {}", sweep.status().message());
    return;
  }
  if (sweep->expired > 0) {
    log::info("uploads: aborted {} abandoned multipart upload(s) ({} bytes of parts)", sweep->expired,
              sweep->expired_bytes);
  }
  MutexLock lock(uploads_mu_);
  uploads_ = *sweep;
  uploads_expired_ += sweep->expired;
  uploads_expired_bytes_ += sweep->expired_bytes;
}

Status Node::StartScrubber() {
  // The pieces this node should hold: every object's layout, walked.
  const std::string self = cluster_blocks_ ? node_id_ : std::string();
  auto expected = [this, self]() -> Result<std::vector<store::ExpectedPiece>> {
    std::vector<store::ExpectedPiece> out;
    for (const auto& b : AQ_TRY(meta_->ListBuckets())) {
      std::string after;
      for (;;) {
        auto page = AQ_TRY(meta_->ListObjects({b.name, "", after, 1000}));
        for (const auto& listed : page.objects) {
          after = listed.key;
          auto o = meta_->GetObject(b.name, listed.key);
          if (o.ok()) store::PiecesHeldBy(*o, self, &out);  // gone meanwhile: nothing to hold
        }
        if (!page.truncated || page.objects.empty()) break;
      }
    }
    return out;
  };
  store::Scrubber::Repair repair;
  if (cluster_blocks_) {
    // A bad piece here is rebuilt from the block's other replicas, or
    // from K other fragments.
    repair = [this](const store::ExpectedPiece& e) -> Status {
      if (cache_) cache_->Erase(e.piece.id);
      if (e.fragment >= 0) return cluster_blocks_->RebuildFragment(e.block, e.fragment, node_id_);
      return cluster_blocks_->Replicate(e.block, node_id_);
    };
  }
  store::ScrubOptions so;
  so.busy = Busy();
  so.bytes_per_second = o_.scrub_bytes_per_second;
  so.interval_s = o_.scrub_interval_s;
  so.clock = &clock();
  scrubber_ = std::make_unique<store::Scrubber>(*blocks_, std::move(expected), std::move(repair), so);
  scrubber_->Start();
  return Status::Ok();
}

void Node::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (scrubber_) scrubber_->Stop();
  tier_stop_ = true;
  if (tier_thread_.joinable()) tier_thread_.join();
  repairer_.reset();
  membership_.reset();  // leave first: the cluster stops sending this node work
  metrics_.reset();
  if (s3_) s3_->Stop();
}

int Node::port() const { return s3_ ? s3_->port() : 0; }
int Node::metrics_port() const { return metrics_ ? metrics_->port() : -1; }
std::string Node::address() const { return s3::HostPort{o_.host, port()}.ToString(); }

std::string Node::Describe() const {
  std::string out = fmt::format("aquifer serve: S3 on {}://{} (data {}, {} blocks)\n", o_.tls ? "https" : "http",
                                address(), o_.data_dir, units::IecBytes(o_.block_size));
  for (const auto& p : blocks_->pools()) {
    std::string extra;
    if (p.direct) extra += ", O_DIRECT";
    if (p.read_latency_s > 0) extra += fmt::format(", +{:.3g} ms per block read", p.read_latency_s * 1e3);
    if (p.spindles > 0) extra += fmt::format(" ({} at once)", p.spindles);
    if (p.compression.enabled()) {
      extra +=
          fmt::format(", compress {} where it saves {:.0f}%", p.compression.ToString(), p.compression.min_saving * 100);
    }
    out += fmt::format("  pool {:<10} {} ({}{})\n", p.name, p.path, store::MediaName(p.media), extra);
  }
  if (metrics_) {
    out += fmt::format("  metrics: {}://{}:{}/metrics (Prometheus), /stats (JSON, aquifer stats)\n",
                       o_.tls ? "https" : "http", o_.metrics_host, metrics_->port());
  }
  out += fmt::format("  cache: {}, {}\n", units::IecBytes(o_.cache_bytes),
                     !cache_ ? "off" : (o_.cache_policy == store::CachePolicy::kTinyLfu ? "tinylfu" : "lru"));
  if (l3_) {
    out += fmt::format("  l3 cache: {} in {}, {} blocks kept from before\n", units::IecBytes(o_.l3_bytes), o_.l3_dir,
                       l3_->Stats().restored);
  }
  if (o_.send_bytes_per_second > 0) {
    out += fmt::format("  net limit: {:.1f} MB/s sent (an emulated link)\n", o_.send_bytes_per_second / 1e6);
  }
  if (same_host_) {
    out +=
        fmt::format("  same-host reads: clients on this machine read RAM-cached blocks from shared memory, up to {}\n",
                    units::IecBytes(o_.same_host_memory));
  } else {
    out += o_.send_bytes_per_second > 0 ? "  same-host reads: off (an emulated link stands between clients and node)\n"
                                        : "  same-host reads: off\n";
  }
  if (stager_) {
    out += fmt::format("  staging: readers' plans staged {} blocks at once, {} in all\n", o_.stage_threads,
                       units::IecBytes(o_.stage_memory));
  } else {
    out += "  staging: off\n";
  }
  if (prefetch_) {
    out += fmt::format("  prefetch: up to {} blocks ahead per stream, {} in all\n", o_.prefetch_window,
                       units::IecBytes(o_.prefetch_memory));
  } else {
    out += "  prefetch: off\n";
  }
  out += fmt::format("  start-up: {} blocks, {} orphans and {} temporaries removed\n", gc_.blocks_seen,
                     gc_.orphans_removed, gc_.temporaries_removed);
  out += fmt::format("  limits: {} request threads, {} connections, {:.0f} s to send a request head\n", o_.threads,
                     o_.max_connections, o_.header_timeout_s);
  out += fmt::format("  auth: {}\n", o_.credentials.empty()
                                         ? std::string("anonymous (unsigned requests accepted)")
                                         : fmt::format("Signature V4, {} key(s){}", o_.credentials.size(),
                                                       o_.anonymous ? ", anonymous also accepted" : ""));
  if (membership_) {
    out += fmt::format("  cluster: node {} at {}, metadata in {}, {} replicas per block, {} nodes known\n", node_id_,
                       membership_->self().address, o_.etcd, o_.replicas, membership_->Nodes().size());
  }
  return out;
}

std::string Node::Summary() const {
  std::string out;
  if (prefetch_) {
    auto ps = prefetch_->Stats();
    out += fmt::format(
        "aquifer serve: prefetch read {} blocks ahead, {} found by readers ({} while in flight), {} unused\n",
        ps.issued, ps.hits + ps.late_hits, ps.late_hits, ps.wasted);
  }
  if (cache_) {
    auto cs = cache_->Stats();
    out += fmt::format("aquifer serve: block cache {} of {}, {:.1f}% hits ({} of {})\n",
                       units::Bytes(static_cast<double>(cs.bytes)), units::Bytes(static_cast<double>(cs.capacity)),
                       100 * cs.hit_ratio(), cs.hits, cs.hits + cs.misses);
  }
  if (stats_) {
    out += fmt::format("aquifer serve: {} client errors, {} server errors\n", stats_->client_errors(),
                       stats_->server_errors());
  }
  return out;
}

}  // namespace aq::node
