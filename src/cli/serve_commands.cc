// aquifer serve: an embedded single storage node speaking S3 over HTTP.
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <sys/statvfs.h>

#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "cli/cli.h"
#include "cluster/cluster_blocks.h"
#include "cluster/etcd_client.h"
#include "cluster/etcd_meta_store.h"
#include "cluster/membership.h"
#include "cluster/placement.h"
#include "cluster/repair.h"
#include "common/units.h"
#include "server/node_stats.h"
#include "server/s3_server.h"
#include "store/block_cache.h"
#include "store/block_store.h"
#include "store/object_store.h"

namespace aq::cli {
namespace {

struct ServeFlags {
  std::string data = "aquifer-data";
  std::string listen = "127.0.0.1:9000";
  std::vector<std::string> pools;
  std::string block_size = "4MiB";
  std::string credentials;
  bool anonymous = false;
  size_t threads = 64;
  std::string cache_size = "1GiB";
  std::string cache_policy = "tinylfu";
  std::string metrics;           // HOST:PORT for /metrics and /stats
  uint32_t prefetch_window = 8;  // blocks; 0 = off
  std::string prefetch_memory = "256MiB";
  std::string meta;             // "" = SQLite under --data; etcd://HOST:PORT = a cluster
  size_t replicas = 2;          // in a cluster
  std::string advertise;        // HOST:PORT other nodes and clients reach this node at
  int lease_ttl = 5;            // seconds without renewal before the cluster marks this node down
  double repair_rate_mb = 200;  // MB/s of re-replication and rebalancing copies
  double net_limit_mb = 0;      // MB/s this node sends at most (0 = unlimited)
  std::string node_id;          // default: generated once, kept in DIR/node-id
};

// This node's id in a cluster: given, or generated once and kept under --data.
Result<std::string> NodeId(io::FileSystem& fs, const std::string& data, const std::string& given) {
  const std::string path = io::JoinPath(data, "node-id");
  if (!given.empty()) {
    for (char c : given) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
        return InvalidArgument(fmt::format("--node-id '{}': letters, digits, '-' and '_' only", given));
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

Result<std::pair<std::string, int>> HostPort(const std::string& flag, const std::string& v) {
  size_t colon = v.rfind(':');
  if (colon == std::string::npos) return InvalidArgument(fmt::format("{} '{}': expected HOST:PORT", flag, v));
  char* end = nullptr;
  long port = std::strtol(v.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || colon + 1 == v.size() || port < 0 || port > 65535) {
    return InvalidArgument(fmt::format("{} '{}': bad port", flag, v));
  }
  return std::make_pair(v.substr(0, colon), static_cast<int>(port));
}

Status Serve(Globals& g, const ServeFlags& f) {
  server::S3ServerOptions so;
  std::tie(so.host, so.port) = AQ_TRY(HostPort("--listen", f.listen));
  std::pair<std::string, int> metrics_at;
  if (!f.metrics.empty()) metrics_at = AQ_TRY(HostPort("--metrics", f.metrics));
  so.anonymous = f.anonymous;
  so.threads = f.threads;
  if (f.net_limit_mb < 0) return InvalidArgument("--net-limit must be >= 0 (MB/s; 0 = unlimited)");
  so.send_bytes_per_second = f.net_limit_mb * 1e6;
  if (!f.credentials.empty()) so.credentials = AQ_TRY(server::LoadCredentials(f.credentials));
  if (so.credentials.empty() && !so.anonymous) {
    return InvalidArgument("give --credentials FILE (AWS Signature V4) or --anonymous to accept unsigned requests");
  }
  store::ObjectStoreOptions oo;
  oo.block_size = AQ_TRY(units::ParseBytes(f.block_size));
  if (oo.block_size < 4096 || oo.block_size > (1ull << 30)) {
    return InvalidArgument("--block-size must be between 4KiB and 1GiB");
  }
  std::vector<store::PoolConfig> pools;
  for (const auto& p : f.pools) pools.push_back(AQ_TRY(store::ParsePool(p)));
  if (pools.empty()) pools.push_back({"default", io::JoinPath(f.data, "pool-default"), store::Media::kSsd});

  AQ_TRY(g.fs->MakeDirs(f.data));
  const bool cluster = !f.meta.empty();
  std::shared_ptr<cluster::EtcdClient> etcd;
  std::unique_ptr<store::MetaStore> meta;
  if (cluster) {
    if (f.meta.rfind("etcd://", 0) != 0)
      return InvalidArgument(fmt::format("--meta '{}': expected etcd://HOST:PORT", f.meta));
    etcd = AQ_TRY(cluster::EtcdClient::Connect(f.meta));
    meta = cluster::NewEtcdMetaStore(etcd);
  } else {
    meta = AQ_TRY(store::OpenSqliteMetaStore(io::JoinPath(f.data, "meta.db")));
  }
  auto blocks = AQ_TRY(store::BlockStore::Open(*g.fs, pools));
  // Before serving: blocks no object refers to are leftovers of interrupted writes.
  // (On a cluster's node: the blocks the layouts place on this node; a
  // replica moved elsewhere while it was down is a leftover too.)
  std::vector<std::string> keep;
  if (cluster) {
    keep = AQ_TRY(cluster::BlocksHeldBy(*meta, AQ_TRY(NodeId(*g.fs, f.data, f.node_id))));
  } else {
    keep = AQ_TRY(meta->ReferencedBlocks());
  }
  auto gc = AQ_TRY(blocks->CollectGarbage(keep));
  const uint64_t cache_bytes = AQ_TRY(units::ParseBytes(f.cache_size));
  store::CachePolicy policy;
  if (f.cache_policy == "tinylfu") {
    policy = store::CachePolicy::kTinyLfu;
  } else if (f.cache_policy == "lru") {
    policy = store::CachePolicy::kLru;
  } else {
    return InvalidArgument(fmt::format("--cache-policy {}: expected tinylfu or lru", f.cache_policy));
  }
  std::unique_ptr<store::BlockCache> cache;
  if (cache_bytes > 0) cache = std::make_unique<store::BlockCache>(cache_bytes, policy, oo.block_size);
  // In a cluster, blocks go to replicas on several nodes; this node's own
  // pools and cache serve its replicas, to itself and to the other nodes.
  store::LocalBlockService local(*blocks, cache.get());
  std::string node_id;
  std::unique_ptr<cluster::BlockClient> block_client;
  std::unique_ptr<cluster::ClusterBlockService> cluster_blocks;
  std::unique_ptr<cluster::Membership> membership;
  std::unique_ptr<cluster::Repairer> repairer;
  if (cluster) {
    node_id = AQ_TRY(NodeId(*g.fs, f.data, f.node_id));
    if (f.replicas < 1 || f.replicas > 16) return InvalidArgument("--replicas must be 1 to 16");
    block_client = std::make_unique<cluster::BlockClient>(so.credentials.empty() ? "" : so.credentials[0].access_key,
                                                          so.credentials.empty() ? "" : so.credentials[0].secret);
    cluster_blocks = std::make_unique<cluster::ClusterBlockService>(node_id, local, *block_client, f.replicas);
    so.node_blocks = &local;
    so.layout_json = [&membership](const store::ObjectMeta& o) -> std::string {
      // Each block's holders, owner first (placement weight), nodes that are down last.
      std::map<std::string, cluster::NodeInfo> map;
      if (cluster::Membership* m = membership.get()) {
        for (auto& n : m->Nodes()) map.emplace(n.id, std::move(n));
      }
      nlohmann::json blocks = nlohmann::json::array();
      for (const auto& b : o.blocks) {
        std::vector<std::string> holders = b.nodes;
        std::stable_sort(holders.begin(), holders.end(), [&](const std::string& x, const std::string& y) {
          const bool ux = map.count(x) && map[x].up, uy = map.count(y) && map[y].up;
          if (ux != uy) return ux;
          return cluster::PlacementWeight(b.id, x) > cluster::PlacementWeight(b.id, y);
        });
        nlohmann::json addresses = nlohmann::json::array();
        for (const auto& h : holders) {
          if (map.count(h)) addresses.push_back(map[h].address);
        }
        nlohmann::json jb = nlohmann::json::object();
        jb["id"] = b.id;
        jb["size"] = b.size;
        jb["crc32c"] = b.crc32c;
        jb["pool"] = b.pool;
        jb["addresses"] = std::move(addresses);
        blocks.push_back(std::move(jb));
      }
      nlohmann::json j = nlohmann::json::object();
      j["size"] = o.size;
      j["version"] = o.version;
      j["blocks"] = std::move(blocks);
      return j.dump();
    };
    so.cluster_json = [&membership, &cluster_blocks]() -> std::string {
      nlohmann::json j = {{"replicas", cluster_blocks->replicas()}, {"nodes", nlohmann::json::array()}};
      if (cluster::Membership* m = membership.get()) {
        j["self"] = m->self().id;
        for (const auto& n : m->Nodes()) {
          j["nodes"].push_back({{"id", n.id}, {"address", n.address}, {"state", n.state}, {"up", n.up}});
        }
      }
      return j.dump();
    };
  }
  store::ObjectStore objects = cluster ? store::ObjectStore(*meta, *blocks, *cluster_blocks, oo, cache.get())
                                       : store::ObjectStore(*meta, *blocks, oo, cache.get());
  std::unique_ptr<store::Prefetcher> prefetch;
  if (f.prefetch_window > 0) {
    store::PrefetchOptions po;
    po.max_window_blocks = f.prefetch_window;
    po.memory_bytes = AQ_TRY(units::ParseBytes(f.prefetch_memory));
    if (po.memory_bytes < oo.block_size) {
      return InvalidArgument(fmt::format("--prefetch-memory {} is less than one block ({})", f.prefetch_memory,
                                         units::IecBytes(oo.block_size)));
    }
    prefetch = std::make_unique<store::Prefetcher>(objects.service(), po);
    objects.set_prefetcher(prefetch.get());
  }

  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  server::NodeStats stats;
  so.stats = &stats;
  auto s3 = AQ_TRY(server::S3Server::Start(objects, so));
  if (cluster) {
    // Listening: now the cluster may send this node blocks and requests.
    cluster::NodeInfo self;
    self.id = node_id;
    self.address = f.advertise.empty() ? fmt::format("{}:{}", so.host, s3->port()) : f.advertise;
    for (const auto& p : blocks->pools()) self.pools.push_back(p.name);
    struct statvfs vfs {};
    if (::statvfs(blocks->pools().front().path.c_str(), &vfs) == 0) {
      self.capacity_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    }
    AQ_TRY(cluster::EnsureClusterConfig(*etcd, "/aquifer/", f.replicas));
    membership = AQ_TRY(cluster::Membership::Join(etcd, self, "/aquifer/", f.lease_ttl));
    cluster_blocks->Attach(membership.get());
    // Load and cache, published with the alive key for `aquifer cluster status`.
    membership->SetStatusProvider([&stats, &cache, &cluster_blocks,
                                   last = std::make_shared<std::pair<double, uint64_t>>(0.0, 0)]() -> std::string {
      const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
      const uint64_t gets = stats.requests(server::Op::kGet);
      const double rate = last->first > 0 ? (gets - last->second) / (now - last->first) : 0;
      *last = {now, gets};
      nlohmann::json j = nlohmann::json::object();
      j["get_per_second"] = rate;
      j["bytes_out"] = stats.bytes_out();
      if (cache) {
        auto c = cache->Stats();
        j["cache_hits"] = c.hits;
        j["cache_misses"] = c.misses;
        j["cache_bytes"] = c.bytes;
      }
      j["remote_reads"] = cluster_blocks->Stats().remote_reads;
      return j.dump();
    });
    cluster::RepairOptions ro;
    ro.bytes_per_second = f.repair_rate_mb * 1e6;
    repairer = std::make_unique<cluster::Repairer>(*membership, *meta, *cluster_blocks, *block_client, ro);
  }
  std::unique_ptr<server::MetricsServer> metrics;
  if (!f.metrics.empty()) {
    std::function<nlohmann::json()> extra;
    if (cluster) {
      extra = [&]() -> nlohmann::json {
        auto b = cluster_blocks->Stats();
        auto r = repairer->Stats();
        nlohmann::json blocks_j = nlohmann::json::object();
        blocks_j["local_reads"] = b.local_reads;
        blocks_j["remote_reads"] = b.remote_reads;
        blocks_j["failovers"] = b.failovers;
        blocks_j["repaired_on_read"] = b.repaired_on_read;
        blocks_j["replicas_written"] = b.replicas_written;
        blocks_j["remote_writes"] = b.remote_writes;
        nlohmann::json repair_j = nlohmann::json::object();
        repair_j["passes"] = r.passes;
        repair_j["objects"] = r.objects;
        repair_j["blocks"] = r.blocks;
        repair_j["under_protected"] = r.under_protected;
        repair_j["misplaced"] = r.misplaced;
        repair_j["fully_protected"] = r.fully_protected;
        repair_j["last_pass_seconds"] = r.last_pass_seconds;
        repair_j["copied"] = r.copied;
        repair_j["bytes_copied"] = r.bytes_copied;
        repair_j["dropped"] = r.dropped;
        repair_j["layouts_committed"] = r.layouts_committed;
        repair_j["conflicts"] = r.conflicts;
        repair_j["errors"] = r.errors;
        repair_j["last_error"] = r.last_error;
        nlohmann::json c = nlohmann::json::object();
        c["node"] = node_id;
        c["replicas"] = f.replicas;
        c["nodes_known"] = membership->Nodes().size();
        c["rejoins"] = membership->rejoins();
        c["blocks"] = std::move(blocks_j);
        c["repair"] = std::move(repair_j);
        nlohmann::json out = nlohmann::json::object();
        out["cluster"] = std::move(c);
        return out;
      };
    }
    metrics = AQ_TRY(server::MetricsServer::Start(stats, objects, metrics_at.first, metrics_at.second, extra));
  }
  std::printf("aquifer serve: S3 on http://%s:%d (data %s, %s blocks)\n", so.host.c_str(), s3->port(), f.data.c_str(),
              units::IecBytes(oo.block_size).c_str());
  for (const auto& p : blocks->pools()) {
    std::string extra;
    if (p.direct) extra += ", O_DIRECT";
    if (p.read_latency_s > 0) extra += fmt::format(", +{:.3g} ms per block read", p.read_latency_s * 1e3);
    std::printf("  pool %-10s %s (%s%s)\n", p.name.c_str(), p.path.c_str(),
                p.media == store::Media::kSsd ? "ssd" : "hdd", extra.c_str());
  }
  if (metrics) {
    std::printf("  metrics: http://%s:%d/metrics (Prometheus), /stats (JSON, aquifer stats)\n",
                metrics_at.first.c_str(), metrics->port());
  }
  std::printf("  cache: %s, %s\n", units::IecBytes(cache_bytes).c_str(), cache ? f.cache_policy.c_str() : "off");
  if (f.net_limit_mb > 0) std::printf("  net limit: %.1f MB/s sent (an emulated link)\n", f.net_limit_mb);
  if (prefetch) {
    std::printf("  prefetch: up to %u blocks ahead per stream, %s in all\n", f.prefetch_window,
                units::IecBytes(prefetch->options().memory_bytes).c_str());
  } else {
    std::printf("  prefetch: off\n");
  }
  std::printf("  start-up: %llu blocks, %llu orphans and %llu temporaries removed\n",
              static_cast<unsigned long long>(gc.blocks_seen), static_cast<unsigned long long>(gc.orphans_removed),
              static_cast<unsigned long long>(gc.temporaries_removed));
  std::printf("  auth: %s\n", so.credentials.empty() ? "anonymous (unsigned requests accepted)"
                                                     : fmt::format("Signature V4, {} key(s){}", so.credentials.size(),
                                                                   so.anonymous ? ", anonymous also accepted" : "")
                                                           .c_str());
  if (cluster) {
    std::printf("  cluster: node %s at %s, metadata in %s, %zu replicas per block, %zu nodes known\n", node_id.c_str(),
                membership->self().address.c_str(), f.meta.c_str(), f.replicas, membership->Nodes().size());
  }
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  repairer.reset();
  metrics.reset();
  membership.reset();  // leave first: the cluster stops sending this node work
  s3->Stop();
  metrics.reset();
  if (prefetch) {
    auto ps = prefetch->Stats();
    std::printf(
        "aquifer serve: prefetch read %llu blocks ahead, %llu found by readers (%llu while in flight), "
        "%llu unused\n",
        static_cast<unsigned long long>(ps.issued), static_cast<unsigned long long>(ps.hits + ps.late_hits),
        static_cast<unsigned long long>(ps.late_hits), static_cast<unsigned long long>(ps.wasted));
  }
  objects.set_prefetcher(nullptr);
  prefetch.reset();
  if (cache) {
    auto cs = cache->Stats();
    std::printf("aquifer serve: stopped (signal %d); block cache %s of %s, %.1f%% hits (%llu of %llu)\n", sig,
                units::Bytes(static_cast<double>(cs.bytes)).c_str(),
                units::Bytes(static_cast<double>(cs.capacity)).c_str(), 100 * cs.hit_ratio(),
                static_cast<unsigned long long>(cs.hits), static_cast<unsigned long long>(cs.hits + cs.misses));
  } else {
    std::printf("aquifer serve: stopped (signal %d)\n", sig);
  }
  return Status::Ok();
}

struct CopyFlags {
  std::vector<std::string> paths;
  bool recursive = false;
};

// Copies one file through this process, streaming in 16 MiB pieces (from a
// node, each piece arrives as parallel ranged GETs).
Status CopyFile(io::FileSystem& fs, const std::string& from, const std::string& to, uint64_t* bytes) {
  auto in = AQ_TRY(fs.OpenRead(from, io::AccessHint::kSequential));
  auto out = AQ_TRY(fs.OpenWrite(to));
  std::string buf(16 << 20, '\0');
  for (uint64_t off = 0; off < in->size();) {
    size_t n = AQ_TRY(in->ReadAt(off, buf.size(), buf.data()));
    if (n == 0) break;
    AQ_TRY(out->Append(std::string_view(buf.data(), n)));
    off += n;
    *bytes += n;
  }
  AQ_TRY(out->Sync());
  return out->Close();
}

Status CopyTree(io::FileSystem& fs, const std::string& from, const std::string& to, bool recursive, uint64_t* files,
                uint64_t* bytes) {
  auto st = AQ_TRY(fs.Stat(from));
  if (!st.is_dir) {
    AQ_TRY(fs.MakeDirs(std::string(io::DirName(to))));  // the destination's directory, or bucket
    AQ_TRY(CopyFile(fs, from, to, bytes));
    ++*files;
    return Status::Ok();
  }
  if (!recursive) return InvalidArgument(fmt::format("'{}' is a directory (use -r)", from));
  AQ_TRY(fs.MakeDirs(to));
  for (const auto& e : AQ_TRY(fs.List(from))) {
    AQ_TRY(CopyTree(fs, io::JoinPath(from, e.name), io::JoinPath(to, e.name), true, files, bytes));
  }
  return Status::Ok();
}

}  // namespace

void RegisterFileCommands(CLI::App& app, Globals& g) {
  auto* cp = g.Own<CopyFlags>();
  auto* c = app.add_subcommand("cp", "Copy files between local paths and aquifer://HOST:PORT/BUCKET/KEY (either way)");
  c->add_option("paths", cp->paths, "SOURCE DESTINATION")->required()->expected(2);
  c->add_flag("-r,--recursive", cp->recursive, "Copy directories (prefixes) and everything below them");
  AddOutputFlags(c, g, false);
  c->callback([cp, &g] {
    uint64_t files = 0, bytes = 0;
    Status s = CopyTree(*g.fs, cp->paths[0], cp->paths[1], cp->recursive, &files, &bytes);
    if (!s.ok()) return Fail(g, s);
    if (g.json) {
      std::printf("{\"files\": %llu, \"bytes\": %llu}\n", static_cast<unsigned long long>(files),
                  static_cast<unsigned long long>(bytes));
    } else {
      std::printf("copied %llu file(s), %s\n", static_cast<unsigned long long>(files),
                  units::Bytes(static_cast<double>(bytes)).c_str());
    }
  });
  auto* ls = g.Own<std::string>();
  auto* l = app.add_subcommand("ls", "List a directory or prefix (local or aquifer://)");
  l->add_option("path", *ls, "Directory, bucket or prefix")->required();
  AddOutputFlags(l, g, false);
  l->callback([ls, &g] {
    auto list = g.fs->List(*ls);
    if (!list.ok()) return Fail(g, list.status());
    for (const auto& e : *list) {
      if (e.is_dir) {
        std::printf("%12s  %s/\n", "DIR", e.name.c_str());
      } else {
        std::printf("%12llu  %s\n", static_cast<unsigned long long>(e.size), e.name.c_str());
      }
    }
  });
  auto* rm = g.Own<CopyFlags>();
  auto* r = app.add_subcommand("rm", "Remove a file or object (with -r, everything below a prefix)");
  r->add_option("paths", rm->paths, "Paths to remove")->required();
  r->add_flag("-r,--recursive", rm->recursive, "Remove directories (prefixes) and everything below them");
  r->callback([rm, &g] {
    std::function<Status(const std::string&)> remove = [&](const std::string& p) -> Status {
      auto st = AQ_TRY(g.fs->Stat(p));
      if (st.is_dir) {
        if (!rm->recursive) return InvalidArgument(fmt::format("'{}' is a directory (use -r)", p));
        for (const auto& e : AQ_TRY(g.fs->List(p))) AQ_TRY(remove(io::JoinPath(p, e.name)));
        return p.rfind("aquifer://", 0) == 0 ? Status::Ok() : g.fs->Remove(p);
      }
      return g.fs->Remove(p);
    };
    for (const auto& p : rm->paths) {
      if (Status s = remove(p); !s.ok()) return Fail(g, s);
    }
  });
}

struct StatsFlags {
  std::string node;
  double watch = 0;
};

Result<nlohmann::json> FetchStats(const std::string& node) {
  auto [host, port] = AQ_TRY(HostPort("stats", node));
  httplib::Client c(host, port);
  c.set_connection_timeout(5);
  auto res = c.Get("/stats");
  if (!res) return IoError(fmt::format("stats from {}: {}", node, httplib::to_string(res.error())));
  if (res->status != 200) return IoError(fmt::format("stats from {}: HTTP {}", node, res->status));
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return IoError(fmt::format("stats from {}: not JSON", node));
  return j;
}

void PrintStats(const std::string& node, const nlohmann::json& now, const nlohmann::json* before, double dt) {
  auto num = [](const nlohmann::json& j, const char* k) {
    return j.is_object() && j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0;
  };
  std::printf("node %s, up %s\n", node.c_str(), units::Duration(num(now, "uptime_seconds")).c_str());
  const auto& m = now.contains("machine") ? now["machine"] : nlohmann::json::object();
  std::printf("  CPU %.0f%% user %.0f%% system %.0f%% iowait", num(m, "cpu.user"), num(m, "cpu.system"),
              num(m, "cpu.iowait"));
  double net_in = 0, net_out = 0, disk_in = 0, disk_out = 0;
  for (auto it = m.begin(); it != m.end(); ++it) {
    const std::string& k = it.key();
    if (!it->is_number()) continue;
    if (k.rfind("net.", 0) == 0 && k.size() > 3 && k.compare(k.size() - 3, 3, ".rx") == 0) net_in += it->get<double>();
    if (k.rfind("net.", 0) == 0 && k.size() > 3 && k.compare(k.size() - 3, 3, ".tx") == 0) net_out += it->get<double>();
    if (k.rfind("disk.", 0) == 0 && k.compare(k.size() - 5, 5, ".read") == 0) disk_in += it->get<double>();
    if (k.rfind("disk.", 0) == 0 && k.compare(k.size() - 6, 6, ".write") == 0) disk_out += it->get<double>();
  }
  std::printf("   NetIn %.1f MB/s  NetOut %.1f MB/s   DiskIn %.1f MB/s  DiskOut %.1f MB/s\n", net_in, net_out, disk_in,
              disk_out);
  std::printf("  %-7s %10s %9s %8s %10s %10s %10s %10s\n", "op", "requests", before ? "per s" : "", "errors", "MB in",
              "MB out", "p50 ms", "p99 ms");
  const auto& ops = now.contains("ops") ? now["ops"] : nlohmann::json::object();
  for (auto it = ops.begin(); it != ops.end(); ++it) {
    const auto& o = *it;
    double rate = 0;
    if (before && before->contains("ops") && (*before)["ops"].contains(it.key()) && dt > 0) {
      rate = (num(o, "requests") - num((*before)["ops"][it.key()], "requests")) / dt;
    }
    const auto& lat = o.contains("latency") ? o["latency"] : nlohmann::json::object();
    std::printf("  %-7s %10.0f %9s %8.0f %10.1f %10.1f %10.2f %10.2f\n", it.key().c_str(), num(o, "requests"),
                before ? fmt::format("{:.1f}", rate).c_str() : "", num(o, "errors"), num(o, "bytes_in") / 1e6,
                num(o, "bytes_out") / 1e6, num(lat, "p50_us") / 1e3, num(lat, "p99_us") / 1e3);
  }
  if (now.contains("cache") && now["cache"].is_object()) {
    const auto& c = now["cache"];
    std::printf("  cache   %.1f%% hits (%s), %s of %s, %.0f evicted, %.0f not admitted\n", 100 * num(c, "hit_ratio"),
                c.value("policy", "").c_str(), units::Bytes(num(c, "bytes")).c_str(),
                units::Bytes(num(c, "capacity_bytes")).c_str(), num(c, "evicted"), num(c, "rejected"));
  }
  if (now.contains("prefetch") && now["prefetch"].is_object()) {
    const auto& p = now["prefetch"];
    const double found = num(p, "hits") + num(p, "late_hits");
    std::printf(
        "  prefetch %.0f blocks read ahead, %.0f found by readers (%.0f in flight), %.0f unused; "
        "%.0f streams continued, %.0f started; %s held\n",
        num(p, "issued"), found, num(p, "late_hits"), num(p, "wasted"), num(p, "continued_streams"),
        num(p, "new_streams"), units::Bytes(num(p, "bytes_held")).c_str());
  }
  if (now.contains("cluster") && now["cluster"].is_object()) {
    const auto& c = now["cluster"];
    const auto& b = c.value("blocks", nlohmann::json::object());
    const auto& r = c.value("repair", nlohmann::json::object());
    std::printf(
        "  cluster node %s, %.0f replicas, %.0f nodes known; reads %.0f local, %.0f remote, %.0f failovers, "
        "%.0f repaired on read\n",
        c.value("node", "").c_str(), num(c, "replicas"), num(c, "nodes_known"), num(b, "local_reads"),
        num(b, "remote_reads"), num(b, "failovers"), num(b, "repaired_on_read"));
    std::printf("  repair  %s: %.0f blocks, %.0f under-protected, %.0f misplaced; copied %.0f (%s), dropped %.0f\n",
                r.value("fully_protected", false) ? "fully protected" : "working", num(r, "blocks"),
                num(r, "under_protected"), num(r, "misplaced"), num(r, "copied"),
                units::Bytes(num(r, "bytes_copied")).c_str(), num(r, "dropped"));
  }
  for (const auto& p : now.value("pools", nlohmann::json::array())) {
    std::printf("  pool    %-10s %8.0f blocks %12s\n", p.value("name", "").c_str(), num(p, "blocks"),
                units::Bytes(num(p, "bytes")).c_str());
  }
}

void RegisterStats(CLI::App& app, Globals& g) {
  auto* f = g.Own<StatsFlags>();
  auto* cmd = app.add_subcommand("stats",
                                 "A node's statistics: requests, latency and bytes by operation, cache, pools, "
                                 "CPU, NetIn/NetOut, DiskIn/DiskOut (from serve --metrics HOST:PORT)");
  cmd->add_option("node", f->node, "The node's metrics address HOST:PORT")->required();
  cmd->add_option("-w,--watch", f->watch, "Refresh every SECONDS, top-style, with request rates (Ctrl-C stops)");
  AddOutputFlags(cmd, g, false);
  cmd->callback([f, &g] {
    auto first = FetchStats(f->node);
    if (!first.ok()) return Fail(g, first.status());
    if (g.json) {
      std::cout << first->dump(1) << std::endl;
      return;
    }
    if (f->watch <= 0) return PrintStats(f->node, *first, nullptr, 0);
    nlohmann::json before = *first;
    while (true) {
      std::this_thread::sleep_for(std::chrono::duration<double>(f->watch));
      auto now = FetchStats(f->node);
      if (!now.ok()) return Fail(g, now.status());
      std::printf("\033[H\033[2J");
      PrintStats(f->node, *now, &before, f->watch);
      std::fflush(stdout);
      before = *now;
    }
  });
}

struct StatFileFlags {
  std::string data = "aquifer-data";
  std::vector<std::string> pools;
  std::string object;
  bool verify = false;
  std::string meta;  // etcd://... for a cluster's node
};

// What `isi get -D` shows: where an object's blocks live, with their checksums.
Status StatFile(Globals& g, const StatFileFlags& f) {
  size_t slash = f.object.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == f.object.size()) {
    return InvalidArgument(fmt::format("'{}': expected BUCKET/KEY", f.object));
  }
  const std::string bucket = f.object.substr(0, slash), key = f.object.substr(slash + 1);
  std::unique_ptr<store::MetaStore> meta;
  std::string self;  // this node's id in a cluster
  if (!f.meta.empty()) {
    meta = cluster::NewEtcdMetaStore(AQ_TRY(cluster::EtcdClient::Connect(f.meta)));
    if (auto id = g.fs->OpenRead(io::JoinPath(f.data, "node-id"), io::AccessHint::kSequential); id.ok()) {
      self.resize((*id)->size());
      AQ_TRY((*id)->ReadAt(0, self.size(), self.data()));
      while (!self.empty() && (self.back() == '\n' || self.back() == ' ')) self.pop_back();
    }
  } else {
    meta = AQ_TRY(store::OpenSqliteMetaStore(io::JoinPath(f.data, "meta.db")));
  }
  std::vector<store::PoolConfig> pools;
  for (const auto& p : f.pools) pools.push_back(AQ_TRY(store::ParsePool(p)));
  if (pools.empty()) pools.push_back({"default", io::JoinPath(f.data, "pool-default"), store::Media::kSsd});
  std::unique_ptr<store::BlockStore> blocks;
  if (f.meta.empty() || g.fs->Stat(f.data).ok()) blocks = AQ_TRY(store::BlockStore::Open(*g.fs, pools));
  auto o = AQ_TRY(meta->GetObject(bucket, key));
  nlohmann::json list = nlohmann::json::array();
  uint64_t offset = 0, bad = 0;
  for (const auto& b : o.blocks) {
    // On a cluster's node, only the replicas this node holds are its to verify.
    const bool here = blocks && (b.nodes.empty() || std::find(b.nodes.begin(), b.nodes.end(), self) != b.nodes.end());
    std::string state = here ? "not checked" : "elsewhere";
    if (f.verify && here) {
      auto r = blocks->Read(b);
      state = r.ok() ? "ok" : std::string(r.status().message());
      if (!r.ok()) ++bad;
    }
    list.push_back({{"offset", offset},
                    {"size", b.size},
                    {"id", b.id},
                    {"crc32c", fmt::format("{:08x}", b.crc32c)},
                    {"pool", b.pool},
                    {"nodes", b.nodes},
                    {"path", here ? blocks->PathOf(b) : ""},
                    {"state", state}});
    offset += b.size;
  }
  if (g.json) {
    std::cout << nlohmann::json{{"bucket", bucket}, {"key", key},           {"size", o.size},
                                {"etag", o.etag},   {"version", o.version}, {"block_size", o.block_size},
                                {"blocks", list}}
                     .dump(1)
              << std::endl;
  } else {
    std::printf("%s/%s: %s, %zu blocks of %s, version %llu, ETag %s\n", bucket.c_str(), key.c_str(),
                units::Bytes(static_cast<double>(o.size)).c_str(), o.blocks.size(),
                units::IecBytes(o.block_size).c_str(), static_cast<unsigned long long>(o.version), o.etag.c_str());
    std::printf("  %12s %10s %-32s %-8s %-10s %-24s %s\n", "offset", "size", "block", "crc32c", "pool",
                f.meta.empty() ? "" : "replicas", f.verify ? "state" : "");
    for (const auto& b : list) {
      std::string holders;
      for (const auto& n : b["nodes"]) holders += (holders.empty() ? "" : ",") + n.get<std::string>();
      std::printf("  %12llu %10llu %-32s %-8s %-10s %-24s %s\n", b["offset"].get<unsigned long long>(),
                  b["size"].get<unsigned long long>(), b["id"].get<std::string>().c_str(),
                  b["crc32c"].get<std::string>().c_str(), b["pool"].get<std::string>().c_str(), holders.c_str(),
                  f.verify ? b["state"].get<std::string>().c_str() : "");
    }
  }
  if (bad > 0) {
    return Status(StatusCode::kCorruption, fmt::format("{}/{}: {} damaged block(s)", bucket, key, bad));
  }
  return Status::Ok();
}

void RegisterStatFile(CLI::App& app, Globals& g) {
  auto* f = g.Own<StatFileFlags>();
  auto* cmd = app.add_subcommand(
      "stat-file", "Where an object's blocks live on a node: offsets, block ids, checksums, pools, files");
  cmd->add_option("object", f->object, "BUCKET/KEY")->required();
  cmd->add_option("--data", f->data, "The node's --data directory")->capture_default_str();
  cmd->add_option("--pool", f->pools, "The node's pools, as given to serve");
  cmd->add_flag("--verify", f->verify, "Read every block and check its checksum (exit 1 on damage)");
  cmd->add_option("--meta", f->meta,
                  "A cluster's etcd (etcd://HOST:PORT): the layout from there; --data names the node whose replicas "
                  "are verified");
  AddOutputFlags(cmd, g, false);
  cmd->callback([f, &g] {
    if (Status s = StatFile(g, *f); !s.ok()) Fail(g, s);
  });
}

void RegisterServeCommands(CLI::App& app, Globals& g) {
  RegisterFileCommands(app, g);
  RegisterStats(app, g);
  RegisterStatFile(app, g);
  auto* f = g.Own<ServeFlags>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Run a storage node: one namespace over S3/HTTP, objects as checksummed blocks in pools, metadata in "
      "SQLite under --data");
  cmd->add_option("--data", f->data, "Directory for metadata (and the default pool)")->capture_default_str();
  cmd->add_option("--listen", f->listen, "HOST:PORT to serve on (port 0 picks a free one)")->capture_default_str();
  cmd->add_option("--pool", f->pools,
                  "A pool NAME=PATH[,media=ssd|hdd][,direct][,latency=8ms] (repeatable; the first is the default; "
                  "direct: O_DIRECT reads; latency: added per block read, to emulate a slower device)");
  cmd->add_option("--block-size", f->block_size, "Size of the blocks objects are cut into")->capture_default_str();
  cmd->add_option("--credentials", f->credentials, "File of 'ACCESS_KEY_ID SECRET_ACCESS_KEY' lines (SigV4)");
  cmd->add_flag("--anonymous", f->anonymous, "Accept unsigned requests");
  cmd->add_option("--threads", f->threads, "Connections served at once")->capture_default_str();
  cmd->add_option("--cache-size", f->cache_size, "RAM block cache (0 = off)")->capture_default_str();
  cmd->add_option(
      "--meta", f->meta,
      "Metadata store: etcd://HOST:PORT[,HOST:PORT] joins a cluster (default: SQLite under --data, one node)");
  cmd->add_option("--replicas", f->replicas, "In a cluster: replicas of every block, on distinct nodes")
      ->capture_default_str();
  cmd->add_option("--advertise", f->advertise, "In a cluster: HOST:PORT others reach this node at (default: --listen)");
  cmd->add_option("--lease-ttl", f->lease_ttl, "In a cluster: seconds without a heartbeat before this node is down")
      ->capture_default_str();
  cmd->add_option("--net-limit", f->net_limit_mb,
                  "MB/s this node sends at most (object and block bodies; 0 = unlimited): emulates its network link")
      ->capture_default_str();
  cmd->add_option("--repair-rate", f->repair_rate_mb, "In a cluster: MB/s this node copies for repair and rebalancing")
      ->capture_default_str();
  cmd->add_option("--node-id", f->node_id,
                  "In a cluster: this node's id (default: generated once, kept in DIR/node-id)");
  cmd->add_option("--prefetch-window", f->prefetch_window,
                  "Stream prefetch: most blocks read ahead per sequential stream (0 = off)")
      ->capture_default_str();
  cmd->add_option("--prefetch-memory", f->prefetch_memory, "Stream prefetch: memory for read-ahead blocks, all streams")
      ->capture_default_str();
  cmd->add_option("--cache-policy", f->cache_policy,
                  "tinylfu (keeps a stable set under shuffled epochs: hits = cache/dataset) or lru")
      ->capture_default_str();
  cmd->add_option("--metrics", f->metrics,
                  "HOST:PORT serving /metrics (Prometheus) and /stats (JSON for aquifer stats); port 0 = any");
  cmd->callback([f, &g] {
    Status s = Serve(g, *f);
    if (!s.ok()) {
      Fail(g, s);
      if (s.code() == StatusCode::kInvalidArgument) g.exit_code = 2;
    }
  });
}

}  // namespace aq::cli
