#include "server/node_stats.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>

#include "monitor/prometheus.h"

namespace aq::server {

const char* OpName(Op op) {
  static const char* kNames[kOps] = {"get", "head", "put", "delete", "list", "bucket", "other"};
  return kNames[static_cast<size_t>(op)];
}

void NodeStats::Record(Op op, double seconds, uint64_t in, uint64_t out, bool error) {
  auto& s = ops_[static_cast<size_t>(op)];
  s.count.fetch_add(1, std::memory_order_relaxed);
  if (error) s.errors.fetch_add(1, std::memory_order_relaxed);
  s.bytes_in.fetch_add(in, std::memory_order_relaxed);
  s.bytes_out.fetch_add(out, std::memory_order_relaxed);
  bytes_in_.fetch_add(in, std::memory_order_relaxed);
  bytes_out_.fetch_add(out, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(s.mu);
  s.latency.Record(static_cast<uint64_t>(seconds * 1e9));
}

nlohmann::json NodeStats::ToJson() const {
  nlohmann::json ops = nlohmann::json::object();
  for (size_t i = 0; i < kOps; ++i) {
    const auto& s = ops_[i];
    nlohmann::json lat;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      lat = s.latency.ToJson();
    }
    ops[OpName(static_cast<Op>(i))] = {{"requests", s.count.load()},
                                       {"errors", s.errors.load()},
                                       {"bytes_in", s.bytes_in.load()},
                                       {"bytes_out", s.bytes_out.load()},
                                       {"latency", lat}};
  }
  return {{"ops", ops}, {"bytes_in", bytes_in_.load()}, {"bytes_out", bytes_out_.load()}};
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(NodeStats& stats, store::ObjectStore& objects,
                                                            const std::string& host, int port,
                                                            std::function<nlohmann::json()> extra) {
  std::unique_ptr<MetricsServer> m(new MetricsServer());
  monitor::SamplerOptions so;
  m->sampler_ = std::make_unique<monitor::Sampler>(so);
  auto& sampler = *m->sampler_;
  for (size_t i = 0; i < kOps; ++i) {
    const Op op = static_cast<Op>(i);
    sampler.AddCounter(fmt::format("node.{}", OpName(op)), "requests/s",
                       [&stats, op] { return static_cast<double>(stats.requests(op)); });
  }
  sampler.AddCounter(
      "node.in", "MB/s", [&stats] { return static_cast<double>(stats.bytes_in()); }, 1e-6);
  sampler.AddCounter(
      "node.out", "MB/s", [&stats] { return static_cast<double>(stats.bytes_out()); }, 1e-6);
  if (store::BlockCache* cache = objects.cache()) {
    sampler.AddGauge("node.cache.hit_ratio", "%", [cache] { return 100 * cache->Stats().hit_ratio(); });
    sampler.AddGauge("node.cache.used", "bytes", [cache] { return static_cast<double>(cache->Stats().bytes); });
  }
  if (store::Prefetcher* pf = objects.prefetcher()) {
    sampler.AddCounter("node.prefetch.hits", "blocks/s", [pf] {
      auto p = pf->Stats();
      return static_cast<double>(p.hits + p.late_hits);
    });
    sampler.AddCounter("node.prefetch.issued", "blocks/s", [pf] { return static_cast<double>(pf->Stats().issued); });
    sampler.AddGauge("node.prefetch.held", "bytes", [pf] { return static_cast<double>(pf->Stats().bytes_held); });
  }
  sampler.Start();
  const auto started = std::chrono::steady_clock::now();
  m->http_ = std::make_unique<httplib::Server>();
  m->http_->Get("/metrics", [&sampler](const httplib::Request&, httplib::Response& res) {
    std::vector<monitor::Column> cols;
    for (auto& c : sampler.Take().columns) {
      if (!c.values.empty()) c.values = {c.values.back()};
      cols.push_back(std::move(c));
    }
    res.set_content(monitor::PrometheusText(cols), "text/plain; version=0.0.4");
  });
  m->http_->Get(
      "/stats", [&sampler, &stats, &objects, started, extra](const httplib::Request&, httplib::Response& res) {
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
        nlohmann::json pools = nlohmann::json::array();
        if (auto usage = objects.blocks().Usage(); usage.ok()) {
          for (const auto& u : *usage) pools.push_back({{"name", u.name}, {"blocks", u.blocks}, {"bytes", u.bytes}});
        }
        j["pools"] = pools;
        nlohmann::json latest = nlohmann::json::object();
        for (const auto& [name, value] : sampler.Latest()) latest[name] = value;
        j["machine"] = latest;
        res.set_content(j.dump(1), "application/json");
      });
  if (port == 0) {
    m->port_ = m->http_->bind_to_any_port(host);
    if (m->port_ <= 0) return IoError(fmt::format("--metrics: cannot listen on {}", host));
  } else {
    if (!m->http_->bind_to_port(host, port)) {
      return IoError(fmt::format("--metrics: cannot listen on {}:{} (in use?)", host, port));
    }
    m->port_ = port;
  }
  m->thread_ = std::thread([srv = m->http_.get()] { srv->listen_after_bind(); });
  return m;
}

MetricsServer::~MetricsServer() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
  if (sampler_) sampler_->Stop();
}

}  // namespace aq::server
