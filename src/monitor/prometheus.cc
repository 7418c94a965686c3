#include "monitor/prometheus.h"

#include <fmt/format.h>
#include <httplib.h>

#include <cmath>
#include <map>

namespace aq::monitor {
namespace {

std::string Sanitize(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  return s;
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

std::string EscapeHelp(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string LabelText(const PrometheusWriter::Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    out += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, EscapeLabel(labels[i].second));
  }
  return out + "}";
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return fmt::format("{}", v);  // the shortest text that reads back as v
}

// A sampled column's metric suffix and the factor to base units.
std::pair<std::string, double> BaseUnit(std::string& name, const std::string& unit) {
  auto strip = [&](const std::string& tail) {
    if (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0) {
      name.erase(name.size() - tail.size());
    }
  };
  if (unit == "%") return {"_ratio", 0.01};
  if (unit == "MB/s") return {"_bytes_per_second", 1e6};
  if (unit == "bytes") {
    strip("_bytes");
    return {"_bytes", 1};
  }
  if (unit == "IOPS") {
    strip("_iops");
    return {"_operations_per_second", 1};
  }
  if (unit.size() > 2 && unit.compare(unit.size() - 2, 2, "/s") == 0) {
    const std::string what = Sanitize(unit.substr(0, unit.size() - 2));
    strip("_" + what);
    return {"_" + what + "_per_second", 1};
  }
  if (unit.empty()) return {"", 1};
  strip("_" + Sanitize(unit));
  return {"_" + Sanitize(unit), 1};
}

}  // namespace

PrometheusWriter::Family& PrometheusWriter::Of(const std::string& name, const char* type, const std::string& help) {
  for (auto& [n, f] : families_) {
    if (n == name) return f;
  }
  families_.push_back({name, Family{type, help, {}}});
  return families_.back().second;
}

void PrometheusWriter::Counter(const std::string& name, const std::string& help, double value, const Labels& labels) {
  Of(name, "counter", help).lines.push_back(fmt::format("{}{} {}", name, LabelText(labels), Number(value)));
}

void PrometheusWriter::Gauge(const std::string& name, const std::string& help, double value, const Labels& labels) {
  Of(name, "gauge", help).lines.push_back(fmt::format("{}{} {}", name, LabelText(labels), Number(value)));
}

void PrometheusWriter::Histogram(const std::string& name, const std::string& help,
                                 const std::vector<std::pair<double, uint64_t>>& buckets, double sum, uint64_t count,
                                 const Labels& labels) {
  Family& f = Of(name, "histogram", help);
  for (const auto& [le, n] : buckets) {
    Labels l = labels;
    l.emplace_back("le", Number(le));
    f.lines.push_back(fmt::format("{}_bucket{} {}", name, LabelText(l), n));
  }
  Labels inf = labels;
  inf.emplace_back("le", "+Inf");
  f.lines.push_back(fmt::format("{}_bucket{} {}", name, LabelText(inf), count));
  f.lines.push_back(fmt::format("{}_sum{} {}", name, LabelText(labels), Number(sum)));
  f.lines.push_back(fmt::format("{}_count{} {}", name, LabelText(labels), count));
}

std::string PrometheusWriter::Text() const {
  std::string out;
  for (const auto& [name, f] : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, EscapeHelp(f.help), name, f.type);
    for (const auto& l : f.lines) out += l + "\n";
  }
  return out;
}

void WriteSampled(const std::vector<Column>& columns, PrometheusWriter* out) {
  for (const auto& c : columns) {
    if (c.values.empty()) continue;
    std::string metric;
    PrometheusWriter::Labels labels;
    size_t a = c.name.find('.'), b = c.name.rfind('.');
    std::string head = c.name.substr(0, a);
    if (a != std::string::npos && b != a && (head == "disk" || head == "net")) {
      metric = "aquifer_" + head + "_" + Sanitize(c.name.substr(b + 1));
      labels.emplace_back(head == "disk" ? "device" : "interface", c.name.substr(a + 1, b - a - 1));
    } else {
      metric = "aquifer_" + Sanitize(c.name);
    }
    const auto [suffix, factor] = BaseUnit(metric, c.unit);
    out->Gauge(metric + suffix, c.name + " (" + c.unit + ", sampled every second; in base units here)",
               c.values.back() * factor, labels);
  }
}

std::string PrometheusText(const std::vector<Column>& columns) {
  PrometheusWriter w;
  WriteSampled(columns, &w);
  return w.Text();
}

Result<std::unique_ptr<PrometheusExporter>> PrometheusExporter::Start(const Sampler& sampler, const std::string& host,
                                                                      int port) {
  return Serve(
      [&sampler] {
        std::vector<Column> cols;
        Series s = sampler.Take();
        for (auto& c : s.columns) {
          if (!c.values.empty()) c.values = {c.values.back()};
          cols.push_back(std::move(c));
        }
        return PrometheusText(cols);
      },
      host, port);
}

Result<std::unique_ptr<PrometheusExporter>> PrometheusExporter::Serve(std::function<std::string()> text,
                                                                      const std::string& host, int port) {
  std::unique_ptr<PrometheusExporter> e(new PrometheusExporter());
  e->server_ = std::make_unique<httplib::Server>();
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would
  // let a second exporter share the port and split the scrapes.
  e->server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  e->server_->Get("/metrics", [text = std::move(text)](const httplib::Request&, httplib::Response& res) {
    res.set_content(text(), "text/plain; version=0.0.4");
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
