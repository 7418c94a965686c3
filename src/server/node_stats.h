// A node's statistics, what `isi statistics` shows for a storage node:
// requests, client errors (4xx) and server errors (5xx) by status, bytes in
// and out and latency percentiles per operation,
// plus the block cache and the machine (CPU, network, disks from the
// monitor's sampler). Served on the node's metrics address as Prometheus
// text (/metrics) and JSON (/stats, what `aquifer stats` reads).
//
// Thread safety: Record() from any request thread; readers take a snapshot.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/latency.h"
#include "common/mutex.h"
#include "common/status.h"
#include "http/server.h"
#include "monitor/prometheus.h"
#include "monitor/sampler.h"
#include "s3/node_stats_doc.h"
#include "store/object_store.h"

namespace aq::server {

enum class Op { kGet, kHead, kPut, kDelete, kList, kBucket, kOther };
inline constexpr size_t kOps = 7;
const char* OpName(Op op);

class NodeStats {
 public:
  // A request starts: counted now, so a client that has its answer sees it
  // counted. Its outcome follows with Finish.
  void Begin(Op op);
  // `status` is the HTTP status answered: 4xx counts as a client error, 5xx
  // as a server error.
  void Finish(Op op, double seconds, uint64_t bytes_in, uint64_t bytes_out, int status);
  // Begin and Finish at once.
  void Record(Op op, double seconds, uint64_t bytes_in, uint64_t bytes_out, int status) {
    Begin(op);
    Finish(op, seconds, bytes_in, bytes_out, status);
  }
  uint64_t requests(Op op) const { return ops_[static_cast<size_t>(op)].count.load(); }
  uint64_t client_errors() const { return client_errors_.load(); }
  uint64_t server_errors() const { return server_errors_.load(); }
  // A GET whose body failed part way and was continued from another
  // replica or fragments (resumed), or could not be and was reset (cut).
  void BodyResumed() { bodies_resumed_.fetch_add(1, std::memory_order_relaxed); }
  void BodyCut() { bodies_cut_.fetch_add(1, std::memory_order_relaxed); }
  // A request refused because its key may not do it (403 AccessDenied).
  void Denied() { denied_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t denied() const { return denied_.load(); }
  uint64_t bodies_resumed() const { return bodies_resumed_.load(); }
  uint64_t bodies_cut() const { return bodies_cut_.load(); }
  uint64_t bytes_in() const { return bytes_in_.load(); }
  uint64_t bytes_out() const { return bytes_out_.load(); }
  // A copy of one operation's cumulative latency histogram.
  LatencyHistogram Latency(Op op) const;
  // Its part of /stats: ops, errors (and by status), bytes, bodies, denied.
  void Fill(s3::NodeStatsDoc* doc) const;
  // The same as Prometheus counters and a request-duration histogram per
  // operation (aquifer_s3_*).
  void WritePrometheus(monitor::PrometheusWriter* out) const;

 private:
  struct PerOp {
    std::atomic<uint64_t> count{0}, client_errors{0}, server_errors{0}, bytes_in{0}, bytes_out{0};
    mutable Mutex mu;
    LatencyHistogram latency AQ_GUARDED_BY(mu);
  };
  std::array<PerOp, kOps> ops_;
  std::atomic<uint64_t> bytes_in_{0}, bytes_out_{0}, client_errors_{0}, server_errors_{0};
  std::atomic<uint64_t> bodies_resumed_{0}, bodies_cut_{0}, denied_{0};
  mutable Mutex status_mu_;
  std::map<int, uint64_t> by_status_ AQ_GUARDED_BY(status_mu_);  // error statuses only
};

// Seconds of 1 Hz samples the metrics address keeps (the dashboard's
// charts); older ones are dropped.
inline constexpr size_t kDashboardHistorySamples = 600;

// The metrics address: /metrics (Prometheus) and /stats (JSON) from the
// node's counters, its cache and a 1 Hz machine sampler, and the live
// dashboard: /dashboard, a self-contained page (server/dashboard_page.h)
// that polls /dashboard.json every second: /stats, the last minutes of the
// node's series, and the cluster as this node sees it (`dashboard`).
// Read-only, no object data and no keys, like /metrics: the address is off
// unless asked for (serve --metrics), on 127.0.0.1 by default, and HTTPS
// when the node has a certificate.
class MetricsServer {
 public:
  // `extra` (optional) fills the sections of /stats the node keeps
  // (scrub, uploads, same-host, the cluster's).
  // A series of the node's own for /metrics: a counter (its rate is
  // sampled) or a gauge.
  struct Series {
    std::string name, unit;
    std::function<double()> value;
    bool counter = true;
  };
  static Result<std::unique_ptr<MetricsServer>> Start(NodeStats& stats, store::ObjectStore& objects,
                                                      const std::string& host, int port,
                                                      std::function<void(s3::NodeStatsDoc&)> extra = nullptr,
                                                      std::vector<Series> series = {},
                                                      std::shared_ptr<http::TlsServer> tls = nullptr,
                                                      std::function<nlohmann::json()> dashboard = nullptr);
  ~MetricsServer();
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<monitor::Sampler> sampler_;
  std::unique_ptr<http::Server> http_;
  int port_ = 0;
};

}  // namespace aq::server
