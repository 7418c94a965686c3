// File pool policies and the mover: the right data on the right media,
// paths unchanged. A policy matches objects by bucket and key glob, size,
// age (since last modification) and last access (the later of the last
// read, as AccessClock records it, and the last write), and names the pool
// their blocks belong in;
// the first matching policy, in order, wins; objects no policy matches stay
// where they are. Policies are kept with the metadata (setting
// "tier/policies", JSON), so they survive restarts and every tool sees them.
//
// The mover (one pass: Mover::Run) walks every object and plans its moves
// with PlanTierMoves, the rule the cluster's repair planner uses too; each
// block not in its policy's pool is copied there under a new block id, checked against
// its checksum, and the object's layout switched to the new copies in one
// metadata transaction if the object did not change meanwhile (else the
// copies are removed: a newer write won). The old copies are then released
// to the reclaimer, so readers that resolved the old layout finish first.
// A new id per copy means a (block, pool) file is written once and removed
// once: a delayed release can never remove a copy a later layout uses, even
// when a policy moves an object away and back within the reclaim delay.
// A crash before the switch leaves the object on its old blocks (the copies
// are garbage, collected at the next start, and taken again by the next
// pass); after it, on the new ones (the old copies are garbage). Reads never
// fail: every layout a reader can see names blocks that exist.
//
// Thread safety: Mover::Run may be called from any thread, one pass at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "store/block_store.h"
#include "store/meta_store.h"
#include "store/reclaimer.h"

namespace aq::store {

struct TierPolicy {
  std::string name;
  std::string bucket = "*";  // glob (fnmatch: * ? [..])
  std::string key = "*";     // glob over the whole key ("train/*", "*.tfrecord")
  uint64_t min_size = 0, max_size = UINT64_MAX;
  double older_than_s = 0;       // last modified at least this long ago
  std::string pool;              // where matching objects' blocks belong
  double idle_s = 0;             // not read nor written for at least this long
  double accessed_within_s = 0;  // read or written at most this long ago
  std::optional<Media> media;    // with no pool: a pool of this media
  bool operator==(const TierPolicy&) const = default;
};

inline constexpr const char* kTierPoliciesSetting = "tier/policies";
inline constexpr const char* kTierReportSetting = "tier/last-report";
inline constexpr const char* kTierRequestSetting = "tier/run-requested";

// A pass asked of a single node's mover (`aquifer tier run`): kept in
// setting kTierRequestSetting; the node answers with a report (setting
// kTierReportSetting) that carries the request's id.
struct TierRunRequest {
  std::string id;  // unique per request
  bool dry_run = false;
  std::string ToString() const;
  // Never fails: an unreadable text is a request (not a dry run) whose id is the text.
  static TierRunRequest Parse(const std::string& text);
};

// InvalidArgument naming what is wrong: no name, neither or both of pool
// and media, sizes or access ages that leave nothing to match.
Status ValidateTierPolicy(const TierPolicy& policy);

std::string TierPoliciesToJson(const std::vector<TierPolicy>& policies);
// Corruption when malformed; InvalidArgument for a policy without a name or
// pool, or with a media other than ssd or hdd.
Result<std::vector<TierPolicy>> TierPoliciesFromJson(const std::string& json);
// The policies kept in `meta` (none if never set).
Result<std::vector<TierPolicy>> LoadTierPolicies(MetaStore& meta);
Status SaveTierPolicies(MetaStore& meta, const std::vector<TierPolicy>& policies);

bool GlobMatch(const std::string& pattern, const std::string& text);
// The policies with `pool` set for those that name a media: `resolve`
// gives the pool for a media ("" when there is none: InvalidArgument).
Result<std::vector<TierPolicy>> ResolveTierMedia(const std::vector<TierPolicy>& policies,
                                                 const std::function<std::string(Media)>& resolve);
// "pool X" or "a hdd pool": what a policy targets, for messages.
std::string TierTarget(const TierPolicy& policy);
// The first policy that matches the object at `now_ns`, or null. `atime_ns`:
// its last recorded read (0: none recorded).
const TierPolicy* MatchTierPolicy(const std::vector<TierPolicy>& policies, const ObjectMeta& object, int64_t now_ns,
                                  int64_t atime_ns = 0);
// The object's last recorded read in `times` (MetaStore::AccessTimes), or 0.
int64_t LastRead(const std::unordered_map<std::string, int64_t>& times, const ObjectMeta& object);
// Whether a policy matches on last access (idle, accessed within), so that a
// pass must read the recorded access times.
bool NeedsAccessTimes(const std::vector<TierPolicy>& policies);

// Which policy each object falls under at one moment (`now_ns`, wall
// clock): what every pass over the namespace asks per object (a single
// node's Mover, the cluster's Repairer, `tier status`). The recorded reads
// are loaded once, and only when a policy matches on access.
class TierMatcher {
 public:
  TierMatcher(std::vector<TierPolicy> policies, std::unordered_map<std::string, int64_t> atimes, int64_t now_ns)
      : policies_(std::move(policies)), atimes_(std::move(atimes)), now_ns_(now_ns) {}
  // With the access times from `meta` when NeedsAccessTimes(policies).
  static Result<TierMatcher> Load(MetaStore& meta, std::vector<TierPolicy> policies, int64_t now_ns);
  // The first policy that matches `object`, or null.
  const TierPolicy* For(const ObjectMeta& object) const {
    return policies_.empty() ? nullptr : MatchTierPolicy(policies_, object, now_ns_, LastRead(atimes_, object));
  }
  const std::vector<TierPolicy>& policies() const { return policies_; }

