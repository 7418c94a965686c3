// aquifer tier policy add|list|rm, tier run, tier status: file pool
// policies, kept with the metadata: a single node's under --data, a
// cluster's in etcd (--meta). A single node runs the mover's passes
// (readers of its blocks are its own to protect): `tier run` asks it for
// one through the metadata and waits for the report. In a cluster every
// node's repairer moves the blocks of the objects it coordinates to nodes
// with the policy's pool, continuously: `tier run` waits until nothing is
// left to move.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "cli/cli.h"
#include "common/clock.h"
#include "common/progress.h"
#include "common/units.h"
#include "node/tier_admin.h"
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

Result<node::TierAdmin> Open(Globals& g, const TierFlags& f) { return node::TierAdmin::Open(*g.fs, f.data, f.meta); }

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

// The flags as a policy; an age or size that does not parse names its flag.
Result<store::TierPolicy> PolicyFrom(const TierFlags& f) {
  store::TierPolicy p;
  p.name = f.name;
  p.pool = f.pool;
  if (p.pool.empty() == f.media.empty()) return InvalidArgument("give either --pool NAME or --media ssd|hdd");
  if (!f.media.empty()) {
    p.media = store::ParseMedia(f.media);
    if (!p.media) return InvalidArgument(fmt::format("--media {}: expected ssd or hdd", f.media));
  }
  p.bucket = f.bucket;
  p.key = f.key;
  for (const auto& [text, out, flag] :
       {std::tuple{&f.min_size, &p.min_size, "--min-size"}, std::tuple{&f.max_size, &p.max_size, "--max-size"}}) {
    if (text->empty()) continue;
    auto v = units::ParseBytes(*text);
    if (!v.ok()) return InvalidArgument(fmt::format("{}: {}", flag, v.status().message()));
    *out = *v;
  }
  for (const auto& [text, out, flag] : {std::tuple{&f.older_than, &p.older_than_s, "--older-than"},
                                        std::tuple{&f.idle, &p.idle_s, "--not-accessed-for"},
                                        std::tuple{&f.accessed_within, &p.accessed_within_s, "--accessed-within"}}) {
    if (text->empty()) continue;
    auto v = units::ParseDuration(*text);
    if (!v.ok())
      return InvalidArgument(fmt::format("{} '{}': expected an age such as 30d, 12h, 90m or 45s", flag, *text));
    *out = *v;
  }
  return p;
}

Status Add(Globals& g, const TierFlags& f) {
  const auto p = AQ_TRY(PolicyFrom(f));
  auto admin = AQ_TRY(Open(g, f));
  const size_t at = AQ_TRY(admin.AddPolicy(p, f.at));
  const size_t n = AQ_TRY(admin.Policies()).size();
  std::printf("policy %s (%zu of %zu): %s\n", p.name.c_str(), at + 1, n, Describe(p).c_str());
  return Status::Ok();
}

Status List(Globals& g, const TierFlags& f) {
  auto admin = AQ_TRY(Open(g, f));
  auto policies = AQ_TRY(admin.Policies());
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
  auto admin = AQ_TRY(Open(g, f));
  AQ_TRY(admin.RemovePolicy(f.name));
  std::printf("policy %s removed (blocks already moved stay where they are)\n", f.name.c_str());
  return Status::Ok();
}

void PrintReport(const nlohmann::json& r) {
  if (r.contains("error")) {
    std::printf("  the pass failed: %s\n", r["error"].get<std::string>().c_str());
    return;
  }
  const bool dry = r.value("dry_run", false);
  const std::string last_error = r.value("last_error", std::string());
  std::printf("  %s: %llu objects, %llu matched a policy; %llu blocks (%s) %s; %llu conflicts, %llu errors%s\n",
              dry ? "dry run" : "pass", r.value("objects", 0ull), r.value("matched", 0ull),
              r.value(dry ? "blocks_to_move" : "blocks_moved", 0ull),
              units::Bytes(r.value(dry ? "bytes_to_move" : "bytes_moved", 0.0)).c_str(), dry ? "would move" : "moved",
              r.value("conflicts", 0ull), r.value("errors", 0ull),
              last_error.empty() ? "" : (" (" + last_error + ")").c_str());
  if (r.contains("bytes_per_pool")) {
    for (const auto& [pool, bytes] : r["bytes_per_pool"].items()) {
      std::printf("  pool %-10s %8llu blocks %12s\n", pool.c_str(), r["blocks_per_pool"].value(pool, 0ull),
                  units::Bytes(bytes.get<double>()).c_str());
    }
  }
}

