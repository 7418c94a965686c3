#include "store/tiering.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "store/stager.h"

namespace aq::store {

std::string TierPoliciesToJson(const std::vector<TierPolicy>& policies) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : policies) {
    nlohmann::json j = {{"name", p.name}, {"bucket", p.bucket}, {"key", p.key}};
    if (!p.pool.empty()) j["pool"] = p.pool;
    if (p.media) j["media"] = MediaName(*p.media);
    if (p.min_size > 0) j["min_size"] = p.min_size;
    if (p.max_size != UINT64_MAX) j["max_size"] = p.max_size;
    if (p.older_than_s > 0) j["older_than_s"] = p.older_than_s;
    if (p.idle_s > 0) j["idle_s"] = p.idle_s;
    if (p.accessed_within_s > 0) j["accessed_within_s"] = p.accessed_within_s;
    a.push_back(std::move(j));
  }
  return a.dump();
}

Result<std::vector<TierPolicy>> TierPoliciesFromJson(const std::string& text) {
  auto a = nlohmann::json::parse(text, nullptr, false);
  if (!a.is_array()) return Corruption("tiering policies: not a JSON array");
  std::vector<TierPolicy> out;
  try {
    for (const auto& j : a) {
      TierPolicy p;
      p.name = j.at("name").get<std::string>();
      p.bucket = j.value("bucket", "*");
      p.key = j.value("key", "*");
      p.pool = j.value("pool", "");
      if (const std::string media = j.value("media", ""); !media.empty()) {
        p.media = ParseMedia(media);
        if (!p.media) {
          return InvalidArgument(fmt::format("tiering policy '{}': media '{}' (expected ssd or hdd)", p.name, media));
        }
      }
      p.min_size = j.value("min_size", uint64_t{0});
      p.max_size = j.value("max_size", UINT64_MAX);
      p.older_than_s = j.value("older_than_s", 0.0);
      p.idle_s = j.value("idle_s", 0.0);
      p.accessed_within_s = j.value("accessed_within_s", 0.0);
      AQ_TRY(ValidateTierPolicy(p));
      out.push_back(std::move(p));
    }
  } catch (const nlohmann::json::exception& e) {
    return Corruption(fmt::format("tiering policies: {}", e.what()));
  }
  return out;
}

Status ValidateTierPolicy(const TierPolicy& p) {
  if (p.name.empty()) return InvalidArgument("a tiering policy needs a name");
  if (p.pool.empty() == !p.media) {
    return InvalidArgument(fmt::format("tiering policy '{}': give either a pool or a media (ssd, hdd)", p.name));
  }
  if (p.min_size > p.max_size) {
    return InvalidArgument(fmt::format("tiering policy '{}': the minimum size is larger than the maximum", p.name));
  }
  if (p.idle_s > 0 && p.accessed_within_s > 0 && p.idle_s >= p.accessed_within_s) {
    return InvalidArgument(
        fmt::format("tiering policy '{}': 'not accessed for' and 'accessed within' leave no age that matches", p.name));
  }
  return Status::Ok();
}

std::string TierRunRequest::ToString() const { return nlohmann::json{{"id", id}, {"dry_run", dry_run}}.dump(); }

TierRunRequest TierRunRequest::Parse(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("id") || !j["id"].is_string()) return {text, false};
  return {j["id"].get<std::string>(), j.value("dry_run", false)};
}

Result<TierPlacement> MeasureTierPlacement(MetaStore& meta, const std::vector<TierPolicy>& policies, int64_t now_ns) {
  TierPlacement out;
  const auto matcher = AQ_TRY(TierMatcher::Load(meta, policies, now_ns));
  AQ_TRY(ForEachObject(meta, [&](const ObjectMeta& o) -> Status {
    const TierPolicy* p = matcher.For(o);
    if (p != nullptr) out.per_policy[p->name].objects++;
    for (const auto& blk : o.blocks) {
      out.pools[blk.pool].blocks++;
      out.pools[blk.pool].bytes += blk.size;
    }
    for (const auto& m : PlanTierMoves(o, p)) {
      const uint64_t size = o.blocks[m.block].size;
      out.per_policy[p->name].misplaced_blocks++;
      out.per_policy[p->name].misplaced_bytes += size;
      out.misplaced_blocks++;
      out.misplaced_bytes += size;
    }
    return Status::Ok();
  }));
  return out;
}

bool NeedsAccessTimes(const std::vector<TierPolicy>& policies) {
  return std::any_of(policies.begin(), policies.end(),
                     [](const TierPolicy& p) { return p.idle_s > 0 || p.accessed_within_s > 0; });
}

