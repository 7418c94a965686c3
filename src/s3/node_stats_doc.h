// A node's statistics as its metrics address serves them (GET /stats), the
// one definition of that document: the node fills it (server/node_stats.cc,
// node/node.cc), `aquifer stats`, `bench train --node-stats` and
// `size --stored-from` read it, and the dashboard page embeds it. Written
// and read through one codec (ToJson / ParseNodeStatsDoc), so a field is
// named in one place.
//
//   {"uptime_seconds", "ops": {"get": {"requests", "client_errors", "server_errors", "bytes_in",
//    "bytes_out", "latency": {"count", "mean_us", "p50_us", ...}}, ...}, "client_errors",
//    "server_errors", "errors_by_status": {"404": N}, "bytes_in", "bytes_out",
//    "bodies": {"resumed", "cut"}, "denied", "cache", "l3", "prefetch", "staging", "reclaim",
//    "pools": [...], "machine": {"cpu.user": ...}, "scrub", "same_host", "uploads", "connections",
//    "cluster"}
//
// A section the node does not have (no L3 cache, not in a cluster) is left
// out (same_host: null); a reader finds it empty. Missing fields read as
// zero, so a reader copes with a node older than itself; a field of the
// wrong type is an error naming it.
//
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/latency.h"
#include "common/status.h"

namespace aq::s3 {

// Latency in microseconds, from a histogram of nanoseconds.
struct LatencySummary {
  uint64_t count = 0;
  double mean_us = 0, p50_us = 0, p90_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
  static LatencySummary Of(const LatencyHistogram& h);
};

// One S3 operation (get, head, put, delete, list, bucket, other).
struct OpStatsDoc {
  uint64_t requests = 0, client_errors = 0, server_errors = 0, bytes_in = 0, bytes_out = 0;
  LatencySummary latency;
};

struct CacheStatsDoc {  // the RAM block cache
  std::string policy;   // "lru" or "tinylfu"
  uint64_t capacity_bytes = 0, bytes = 0, entries = 0, hits = 0, misses = 0, evicted = 0, rejected = 0;
  double hit_ratio = 0;
};

struct L3StatsDoc {  // the flash cache under the RAM cache
  std::string path;
  uint64_t capacity_bytes = 0, bytes = 0, entries = 0, hits = 0, misses = 0, admitted = 0, evicted = 0, rejected = 0,
           dropped = 0, damaged = 0, restored = 0, queued_writes = 0, queued_bytes = 0, write_errors = 0;
  double hit_ratio = 0;
};

struct PrefetchStatsDoc {
  uint64_t issued = 0, hits = 0, late_hits = 0, wasted = 0, continued_streams = 0, new_streams = 0, bytes_held = 0,
           window_blocks = 0, memory_bytes = 0;
};

struct StagingStatsDoc {  // blocks read ahead of the plans readers sent
  uint64_t planned = 0, staged = 0, shared = 0, resident = 0, hits = 0, late_hits = 0, expired = 0, skipped = 0,
           failed = 0, bytes_held = 0, queued = 0, reading = 0, streams = 0, memory_bytes = 0, threads = 0;
};

struct ReclaimStatsDoc {  // block files freed after their last reader
  uint64_t freed = 0, removed = 0, deferred = 0, forced = 0, early = 0, pending = 0, readers = 0;
};

struct DedupWritesDoc {
  uint64_t written = 0, found = 0, found_bytes = 0, repaired = 0, kept = 0;
  double hash_seconds = 0;
};

struct CompressionWritesDoc {
  uint64_t compressed = 0, plain = 0, logical_bytes = 0, stored_bytes = 0, decompressed = 0;
  double seconds = 0, decompress_seconds = 0;
};

struct PoolStatsDoc {
  std::string name, media, compression;  // compression: the pool's codec ("none", "zstd:3", ...)
  bool dedup = false;
  uint64_t blocks = 0, bytes = 0, compressed_blocks = 0, shared_blocks = 0, dedup_saved_bytes = 0;
  uint64_t logical_bytes = 0;                         // what the objects hold, before compression and deduplication
  double ratio = 0;                                   // bytes / logical_bytes
  std::optional<double> size_bytes, available_bytes;  // its file system's, where statvfs answered
  std::optional<DedupWritesDoc> dedup_writes;
  std::optional<CompressionWritesDoc> compression_writes;
};

struct ScrubFindingDoc {
  std::string object, piece, problem;  // problem: "corrupt: ..." or "missing"
  bool repaired = false;
  std::string repair_error;
  std::string quarantined;        // where a piece not rebuilt is kept, if it was
  std::vector<std::string> also;  // other objects naming the same (shared) piece
};

struct QuarantinedDoc {
  std::string path;
  uint64_t bytes = 0;
};

struct ScrubStatsDoc {
  bool enabled = false, running = false;
  double bytes_per_second = 0, interval_seconds = 0, last_pass_seconds = 0, last_pass_ended_seconds_ago = 0;
  uint64_t passes = 0, pieces_in_pass = 0, pieces_done_in_pass = 0, pieces_verified = 0, bytes_verified = 0,
           corrupt = 0, missing = 0, repaired = 0, repair_errors = 0, unrepaired = 0, quarantined = 0,
           quarantined_bytes = 0;
  std::vector<std::string> objects_at_risk;
  std::vector<QuarantinedDoc> quarantine;
  std::vector<ScrubFindingDoc> findings;
};

struct SameHostStatsDoc {  // blocks handed to readers on the node's machine as shared memory or block files
  uint64_t grants = 0, granted_blocks = 0, fetches = 0, blocks_sent = 0, files_sent = 0, blocks_gone = 0, refused = 0,
           created = 0, evicted = 0, shared = 0, shared_bytes = 0, memory_bytes = 0;
};

struct UploadStatsDoc {  // multipart uploads
  uint64_t in_progress = 0, parts = 0, part_bytes = 0, expired = 0, expired_bytes = 0, sweep_errors = 0;
  double oldest_age_seconds = 0, expiry_seconds = 0;
  std::string last_error;
};

struct ConnectionStatsDoc {  // the S3 port's connections, and those its HTTP layer cut or refused
  uint64_t open = 0, accepted = 0, requests = 0;
  uint64_t refused_overload = 0;  // 503: past --max-connections
  uint64_t header_timeouts = 0;   // 408: a request head did not arrive within --header-timeout
  uint64_t idle_closed = 0;       // kept-alive connections closed for idleness
  uint64_t bad_heads = 0;         // 400 / 431: malformed or oversized heads
  uint64_t tls_failures = 0;      // handshakes that failed
};

struct ClusterBlockStatsDoc {
  uint64_t local_reads = 0, remote_reads = 0, failovers = 0, repaired_on_read = 0, stray_reads = 0,
           replicas_written = 0, remote_writes = 0, stripe_reads = 0, degraded_reads = 0, fragments_written = 0;
};

struct RepairStatsDoc {
  uint64_t passes = 0, objects = 0, blocks = 0, under_protected = 0, misplaced = 0, copied = 0, bytes_copied = 0,
           dropped = 0, drops_pending = 0, reprotected = 0, tiered = 0, bytes_tiered = 0, tier_misplaced = 0,
           tier_blocked = 0, layouts_committed = 0, conflicts = 0, errors = 0;
  bool fully_protected = false;
  double last_pass_seconds = 0;
  std::string last_error;
};

struct ClusterStatsDoc {
  std::string node, policy;  // this node's id; the cluster's protection ("replicas:2", "ec:4+2")
  uint64_t replicas = 0, nodes_known = 0, rejoins = 0;
  std::map<std::string, std::string> bucket_policies;  // bucket -> its own protection
  ClusterBlockStatsDoc blocks;
  RepairStatsDoc repair;
};

struct NodeStatsDoc {
  double uptime_seconds = 0;
  std::map<std::string, OpStatsDoc> ops;  // by operation name
  uint64_t client_errors = 0, server_errors = 0, bytes_in = 0, bytes_out = 0, denied = 0;
  std::map<std::string, uint64_t> errors_by_status;  // "404" -> answers
  uint64_t bodies_resumed = 0, bodies_cut = 0;       // GET bodies continued elsewhere / reset part way
  std::optional<CacheStatsDoc> cache;
  std::optional<L3StatsDoc> l3;
  std::optional<PrefetchStatsDoc> prefetch;
  std::optional<StagingStatsDoc> staging;
  ReclaimStatsDoc reclaim;
  std::vector<PoolStatsDoc> pools;
  std::map<std::string, double> machine;  // the sampler's latest values: "cpu.user", "net.eth0.rx", ...
  std::optional<ScrubStatsDoc> scrub;
  std::optional<SameHostStatsDoc> same_host;
  std::optional<UploadStatsDoc> uploads;
  std::optional<ConnectionStatsDoc> connections;
  std::optional<ClusterStatsDoc> cluster;