 private:
  std::vector<TierPolicy> policies_;
  std::unordered_map<std::string, int64_t> atimes_;
  int64_t now_ns_;
};

// The tiering half of placement, decided apart from done: the blocks of
// `object` that are not in the pool `tier` names (the first policy the
// object matches, its pool resolved; null: none), each with that pool. A
// pure function, shared by a single node's Mover (which carries the moves
// out on its own blocks) and the cluster's PlanObjectRepair (which weighs
// them with protection and placement), so both decide a block's tier home
// by the same rule. An empty `tier->pool` (a media no pool has) still
// lists the blocks: the cluster counts them as blocked.
struct TierMove {
  size_t block = 0;  // index in object.blocks
  std::string pool;  // where the block belongs
  bool operator==(const TierMove&) const = default;
};
std::vector<TierMove> PlanTierMoves(const ObjectMeta& object, const TierPolicy* tier);

// Where every object's blocks are against the policies (resolved to pools):
// what `aquifer tier status` shows and `tier run` waits on.
struct TierPlacement {
  struct PerPolicy {
    uint64_t objects = 0, misplaced_blocks = 0, misplaced_bytes = 0;
  };
  std::map<std::string, PerPolicy> per_policy;  // by policy name
  struct PerPool {
    uint64_t blocks = 0, bytes = 0;
  };
  std::map<std::string, PerPool> pools;  // by the layouts
  uint64_t misplaced_blocks = 0, misplaced_bytes = 0;
};
// Reads the recorded access times when a policy asks for them. `now_ns`:
// the wall-clock time the policies' ages are measured against.
Result<TierPlacement> MeasureTierPlacement(MetaStore& meta, const std::vector<TierPolicy>& policies, int64_t now_ns);

struct TierOptions {
  double bytes_per_second = 100e6;  // copy budget
  bool dry_run = false;             // count what would move, move nothing
  // True while foreground reads need the disks (readers' plans being
  // staged): moves then charge kYieldFactor times their bytes to the budget.
  std::function<bool()> busy;
};

struct TierReport {
  uint64_t objects = 0, matched = 0, objects_moved = 0, blocks_moved = 0, bytes_moved = 0;
  uint64_t blocks_to_move = 0, bytes_to_move = 0;  // found misplaced (dry run: all of them)
  uint64_t conflicts = 0;                          // objects changed or deleted during their move (a newer write won)
  uint64_t errors = 0;                             // objects that could not be moved (read, write or commit failed)
  std::string last_error;
  double seconds = 0;
  int64_t finished_ns = 0;
  std::map<std::string, uint64_t> blocks_per_pool, bytes_per_pool;  // after the pass, by the layouts
};
std::string TierReportToJson(const TierReport& r);

class Mover {
 public:
  // Old copies are released to `reclaimer` (the object store's: it knows
  // the readers and removes through the node's caches).
  Mover(MetaStore& meta, BlockStore& blocks, Reclaimer& reclaimer, Clock& clock = Clock::Real())
      : meta_(meta), blocks_(blocks), reclaimer_(reclaimer), clock_(clock) {}
  // One pass over every object. `stop` (may be null) ends it early.
  Result<TierReport> Run(const std::vector<TierPolicy>& policies, const TierOptions& options,
                         const std::atomic<bool>* stop = nullptr);