Result<TierMatcher> TierMatcher::Load(MetaStore& meta, std::vector<TierPolicy> policies, int64_t now_ns) {
  std::unordered_map<std::string, int64_t> atimes;
  if (NeedsAccessTimes(policies)) atimes = AQ_TRY(meta.AccessTimes());
  return TierMatcher(std::move(policies), std::move(atimes), now_ns);
}

std::vector<TierMove> PlanTierMoves(const ObjectMeta& o, const TierPolicy* tier) {
  std::vector<TierMove> out;
  if (tier == nullptr) return out;
  for (size_t i = 0; i < o.blocks.size(); ++i) {
    if (o.blocks[i].pool != tier->pool) out.push_back({i, tier->pool});
  }
  return out;
}

Result<std::vector<TierPolicy>> LoadTierPolicies(MetaStore& meta) {
  auto text = meta.GetSetting(kTierPoliciesSetting);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return std::vector<TierPolicy>();
    return text.status();
  }
  return TierPoliciesFromJson(*text);
}

Status SaveTierPolicies(MetaStore& meta, const std::vector<TierPolicy>& policies) {
  return meta.PutSetting(kTierPoliciesSetting, TierPoliciesToJson(policies));
}

Result<std::vector<TierPolicy>> ResolveTierMedia(const std::vector<TierPolicy>& policies,
                                                 const std::function<std::string(Media)>& resolve) {
  std::vector<TierPolicy> out = policies;
  for (auto& p : out) {
    if (!p.pool.empty() || !p.media) continue;
    p.pool = resolve(*p.media);
    if (p.pool.empty()) {
      return InvalidArgument(fmt::format("tiering policy '{}': no pool has media {}", p.name, MediaName(*p.media)));
    }
  }
  return out;
}

std::string TierTarget(const TierPolicy& p) {
  if (!p.pool.empty() || !p.media) return "pool " + p.pool;
  return fmt::format("a {} pool", MediaName(*p.media));
}

