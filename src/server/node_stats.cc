#include "server/node_stats.h"

#include <fmt/format.h>

#include <chrono>

#include "monitor/latency_json.h"
#include "monitor/prometheus.h"

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

nlohmann::json NodeStats::ToJson() const {
  nlohmann::json ops = nlohmann::json::object();
  for (size_t i = 0; i < kOps; ++i) {
    const auto& s = ops_[i];
    nlohmann::json lat;
    {
      MutexLock lock(s.mu);
      lat = monitor::LatencyJson(s.latency);
    }
    ops[OpName(static_cast<Op>(i))] = {{"requests", s.count.load()},
                                       {"client_errors", s.client_errors.load()},
                                       {"server_errors", s.server_errors.load()},
                                       {"bytes_in", s.bytes_in.load()},
                                       {"bytes_out", s.bytes_out.load()},
                                       {"latency", lat}};
  }
  nlohmann::json statuses = nlohmann::json::object();
  {
    MutexLock lock(status_mu_);
    for (const auto& [code, n] : by_status_) statuses[std::to_string(code)] = n;
  }
  return {{"ops", ops},
          {"client_errors", client_errors_.load()},
          {"server_errors", server_errors_.load()},
          {"errors_by_status", statuses},
          {"bytes_in", bytes_in_.load()},
          {"bytes_out", bytes_out_.load()},
          {"bodies", {{"resumed", bodies_resumed_.load()}, {"cut", bodies_cut_.load()}}},
          {"denied", denied_.load()}};
}

// Long by design: one sampler registration per exported series (requests by
// operation, errors, cache, reclaim, uploads, ...), a line or two each.
Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(NodeStats& stats, store::ObjectStore& objects,
                                                            const std::string& host, int port,
                                                            std::function<nlohmann::json()> extra,
                                                            std::vector<Series> series,
                                                            std::shared_ptr<http::TlsServer> tls) {
  std::unique_ptr<MetricsServer> m(new MetricsServer());
  monitor::SamplerOptions so;
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
  for (auto& one : series) {
    if (one.counter) {
      sampler.AddCounter(one.name, one.unit, std::move(one.value));
    } else {
      sampler.AddGauge(one.name, one.unit, std::move(one.value));
    }
  }
  sampler.Start();
  const auto started = std::chrono::steady_clock::now();
  auto stats_json = [&sampler, &stats, &objects, started, extra]() {
    nlohmann::json j = stats.ToJson();
    if (extra) {
      const nlohmann::json more = extra();  // (kept alive for the loop)
      for (const auto& [k, v] : more.items()) j[k] = v;
    }
    j["uptime_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (store::BlockCache* cache = objects.cache()) {
      auto c = cache->Stats();
      j["cache"] = {{"policy", cache->policy() == store::CachePolicy::kTinyLfu ? "tinylfu" : "lru"},
                    {"capacity_bytes", c.capacity},
                    {"bytes", c.bytes},
                    {"entries", c.entries},
                    {"hits", c.hits},
                    {"misses", c.misses},
                    {"hit_ratio", c.hit_ratio()},
                    {"evicted", c.evicted},
                    {"rejected", c.rejected}};
    }
    if (store::L3Cache* l3 = objects.l3()) {
      auto c = l3->Stats();
      j["l3"] = {{"path", l3->path()},
                 {"capacity_bytes", c.capacity},
                 {"bytes", c.bytes},
                 {"entries", c.entries},
                 {"hits", c.hits},
                 {"misses", c.misses},
                 {"hit_ratio", c.hit_ratio()},
                 {"admitted", c.admitted},
                 {"evicted", c.evicted},
                 {"rejected", c.rejected},
                 {"dropped", c.dropped},
                 {"damaged", c.damaged},
                 {"restored", c.restored},
                 {"queued_writes", c.queued},
                 {"queued_bytes", c.queued_bytes},
                 {"write_errors", c.write_errors}};
    }
    if (store::Prefetcher* pf = objects.prefetcher()) {
      auto p = pf->Stats();
      j["prefetch"] = {{"issued", p.issued},
                       {"hits", p.hits},
                       {"late_hits", p.late_hits},
                       {"wasted", p.wasted},
                       {"continued_streams", p.continued},
                       {"new_streams", p.new_streams},
                       {"bytes_held", p.bytes_held},
                       {"window_blocks", pf->options().max_window_blocks},
                       {"memory_bytes", pf->options().memory_bytes}};
    }
    if (store::Stager* st = objects.stager()) {
      auto p = st->Stats();
      j["staging"] = {{"planned", p.planned},
                      {"staged", p.staged},
                      {"shared", p.shared},
                      {"resident", p.resident},
                      {"hits", p.hits},
                      {"late_hits", p.late_hits},
                      {"expired", p.expired},
                      {"skipped", p.skipped},
                      {"failed", p.failed},
                      {"bytes_held", p.bytes_held},
                      {"queued", p.queued},
                      {"reading", p.reading},
                      {"streams", p.streams},
                      {"memory_bytes", st->options().memory_bytes},
                      {"threads", st->options().threads}};
    }
    auto rs = objects.reclaimer().Stats();
    j["reclaim"] = {{"freed", rs.freed}, {"removed", rs.removed}, {"deferred", rs.deferred}, {"forced", rs.forced},
                    {"early", rs.early}, {"pending", rs.pending}, {"readers", rs.pins}};
    nlohmann::json pools = nlohmann::json::array();
    if (auto usage = objects.blocks().Usage(); usage.ok()) {
      for (const auto& u : *usage) pools.push_back({{"name", u.name}, {"blocks", u.blocks}, {"bytes", u.bytes}});
    }
    j["pools"] = pools;
    nlohmann::json latest = nlohmann::json::object();
    for (const auto& [name, value] : sampler.Latest()) latest[name] = value;
    j["machine"] = latest;
    return j.dump(1);
  };
  http::ServerOptions ho;
  ho.host = host;
  ho.port = port;
  ho.threads = 2;
  ho.max_connections = 64;
  ho.tls = std::move(tls);
  m->http_ = AQ_TRY(http::Server::Start(ho, [&sampler, stats_json](http::Exchange& ex) {
    http::Headers h;
    if (ex.request().method != "GET" && ex.request().method != "HEAD") {
      (void)ex.Respond(405, std::move(h), "GET /metrics or /stats\n");
    } else if (ex.request().path == "/metrics") {
      std::vector<monitor::Column> cols;
      for (auto& c : sampler.Take().columns) {
        if (!c.values.empty()) c.values = {c.values.back()};
        cols.push_back(std::move(c));
      }
      h.Add("Content-Type", "text/plain; version=0.0.4");
      (void)ex.Respond(200, std::move(h), monitor::PrometheusText(cols));
    } else if (ex.request().path == "/stats") {
      h.Add("Content-Type", "application/json");
      (void)ex.Respond(200, std::move(h), stats_json());
    } else {
      (void)ex.Respond(404, std::move(h), "not found: the metrics address serves /metrics and /stats\n");
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
