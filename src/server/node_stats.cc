#include "server/node_stats.h"

#include <fmt/format.h>
#include <sys/statvfs.h>

#include <chrono>
#include <set>

#include "common/clock.h"
#include "monitor/prometheus.h"
#include "server/dashboard_page.h"

namespace aq::server {

const char* OpName(Op op) {
  static const char* kNames[kOps] = {"get", "head", "put", "delete", "list", "bucket", "other"};
  return kNames[static_cast<size_t>(op)];
}

void NodeStats::Begin(Op op) { ops_[static_cast<size_t>(op)].count.fetch_add(1, std::memory_order_relaxed); }

void NodeStats::Finish(Op op, double seconds, uint64_t in, uint64_t out, int status) {
  auto& s = ops_[static_cast<size_t>(op)];
  if (status >= 400 && status < 500) {
    s.client_errors.fetch_add(1, std::memory_order_relaxed);
    client_errors_.fetch_add(1, std::memory_order_relaxed);
  } else if (status >= 500) {
    s.server_errors.fetch_add(1, std::memory_order_relaxed);
    server_errors_.fetch_add(1, std::memory_order_relaxed);
  }
  if (status >= 400) {
    MutexLock lock(status_mu_);
    ++by_status_[status];
  }
  s.bytes_in.fetch_add(in, std::memory_order_relaxed);
  s.bytes_out.fetch_add(out, std::memory_order_relaxed);
  bytes_in_.fetch_add(in, std::memory_order_relaxed);
  bytes_out_.fetch_add(out, std::memory_order_relaxed);
  MutexLock lock(s.mu);
  s.latency.Record(static_cast<uint64_t>(seconds * 1e9));
}

void NodeStats::Fill(s3::NodeStatsDoc* doc) const {
  for (size_t i = 0; i < kOps; ++i) {
    const auto& s = ops_[i];
    s3::OpStatsDoc& o = doc->ops[OpName(static_cast<Op>(i))];
    o.requests = s.count.load();
    o.client_errors = s.client_errors.load();
    o.server_errors = s.server_errors.load();
    o.bytes_in = s.bytes_in.load();
    o.bytes_out = s.bytes_out.load();
    MutexLock lock(s.mu);
    o.latency = s3::LatencySummary::Of(s.latency);
  }
  {
    MutexLock lock(status_mu_);
    for (const auto& [code, n] : by_status_) doc->errors_by_status[std::to_string(code)] = n;
  }
  doc->client_errors = client_errors_.load();
  doc->server_errors = server_errors_.load();
  doc->bytes_in = bytes_in_.load();
  doc->bytes_out = bytes_out_.load();
  doc->bodies_resumed = bodies_resumed_.load();
  doc->bodies_cut = bodies_cut_.load();
  doc->denied = denied_.load();
}

LatencyHistogram NodeStats::Latency(Op op) const {
  const PerOp& s = ops_[static_cast<size_t>(op)];
  MutexLock lock(s.mu);
  return s.latency;
}

void NodeStats::WritePrometheus(monitor::PrometheusWriter* w) const {
  // Latency buckets (seconds): 100 us to 10 s.
  static const double kBounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                   0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  for (size_t i = 0; i < kOps; ++i) {
    const auto& s = ops_[i];
    const monitor::PrometheusWriter::Labels op = {{"operation", OpName(static_cast<Op>(i))}};
    w->Counter("aquifer_s3_requests_total", "S3 requests begun, by operation", static_cast<double>(s.count.load()), op);
    auto with = [&](const char* k, const char* v) {
      auto l = op;
      l.emplace_back(k, v);
      return l;
    };
    w->Counter("aquifer_s3_errors_total", "S3 requests answered 4xx (client) or 5xx (server), by operation",
               static_cast<double>(s.client_errors.load()), with("class", "client"));
    w->Counter("aquifer_s3_errors_total", "S3 requests answered 4xx (client) or 5xx (server), by operation",
               static_cast<double>(s.server_errors.load()), with("class", "server"));
    w->Counter("aquifer_s3_received_bytes_total", "Request body bytes received, by operation",
               static_cast<double>(s.bytes_in.load()), op);
    w->Counter("aquifer_s3_sent_bytes_total", "Response bytes sent, by operation",
               static_cast<double>(s.bytes_out.load()), op);
    std::vector<std::pair<double, uint64_t>> buckets;
    double sum = 0;
    uint64_t count = 0;
    {
      MutexLock lock(s.mu);
      for (double b : kBounds) buckets.emplace_back(b, s.latency.CountAtMost(b * 1e9));
      sum = static_cast<double>(s.latency.sum_ns()) / 1e9;
      count = s.latency.count();
    }
    w->Histogram("aquifer_s3_request_duration_seconds",
                 "Time from a request's head to its last response byte, by operation (finished requests; buckets "
                 "to 1/16 of an octave)",
                 buckets, sum, count, op);
  }
  {
    MutexLock lock(status_mu_);
    for (const auto& [code, n] : by_status_) {
      w->Counter("aquifer_s3_error_responses_total", "Error responses by HTTP status", static_cast<double>(n),
                 {{"status", std::to_string(code)}});
    }
  }
  w->Counter("aquifer_s3_denied_requests_total", "Requests refused because their key may not make them (403)",
             static_cast<double>(denied_.load()));
  w->Counter("aquifer_s3_resumed_bodies_total",
             "GET bodies that failed part way and were continued from another replica or fragments",
             static_cast<double>(bodies_resumed_.load()));
  w->Counter("aquifer_s3_cut_bodies_total", "GET bodies that could not be finished and were reset",
             static_cast<double>(bodies_cut_.load()));
}

namespace {

// A node series (MetricsServer::Series) by Prometheus' conventions: "node."
// dropped, dots to underscores; a counter in "X/s" becomes aquifer_..._X_total
// ("MB/s": bytes), a gauge in "bytes" ..._bytes.
void WriteSeries(const MetricsServer::Series& one, monitor::PrometheusWriter* w) {
  std::string name = one.name.rfind("node.", 0) == 0 ? one.name.substr(5) : one.name;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  auto ends = [&](const std::string& tail) {
    return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  std::string unit = one.unit;
  double factor = 1;
  if (unit == "MB/s") {
    unit = "bytes";
    factor = 1e6;
  } else if (unit.size() > 2 && unit.compare(unit.size() - 2, 2, "/s") == 0) {
    unit = unit.substr(0, unit.size() - 2);
  }
  const std::string help = one.name + " (" + one.unit + (one.counter ? ", cumulative)" : ")");
  const bool named = unit.empty() || ends("_" + unit) || name.find("_" + unit + "_") != std::string::npos;
  std::string metric = "aquifer_" + name + (named ? "" : "_" + unit);
  if (one.counter) {
    w->Counter(metric + "_total", help, one.value() * factor);
  } else {
    w->Gauge(metric, help, one.value() * factor);
  }
}

}  // namespace

// Long by design: one sampler registration per exported series (requests by
// operation, errors, cache, reclaim, uploads, ...), a line or two each.
Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(NodeStats& stats, store::ObjectStore& objects,
                                                            const std::string& host, int port,
                                                            std::function<void(s3::NodeStatsDoc&)> extra,
                                                            std::vector<Series> series,
                                                            std::shared_ptr<http::TlsServer> tls,
                                                            std::function<nlohmann::json()> dashboard) {
  std::unique_ptr<MetricsServer> m(new MetricsServer());
  monitor::SamplerOptions so;
  so.keep_samples = kDashboardHistorySamples;  // the dashboard's last minutes; bounded memory
  m->sampler_ = std::make_unique<monitor::Sampler>(so);
  auto& sampler = *m->sampler_;
  for (size_t i = 0; i < kOps; ++i) {
    const Op op = static_cast<Op>(i);
    sampler.AddCounter(fmt::format("node.{}", OpName(op)), "requests/s",
                       [&stats, op] { return static_cast<double>(stats.requests(op)); });
  }
  sampler.AddCounter("node.errors.client", "requests/s",
                     [&stats] { return static_cast<double>(stats.client_errors()); });
  sampler.AddCounter("node.errors.server", "requests/s",
                     [&stats] { return static_cast<double>(stats.server_errors()); });
  sampler.AddCounter("node.bodies.resumed", "responses/s",
                     [&stats] { return static_cast<double>(stats.bodies_resumed()); });
  sampler.AddCounter("node.bodies.cut", "responses/s", [&stats] { return static_cast<double>(stats.bodies_cut()); });
  sampler.AddCounter("node.requests.denied", "requests/s", [&stats] { return static_cast<double>(stats.denied()); });
  // Each second's latency quantiles (of the requests finished in it), from
  // the difference of the cumulative histogram with its copy a second ago.
  for (const Op op : {Op::kGet, Op::kPut}) {
    auto last = std::make_shared<LatencyHistogram>();
    auto interval = std::make_shared<LatencyHistogram>();
    sampler.AddGauge(fmt::format("node.{}.p99_ms", OpName(op)), "ms", [&stats, op, last, interval] {
      const LatencyHistogram now = stats.Latency(op);
      *interval = now.Since(*last);
      *last = now;
      return interval->Quantile(0.99) / 1e6;
    });
    // Read just after the p99 above (probes run in order): the same interval.
    sampler.AddGauge(fmt::format("node.{}.p50_ms", OpName(op)), "ms",
                     [interval] { return interval->Quantile(0.5) / 1e6; });
  }
  sampler.AddCounter(
      "node.in", "MB/s", [&stats] { return static_cast<double>(stats.bytes_in()); }, 1e-6);
  sampler.AddCounter(
      "node.out", "MB/s", [&stats] { return static_cast<double>(stats.bytes_out()); }, 1e-6);
  if (store::BlockCache* cache = objects.cache()) {
    sampler.AddGauge("node.cache.hit_ratio", "%", [cache] { return 100 * cache->Stats().hit_ratio(); });
    sampler.AddGauge("node.cache.used", "bytes", [cache] { return static_cast<double>(cache->Stats().bytes); });
  }
  if (store::L3Cache* l3 = objects.l3()) {
    sampler.AddGauge("node.l3.hit_ratio", "%", [l3] { return 100 * l3->Stats().hit_ratio(); });
    sampler.AddGauge("node.l3.used", "bytes", [l3] { return static_cast<double>(l3->Stats().bytes); });
    sampler.AddCounter("node.l3.hits", "blocks/s", [l3] { return static_cast<double>(l3->Stats().hits); });
  }
  if (store::Prefetcher* pf = objects.prefetcher()) {
    sampler.AddCounter("node.prefetch.hits", "blocks/s", [pf] {
      auto p = pf->Stats();
      return static_cast<double>(p.hits + p.late_hits);
    });
    sampler.AddCounter("node.prefetch.issued", "blocks/s", [pf] { return static_cast<double>(pf->Stats().issued); });
    sampler.AddGauge("node.prefetch.held", "bytes", [pf] { return static_cast<double>(pf->Stats().bytes_held); });
  }
  if (store::Stager* st = objects.stager()) {
    sampler.AddCounter("node.staging.hits", "blocks/s", [st] {
      auto p = st->Stats();
      return static_cast<double>(p.hits + p.late_hits);
    });
    sampler.AddCounter("node.staging.staged", "blocks/s", [st] { return static_cast<double>(st->Stats().staged); });
    sampler.AddGauge("node.staging.held", "bytes", [st] { return static_cast<double>(st->Stats().bytes_held); });
  }
  auto series_for_prometheus = std::make_shared<const std::vector<Series>>(series);
  for (auto& one : series) {
    if (one.counter) {
      sampler.AddCounter(one.name, one.unit, std::move(one.value));
    } else {
      sampler.AddGauge(one.name, one.unit, std::move(one.value));
    }
  }
  sampler.Start();
  const double started = Clock::Real().Now();
  auto stats_doc = [&sampler, &stats, &objects, started, extra]() {
    s3::NodeStatsDoc doc;
    stats.Fill(&doc);
    if (extra) extra(doc);
    doc.uptime_seconds = Clock::Real().Now() - started;
    if (store::BlockCache* cache = objects.cache()) {
      auto c = cache->Stats();
      auto& d = doc.cache.emplace();
      d.policy = cache->policy() == store::CachePolicy::kTinyLfu ? "tinylfu" : "lru";
      d.capacity_bytes = c.capacity;
      d.bytes = c.bytes;
      d.entries = c.entries;
      d.hits = c.hits;
      d.misses = c.misses;
      d.hit_ratio = c.hit_ratio();
      d.evicted = c.evicted;
      d.rejected = c.rejected;
    }
    if (store::L3Cache* l3 = objects.l3()) {
      auto c = l3->Stats();
      auto& d = doc.l3.emplace();
      d.path = l3->path();
      d.capacity_bytes = c.capacity;
      d.bytes = c.bytes;
      d.entries = c.entries;
      d.hits = c.hits;
      d.misses = c.misses;
      d.hit_ratio = c.hit_ratio();
      d.admitted = c.admitted;
      d.evicted = c.evicted;
      d.rejected = c.rejected;
      d.dropped = c.dropped;
      d.damaged = c.damaged;
      d.restored = c.restored;
      d.queued_writes = c.queued;
      d.queued_bytes = c.queued_bytes;
      d.write_errors = c.write_errors;
    }
    if (store::Prefetcher* pf = objects.prefetcher()) {
      auto p = pf->Stats();
      auto& d = doc.prefetch.emplace();
      d.issued = p.issued;
      d.hits = p.hits;
      d.late_hits = p.late_hits;
      d.wasted = p.wasted;
      d.continued_streams = p.continued;
      d.new_streams = p.new_streams;
      d.bytes_held = p.bytes_held;
      d.window_blocks = pf->options().max_window_blocks;
      d.memory_bytes = pf->options().memory_bytes;
    }
    if (store::Stager* st = objects.stager()) {
      auto p = st->Stats();
      auto& d = doc.staging.emplace();
      d.planned = p.planned;
      d.staged = p.staged;
      d.shared = p.shared;
      d.resident = p.resident;
      d.hits = p.hits;
      d.late_hits = p.late_hits;
      d.expired = p.expired;
      d.skipped = p.skipped;
      d.failed = p.failed;
      d.bytes_held = p.bytes_held;
      d.queued = p.queued;
      d.reading = p.reading;
      d.streams = p.streams;
      d.memory_bytes = st->options().memory_bytes;
      d.threads = st->options().threads;
    }
    auto rs = objects.reclaimer().Stats();
    doc.reclaim = {.freed = rs.freed,
                   .removed = rs.removed,
                   .deferred = rs.deferred,
                   .forced = rs.forced,
                   .early = rs.early,
                   .pending = rs.pending,
                   .readers = rs.pins};
    if (auto usage = objects.Usage(); usage.ok()) {
      for (const auto& u : *usage) {
        s3::PoolStatsDoc& p = doc.pools.emplace_back();
        p.name = u.name;
        p.blocks = u.blocks;
        p.bytes = u.bytes;
        p.logical_bytes = u.referenced_bytes();
        p.compressed_blocks = u.compressed_blocks;
        p.shared_blocks = u.shared_blocks;
        p.dedup_saved_bytes = u.dedup_saved_bytes;
        p.ratio = u.ratio();
        for (const auto& d : objects.blocks().DedupCounters()) {
          if (d.pool != u.name || d.written + d.found + d.kept == 0) continue;
          p.dedup_writes = s3::DedupWritesDoc{.written = d.written,
                                              .found = d.found,
                                              .found_bytes = d.found_bytes,
                                              .repaired = d.repaired,
                                              .kept = d.kept,
                                              .hash_seconds = d.hash_seconds};
        }
        for (const auto& c : objects.blocks().CompressionCounters()) {
          if (c.pool != u.name) continue;
          p.compression_writes = s3::CompressionWritesDoc{.compressed = c.compressed,
                                                          .plain = c.plain,
                                                          .logical_bytes = c.logical_in,
                                                          .stored_bytes = c.stored_out,
                                                          .decompressed = c.decompressed,
                                                          .seconds = c.compress_seconds,
                                                          .decompress_seconds = c.decompress_seconds};
        }
        for (const auto& pool : objects.blocks().pools()) {
          if (pool.name != u.name) continue;
          p.media = store::MediaName(pool.media);
          p.compression = pool.compression.ToString();
          p.dedup = pool.dedup;
          struct statvfs v {};
          if (::statvfs(pool.path.c_str(), &v) == 0) {  // its file system (shared with whatever else is there)
            p.size_bytes = static_cast<double>(v.f_blocks) * v.f_frsize;
            p.available_bytes = static_cast<double>(v.f_bavail) * v.f_frsize;
          }
        }
      }
    }
    for (const auto& [name, value] : sampler.Latest()) doc.machine[name] = value;
    return doc;
  };
  auto stats_json = [stats_doc] { return s3::ToJson(stats_doc()); };
  // The dashboard's poll: /stats, the series its charts draw (the last
  // kDashboardHistorySamples seconds), and the cluster part.
  auto dashboard_json = [&sampler, stats_json, dashboard]() {
    nlohmann::json j = {{"stats", stats_json()}, {"time", static_cast<double>(Clock::Real().WallNanos()) * 1e-9}};
    const monitor::Series series = sampler.Take();
    nlohmann::json history = {{"t", series.t}};
    for (const auto& c : series.columns) {
      static const std::set<std::string> kDrawn = {"node.get",           "node.put",
                                                   "node.head",          "node.list",
                                                   "node.delete",        "node.in",
                                                   "node.out",           "node.errors.client",
                                                   "node.errors.server", "node.get.p50_ms",
                                                   "node.get.p99_ms",    "node.put.p50_ms",
                                                   "node.put.p99_ms",    "node.cache.hit_ratio",
                                                   "cpu.user",           "cpu.system",
                                                   "cpu.iowait",         "node.staging.staged",
                                                   "node.staging.hits",  "node.scrub.verified_bytes"};
      if (kDrawn.count(c.name)) history[c.name] = c.values;
    }
    j["history"] = std::move(history);
    j["cluster"] = dashboard ? dashboard() : nlohmann::json(nullptr);
    return j;
  };
  // /metrics: the node's own counters as counters (their rates are
  // Prometheus' to take), its gauges, and the machine's sampled gauges.
  auto prometheus_text = [&sampler, &stats, &objects, series_copy = series_for_prometheus]() {
    monitor::PrometheusWriter w;
    stats.WritePrometheus(&w);
    if (store::BlockCache* cache = objects.cache()) {
      auto c = cache->Stats();
      w.Counter("aquifer_cache_hits_total", "Block cache hits", static_cast<double>(c.hits));
      w.Counter("aquifer_cache_misses_total", "Block cache misses", static_cast<double>(c.misses));
      w.Counter("aquifer_cache_evicted_total", "Blocks evicted from the cache", static_cast<double>(c.evicted));
      w.Gauge("aquifer_cache_used_bytes", "Bytes held by the block cache", static_cast<double>(c.bytes));
      w.Gauge("aquifer_cache_capacity_bytes", "The block cache's capacity", static_cast<double>(c.capacity));
    }
    if (store::L3Cache* l3 = objects.l3()) {
      auto c = l3->Stats();
      w.Counter("aquifer_l3_hits_total", "L3 (SSD) cache hits", static_cast<double>(c.hits));
      w.Counter("aquifer_l3_misses_total", "L3 (SSD) cache misses", static_cast<double>(c.misses));
      w.Gauge("aquifer_l3_used_bytes", "Bytes held by the L3 cache", static_cast<double>(c.bytes));
      w.Gauge("aquifer_l3_capacity_bytes", "The L3 cache's capacity", static_cast<double>(c.capacity));
    }
    if (store::Prefetcher* pf = objects.prefetcher()) {
      auto p = pf->Stats();
      w.Counter("aquifer_prefetch_issued_blocks_total", "Blocks read ahead for streams", static_cast<double>(p.issued));
      w.Counter("aquifer_prefetch_hit_blocks_total", "Reads served by a block read ahead",
                static_cast<double>(p.hits + p.late_hits));
      w.Counter("aquifer_prefetch_wasted_blocks_total", "Blocks read ahead and never read",
                static_cast<double>(p.wasted));
      w.Gauge("aquifer_prefetch_held_bytes", "Bytes read ahead and held", static_cast<double>(p.bytes_held));
    }
    if (store::Stager* st = objects.stager()) {
      auto p = st->Stats();
      w.Counter("aquifer_staging_staged_blocks_total", "Blocks staged for read plans", static_cast<double>(p.staged));
      w.Counter("aquifer_staging_hit_blocks_total", "Reads served by a staged block",
                static_cast<double>(p.hits + p.late_hits));
      w.Counter("aquifer_staging_failed_blocks_total", "Blocks a plan named that could not be staged",
                static_cast<double>(p.failed));
      w.Gauge("aquifer_staging_held_bytes", "Bytes staged and held", static_cast<double>(p.bytes_held));
    }
    auto rs = objects.reclaimer().Stats();
    w.Counter("aquifer_reclaim_freed_blocks_total", "Blocks of replaced or deleted objects freed",
              static_cast<double>(rs.freed));
    w.Gauge("aquifer_reclaim_pending_blocks", "Blocks waiting to be freed (readers may hold them)",
            static_cast<double>(rs.pending));
    if (auto usage = objects.Usage(); usage.ok()) {
      for (const auto& u : *usage) {
        w.Gauge("aquifer_pool_used_bytes", "Bytes of blocks stored in each pool on this node",
                static_cast<double>(u.bytes), {{"pool", u.name}});
        w.Gauge("aquifer_pool_blocks", "Blocks stored in each pool on this node", static_cast<double>(u.blocks),
                {{"pool", u.name}});
        w.Gauge("aquifer_pool_logical_bytes",
                "Bytes the objects hold in each pool before compression and deduplication (physical: "
                "aquifer_pool_used_bytes)",
                static_cast<double>(u.referenced_bytes()), {{"pool", u.name}});
        w.Gauge("aquifer_pool_compressed_blocks", "Blocks each pool stores compressed",
                static_cast<double>(u.compressed_blocks), {{"pool", u.name}});
        w.Gauge("aquifer_pool_shared_blocks", "Content-addressed blocks each pool stores once for every object",
                static_cast<double>(u.shared_blocks), {{"pool", u.name}});
        w.Gauge("aquifer_pool_dedup_saved_bytes",
                "Bytes the objects' layouts name beyond the shared blocks stored (what deduplication saves)",
                static_cast<double>(u.dedup_saved_bytes), {{"pool", u.name}});
      }
    }
    for (const auto& c : objects.blocks().CompressionCounters()) {
      w.Counter("aquifer_pool_compression_writes_total",
                "Blocks written under a compressing policy, by whether they were stored compressed",
                static_cast<double>(c.compressed), {{"pool", c.pool}, {"stored", "compressed"}});
      w.Counter("aquifer_pool_compression_writes_total",
                "Blocks written under a compressing policy, by whether they were stored compressed",
                static_cast<double>(c.plain), {{"pool", c.pool}, {"stored", "plain"}});
      w.Counter("aquifer_pool_compression_seconds_total", "CPU time spent compressing blocks (kept or not)",
                c.compress_seconds, {{"pool", c.pool}});
      w.Counter("aquifer_pool_decompression_seconds_total", "CPU time spent decompressing blocks read from disk",
                c.decompress_seconds, {{"pool", c.pool}});
    }
    for (const auto& d : objects.blocks().DedupCounters()) {
      const bool dedup = [&] {
        for (const auto& pool : objects.blocks().pools()) {
          if (pool.name == d.pool) return pool.dedup;
        }
        return false;
      }();
      if (!dedup) continue;
      const char* help = "Blocks written to a dedup pool, by whether their content was stored already";
      w.Counter("aquifer_pool_dedup_writes_total", help, static_cast<double>(d.written),
                {{"pool", d.pool}, {"content", "new"}});
      w.Counter("aquifer_pool_dedup_writes_total", help, static_cast<double>(d.found),
                {{"pool", d.pool}, {"content", "found"}});
      w.Counter("aquifer_pool_dedup_hash_seconds_total", "CPU time naming blocks by their content (SHA-256)",
                d.hash_seconds, {{"pool", d.pool}});
    }
    // Each pool's file system: its size and what is left of it (a pool
    // shares its disk with whatever else is there).
    for (const auto& pool : objects.blocks().pools()) {
      struct statvfs v {};
      if (::statvfs(pool.path.c_str(), &v) != 0) continue;  // not a local directory (tests' memory pools)
      const std::string media(store::MediaName(pool.media));
      w.Gauge("aquifer_pool_size_bytes", "Size of the file system each pool is on",
              static_cast<double>(v.f_blocks) * v.f_frsize, {{"pool", pool.name}, {"media", media}});
      w.Gauge("aquifer_pool_available_bytes", "Bytes still free for this node on each pool's file system",
              static_cast<double>(v.f_bavail) * v.f_frsize, {{"pool", pool.name}, {"media", media}});
    }
    for (const auto& one : *series_copy) WriteSeries(one, &w);
    std::vector<monitor::Column> machine;
    for (auto& c : sampler.Take().columns) {
      if (c.values.empty() || c.name.rfind("node.", 0) == 0) continue;  // the node's own: counters above
      c.values = {c.values.back()};
      machine.push_back(std::move(c));
    }
    monitor::WriteSampled(machine, &w);
    return w.Text();
  };
  http::ServerOptions ho;
  ho.host = host;
  ho.port = port;
  ho.threads = 2;
  ho.max_connections = 64;
  ho.tls = std::move(tls);
  m->http_ = AQ_TRY(http::Server::Start(ho, [stats_json, prometheus_text, dashboard_json](http::Exchange& ex) {
    http::Headers h;
    const std::string& path = ex.request().path;
    if (ex.request().method != "GET" && ex.request().method != "HEAD") {
      (void)ex.Respond(405, std::move(h), "GET /metrics, /stats or /dashboard\n");
    } else if (path == "/metrics") {
      h.Add("Content-Type", "text/plain; version=0.0.4");
      (void)ex.Respond(200, std::move(h), prometheus_text());
    } else if (path == "/stats") {
      h.Add("Content-Type", "application/json");
      (void)ex.Respond(200, std::move(h), stats_json().dump(1));
    } else if (path == "/dashboard" || path == "/dashboard/" || path == "/") {
      h.Add("Content-Type", "text/html; charset=utf-8");
      h.Add("Cache-Control", "no-store");
      // The page runs only its own inline script and fetches only this address.
      h.Add("Content-Security-Policy",
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
            "img-src data:");
      h.Add("X-Content-Type-Options", "nosniff");
      (void)ex.Respond(200, std::move(h), std::string(kDashboardPage));
    } else if (path == "/dashboard.json") {
      h.Add("Content-Type", "application/json");
      h.Add("Cache-Control", "no-store");
      (void)ex.Respond(200, std::move(h), dashboard_json().dump());
    } else {
      (void)ex.Respond(404, std::move(h),
                       "not found: the metrics address serves /metrics, /stats, /dashboard and /dashboard.json\n");
    }
  }));
  m->port_ = m->http_->port();
  return m;
}

MetricsServer::~MetricsServer() {
  if (http_) http_->Stop();
  if (sampler_) sampler_->Stop();
}

}  // namespace aq::server