bool GlobMatch(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

const TierPolicy* MatchTierPolicy(const std::vector<TierPolicy>& policies, const ObjectMeta& o, int64_t now_ns,
                                  int64_t atime_ns) {
  const double age = static_cast<double>(now_ns - o.mtime_ns) / 1e9;
  const double idle = static_cast<double>(now_ns - std::max(o.mtime_ns, atime_ns)) / 1e9;
  for (const auto& p : policies) {
    if (!GlobMatch(p.bucket, o.bucket) || !GlobMatch(p.key, o.key)) continue;
    if (o.size < p.min_size || o.size > p.max_size) continue;
    if (p.older_than_s > 0 && age < p.older_than_s) continue;
    if (p.idle_s > 0 && idle < p.idle_s) continue;
    if (p.accessed_within_s > 0 && idle > p.accessed_within_s) continue;
    return &p;
  }
  return nullptr;
}

int64_t LastRead(const std::unordered_map<std::string, int64_t>& times, const ObjectMeta& o) {
  if (times.empty()) return 0;
  auto it = times.find(AccessKey(o.bucket, o.key));
  return it == times.end() ? 0 : it->second;
}

std::string TierReportToJson(const TierReport& r) {
  return nlohmann::json{{"objects", r.objects},
                        {"matched", r.matched},
                        {"objects_moved", r.objects_moved},
                        {"blocks_moved", r.blocks_moved},
                        {"bytes_moved", r.bytes_moved},
                        {"blocks_to_move", r.blocks_to_move},
                        {"bytes_to_move", r.bytes_to_move},
                        {"conflicts", r.conflicts},
                        {"errors", r.errors},
                        {"last_error", r.last_error},
                        {"seconds", r.seconds},
                        {"finished_ns", r.finished_ns},
                        {"blocks_per_pool", r.blocks_per_pool},
                        {"bytes_per_pool", r.bytes_per_pool}}
      .dump();
}

// One object's blocks copied to `policy`'s pool and its layout switched, or
// counted only (dry run); a failure leaves it on its old blocks.
void Mover::MoveObject(ObjectMeta o, const std::vector<TierMove>& moves, bool dry_run,
                       const std::function<void(uint64_t)>& throttle, TierReport* r) {
  std::vector<BlockRef> copies, old;
  Status failed;
  for (const auto& m : moves) {
    auto& b = o.blocks[m.block];
    ++r->blocks_to_move;
    r->bytes_to_move += b.size;
    if (dry_run) continue;
    throttle(b.size);
    // Copy, verified: the source read checks the block's checksum, the
    // written copy's checksum must be the same. The copy gets a new id:
    // a (block, pool) file is never written twice, so a release of the
    // old layout's copy can never remove one a newer layout uses (a
    // move there and back within the reclaim delay would otherwise
    // lose the object). In a dedup pool the copy is named by its content
    // and may be written again, but a shared block's removal asks the
    // metadata whether a layout names it.
    auto bytes = blocks_.Read(b);
    Result<BlockRef> copy = bytes.ok() ? blocks_.Write(m.pool, *bytes) : bytes.status();
    if (copy.ok() && copy->crc32c != b.crc32c) {
      blocks_.Unhold({*copy});
      (void)blocks_.Remove(*copy);
      copy = Corruption(fmt::format("block {}: copy differs", b.id));
    }
    if (!copy.ok()) {
      failed = copy.status();
      break;  // this object stays where it is this pass
    }
    old.push_back(b);
    copies.push_back(*copy);
    b.id = copy->id;
    b.pool = m.pool;
  }
  if (!failed.ok()) {
    blocks_.Unhold(copies);
    for (const auto& c : copies) (void)blocks_.Remove(c);
    // A block that went away because the object was overwritten or
    // deleted meanwhile is a lost race, not a failure.
    auto now = meta_.GetObject(o.bucket, o.key);
    const bool changed =
        (!now.ok() && now.status().code() == StatusCode::kNotFound) || (now.ok() && now->version != o.version);
    if (changed) {
      ++r->conflicts;
    } else {
      ++r->errors;
      r->last_error = std::string(failed.message());
    }
    return;
  }
  if (copies.empty()) return;
  auto switched = meta_.UpdateLayout(o);
  blocks_.Unhold(copies);  // named by the layout now, or removed below
  if (!switched.ok() || !*switched) {
    // Changed meanwhile (a newer write won) or not committed: the copies go.
    if (!switched.ok()) {
      ++r->errors;
      r->last_error = std::string(switched.status().message());
    } else {
      ++r->conflicts;
    }
    for (const auto& c : copies) (void)blocks_.Remove(c);
    return;
  }
  reclaimer_.Release(old);  // after readers of the old layout are done
  ++r->objects_moved;
  r->blocks_moved += copies.size();
  for (const auto& c : copies) r->bytes_moved += c.size;
}

Result<TierReport> Mover::Run(const std::vector<TierPolicy>& named, const TierOptions& options,
                              const std::atomic<bool>* stop) {
  MutexLock one(pass_mu_);
  const auto policies =
      AQ_TRY(ResolveTierMedia(named, [&](Media media) { return PoolForMedia(blocks_.pools(), media); }));
  for (const auto& p : policies) {
    bool known = false;
    for (const auto& pool : blocks_.pools()) known |= pool.name == p.pool;
    if (!known) {
      return InvalidArgument(fmt::format("tiering policy '{}': this node has no pool '{}'", p.name, p.pool));
    }
  }
  TierReport r;
  const double t0 = clock_.Now();
  RateLimiter pace(options.bytes_per_second, 1.0, clock_);
  auto throttle = [&](uint64_t bytes) {
    const double factor = options.busy && options.busy() ? kYieldFactor : 1;
    for (double wait = pace.Reserve(static_cast<uint64_t>(static_cast<double>(bytes) * factor));
         wait > 0 && (stop == nullptr || !stop->load()); wait -= 1) {
      clock_.SleepFor(std::min(wait, 1.0));  // a second at a time: a stop ends the pass promptly
    }
  };
  const auto matcher = AQ_TRY(TierMatcher::Load(meta_, policies, clock_.WallNanos()));
  AQ_TRY(ForEachObject(
      meta_,
      [&](ObjectMeta o) -> Status {
        ++r.objects;
        const TierPolicy* p = matcher.For(o);
        if (p == nullptr) return Status::Ok();
        ++r.matched;
        auto moves = PlanTierMoves(o, p);
        // A cluster's blocks (with holders) are its Repairer's to move.
        std::erase_if(moves, [&](const TierMove& m) { return !o.blocks[m.block].nodes.empty(); });
        if (!moves.empty()) MoveObject(std::move(o), moves, options.dry_run, throttle, &r);
        return Status::Ok();
      },
      stop));
  // Where the bytes are now, by the layouts.
  AQ_TRY(ForEachObject(
      meta_,
      [&](const ObjectMeta& o) -> Status {
        for (const auto& b : o.blocks) {
          r.blocks_per_pool[b.pool]++;
          r.bytes_per_pool[b.pool] += b.size;
        }
        return Status::Ok();
      },
      stop));
  r.seconds = clock_.Now() - t0;
  r.finished_ns = clock_.WallNanos();
  return r;
}

TierRuns::TierRuns(MetaStore& meta, Mover& mover, double interval_s, TierOptions options, double start_s)
    : meta_(meta), mover_(mover), interval_s_(interval_s), options_(std::move(options)), last_s_(start_s) {
  if (auto r = meta_.GetSetting(kTierRequestSetting); r.ok()) answered_ = *r;  // asked before this start
}

std::optional<Result<TierReport>> TierRuns::Tick(double now_s, const std::function<void()>& before_pass,
                                                 const std::atomic<bool>* stop) {
  auto request = meta_.GetSetting(kTierRequestSetting);
  const bool asked = request.ok() && *request != answered_;
  const bool due = interval_s_ > 0 && now_s - last_s_ >= interval_s_;
  if (!asked && !due) return std::nullopt;
  last_s_ = now_s;
  if (before_pass) before_pass();  // the pass sees the reads up to now
  auto policies = LoadTierPolicies(meta_);
  if (!asked && (!policies.ok() || policies->empty())) return std::nullopt;  // nothing to do on schedule
  TierOptions to = options_;
  const auto req = asked ? TierRunRequest::Parse(*request) : TierRunRequest{};
  to.dry_run = req.dry_run;
  Result<TierReport> report = policies.ok() ? mover_.Run(*policies, to, stop) : Result<TierReport>(policies.status());
  nlohmann::json j = report.ok() ? nlohmann::json::parse(TierReportToJson(*report))
                                 : nlohmann::json{{"error", std::string(report.status().message())}};
  j["request"] = req.id;
  j["dry_run"] = to.dry_run;
  (void)meta_.PutSetting(kTierReportSetting, j.dump());
  if (asked) answered_ = *request;
  return report;
}

TierPlacer::TierPlacer(MetaStore& meta, std::function<std::string(Media)> resolve,
                       std::function<bool(const std::string&, const std::string&)> usable, double refresh_seconds,
                       Clock& clock)
    : meta_(meta),
      resolve_(std::move(resolve)),
      usable_(std::move(usable)),
      refresh_s_(refresh_seconds),
      clock_(clock) {}

std::string TierPlacer::PoolFor(const std::string& bucket, const std::string& key, uint64_t size) {
  const double now = clock_.Now();
  bool stale;
  {
    MutexLock lock(mu_);
    stale = now - loaded_at_ >= refresh_s_;
  }
  if (stale) {
    MutexLock one(load_mu_);  // one reload; the others wait for it
    bool still;
    {
      MutexLock lock(mu_);
      still = now - loaded_at_ >= refresh_s_;
    }
    if (still) {
      auto loaded = LoadTierPolicies(meta_);
      MutexLock lock(mu_);
      if (loaded.ok()) policies_ = std::move(*loaded);
      loaded_at_ = now;
    }
  }
  std::vector<TierPolicy> policies;
  {
    MutexLock lock(mu_);
    if (policies_.empty()) return "";
    policies = policies_;
  }
  for (const auto& p : policies) {
    if (!GlobMatch(p.bucket, bucket) || !GlobMatch(p.key, key)) continue;
    const bool sized = p.min_size > 0 || p.max_size != UINT64_MAX;
    if (sized && (size == UINT64_MAX || size < p.min_size || size > p.max_size)) continue;
    if (p.older_than_s > 0 || p.idle_s > 0) continue;  // a new object is neither old nor idle
    std::string pool = p.pool.empty() && p.media ? resolve_(*p.media) : p.pool;
    return !pool.empty() && usable_(bucket, pool) ? pool : "";
  }
  return "";
}

Result<uint64_t> RemoveStrayCopies(MetaStore& meta, BlockStore& blocks, const std::string& node) {
  if (blocks.pools().size() < 2) return uint64_t{0};
  // piece id -> the pools its layouts name (a shared block's content id
  // may be named in several dedup pools)
  std::unordered_map<std::string, std::set<std::string>> home;
  AQ_TRY(ForEachObject(meta, [&](const ObjectMeta& o) -> Status {
    for (const auto& b : o.blocks) {
      if (node.empty() || b.nodes.empty()) {
        home[b.id].insert(b.pool);
        continue;
      }
      for (const auto& [holder, piece] : StoredPieces(b)) {
        if (holder == node) home[piece.id].insert(piece.pool);
      }
    }
    return Status::Ok();
  }));
  uint64_t removed = 0;
  for (const auto& pool : blocks.pools()) {
    for (const auto& id : AQ_TRY(blocks.List(pool.name))) {
      auto it = home.find(id);
      if (it == home.end() || it->second.count(pool.name) > 0) continue;  // unreferenced: garbage collection's
      BlockRef stray;
      stray.id = id;
      stray.pool = pool.name;
      if (blocks.Remove(stray).ok()) ++removed;
    }
  }
  return removed;
}

}  // namespace aq::store