 private:
  // Carries out `moves` (PlanTierMoves of `object`, its own blocks only).
  void MoveObject(ObjectMeta object, const std::vector<TierMove>& moves, bool dry_run,
                  const std::function<void(uint64_t)>& throttle, TierReport* report);

  MetaStore& meta_;
  BlockStore& blocks_;
  Reclaimer& reclaimer_;
  Clock& clock_;
  Mutex pass_mu_;
};

// A single node's tier-run protocol: Tick, called every so often, runs one
// mover pass when one is due (every `interval_s`; 0: never on schedule,
// and not while no policy is set) or asked for (`aquifer tier run` writes
// setting kTierRequestSetting; the report, setting kTierReportSetting,
// carries the request's id and whether it was a dry run). A request
// written before this start is taken as answered.
//
// Thread safety: one thread calls Tick.
class TierRuns {
 public:
  TierRuns(MetaStore& meta, Mover& mover, double interval_s, TierOptions options, double start_s);
  // `now_s`: the steady clock's time; `before_pass`: called before a pass
  // (the node records the access times read so far); `stop` ends a pass.
  // The pass's report, if one ran.
  std::optional<Result<TierReport>> Tick(double now_s, const std::function<void()>& before_pass,
                                         const std::atomic<bool>* stop);

 private:
  MetaStore& meta_;
  Mover& mover_;
  const double interval_s_;
  const TierOptions options_;
  double last_s_;
  std::string answered_;  // the last request answered
};

// Tiering policies at write time: the pool a new object's blocks go to, so
// data lands on the right media before any mover pass. A new object is as
// young as can be and has just been accessed: "older than" and "not
// accessed for" do not match it, "accessed within" does; a policy on size
// is passed over when the size is not known (the next pass moves the
// object if it should). Policies are re-read every `refresh_seconds`.
//
// Thread safety: PoolFor may be called from any thread.
class TierPlacer {
 public:
  // `resolve(media)`: the pool of that media ("" if none); `usable(bucket,
  // pool)`: whether the bucket's new blocks can go there (a cluster: enough
  // nodes have it).
  TierPlacer(MetaStore& meta, std::function<std::string(Media)> resolve,
             std::function<bool(const std::string&, const std::string&)> usable, double refresh_seconds = 2,
             Clock& clock = Clock::Real());
  // The pool for a new object ("": the default pool).
  std::string PoolFor(const std::string& bucket, const std::string& key, uint64_t size);

 private:
  MetaStore& meta_;
  const std::function<std::string(Media)> resolve_;
  const std::function<bool(const std::string&, const std::string&)> usable_;
  const double refresh_s_;
  Clock& clock_;
  Mutex load_mu_;  // one reload at a time
  mutable Mutex mu_;
  std::vector<TierPolicy> policies_ AQ_GUARDED_BY(mu_);
  double loaded_at_ AQ_GUARDED_BY(mu_) = -1e18;
};

// Removes copies of blocks that sit in a pool their layout does not name
// (left by a mover that stopped after switching a layout). On a cluster's
// node (`node` given): of the pieces the layouts place on that node.
// REQUIRES: no mover running here (call at start, before serving).
Result<uint64_t> RemoveStrayCopies(MetaStore& meta, BlockStore& blocks, const std::string& node = {});

}  // namespace aq::store
