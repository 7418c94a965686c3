#include "report/report.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <map>

#include "report/svg.h"

namespace aq::report {
namespace {

using nlohmann::json;

const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#14213d;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c9d3e6}main{padding:16px 28px;max-width:1400px}
section.card{background:#fff;border:1px solid #dde2ea;border-radius:8px;margin:16px 0;padding:14px 18px}
section.card h2{margin:0 0 4px;font-size:17px}.src{color:#667;font-size:12px;word-break:break-all}
.figs{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}.fig{background:#f0f3f8;border-radius:6px;padding:8px 12px;min-width:120px}
.fig b{display:block;font-size:20px}.fig span{color:#556;font-size:12px}
.verdict{padding:8px 12px;border-radius:6px;margin:8px 0;font-weight:600}
.ok{background:#e3f6e8;color:#17612d}.bad{background:#fdeaea;color:#8a1c1c}.info{background:#eef2fb;color:#233a6b}
.charts{display:flex;flex-wrap:wrap;gap:12px}svg.chart{background:#fff;border:1px solid #eef0f4;border-radius:6px;max-width:100%;height:auto}
svg .title{font-weight:600;font-size:13px;fill:#1d2330}svg .tick{font-size:11px;fill:#556}svg .label{font-size:12px;fill:#334}
svg .legend{font-size:11px;fill:#334}svg .grid{stroke:#e8ebf0}svg .axis{stroke:#99a}
table{border-collapse:collapse;margin:8px 0}td,th{border-bottom:1px solid #e6e9ef;padding:4px 10px;text-align:left;font-size:13px}
th{background:#f0f3f8}ul.assume{font-size:12px;color:#445;margin:6px 0}details{margin-top:8px}
)";

// Marks how many charts drew something, for people's browsers and for the
// headless-browser test (data-charts / data-charts-rendered on <body>).
const char* kScript = R"(
(function(){var all=document.querySelectorAll('svg.chart'),ok=0;
all.forEach(function(s){var drawn=false;s.querySelectorAll('.series').forEach(function(e){
var b=e.getBBox();if(b.width>0||b.height>0)drawn=true;});s.setAttribute('data-rendered',drawn?'1':'0');if(drawn)ok++;});
document.body.setAttribute('data-charts',all.length);document.body.setAttribute('data-charts-rendered',ok);})();
)";

std::string Esc(const std::string& s) { return EscapeXml(s); }

// Accessors that accept any JSON: a result file is input, and a missing or
// mistyped field renders as empty, never as an exception or a crash.
double Num(const json& j, const char* key, double def = 0) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : def;
}
std::string Str(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}
bool Bool(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
}
const json& Obj(const json& j, const char* key) {
  static const json empty = json::object();
  return j.is_object() && j.contains(key) && j[key].is_object() ? j[key] : empty;
}
const json& Arr(const json& j, const char* key) {
  static const json empty = json::array();
  return j.is_object() && j.contains(key) && j[key].is_array() ? j[key] : empty;
}
std::vector<double> Numbers(const json& j, const char* key) {
  std::vector<double> out;
  for (const auto& v : Arr(j, key)) out.push_back(v.is_number() ? v.get<double>() : std::nan(""));
  return out;
}
std::string Text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string Fig(const std::string& value, const std::string& what) {
  return fmt::format("<div class=\"fig\"><b>{}</b><span>{}</span></div>", Esc(value), Esc(what));
}

// Series columns by name from a result's monitor series.
struct SeriesView {
  std::vector<double> t;
  std::map<std::string, std::pair<std::string, std::vector<double>>> cols;  // name -> (unit, values)
  explicit SeriesView(const json& r) {
    const json& s = Obj(r, "series");
    t = Numbers(s, "t");
    for (const auto& c : Arr(s, "columns")) cols[Str(c, "name")] = {Str(c, "unit"), Numbers(c, "values")};
  }
  const std::vector<double>* Get(const std::string& name) const {
    auto it = cols.find(name);
    return it == cols.end() ? nullptr : &it->second.second;
  }
  bool Active(const std::vector<double>& v) const {
    for (double x : v) {
      if (x > 0.01) return true;
    }
    return false;
  }
};

Line MakeLine(const std::string& name, const std::vector<double>& t, const std::vector<double>& v) {
  return {name, t, v, false};
}

std::string MonitorCharts(const SeriesView& s) {
  if (s.t.empty()) return "";
  std::string out;
  LineChart cpu{"CPU", "seconds", "%", {}, true};
  for (const char* c : {"cpu.user", "cpu.system", "cpu.iowait"}) {
    if (auto* v = s.Get(c)) cpu.lines.push_back(MakeLine(std::string(c).substr(4), s.t, *v));
  }
  if (auto* v = s.Get("process.cpu")) cpu.lines.push_back(MakeLine("aquifer (100% = 1 core)", s.t, *v));
  if (!cpu.lines.empty()) out += RenderSvg(cpu);
  LineChart mem{"Memory", "seconds", "GB", {}, true};
  for (const char* c : {"mem.used", "mem.page_cache", "process.rss"}) {
    if (auto* v = s.Get(c)) {
      std::vector<double> gb;
      for (double x : *v) gb.push_back(x / 1e9);
      mem.lines.push_back(MakeLine(c, s.t, gb));
    }
  }
  if (!mem.lines.empty()) out += RenderSvg(mem);
  LineChart disk{"Disks", "seconds", "MB/s", {}, true}, net{"Network", "seconds", "MB/s", {}, true};
  for (const auto& [name, col] : s.cols) {
    if (name.rfind("disk.", 0) == 0 && col.first == "MB/s" && s.Active(col.second)) {
      disk.lines.push_back(MakeLine(name.substr(5), s.t, col.second));
    }
    if (name.rfind("net.", 0) == 0 && s.Active(col.second))
      net.lines.push_back(MakeLine(name.substr(4), s.t, col.second));
  }
  if (!disk.lines.empty()) out += RenderSvg(disk);
  if (!net.lines.empty()) out += RenderSvg(net);
  for (const auto& [name, col] : s.cols) {
    if (name.rfind("gpu", 0) == 0 && name.find(".util") != std::string::npos) {
      out += RenderSvg(LineChart{"GPU utilisation (NVML)", "seconds", "%", {MakeLine(name, s.t, col.second)}, true});
    }
  }
  return out;
}

std::string StageBars(const json& stages) {
  BarChart b{"Pipeline stage utilisation", "%", {}, 100};
  for (const auto& st : stages) {
    b.bars.push_back(
        {fmt::format("{} ({:g} threads)", Str(st, "name"), Num(st, "threads")), 100 * Num(st, "utilisation"), ""});
  }
  return b.bars.empty() ? "" : RenderSvg(b);
}

std::string StorageCard(const json& r, const SeriesView& s) {
  const json& sum = Obj(r, "summary");
  std::string figs = Fig(fmt::format("{:.1f} MB/s", Num(sum, "mb_per_second")), "read (SI), measured window") +
                     Fig(fmt::format("{:.1f} MiB/s", Num(sum, "mib_per_second")), "read (binary)") +
                     Fig(fmt::format("{:.1f}", Num(sum, "files_per_second")), "files/s") +
                     Fig(fmt::format("{:.0f}", Num(sum, "requests_per_second")), "requests/s");
  std::string charts;
  if (auto* v = s.Get("bench.read")) {
    LineChart c{"Read throughput", "seconds", "MB/s", {MakeLine("bench read", s.t, *v)}, true};
    std::vector<double> disk(s.t.size(), 0);
    bool any = false;
    for (const auto& [name, col] : s.cols) {
      if (name.rfind("disk.", 0) == 0 && col.first == "MB/s" && name.find(".read") != std::string::npos) {
        for (size_t i = 0; i < disk.size() && i < col.second.size(); ++i) disk[i] += col.second[i];
        any = true;
      }
    }
    if (any) c.lines.push_back(MakeLine("disks read", s.t, disk));
    charts += RenderSvg(c);
  }
  if (sum.contains("latency")) {
    const json& l = Obj(sum, "latency");
    BarChart b{"Request latency", "µs", {}, 0};
    for (const char* q : {"p50_us", "p90_us", "p99_us", "p999_us", "max_us"}) {
      std::string label(q);
      b.bars.push_back({label.substr(0, label.size() - 3), Num(l, q), fmt::format("{:.0f} µs", Num(l, q))});
    }
    charts += RenderSvg(b);
  }
  return "<div class=\"figs\">" + figs + "</div><div class=\"charts\">" + charts + "</div>";
}

std::string TrainCard(const json& r, const SeriesView& s) {
  const json& sum = Obj(r, "summary");
  const json& cfg = Obj(r, "config");
  std::string figs =
      Fig(fmt::format("{:.0f}", Num(sum, "images_per_second")), "images/s delivered") +
      Fig(fmt::format("{:.0f}", Num(sum, "demand_images_per_second")), "images/s the GPUs could take") +
      Fig(fmt::format("{:.1f}%", 100 * Num(sum, "au")), "accelerator utilisation") +
      Fig(fmt::format("{:.1f} MB/s", Num(sum, "mb_per_second")), "storage") +
      Fig(fmt::format("{:.1f} MB/s", Num(sum, "mb_per_second_per_gpu")), "storage per GPU") +
      Fig(fmt::format("{:g} x {} {} {}", Num(cfg, "gpus"), Str(cfg, "gpu"), Str(cfg, "model"), Str(cfg, "precision")),
          Str(cfg, "mode"));
  std::string verdict =
      fmt::format("<div class=\"verdict {}\">{}</div>", Bool(sum, "au_ok") ? "ok" : "bad", Esc(Str(sum, "verdict")));
  std::string charts;
  if (auto* v = s.Get("bench.images")) {
    LineChart c{"Images per second", "seconds", "images/s", {MakeLine("delivered", s.t, *v)}, true};
    c.lines.push_back({"GPUs' demand",
                       {s.t.empty() ? 0 : s.t.front(), s.t.empty() ? 1 : s.t.back()},
                       {Num(sum, "demand_images_per_second"), Num(sum, "demand_images_per_second")},
                       true});
    charts += RenderSvg(c);
  }
  if (auto* v = s.Get("bench.au")) {
    double th = 100 * Num(cfg, "au_threshold", 0.9);
    LineChart c{"Accelerator utilisation", "seconds", "%", {MakeLine("AU", s.t, *v)}, true};
    c.lines.push_back({fmt::format("{:.0f}% target", th),
                       {s.t.empty() ? 0 : s.t.front(), s.t.empty() ? 1 : s.t.back()},
                       {th, th},
                       true});
    charts += RenderSvg(c);
  }
  if (auto* v = s.Get("bench.read")) {
    charts += RenderSvg(LineChart{"Storage read", "seconds", "MB/s", {MakeLine("read", s.t, *v)}, true});
  }
  charts += StageBars(Arr(sum, "stages"));
  return verdict + "<div class=\"figs\">" + figs + "</div><div class=\"charts\">" + charts + "</div>";
}

std::string PipelineCard(const json& r) {
  const json& sum = Obj(r, "summary");
  std::string figs = Fig(fmt::format("{:.0f}", Num(sum, "images_per_second")), "images/s") +
                     Fig(fmt::format("{:.1f} MB/s", Num(sum, "mb_per_second")), "storage") +
                     Fig(Str(sum, "limiting_stage"), "limiting stage");
  std::string charts = StageBars(Arr(sum, "stages"));
  return "<div class=\"figs\">" + figs + "</div><div class=\"charts\">" + charts + "</div>";
}

std::string SweepCard(const json& r) {
  const json& sum = Obj(r, "summary");
  const std::string metric = Str(sum, "metric"), param = Str(sum, "parameter");
  std::vector<double> x, y, ideal, au;
  for (const auto& p : Arr(sum, "points")) {
    x.push_back(Num(p, "value"));
    y.push_back(Num(p, "metric_value"));
    if (p.is_object() && p.contains("au")) au.push_back(100 * Num(p, "au"));
  }
  for (size_t i = 0; i < x.size(); ++i) ideal.push_back(x[0] > 0 ? y[0] * x[i] / x[0] : 0);
  std::string charts = RenderSvg(LineChart{fmt::format("Scaling: {} vs {}", metric, param),
                                           param,
                                           metric,
                                           {{"measured", x, y, false}, {"linear from the first point", x, ideal, true}},
                                           true});
  if (au.size() == x.size() && !au.empty()) {
    charts += RenderSvg(LineChart{"Accelerator utilisation vs " + param,
                                  param,
                                  "%",
                                  {{"AU", x, au, false}, {"90%", {x.front(), x.back()}, {90, 90}, true}},
                                  true});
  }
  std::string table = "<table><tr><th>" + Esc(param) + "</th><th>" + Esc(metric) + "</th><th>vs first</th></tr>";
  for (size_t i = 0; i < x.size(); ++i) {
    table +=
        fmt::format("<tr><td>{:g}</td><td>{:.1f}</td><td>{:.2f}x</td></tr>", x[i], y[i], y[0] > 0 ? y[i] / y[0] : 0);
  }
  table += "</table>";
  return "<div class=\"charts\">" + charts + "</div>" + table;
}

std::string SizeCard(const json& r) {
  const json& sum = Obj(r, "summary");
  const json& cfg = Obj(r, "config");
  double nodes = Num(sum, "nodes"), node_mbps = Num(sum, "node_mb_per_second"),
         demand = Num(sum, "demand_mb_per_second");
  std::string figs = Fig(fmt::format("{:.0f}", nodes), fmt::format("{} nodes", Str(cfg, "node"))) +
                     Fig(fmt::format("{:.2f}", Num(sum, "nodes_exact")), "nodes before rounding up") +
                     Fig(fmt::format("{:g}", Num(cfg, "gpus")), "GPUs") +
                     Fig(fmt::format("{:.0f} MB/s", demand), "demand");
  std::string charts;
  if (demand > 0 && node_mbps > 0) {
    BarChart b{"Demand vs what the nodes deliver", "MB/s", {}, 0};
    b.bars.push_back({"GPUs' demand", demand, ""});
    b.bars.push_back({fmt::format("{:.0f} x {} node", nodes, Str(cfg, "node")), nodes * node_mbps, ""});
    charts = RenderSvg(b);
  }
  std::string list = "<ul class=\"assume\">";
  for (const auto& a : Arr(sum, "assumptions")) list += "<li>" + Esc(Text(a)) + "</li>";
  return "<div class=\"figs\">" + figs + "</div><div class=\"charts\">" + charts + "</div>" + list + "</ul>";
}

std::string CacheCard(const json& r) {
  const json& sum = Obj(r, "summary");
  BarChart b{"Where reads are served (model: cache / dataset)", "%", {}, 100};
  b.bars.push_back({"client page cache", 100 * Num(sum, "client_hit"), ""});
  b.bars.push_back({"storage cache (of storage reads)", 100 * Num(sum, "storage_hit"), ""});
  b.bars.push_back({"storage media (of storage reads)", 100 * Num(sum, "storage_media"), ""});
  if (sum.contains("measured") && sum["measured"].is_object()) {
    const json& m = Obj(sum, "measured");
    b.bars.push_back({"measured client hits", 100 * Num(m, "client_hit"), ""});
  }
  return "<div class=\"charts\">" + RenderSvg(b) + "</div>";
}

std::string Card(const Input& in, size_t index) {
  const auto& r = in.result;
  const std::string cmd = Str(r, "command");
  SeriesView s(r);
  std::string body;
  if (cmd == "bench storage") {
    body = StorageCard(r, s);
  } else if (cmd == "bench train") {
    body = TrainCard(r, s);
  } else if (cmd == "bench pipeline") {
    body = PipelineCard(r);
  } else if (cmd.rfind("bench sweep", 0) == 0) {
    body = SweepCard(r);
  } else if (cmd == "size") {
    body = SizeCard(r);
  } else if (cmd == "model cache") {
    body = CacheCard(r);
  } else {
    body = "<div class=\"verdict info\">No chart for this command; its summary is below.</div>";
  }
  std::string monitor = MonitorCharts(s);
  if (!monitor.empty()) body += "<h3>Machine during the run</h3><div class=\"charts\">" + monitor + "</div>";
  std::string argv;
  for (const auto& a : Arr(r, "argv")) argv += (argv.empty() ? "" : " ") + Text(a);
  return fmt::format(
      "<section class=\"card\" id=\"r{}\"><h2>{}</h2><div class=\"src\">{} · {} · <code>{}</code></div>{}"
      "<details><summary>configuration and summary (JSON)</summary><pre>{}</pre><pre>{}</pre></details></section>\n",
      index, Esc(cmd), Esc(in.path), Esc(Str(r, "started")), Esc(argv), body, Esc(Obj(r, "config").dump(1)),
      Esc(Obj(r, "summary").dump(1)));
}

// The key figure and verdict of one result, for the overview and the text summary.
std::pair<std::string, std::string> KeyAndVerdict(const json& r) {
  const json& sum = Obj(r, "summary");
  std::string cmd = Str(r, "command"), key, verdict;
  if (cmd == "bench storage") {
    key = fmt::format("{:.1f} MB/s, {:.1f} files/s, p99 {:.0f} us", Num(sum, "mb_per_second"),
                      Num(sum, "files_per_second"), Num(Obj(sum, "latency"), "p99_us"));
  }
  if (cmd == "bench train" || cmd == "bench pipeline") {
    key = fmt::format("{:.0f} images/s, {:.1f} MB/s", Num(sum, "images_per_second"), Num(sum, "mb_per_second"));
  }
  if (cmd == "bench train") verdict = Str(sum, "verdict");
  if (cmd == "size") {
    key = fmt::format("{:g} GPUs, {:.0f} MB/s", Num(Obj(r, "config"), "gpus"), Num(sum, "demand_mb_per_second"));
    verdict = fmt::format("{:.0f} {} node(s) ({:.2f} before rounding up)", Num(sum, "nodes"),
                          Str(Obj(r, "config"), "node"), Num(sum, "nodes_exact"));
  }
  if (cmd == "model cache") {
    key = fmt::format("dataset {:.3g} GB", Num(sum, "dataset_bytes") / 1e9);
    verdict = fmt::format("client {:.1f}%, storage cache {:.1f}%, media {:.1f}% of storage reads",
                          100 * Num(sum, "client_hit"), 100 * Num(sum, "storage_hit"), 100 * Num(sum, "storage_media"));
    if (sum.contains("measured") && sum["measured"].is_object()) {
      verdict += fmt::format("; measured client hits {:.1f}%", 100 * Num(Obj(sum, "measured"), "client_hit"));
    }
  }
  if (cmd.rfind("bench sweep", 0) == 0) {
    std::string line;
    for (const auto& p : Arr(sum, "points")) {
      line += fmt::format("{}{}: {:.0f}", line.empty() ? "" : ", ", Str(p, "label"), Num(p, "metric_value"));
    }
    key = fmt::format("{} by {}", Str(sum, "metric"), Str(sum, "parameter"));
    verdict = line;
  }
  return {key, verdict};
}

}  // namespace

std::string TextSummary(const std::vector<Input>& inputs) {
  std::string out;
  for (const auto& in : inputs) {
    auto [key, verdict] = KeyAndVerdict(in.result);
    out += fmt::format("  {:<18} {}\n", Str(in.result, "command"), key);
    if (!verdict.empty()) out += fmt::format("  {:<18} -> {}\n", "", verdict);
  }
  return out;
}

std::string RenderHtml(const std::vector<Input>& inputs, const std::string& title) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
  std::string machine;
  if (!inputs.empty() && inputs[0].result.contains("machine")) {
    const json& m = Obj(inputs[0].result, "machine");
    machine = fmt::format("{} · {:g} cores · {:.1f} GB · {}", Str(m, "cpu_model"), Num(m, "cores"),
                          Num(m, "memory_bytes") / 1e9, Str(m, "kernel"));
  }
  std::string overview = "<table><tr><th>#</th><th>command</th><th>key figure</th><th>verdict / answer</th></tr>";
  std::string cards;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& r = inputs[i].result;
    std::string cmd = Str(r, "command");
    auto [key, verdict] = KeyAndVerdict(r);
    overview += fmt::format("<tr><td><a href=\"#r{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>", i, i + 1,
                            Esc(cmd), Esc(key), Esc(verdict));
    cards += Card(inputs[i], i);
  }
  overview += "</table>";
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><style>{}</style></head>\n"
      "<body><header><h1>{}</h1><p>{} result(s) · generated {} · {}</p></header><main>"
      "<section class=\"card\"><h2>Overview</h2>{}</section>{}</main><script>{}</script></body></html>\n",
      Esc(title), kStyle, Esc(title), inputs.size(), when, Esc(machine), overview, cards, kScript);
}

size_t CountCharts(const std::string& html) {
  size_t n = 0;
  for (size_t p = html.find("<svg class=\"chart\""); p != std::string::npos;
       p = html.find("<svg class=\"chart\"", p + 1)) {
    ++n;
  }
  return n;
}

}  // namespace aq::report
