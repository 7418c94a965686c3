// aquifer tier policy add|list|rm, tier run, tier status: file pool
// policies of a single node (kept in its metadata under --data) and the
// node's mover. The node runs the passes (readers of its blocks are its
// own to protect); `tier run` asks it for one through the metadata and
// waits for the report.
#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli/cli.h"
#include "common/units.h"
#include "io/file_system.h"
#include "store/meta_store.h"
#include "store/tiering.h"

namespace aq::cli {
namespace {

struct TierFlags {
  std::string data = "aquifer-data";
  std::string name, pool, bucket = "*", key = "*", min_size, max_size, older_than;
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

Result<std::unique_ptr<store::MetaStore>> OpenMeta(Globals& g, const std::string& data) {
  const std::string path = io::JoinPath(data, "meta.db");
  if (!g.fs->Exists(path)) {
    return NotFound(fmt::format("{}: no node's metadata here (give the --data of aquifer serve)", data));
  }
  return store::OpenSqliteMetaStore(path);
}

std::string Describe(const store::TierPolicy& p) {
  std::string s = fmt::format("bucket {} key {}", p.bucket, p.key);
  if (p.min_size > 0) s += fmt::format(", >= {}", units::IecBytes(p.min_size));
  if (p.max_size != UINT64_MAX) s += fmt::format(", <= {}", units::IecBytes(p.max_size));
  if (p.older_than_s > 0) s += fmt::format(", modified over {:.0f} s ago", p.older_than_s);
  return s + " -> pool " + p.pool;
}

Status Add(Globals& g, const TierFlags& f) {
  auto meta = AQ_TRY(OpenMeta(g, f.data));
  store::TierPolicy p;
  p.name = f.name;
  p.pool = f.pool;
  p.bucket = f.bucket;
  p.key = f.key;
  if (!f.min_size.empty()) p.min_size = AQ_TRY(units::ParseBytes(f.min_size));
  if (!f.max_size.empty()) p.max_size = AQ_TRY(units::ParseBytes(f.max_size));
  if (!f.older_than.empty()) p.older_than_s = AQ_TRY(ParseAge(f.older_than));
  if (p.min_size > p.max_size) return InvalidArgument("--min-size is larger than --max-size");
  // The node publishes its pools at start: a policy naming another is refused now.
  if (auto pools = meta->GetSetting("node/pools"); pools.ok()) {
    auto j = nlohmann::json::parse(*pools, nullptr, false);
    bool known = false;
    std::string names;
    for (const auto& e : j.is_array() ? j : nlohmann::json::array()) {
      const std::string n = e.value("name", "");
      known |= n == p.pool;
      names += (names.empty() ? "" : ", ") + n;
    }
    if (!known) return InvalidArgument(fmt::format("the node has no pool '{}' (its pools: {})", p.pool, names));
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
  auto meta = AQ_TRY(OpenMeta(g, f.data));
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
  auto meta = AQ_TRY(OpenMeta(g, f.data));
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

Status Run(Globals& g, const TierFlags& f) {
  auto meta = AQ_TRY(OpenMeta(g, f.data));
  std::mt19937_64 rng{std::random_device{}()};
  const std::string request = fmt::format("{:016x}{}", rng(), f.dry_run ? " dry-run" : "");
  AQ_TRY(meta->PutSetting(store::kTierRequestSetting, request));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(f.timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto text = meta->GetSetting(store::kTierReportSetting);
    if (!text.ok()) continue;
    auto r = nlohmann::json::parse(*text, nullptr, false);
    if (!r.is_object() || r.value("request", "") != request) continue;
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
  auto meta = AQ_TRY(OpenMeta(g, f.data));
  auto policies = AQ_TRY(store::LoadTierPolicies(*meta));
  struct PerPolicy {
    uint64_t objects = 0, misplaced_blocks = 0, misplaced_bytes = 0;
  };
  std::map<std::string, PerPolicy> per;
  std::map<std::string, std::pair<uint64_t, uint64_t>> pools;  // blocks, bytes by the layouts
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  AQ_TRY(store::ForEachObject(*meta, [&](const store::ObjectMeta& o) -> Status {
    const store::TierPolicy* p = store::MatchTierPolicy(policies, o, now);
    if (p != nullptr) per[p->name].objects++;
    for (const auto& blk : o.blocks) {
      pools[blk.pool].first++;
      pools[blk.pool].second += blk.size;
      if (p != nullptr && blk.pool != p->pool) {
        per[p->name].misplaced_blocks++;
        per[p->name].misplaced_bytes += blk.size;
      }
    }
    return Status::Ok();
  }));
  nlohmann::json last;
  if (auto t = meta->GetSetting(store::kTierReportSetting); t.ok()) last = nlohmann::json::parse(*t, nullptr, false);
  if (g.json) {
    nlohmann::json j = {{"pools", nlohmann::json::object()}, {"policies", nlohmann::json::array()}, {"last", last}};
    for (const auto& [pool, v] : pools) j["pools"][pool] = {{"blocks", v.first}, {"bytes", v.second}};
    for (const auto& p : policies) {
      const auto& s = per[p.name];
      j["policies"].push_back({{"name", p.name},
                               {"pool", p.pool},
                               {"objects", s.objects},
                               {"misplaced_blocks", s.misplaced_blocks},
                               {"misplaced_bytes", s.misplaced_bytes}});
    }
    std::printf("%s\n", j.dump(1).c_str());
    return Status::Ok();
  }
  std::printf("tiering of %s\n", f.data.c_str());
  for (const auto& [pool, v] : pools) {
    std::printf("  pool %-10s %8llu blocks %12s\n", pool.c_str(), static_cast<unsigned long long>(v.first),
                units::Bytes(static_cast<double>(v.second)).c_str());
  }
  for (const auto& p : policies) {
    const auto& s = per[p.name];
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
      "tier", "Tiering of a single node: file pool policies (which pool objects' blocks belong in) and the mover");
  group->require_subcommand(1);
  auto* f = g.Own<TierFlags>();
  auto data = [f](CLI::App* c) {
    c->add_option("--data", f->data, "The node's data directory (aquifer serve --data)")->capture_default_str();
  };
  auto* policy = group->add_subcommand("policy", "Add, list or remove file pool policies (first match wins)");
  policy->require_subcommand(1);
  auto* add = policy->add_subcommand("add", "Add a policy: objects matching it belong in --pool");
  add->add_option("name", f->name, "Policy name")->required();
  add->add_option("--pool", f->pool, "Target pool (a pool of the node: serve --pool NAME=...)")->required();
  add->add_option("--bucket", f->bucket, "Bucket glob")->capture_default_str();
  add->add_option("--key", f->key, "Key glob, over the whole key (e.g. 'train/*', '*.tfrecord')")
      ->capture_default_str();
  add->add_option("--min-size", f->min_size, "Objects of at least this size");
  add->add_option("--max-size", f->max_size, "Objects of at most this size");
  add->add_option("--older-than", f->older_than, "Objects last modified at least this long ago (30d, 12h, 90m)");
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
  auto* run = group->add_subcommand("run", "Ask the node serving --data for a mover pass now and print its report");
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
