// `--prometheus PORT`: the monitor's latest values (and the bench's own
// counters) served as Prometheus text on http://HOST:PORT/metrics while a
// bench runs, so an existing Prometheus/Grafana can watch it.
//
// Thread safety: the exporter reads the sampler through Sampler::Latest(),
// which is safe from any thread; Start/destruction from one thread.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "monitor/sampler.h"

namespace httplib {
class Server;
}

namespace aq::monitor {

// Prometheus exposition text for sampled values. Names follow Prometheus
// conventions: "disk.sda.read" (MB/s) becomes
// aquifer_disk_read_mb_per_second{device="sda"}.
std::string PrometheusText(const std::vector<Column>& columns_with_latest_value);

class PrometheusExporter {
 public:
  // Binds host:port (port 0 picks a free one) and serves in a thread.
  static Result<std::unique_ptr<PrometheusExporter>> Start(const Sampler& sampler, const std::string& host, int port);
  ~PrometheusExporter();
  int port() const { return port_; }

 private:
  PrometheusExporter() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// Starts an exporter when options.prometheus_port >= 0, else returns null.
Result<std::unique_ptr<PrometheusExporter>> ExportIfAsked(const Sampler& sampler, const SamplerOptions& options);

}  // namespace aq::monitor