// A cluster moves continuously (every node's repair passes): run waits
// until nothing is left to move, printing what is left as it shrinks.
Status RunCluster(Globals& g, const TierFlags& f, node::TierAdmin& admin) {
  const double t0 = Clock::Real().Now();
  uint64_t first = UINT64_MAX, last_printed = UINT64_MAX;
  store::TierPlacement m;
  if (f.dry_run) {
    m = AQ_TRY(admin.Placement());
    first = 0;
  } else {
    m = AQ_TRY(admin.WaitUntilPlaced(f.timeout_s, [&](const store::TierPlacement& now) {
      if (first == UINT64_MAX) first = now.misplaced_bytes;
      if (!g.json && now.misplaced_blocks > 0 && now.misplaced_blocks != last_printed) {
        std::fprintf(stderr, "  %llu blocks (%s) still to move\n",
                     static_cast<unsigned long long>(now.misplaced_blocks),
                     units::Bytes(static_cast<double>(now.misplaced_bytes)).c_str());
        last_printed = now.misplaced_blocks;
      }
    }));
  }
  const double secs = Clock::Real().Now() - t0;
  if (g.json) {
    nlohmann::json j = {{"blocks_to_move", m.misplaced_blocks},
                        {"bytes_to_move", m.misplaced_bytes},
                        {"bytes_moved", first},
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

Status Run(Globals& g, const TierFlags& f) {
  auto admin = AQ_TRY(Open(g, f));
  if (admin.cluster()) return RunCluster(g, f, admin);
  // Progress on a terminal: what is left to move, measured from the
  // metadata about once a second while the node's mover works.
  std::optional<Progress> progress;
  std::vector<store::TierPolicy> policies;  // resolved once, measured against about once a second
  uint64_t left_blocks = 0, left_bytes = 0;
  if (!g.json && !g.no_progress && !f.dry_run && Progress::TerminalAttached()) {
    if (auto p = admin.ResolvedPolicies(); p.ok()) policies = std::move(*p);
    if (auto m = admin.Placement(&policies); m.ok() && m->misplaced_blocks > 0) {
      left_blocks = m->misplaced_blocks;
      left_bytes = m->misplaced_bytes;
      progress.emplace(Progress::Options{"tier run", left_blocks, left_bytes, "blocks", true});
    }
  }
  int ticks = 0;
  auto text = admin.RunNodePass(f.dry_run, f.timeout_s, [&] {
    if (!progress || ++ticks % 5 != 0) return;
    if (auto m = admin.Placement(&policies); m.ok()) {
      progress->Add(left_blocks > m->misplaced_blocks ? left_blocks - m->misplaced_blocks : 0,
                    left_bytes > m->misplaced_bytes ? left_bytes - m->misplaced_bytes : 0);
      left_blocks = std::min(left_blocks, m->misplaced_blocks);
      left_bytes = std::min(left_bytes, m->misplaced_bytes);
    }
  });
  if (progress) progress->Finish();
  if (!text.ok() && text.status().code() == StatusCode::kTimedOut) {
    return Status(StatusCode::kTimedOut,
                  fmt::format("no node serving {} answered within {:.0f} s (is aquifer serve --data {} running?)",
                              f.data, f.timeout_s, f.data));
  }
  const auto r = nlohmann::json::parse(AQ_TRY(std::move(text)));
  if (g.json) {
    std::printf("%s\n", r.dump(1).c_str());
  } else {
    PrintReport(r);
  }
  if (r.contains("error")) return Status(StatusCode::kInvalidArgument, r["error"].get<std::string>());
  if (r.value("errors", 0ull) > 0) return IoError(fmt::format("{} blocks could not be moved", r.value("errors", 0ull)));
  return Status::Ok();
}

Status StatusCmd(Globals& g, const TierFlags& f) {
  auto admin = AQ_TRY(Open(g, f));
  const auto policies = AQ_TRY(admin.ResolvedPolicies());
  auto m = AQ_TRY(admin.Placement(&policies));
  const nlohmann::json last = nlohmann::json::parse(admin.LastReport(), nullptr, false);
  if (g.json) {
    nlohmann::json j = {{"pools", nlohmann::json::object()}, {"policies", nlohmann::json::array()}, {"last", last}};
    for (const auto& [pool, v] : m.pools) j["pools"][pool] = {{"blocks", v.blocks}, {"bytes", v.bytes}};
    for (const auto& p : policies) {
      const auto& s = m.per_policy[p.name];
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
    std::printf("  pool %-10s %8llu blocks %12s\n", pool.c_str(), static_cast<unsigned long long>(v.blocks),
                units::Bytes(static_cast<double>(v.bytes)).c_str());
  }
  for (const auto& p : policies) {
    const auto& s = m.per_policy[p.name];
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
