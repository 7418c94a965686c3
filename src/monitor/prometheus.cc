#include "monitor/prometheus.h"

#include <fmt/format.h>
#include <httplib.h>

#include <map>

namespace aq::monitor {
namespace {

std::string Sanitize(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  return s;
}

std::string UnitSuffix(const std::string& unit) {
  static const std::map<std::string, std::string> m = {
      {"%", "_percent"}, {"MB/s", "_mb_per_second"},         {"bytes", "_bytes"},
      {"IOPS", "_iops"}, {"images/s", "_images_per_second"}, {"files/s", "_files_per_second"}};
  auto it = m.find(unit);
  return it != m.end() ? it->second : (unit.empty() ? "" : "_" + Sanitize(unit));
}

std::string EscapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string PrometheusText(const std::vector<Column>& columns) {
  // Group samples by metric name so each gets one HELP/TYPE header.
  std::map<std::string, std::vector<std::string>> metrics;
  std::map<std::string, std::string> help;
  for (const auto& c : columns) {
    if (c.values.empty()) continue;
    std::string metric, labels;
    size_t a = c.name.find('.'), b = c.name.rfind('.');
    std::string head = c.name.substr(0, a);
    if (a != std::string::npos && b != a && (head == "disk" || head == "net")) {
      metric = "aquifer_" + head + "_" + Sanitize(c.name.substr(b + 1)) + UnitSuffix(c.unit);
      labels = fmt::format("{{{}=\"{}\"}}", head == "disk" ? "device" : "interface",
                           EscapeLabel(c.name.substr(a + 1, b - a - 1)));
    } else {
      metric = "aquifer_" + Sanitize(c.name) + UnitSuffix(c.unit);
    }
    metrics[metric].push_back(fmt::format("{}{} {:.6g}", metric, labels, c.values.back()));
    help[metric] = c.name + " (" + c.unit + ")";
  }
  std::string out;
  for (const auto& [metric, lines] : metrics) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", metric, help[metric], metric);
    for (const auto& l : lines) out += l + "\n";
  }
  return out;
}

Result<std::unique_ptr<PrometheusExporter>> PrometheusExporter::Start(const Sampler& sampler, const std::string& host,
                                                                      int port) {
  std::unique_ptr<PrometheusExporter> e(new PrometheusExporter());
  e->server_ = std::make_unique<httplib::Server>();
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would
  // let a second exporter share the port and split the scrapes.
  e->server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  e->server_->Get("/metrics", [&sampler](const httplib::Request&, httplib::Response& res) {
    std::vector<Column> cols;
    Series s = sampler.Take();
    for (auto& c : s.columns) {
      if (!c.values.empty()) c.values = {c.values.back()};
      cols.push_back(std::move(c));
    }
    res.set_content(PrometheusText(cols), "text/plain; version=0.0.4");
  });
  if (port == 0) {
    e->port_ = e->server_->bind_to_any_port(host);
    if (e->port_ <= 0) return IoError(fmt::format("Prometheus exporter: cannot listen on {}", host));
  } else {
    if (!e->server_->bind_to_port(host, port)) {
      return IoError(fmt::format("Prometheus exporter: cannot listen on {}:{} (in use?)", host, port));
    }
    e->port_ = port;
  }
  e->thread_ = std::thread([srv = e->server_.get()] { srv->listen_after_bind(); });
  return e;
}

Result<std::unique_ptr<PrometheusExporter>> ExportIfAsked(const Sampler& sampler, const SamplerOptions& options) {
  if (options.prometheus_port < 0) return std::unique_ptr<PrometheusExporter>();
  auto e = AQ_TRY(PrometheusExporter::Start(sampler, options.prometheus_host, options.prometheus_port));
  std::fprintf(stderr, "aquifer: Prometheus metrics on http://%s:%d/metrics\n", options.prometheus_host.c_str(),
               e->port());
  return e;
}

PrometheusExporter::~PrometheusExporter() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace aq::monitor
