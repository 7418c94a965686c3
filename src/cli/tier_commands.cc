// aquifer tier policy add|list|rm, tier run, tier status: file pool
// policies, kept with the metadata: a single node's under --data, a
// cluster's in etcd (--meta). A single node runs the mover's passes
// (readers of its blocks are its own to protect): `tier run` asks it for
// one through the metadata and waits for the report. In a cluster every
// node's repairer moves the blocks of the objects it coordinates to nodes
// with the policy's pool, continuously: `tier run` waits until nothing is
// left to move.
#include <fmt/format.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>

#include "cli/cli.h"
#include "cluster/etcd_client.h"
#include "cluster/etcd_meta_store.h"
#include "cluster/membership.h"
#include "cluster/placement.h"
#include "common/progress.h"
#include "common/units.h"
#include "io/file_system.h"
#include "store/meta_store.h"
#include "store/tiering.h"

namespace aq::cli {
namespace {

struct TierFlags {
  std::string data = "aquifer-data";
  std::string meta;  // etcd://...: a cluster's
  std::string name, pool, media, bucket = "*", key = "*", min_size, max_size, older_than, idle, accessed_within;
  int at = -1;
  bool dry_run = false;
  double timeout_s = 600;
};

// "30d", "12h", "90m", "45s", "2w" or seconds.
Result<double> ParseAge(const std::string& text) {
  if (text.empty()) return InvalidArgument("an empty age");
  double scale = 1;
  std::string n = text;
  switch (text.back()) {
    case 's':
      scale = 1;
      n.pop_back();
      break;
    case 'm':
      scale = 60;
      n.pop_back();
      break;
    case 'h':
      scale = 3600;
      n.pop_back();
      break;
    case 'd':
      scale = 86400;
      n.pop_back();
      break;
    case 'w':
      scale = 7 * 86400;
      n.pop_back();
      break;
    default: break;
  }
  char* end = nullptr;
  const double v = std::strtod(n.c_str(), &end);
  if (n.empty() || end != n.c_str() + n.size() || !(v >= 0)) {
    return InvalidArgument(fmt::format("'{}': expected an age such as 30d, 12h, 90m or 45s", text));
  }
  return v * scale;
}

const char* kClusterPrefix = "/aquifer/";

Result<std::unique_ptr<store::MetaStore>> OpenMeta(Globals& g, const TierFlags& f) {
  return OpenNodeMeta(g, f.data, f.meta);
}

// The pools a policy may name: a single node's (published at its start),
// or every cluster member's, with their media and (in a cluster) how many
// nodes have each. Empty when unknown (a node never started).
struct KnownPool {
  std::string media;
  int nodes = 1;
};
Result<std::map<std::string, KnownPool>> KnownPools(store::MetaStore& meta, const TierFlags& f) {
  std::map<std::string, KnownPool> out;
  if (!f.meta.empty()) {
    auto etcd = AQ_TRY(cluster::EtcdClient::Connect(f.meta));
    for (const auto& n : AQ_TRY(cluster::ReadClusterMap(*etcd, kClusterPrefix))) {
      if (n.state == "removed") continue;
      for (size_t i = 0; i < n.pools.size(); ++i) {
        auto [it, fresh] = out.try_emplace(n.pools[i], KnownPool{i < n.pool_media.size() ? n.pool_media[i] : "", 1});
        if (!fresh) it->second.nodes++;
      }
    }
    return out;
  }
  if (auto pools = meta.GetSetting("node/pools"); pools.ok()) {
    auto j = nlohmann::json::parse(*pools, nullptr, false);
    for (const auto& e : j.is_array() ? j : nlohmann::json::array()) {
      if (e.is_object()) out[e.value("name", "")] = {e.value("media", ""), 1};
    }
  }
  return out;
}

// The policies with a media resolved to a pool, as the node (the pool of
// that media it has first) or the cluster's repair (the one most nodes
// have) resolves it.
Result<std::vector<store::TierPolicy>> Resolved(store::MetaStore& meta, const TierFlags& f,
                                                const std::vector<store::TierPolicy>& policies) {
  bool any = false;
  for (const auto& p : policies) any |= p.pool.empty();
  if (!any) return policies;
  if (!f.meta.empty()) {
    auto etcd = AQ_TRY(cluster::EtcdClient::Connect(f.meta));
    const auto nodes = AQ_TRY(cluster::ReadClusterMap(*etcd, kClusterPrefix));
    return store::ResolveTierMedia(policies, [&](const std::string& m) { return cluster::PoolForMedia(nodes, m); });
  }
  std::vector<std::pair<std::string, std::string>> order;  // the node's pools in its order
  if (auto pools = meta.GetSetting("node/pools"); pools.ok()) {
    auto j = nlohmann::json::parse(*pools, nullptr, false);
    for (const auto& e : j.is_array() ? j : nlohmann::json::array()) {
      if (e.is_object()) order.emplace_back(e.value("name", ""), e.value("media", ""));
    }
  }
  return store::ResolveTierMedia(policies, [&](const std::string& m) {
    for (const auto& [name, media] : order) {
      if (media == m) return name;
    }
    return std::string();
  });
}

std::string Where(const TierFlags& f) { return f.meta.empty() ? f.data : f.meta; }

std::string Describe(const store::TierPolicy& p) {
  std::string s = fmt::format("bucket {} key {}", p.bucket, p.key);
  if (p.min_size > 0) s += fmt::format(", >= {}", units::IecBytes(p.min_size));
  if (p.max_size != UINT64_MAX) s += fmt::format(", <= {}", units::IecBytes(p.max_size));
  if (p.older_than_s > 0) s += fmt::format(", modified over {:.0f} s ago", p.older_than_s);
  if (p.idle_s > 0) s += fmt::format(", not accessed for {:.0f} s", p.idle_s);
  if (p.accessed_within_s > 0) s += fmt::format(", accessed within {:.0f} s", p.accessed_within_s);
  return s + " -> " + store::TierTarget(p);
}

Status Add(Globals& g, const TierFlags& f) {
  auto meta = AQ_TRY(OpenMeta(g, f));
  store::TierPolicy p;
  p.name = f.name;
  p.pool = f.pool;
  p.media = f.media;
  if (p.pool.empty() == p.media.empty()) return InvalidArgument("give either --pool NAME or --media ssd|hdd");
  if (!p.media.empty() && p.media != "ssd" && p.media != "hdd") {
    return InvalidArgument(fmt::format("--media {}: expected ssd or hdd", p.media));
  }
  p.bucket = f.bucket;
  p.key = f.key;
  if (!f.min_size.empty()) p.min_size = AQ_TRY(units::ParseBytes(f.min_size));
  if (!f.max_size.empty()) p.max_size = AQ_TRY(units::ParseBytes(f.max_size));
  if (!f.older_than.empty()) p.older_than_s = AQ_TRY(ParseAge(f.older_than));
  if (!f.idle.empty()) p.idle_s = AQ_TRY(ParseAge(f.idle));
  if (!f.accessed_within.empty()) p.accessed_within_s = AQ_TRY(ParseAge(f.accessed_within));
  if (p.min_size > p.max_size) return InvalidArgument("--min-size is larger than --max-size");
  if (p.idle_s > 0 && p.accessed_within_s > 0 && p.idle_s >= p.accessed_within_s) {
    return InvalidArgument("--not-accessed-for and --accessed-within leave no age that matches");
  }
  // Pools the node (or the cluster's nodes) published: a policy naming another is refused now.
  const auto pools = AQ_TRY(KnownPools(*meta, f));
  bool media_known = false;
  std::string names;
  for (const auto& [n, k] : pools) {
    media_known |= k.media == p.media;
    names += (names.empty() ? "" : ", ") + n + " (" + (k.media.empty() ? "" : k.media) +
             (f.meta.empty()
                  ? ""
                  : fmt::format("{}on {} node{}", k.media.empty() ? "" : ", ", k.nodes, k.nodes == 1 ? "" : "s")) +
             ")";
  }
  const char* who = f.meta.empty() ? "the node" : "the cluster";
  if (!pools.empty() && !p.pool.empty() && !pools.count(p.pool)) {
    return InvalidArgument(fmt::format("{} has no pool '{}' (its pools: {})", who, p.pool, names));
  }
  if (!pools.empty() && !p.media.empty() && !media_known) {
    return InvalidArgument(fmt::format("{} has no {} pool (its pools: {})", who, p.media, names));
  }
  auto policies = AQ_TRY(store::LoadTierPolicies(*meta));
  for (const auto& q : policies) {
    if (q.name == p.name)
      return Status(StatusCode::kAlreadyExists, fmt::format("a policy '{}' exists (tier policy rm it first)", p.name));
  }
  const size_t at = f.at < 0 ? policies.size() : std::min<size_t>(static_cast<size_t>(f.at), policies.size());
  policies.insert(policies.begin() + static_cast<std::ptrdiff_t>(at), p);
  AQ_TRY(store::SaveTierPolicies(*meta, policies));
  std::printf("policy %s (%zu of %zu): %s\n", p.name.c_str(), at + 1, policies.size(), Describe(p).c_str());
  return Status::Ok();
}

Status List(Globals& g, const TierFlags& f) {
  auto meta = AQ_TRY(OpenMeta(g, f));
  auto policies = AQ_TRY(store::LoadTierPolicies(*meta));
  if (g.json) {
    std::printf("%s\n", nlohmann::json::parse(store::TierPoliciesToJson(policies)).dump(1).c_str());
    return Status::Ok();
  }
  if (policies.empty()) std::printf("no tiering policies (objects stay in the pool they were written to)\n");
  for (size_t i = 0; i < policies.size(); ++i) {
    std::printf("%zu. %-16s %s\n", i + 1, policies[i].name.c_str(), Describe(policies[i]).c_str());
  }
  return Status::Ok();
}

Status Remove(Globals& g, const TierFlags& f) {
  auto meta = AQ_TRY(OpenMeta(g, f));
  auto policies = AQ_TRY(store::LoadTierPolicies(*meta));
  const size_t before = policies.size();
  std::erase_if(policies, [&](const store::TierPolicy& p) { return p.name == f.name; });
  if (policies.size() == before) return NotFound(fmt::format("no policy '{}'", f.name));
  AQ_TRY(store::SaveTierPolicies(*meta, policies));
  std::printf("policy %s removed (blocks already moved stay where they are)\n", f.name.c_str());
  return Status::Ok();
}

void PrintReport(const nlohmann::json& r) {
  if (r.contains("error")) {
    std::printf("  the pass failed: %s\n", r["error"].get<std::string>().c_str());
    return;
  }
  std::printf(
      "  %s: %llu objects, %llu matched a policy; %llu blocks (%s) %s; %llu conflicts, %llu errors%s\n",
      r.value("dry_run", false) ? "dry run" : "pass", r.value("objects", 0ull), r.value("matched", 0ull),
      r.value(r.value("dry_run", false) ? "blocks_to_move" : "blocks_moved", 0ull),
      units::Bytes(r.value(r.value("dry_run", false) ? "bytes_to_move" : "bytes_moved", 0.0)).c_str(),
      r.value("dry_run", false) ? "would move" : "moved", r.value("conflicts", 0ull), r.value("errors", 0ull),
      r.value("last_error", std::string()).empty() ? "" : (" (" + r.value("last_error", std::string()) + ")").c_str());
  if (r.contains("bytes_per_pool")) {
    for (const auto& [pool, bytes] : r["bytes_per_pool"].items()) {
      std::printf("  pool %-10s %8llu blocks %12s\n", pool.c_str(), r["blocks_per_pool"].value(pool, 0ull),
                  units::Bytes(bytes.get<double>()).c_str());
    }
  }
}

struct PerPolicy {
  uint64_t objects = 0, misplaced_blocks = 0, misplaced_bytes = 0;
};
struct Placement {
  std::map<std::string, PerPolicy> per;                        // by policy name
  std::map<std::string, std::pair<uint64_t, uint64_t>> pools;  // blocks, bytes by the layouts
  uint64_t misplaced_blocks = 0, misplaced_bytes = 0;
};

// Where every object's blocks are against the policies (with the recorded
// access times when a policy asks for them).
Result<Placement> Measure(store::MetaStore& meta, const std::vector<store::TierPolicy>& policies) {
  Placement out;
  bool by_access = false;
  for (const auto& p : policies) by_access |= p.idle_s > 0 || p.accessed_within_s > 0;
  std::unordered_map<std::string, int64_t> atimes;
  if (by_access) atimes = AQ_TRY(meta.AccessTimes());
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  AQ_TRY(store::ForEachObject(meta, [&](const store::ObjectMeta& o) -> Status {
    const store::TierPolicy* p = store::MatchTierPolicy(policies, o, now, store::LastRead(atimes, o));
    if (p != nullptr) out.per[p->name].objects++;
    for (const auto& blk : o.blocks) {
      out.pools[blk.pool].first++;
      out.pools[blk.pool].second += blk.size;
      if (p != nullptr && blk.pool != p->pool) {
        out.per[p->name].misplaced_blocks++;
        out.per[p->name].misplaced_bytes += blk.size;
        out.misplaced_blocks++;
        out.misplaced_bytes += blk.size;
      }
    }
    return Status::Ok();
  }));
  return out;
}

// A cluster moves continuously (every node's repair passes): run waits
// until nothing is left to move, printing progress.
Status RunCluster(Globals& g, const TierFlags& f, store::MetaStore& meta) {
  const auto policies = AQ_TRY(Resolved(meta, f, AQ_TRY(store::LoadTierPolicies(meta))));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(f.timeout_s);
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t first = UINT64_MAX, last_printed = UINT64_MAX;
  while (true) {
    const auto m = AQ_TRY(Measure(meta, policies));
    if (first == UINT64_MAX) first = m.misplaced_bytes;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (m.misplaced_blocks == 0 || f.dry_run) {
      if (g.json) {
        nlohmann::json j = {{"blocks_to_move", m.misplaced_blocks},
                            {"bytes_to_move", m.misplaced_bytes},
                            {"bytes_moved", f.dry_run ? 0 : first},
                            {"seconds", secs},
                            {"dry_run", f.dry_run}};
        std::printf("%s\n", j.dump(1).c_str());
      } else if (f.dry_run) {
        std::printf("  dry run: %llu blocks (%s) would move; the cluster's nodes move them continuously\n",
                    static_cast<unsigned long long>(m.misplaced_blocks),
                    units::Bytes(static_cast<double>(m.misplaced_bytes)).c_str());
      } else if (first == 0) {
        std::printf("  every block is in its policy's pool\n");
      } else {
        std::printf("  every block is in its policy's pool (%s moved in %.1f s)\n",
                    units::Bytes(static_cast<double>(first)).c_str(), secs);
      }
      return Status::Ok();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(StatusCode::kTimedOut,
                    fmt::format("{} blocks ({}) still to move after {:.0f} s (are the cluster's nodes up? "
                                "aquifer cluster status shows their repair errors)",
                                m.misplaced_blocks, units::Bytes(static_cast<double>(m.misplaced_bytes)), secs));
    }
    if (!g.json && m.misplaced_blocks != last_printed) {
      std::fprintf(stderr, "  %llu blocks (%s) still to move\n", static_cast<unsigned long long>(m.misplaced_blocks),
                   units::Bytes(static_cast<double>(m.misplaced_bytes)).c_str());
      last_printed = m.misplaced_blocks;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

Status Run(Globals& g, const TierFlags& f) {
  auto meta = AQ_TRY(OpenMeta(g, f));
  if (!f.meta.empty()) return RunCluster(g, f, *meta);
  std::mt19937_64 rng{std::random_device{}()};
  const std::string request = fmt::format("{:016x}{}", rng(), f.dry_run ? " dry-run" : "");
  // Progress on a terminal: what is left to move, measured from the
  // metadata about once a second while the node's mover works.
  const bool show = !g.json && !g.no_progress && !f.dry_run && Progress::TerminalAttached();
  std::vector<store::TierPolicy> policies;
  std::optional<Progress> progress;
  uint64_t left_blocks = 0, left_bytes = 0;
  if (show) {
    auto p = store::LoadTierPolicies(*meta);
    if (p.ok()) {
      auto r = Resolved(*meta, f, *p);
      if (r.ok()) policies = *r;
    }
    if (auto m = Measure(*meta, policies); m.ok() && m->misplaced_blocks > 0) {
      left_blocks = m->misplaced_blocks;
      left_bytes = m->misplaced_bytes;
      progress.emplace(Progress::Options{"tier run", left_blocks, left_bytes, "blocks", true});
    }
  }
  AQ_TRY(meta->PutSetting(store::kTierRequestSetting, request));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(f.timeout_s);
  for (int tick = 1; std::chrono::steady_clock::now() < deadline; ++tick) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (progress && tick % 5 == 0) {
      if (auto m = Measure(*meta, policies); m.ok()) {
        progress->Add(left_blocks > m->misplaced_blocks ? left_blocks - m->misplaced_blocks : 0,
                      left_bytes > m->misplaced_bytes ? left_bytes - m->misplaced_bytes : 0);
        left_blocks = std::min(left_blocks, m->misplaced_blocks);
        left_bytes = std::min(left_bytes, m->misplaced_bytes);
      }
    }
    auto text = meta->GetSetting(store::kTierReportSetting);
    if (!text.ok()) continue;
    auto r = nlohmann::json::parse(*text, nullptr, false);
    if (!r.is_object() || r.value("request", "") != request) continue;
    if (progress) progress->Finish();
    if (g.json) {
      std::printf("%s\n", r.dump(1).c_str());
    } else {
      PrintReport(r);
    }
    if (r.contains("error")) return Status(StatusCode::kInvalidArgument, r["error"].get<std::string>());
    if (r.value("errors", 0ull) > 0)
      return IoError(fmt::format("{} blocks could not be moved", r.value("errors", 0ull)));
    return Status::Ok();
  }
  return Status(StatusCode::kTimedOut,
                fmt::format("no node serving {} answered within {:.0f} s (is aquifer serve --data {} running?)", f.data,
                            f.timeout_s, f.data));
}

Status StatusCmd(Globals& g, const TierFlags& f) {
  auto meta = AQ_TRY(OpenMeta(g, f));
  auto policies = AQ_TRY(Resolved(*meta, f, AQ_TRY(store::LoadTierPolicies(*meta))));
  auto m = AQ_TRY(Measure(*meta, policies));
  nlohmann::json last;
  if (f.meta.empty()) {
    if (auto t = meta->GetSetting(store::kTierReportSetting); t.ok()) last = nlohmann::json::parse(*t, nullptr, false);
  }
  if (g.json) {
    nlohmann::json j = {{"pools", nlohmann::json::object()}, {"policies", nlohmann::json::array()}, {"last", last}};
    for (const auto& [pool, v] : m.pools) j["pools"][pool] = {{"blocks", v.first}, {"bytes", v.second}};
    for (const auto& p : policies) {
      const auto& s = m.per[p.name];
      j["policies"].push_back({{"name", p.name},
                               {"pool", p.pool},
                               {"objects", s.objects},
                               {"misplaced_blocks", s.misplaced_blocks},
                               {"misplaced_bytes", s.misplaced_bytes}});
    }
    std::printf("%s\n", j.dump(1).c_str());
    return Status::Ok();
  }
  std::printf("tiering of %s\n", Where(f).c_str());
  for (const auto& [pool, v] : m.pools) {
    std::printf("  pool %-10s %8llu blocks %12s\n", pool.c_str(), static_cast<unsigned long long>(v.first),
                units::Bytes(static_cast<double>(v.second)).c_str());
  }
  for (const auto& p : policies) {
    const auto& s = m.per[p.name];
    std::printf("  policy %-14s %llu objects; %llu blocks (%s) still to move to %s\n", p.name.c_str(),
                static_cast<unsigned long long>(s.objects), static_cast<unsigned long long>(s.misplaced_blocks),
                units::Bytes(static_cast<double>(s.misplaced_bytes)).c_str(), p.pool.c_str());
  }
  if (last.is_object()) {
    std::printf("  last pass:\n");
    PrintReport(last);
  }
  return Status::Ok();
}

}  // namespace

void RegisterTierCommands(CLI::App& app, Globals& g) {
  auto* group = app.add_subcommand(
      "tier",
      "Tiering: file pool policies (which pool objects' blocks belong in) and the mover, on a node or a cluster");
  group->require_subcommand(1);
  auto* f = g.Own<TierFlags>();
  auto data = [f](CLI::App* c) {
    c->add_option("--data", f->data, "The node's data directory (aquifer serve --data)")->capture_default_str();
    c->add_option("--meta", f->meta, "A cluster's etcd (etcd://HOST:PORT): its policies, kept for every node");
  };
  auto* policy = group->add_subcommand("policy", "Add, list or remove file pool policies (first match wins)");
  policy->require_subcommand(1);
  auto* add = policy->add_subcommand("add", "Add a policy: objects matching it belong in --pool");
  add->add_option("name", f->name, "Policy name")->required();
  add->add_option("--pool", f->pool,
                  "Target pool (serve --pool NAME=...; in a cluster, blocks move to nodes that have this pool)");
  add->add_option("--media", f->media,
                  "Instead of --pool: a pool of this media, ssd or hdd (a node's first such pool; in a cluster the "
                  "one most nodes have)");
  add->add_option("--bucket", f->bucket, "Bucket glob")->capture_default_str();
  add->add_option("--key", f->key, "Key glob, over the whole key (e.g. 'train/*', '*.tfrecord')")
      ->capture_default_str();
  add->add_option("--min-size", f->min_size, "Objects of at least this size");
  add->add_option("--max-size", f->max_size, "Objects of at most this size");
  add->add_option("--older-than", f->older_than, "Objects last modified at least this long ago (30d, 12h, 90m)");
  add->add_option("--not-accessed-for", f->idle,
                  "Objects not read nor written for at least this long (reads recorded per serve --atime-granularity)");
  add->add_option("--accessed-within", f->accessed_within, "Objects read or written at most this long ago");
  add->add_option("--at", f->at, "Position in the order of precedence (0 = first; default: last)");
  data(add);
  add->callback([f, &g] {
    if (Status s = Add(g, *f); !s.ok()) Fail(g, s);
  });
  auto* list = policy->add_subcommand("list", "The policies in order of precedence");
  data(list);
  AddOutputFlags(list, g, false);
  list->callback([f, &g] {
    if (Status s = List(g, *f); !s.ok()) Fail(g, s);
  });
  auto* rm = policy->add_subcommand("rm", "Remove a policy");
  rm->add_option("name", f->name, "Policy name")->required();
  data(rm);
  rm->callback([f, &g] {
    if (Status s = Remove(g, *f); !s.ok()) Fail(g, s);
  });
  auto* run = group->add_subcommand(
      "run", "A mover pass now (a node: its report; a cluster: wait until every block is in its pool)");
  data(run);
  run->add_flag("--dry-run", f->dry_run, "Count what would move; move nothing");
  run->add_option("--timeout", f->timeout_s, "Seconds to wait for the node's report")->capture_default_str();
  AddOutputFlags(run, g, false);
  run->callback([f, &g] {
    if (Status s = Run(g, *f); !s.ok()) Fail(g, s);
  });
  auto* status = group->add_subcommand("status", "Bytes per pool, what each policy still has to move, the last pass");
  data(status);
  AddOutputFlags(status, g, false);
  status->callback([f, &g] {
    if (Status s = StatusCmd(g, *f); !s.ok()) Fail(g, s);
  });
}

}  // namespace aq::cli