  // The machine's network and disk rates summed over interfaces and disks
  // (MB/s): net.*.rx, net.*.tx, disk.*.read, disk.*.write.
  struct Throughput {
    double net_in = 0, net_out = 0, disk_in = 0, disk_out = 0;
  };
  Throughput MachineThroughput() const;
};

// What a cluster member publishes about itself with its alive key (every
// lease renewal), read by `aquifer cluster status`, the cluster audit and
// the dashboard's members table. Kept small: the scrub section carries the
// counts and the objects at risk, not the findings.
struct MemberStatusDoc {
  double get_per_second = 0;  // over the last renewal interval
  uint64_t bytes_out = 0, cache_hits = 0, cache_misses = 0, cache_bytes = 0, remote_reads = 0;
  uint64_t pool_bytes = 0, pool_logical_bytes = 0;  // its pools' block files, and the blocks' own bytes
  std::optional<RepairStatsDoc> repair;
  std::optional<ScrubStatsDoc> scrub;
};

nlohmann::json ToJson(const NodeStatsDoc& doc);
nlohmann::json ToJson(const MemberStatusDoc& doc);
// An empty text reads as an empty record (a member that published none).
Result<MemberStatusDoc> ParseMemberStatusDoc(std::string_view text);
// kCorruption naming the field when a field has the wrong type or the
// document is not an object.
Result<NodeStatsDoc> ParseNodeStatsDoc(const nlohmann::json& j);
Result<NodeStatsDoc> ParseNodeStatsDoc(std::string_view text);

}  // namespace aq::s3
