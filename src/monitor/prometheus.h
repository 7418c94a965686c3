// `--prometheus PORT`: the monitor's latest values (and the bench's own
// counters) served as Prometheus text on http://HOST:PORT/metrics while a
// bench runs, so an existing Prometheus/Grafana can watch it.
//
// Thread safety: the exporter reads the sampler through Sampler::Latest(),
// which is safe from any thread; Start/destruction from one thread.
#pragma once

#include <functional>
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

// Prometheus exposition text (format 0.0.4) built family by family, names and
// units as Prometheus documents them: base units (bytes, seconds, ratios),
// counters ending in _total, one HELP and TYPE per family
// (`promtool check metrics` finds nothing to say: tests run it).
class PrometheusWriter {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  void Counter(const std::string& name, const std::string& help, double value, const Labels& labels = {});
  void Gauge(const std::string& name, const std::string& help, double value, const Labels& labels = {});
  // A histogram: (upper bound, how many at most that) pairs in increasing
  // order; +Inf, _sum and _count are added.
  void Histogram(const std::string& name, const std::string& help,
                 const std::vector<std::pair<double, uint64_t>>& buckets, double sum, uint64_t count,
                 const Labels& labels = {});
  std::string Text() const;

 private:
  struct Family {
    std::string type, help;
    std::vector<std::string> lines;
  };
  Family& Of(const std::string& name, const char* type, const std::string& help);
  std::vector<std::pair<std::string, Family>> families_;  // in the order first written
};

// Sampled values (their latest) as gauges in base units: "disk.sda.read"
// (MB/s) becomes aquifer_disk_read_bytes_per_second{device="sda"} (bytes/s),
// "%" a _ratio (0..1), IOPS _operations_per_second, "images/s"
// _images_per_second.
void WriteSampled(const std::vector<Column>& columns_with_latest_value, PrometheusWriter* out);
std::string PrometheusText(const std::vector<Column>& columns_with_latest_value);

class PrometheusExporter {
 public:
  // Binds host:port (port 0 picks a free one) and serves in a thread.
  static Result<std::unique_ptr<PrometheusExporter>> Start(const Sampler& sampler, const std::string& host, int port);
  // Serves what `text` returns (Prometheus text, PrometheusWriter::Text) on
  // /metrics; `text` is called from the server's thread.
  static Result<std::unique_ptr<PrometheusExporter>> Serve(std::function<std::string()> text, const std::string& host,
                                                           int port);
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
