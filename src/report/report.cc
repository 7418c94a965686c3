#include "report/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>

#include "common/units.h"
#include "report/svg.h"

namespace aq::report {
namespace {

using nlohmann::json;

const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#14213d;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c9d3e6}main{padding:16px 28px;max-width:1400px}
section.card{background:#fff;border:1px solid #dde2ea;border-radius:8px;margin:16px 0;padding:14px 18px}
section.card h2{margin:0 0 4px;font-size:17px;overflow-wrap:anywhere}.src{color:#667;font-size:12px;word-break:break-all}
.figs{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}.fig{background:#f0f3f8;border-radius:6px;padding:8px 12px;min-width:120px}
.fig b{display:block;font-size:20px}.fig span{color:#556;font-size:12px}
.verdict{padding:8px 12px;border-radius:6px;margin:8px 0;font-weight:600}
.ok{background:#e3f6e8;color:#17612d}.bad{background:#fdeaea;color:#8a1c1c}.info{background:#eef2fb;color:#233a6b}
.charts{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
svg.chart{background:#fff;border:1px solid #eef0f4;border-radius:6px;max-width:100%;height:auto}
svg.chart.line{flex:1 1 600px;max-width:980px}svg.chart.bar{flex:0 1 auto}
.path{font-size:13px;color:#334;margin:2px 0 6px}.path b{background:#e7ecf6;border-radius:4px;padding:1px 6px;color:#14213d}
svg .title{font-weight:600;font-size:13px;fill:#1d2330}svg .tick{font-size:11px;fill:#556}svg .label{font-size:12px;fill:#334}
svg .legend{font-size:11px;fill:#334}svg .grid{stroke:#e8ebf0}svg .axis{stroke:#99a}
table{border-collapse:collapse;margin:8px 0}td,th{border-bottom:1px solid #e6e9ef;padding:4px 10px;text-align:left;font-size:13px}
th{background:#f0f3f8}table.overview td:nth-child(2),table.overview td:nth-child(3){white-space:nowrap}ul.assume{font-size:12px;color:#445;margin:6px 0}details{margin-top:8px}
)";

// Marks how many charts drew something, for people's browsers and for the
// headless-browser test (data-charts / data-charts-rendered on <body>).
const char* kScript = R"(
(function(){var all=document.querySelectorAll('svg.chart'),ok=0,problems=[];
function inside(b,w,h){return b.x>=-0.5&&b.y>=-0.5&&b.x+b.width<=w+0.5&&b.y+b.height<=h+0.5;}
function overlap(a,b){return a.x+1<b.x+b.width&&b.x+1<a.x+a.width&&a.y+1<b.y+b.height&&b.y+1<a.y+a.height;}
all.forEach(function(s){var drawn=false;s.querySelectorAll('.series').forEach(function(e){
var b=e.getBBox();if(b.width>0||b.height>0)drawn=true;});s.setAttribute('data-rendered',drawn?'1':'0');if(drawn)ok++;
var vb=s.viewBox.baseVal,texts=[],name=s.getAttribute('aria-label');
s.querySelectorAll('text').forEach(function(t){if(t.getAttribute('transform'))return;var b=t.getBBox();
if(!inside(b,vb.width,vb.height))problems.push('clipped in "'+name+'": '+t.textContent);texts.push([t,b]);});
for(var i=0;i<texts.length;i++)for(var j=i+1;j<texts.length;j++)if(overlap(texts[i][1],texts[j][1]))
problems.push('overlapping in "'+name+'": '+texts[i][0].textContent+' / '+texts[j][0].textContent);});
var seen=[],walk=document.createTreeWalker(document.body,NodeFilter.SHOW_TEXT);
while(walk.nextNode()){var n=walk.currentNode,p=n.parentElement;if(p.closest('details,script,style,code,.src'))continue;
var m=n.textContent.match(/\b\d+(\.\d+)?e[+-]?\d+\b|\bnan\b|\binf\b/i);if(m)problems.push('exponent or non-number: '+m[0]);}
document.body.setAttribute('data-charts',all.length);document.body.setAttribute('data-charts-rendered',ok);
document.body.setAttribute('data-layout-problems',JSON.stringify(problems));})();
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

// A count as written for people: "72", "1.28 M", never "1.28e+06".
std::string Int(double v) { return std::fabs(v) < 1e6 ? fmt::format("{:.0f}", v) : units::Count(v); }

std::string Banner(const std::string& cls, const std::string& text) {
  return text.empty() ? "" : fmt::format("<div class=\"verdict {}\">{}</div>", cls, Esc(text));
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
    // A run shorter than one sampling interval has no samples: no chart.
    auto it = cols.find(name);
    return it == cols.end() || t.empty() || it->second.second.empty() ? nullptr : &it->second.second;
  }
  // Sum of a rate column times the interval between samples: the amount
  // over the run (MB for MB/s). -1 if the column is missing.
  double Total(const std::string& name) const {
    const auto* v = Get(name);
    if (v == nullptr) return -1;
    double sum = 0, prev = 0;
    for (size_t i = 0; i < v->size() && i < t.size(); ++i) {
      if (std::isfinite((*v)[i])) sum += (*v)[i] * (t[i] - prev);
      prev = t[i];
    }
    return sum;
  }
  bool Active(const std::vector<double>& v) const {
    for (double x : v) {
      if (x > 0.01) return true;
    }
    return false;
  }
};

// What to do about figures served from the page cache. A cache dropped
// before the run (--drop-caches) does not help when the dataset fits in
// RAM: every file read a second time comes from memory again.
std::string PageCacheAdvice(const json& r) {
  const json& cfg = Obj(r, "config");
  const double dataset = Num(Obj(r, "summary"), "dataset_bytes"), ram = Num(Obj(r, "machine"), "memory_bytes");
  if (Bool(cfg, "drop_caches")) {
    return fmt::format(
        "The cache was dropped before the run (--drop-caches), but the dataset{} fits in this machine's RAM{}, so "
        "after each file's first read it came from memory again: to measure the storage, read a dataset larger "
        "than RAM (aquifer dataset expand), read with O_DIRECT (--direct), or run for less than one pass.",
        dataset > 0 ? " (" + units::Bytes(dataset) + ")" : "", ram > 0 ? " (" + units::Bytes(ram) + ")" : "");
  }
  return "Drop the cache first (--drop-caches) and read a dataset larger than RAM (or with --direct) to measure "
         "the storage.";
}

}  // namespace

DataPath DescribeDataPath(const json& r) {
  const SeriesView s(r);
  const json& cfg = Obj(r, "config");
  const json& sum = Obj(r, "summary");
  DataPath d;
  std::string data = Str(cfg, "data");
  if (data.empty()) return d;
  d.where = data;
  if (data.rfind("aquifer://", 0) == 0 || data.rfind("aquifers://", 0) == 0) {
    d.kind = data.rfind("aquifers://", 0) == 0 ? "storage node (TLS)" : "storage node";
    d.note =
        "Read over the network from an aquifer node: its RAM cache, L3 and media decide the speed; this "
        "machine's page cache plays no part (aquifer stats shows the node's hits).";
    return d;
  }
  if (data.rfind("s3://", 0) == 0) {
    d.kind = "S3";
    return d;
  }
  const json& roots = Arr(Obj(r, "machine"), "roots");
  std::string fs = roots.empty() ? "" : Str(roots[0], "fs_type");
  std::string dev = roots.empty() ? "" : Str(roots[0], "device");
  if (!fs.empty()) d.where += fmt::format(" ({} on {})", fs, dev);
  if (fs == "fuse.aquifer") {
    d.kind = "aquifer mount";
    d.note = "Read through the POSIX mount: every miss in this machine's page cache is a request to a node.";
    return d;
  }
  if (fs == "tmpfs" || fs == "ramfs") {
    d.kind = "RAM (" + fs + ")";
    d.memory_speed = true;
    d.note = "The files live in memory: these are memory speeds, not a disk's.";
    return d;
  }
  if (fs.rfind("nfs", 0) == 0 || fs == "cifs" || fs.rfind("fuse", 0) == 0) {
    d.kind = "network or FUSE file system (" + fs + ")";
  } else {
    d.kind = "local disk";
  }
  // How much came from the device, measured on this process (/proc/self/io:
  // read_bytes is what it fetched from a block device, rchar every byte its
  // reads returned). Without those counters (several processes, no task
  // accounting), the page-cache residency before the run decides.
  double device = s.Total("process.read"), all = s.Total("process.rchar");
  double before = Num(sum, "page_cache_before", -1);
  if (const json& points = Arr(sum, "points"); before < 0 && !points.empty()) {
    before = Num(points[points.size() - 1], "page_cache_before", -1);  // bench infer: the run of the series
  }
  if (all > 1) {
    double frac = std::clamp(device / all, 0.0, 1.0);
    if (frac < 0.1) {
      d.kind = "page cache";
      d.memory_speed = true;
      d.note = fmt::format(
          "Served from this machine's page cache: only {:.1f}% of the bytes this process read came from the "
          "device (/proc/self/io). These are memory speeds, not the storage's. {}",
          100 * frac, PageCacheAdvice(r));
    } else if (frac < 0.9) {
      d.kind += " + page cache";
      d.note = fmt::format(
          "{:.0f}% of the bytes this process read came from the device, the rest from the page "
          "cache (/proc/self/io).",
          100 * frac);
    }
  } else if (before >= 0.9) {
    d.kind = "page cache";
    d.memory_speed = true;
    d.note = fmt::format(
        "{:.0f}% of the files were in this machine's page cache before the run: these are "
        "memory speeds, not the storage's. {}",
        100 * before, PageCacheAdvice(r));
  } else if (before >= 0) {
    if (before > 0.1) d.kind += fmt::format(" + page cache ({:.0f}% resident before)", 100 * before);
  } else if (d.kind == "local disk") {
    d.kind = "local files";  // nothing says where the bytes came from
  }
  return d;
}

namespace {

Line MakeLine(const std::string& name, const std::vector<double>& t, const std::vector<double>& v) {
  return {name, t, v, false};
}

std::string MonitorCharts(const SeriesView& s) {
  if (s.t.empty()) return "";
  std::string out;
  LineChart cpu{"CPU (whole machine, and this process)", "seconds", "%", {}, true};
  for (const char* c : {"cpu.user", "cpu.system", "cpu.iowait"}) {
    if (auto* v = s.Get(c)) cpu.lines.push_back(MakeLine(std::string(c).substr(4), s.t, *v));
  }
  if (auto* v = s.Get("process.cpu")) cpu.lines.push_back(MakeLine("this process (100% = 1 core)", s.t, *v));
  if (!cpu.lines.empty()) out += RenderSvg(cpu);
  LineChart mem{"Memory (whole machine and this process)", "seconds", "GB", {}, true};
  for (auto [c, label] : {std::pair{"mem.used", "machine: used"}, std::pair{"mem.page_cache", "machine: page cache"},
                          std::pair{"process.rss", "this process: resident"}}) {
    if (auto* v = s.Get(c)) {
      std::vector<double> gb;
      for (double x : *v) gb.push_back(x / 1e9);
      mem.lines.push_back(MakeLine(label, s.t, gb));
    }
  }
  if (!mem.lines.empty()) out += RenderSvg(mem);
  LineChart disk{"Disks (whole machine: every process's I/O)", "seconds", "MB/s", {}, true},
      net{"Network (whole machine)", "seconds", "MB/s", {}, true};
  for (const auto& [name, col] : s.cols) {
    if (name.rfind("disk.", 0) == 0 && col.first == "MB/s" && s.Active(col.second)) {
      disk.lines.push_back(MakeLine(name.substr(5), s.t, col.second));
    }
    if (name.rfind("net.", 0) == 0 && s.Active(col.second))
      net.lines.push_back(MakeLine(name.substr(4), s.t, col.second));
  }
  if (!disk.lines.empty()) {
    if (auto* v = s.Get("process.read"); v != nullptr && s.Active(*v)) {
      disk.lines.push_back({"this process from devices (/proc/self/io)", s.t, *v, true});
    }
    out += RenderSvg(disk);
  }
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
        {fmt::format("{} ({} thread{})", Str(st, "name"), Int(Num(st, "threads")), Num(st, "threads") == 1 ? "" : "s"),
         100 * Num(st, "utilisation"), ""});
  }
  return b.bars.empty() ? "" : RenderSvg(b);
}

std::string StorageCard(const json& r, const SeriesView& s, const DataPath& d) {
  const json& sum = Obj(r, "summary");
  std::string figs = Fig(units::Rate(1e6 * Num(sum, "mb_per_second")), "read (SI), measured window") +
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
    if (auto* p = s.Get("process.read"); p != nullptr && d.kind != "storage node" && s.Active(*p)) {
      c.lines.push_back(MakeLine("this process from devices (/proc/self/io)", s.t, *p));
    }
    if (any) c.lines.push_back({"all disks, whole machine (every process)", s.t, disk, true});
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
  return Banner(d.kind == "page cache" || d.kind.rfind("RAM", 0) == 0 ? "bad" : "info", d.note) +
         "<div class=\"figs\">" + figs + "</div><div class=\"charts\">" + charts + "</div>";
}

// bench train --node-stats: where the node's block reads came from, per
// epoch and over time.
std::string NodeReadCharts(const json& reads, const SeriesView& s) {
  std::string out;
  const json& epochs = Arr(reads, "epochs");
  if (!epochs.empty()) {
    BarChart b{"Node block reads by source, per epoch", "%", {}, 100};
    for (const auto& e : epochs) {
      const std::string epoch = Int(Num(e, "epoch"));
      for (auto [k, label] : {std::pair{"staged_fraction", "staged"}, std::pair{"cache_fraction", "RAM cache"},
                              std::pair{"media_fraction", "media"}}) {
        b.bars.push_back({fmt::format("epoch {}: {}", epoch, label), 100 * Num(e, k), ""});
      }
    }
    out += RenderSvg(b);
  }
  LineChart c{"Node block reads by source", "seconds", "blocks/s", {}, true};
  for (auto [name, label] : {std::pair{"node.reads.staged", "staged"}, std::pair{"node.reads.cache", "RAM cache"},
                             std::pair{"node.reads.media", "media"}}) {
    if (auto* v = s.Get(name)) c.lines.push_back(MakeLine(label, s.t, *v));
  }
  if (!c.lines.empty()) out += RenderSvg(c);
  return out;
}

std::string TrainCard(const json& r, const SeriesView& s) {
  const json& sum = Obj(r, "summary");
  const json& cfg = Obj(r, "config");
  std::string figs = Fig(fmt::format("{:.0f}", Num(sum, "images_per_second")), "images/s delivered") +
                     Fig(fmt::format("{:.0f}", Num(sum, "demand_images_per_second")), "images/s the GPUs could take") +
                     Fig(fmt::format("{:.1f}%", 100 * Num(sum, "au")), "accelerator utilisation") +
                     Fig(fmt::format("{:.1f} MB/s", Num(sum, "mb_per_second")), "storage") +
                     Fig(fmt::format("{:.1f} MB/s", Num(sum, "mb_per_second_per_gpu")), "storage per GPU") +
                     Fig(fmt::format("{} x {} {} {}", Int(Num(cfg, "gpus")), Str(cfg, "gpu"), Str(cfg, "model"),
                                     Str(cfg, "precision")),
                         Str(cfg, "mode"));
  const std::string bound = Str(sum, "bound");
  std::string verdict =
      Banner(bound == "insufficient" ? "info" : (Bool(sum, "au_ok") ? "ok" : "bad"), Str(sum, "verdict"));
  const json& steps = Obj(sum, "measured_step_seconds");
  if (!steps.empty()) {
    figs += Fig(fmt::format("{:.1f} / {:.1f} / {:.1f} ms", 1e3 * Num(steps, "min"), 1e3 * Num(steps, "median"),
                            1e3 * Num(steps, "max")),
                fmt::format("step time min / median / max, {} measured steps", Int(Num(sum, "measured_steps"))));
  }
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
  charts += NodeReadCharts(Obj(sum, "node_reads"), s);
  charts += StageBars(Arr(sum, "stages"));
  return verdict + "<div class=\"figs\">" + figs + "</div><div class=\"charts\">" + charts + "</div>";
}

std::string PipelineCard(const json& r) {
  const json& sum = Obj(r, "summary");
  std::string figs = Fig(fmt::format("{:.0f}", Num(sum, "images_per_second")), "images/s") +
                     Fig(fmt::format("{:.1f} MB/s", Num(sum, "mb_per_second")), "storage") +
                     Fig(Str(sum, "limiting_stage"), "limiting stage");
  std::string charts = StageBars(Arr(sum, "stages"));
  std::string limit = Str(sum, "limiting_stage");
  if (sum.contains("enough_samples") && !Bool(sum, "enough_samples")) {
    limit.clear();
    figs += Fig(fmt::format("{} batches, {:.2f} s", Int(Num(sum, "batches")), Num(sum, "seconds")), "measured");
    return Banner("info",
                  "Not enough samples: too few batches or too short a run for a stable rate (more --epochs "
                  "or data).") +
           "<div class=\"figs\">" + figs + "</div><div class=\"charts\">" + charts + "</div>";
  }
  return Banner("info", limit.empty() ? "" : "Limited by the " + limit + " stage: the busiest one sets the pace.") +
         "<div class=\"figs\">" + figs + "</div><div class=\"charts\">" + charts + "</div>";
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
    table += fmt::format("<tr><td>{}</td><td>{:.1f}</td><td>{:.2f}x</td></tr>",
                         Esc(Str(Arr(sum, "points")[i], "label")), y[i], y[0] > 0 ? y[i] / y[0] : 0);
  }
  table += "</table>";
  std::string banner;
  if (x.size() >= 2 && x[0] > 0 && y[0] > 0 && x.back() > x[0]) {
    double gain = y.back() / y[0], ideal_gain = x.back() / x[0];
    banner = Banner(gain >= 0.8 * ideal_gain ? "ok" : "info",
                    fmt::format("{} from {} to {}: {:.2f}x the {}, {:.0f}% of linear scaling", param,
                                Str(Arr(sum, "points")[0], "label"), Str(Arr(sum, "points")[x.size() - 1], "label"),
                                gain, metric, 100 * gain / ideal_gain));
  }
  return banner + "<div class=\"charts\">" + charts + "</div>" + table;
}

std::string InferCard(const json& r) {
  const json& sum = Obj(r, "summary");
  const json& cfg = Obj(r, "config");
  std::vector<double> batch, delivered, demand, au;
  std::string table =
      "<table><tr><th>batch</th><th>images/s</th><th>GPUs could take</th><th>AU</th><th>storage</th><th>per "
      "GPU</th><th>step time min / median / max</th><th>verdict</th></tr>";
  for (const auto& p : Arr(sum, "points")) {
    batch.push_back(Num(p, "batch"));
    delivered.push_back(Num(p, "images_per_second"));
    demand.push_back(Num(p, "demand_images_per_second"));
    au.push_back(100 * Num(p, "au"));
    const json& st = Obj(p, "measured_step_seconds");
    table += fmt::format(
        "<tr><td>{}</td><td>{:.0f}</td><td>{:.0f}</td><td>{:.1f}%</td><td>{}</td><td>{}</td><td>{:.1f} / {:.1f} / "
        "{:.1f} ms</td><td>{}</td></tr>",
        Int(Num(p, "batch")), Num(p, "images_per_second"), Num(p, "demand_images_per_second"), 100 * Num(p, "au"),
        units::Rate(1e6 * Num(p, "mb_per_second")), units::Rate(1e6 * Num(p, "mb_per_second_per_gpu")),
        1e3 * Num(st, "min"), 1e3 * Num(st, "median"), 1e3 * Num(st, "max"), Esc(Str(p, "verdict")));
  }
  table += "</table>";
  std::string charts;
  if (!batch.empty()) {
    charts += RenderSvg(LineChart{"Inference images per second by batch size",
                                  "batch size",
                                  "images/s",
                                  {{"delivered", batch, delivered, false}, {"GPUs could take", batch, demand, true}},
                                  true});
    double th = 100 * Num(cfg, "au_threshold", 0.9);
    charts += RenderSvg(LineChart{
        "Accelerator utilisation by batch size",
        "batch size",
        "%",
        {{"AU", batch, au, false}, {fmt::format("{:.0f}% target", th), {batch.front(), batch.back()}, {th, th}, true}},
        true});
  }
  std::string banner;
  const json& ev = Obj(sum, "evaluation");
  if (!ev.empty()) {
    banner = Banner("ok", fmt::format("Top-1 {:.2f}% (top-5 {:.2f}%) of {} over {} images, each counted once, through "
                                      "aquifer.Loader on the CPU ({:.0f} images/s)",
                                      100 * Num(ev, "top1"), 100 * Num(ev, "top5"), Str(ev, "arch"),
                                      Int(Num(ev, "images")), Num(ev, "images_per_second")));
  }
  std::string list = "<ul class=\"assume\">";
  for (const auto& a : Arr(sum, "assumptions")) list += "<li>" + Esc(Text(a)) + "</li>";
  for (const auto& a : Arr(sum, "skipped")) list += "<li>skipped: " + Esc(Text(a)) + "</li>";
  return banner + "<div class=\"charts\">" + charts + "</div>" + table + list + "</ul>";
}

std::string SizeCard(const json& r) {
  const json& sum = Obj(r, "summary");
  const json& cfg = Obj(r, "config");
  double nodes = Num(sum, "nodes"), node_mbps = Num(sum, "node_mb_per_second"),
         demand = Num(sum, "demand_mb_per_second");
  std::string figs = Fig(fmt::format("{:.0f}", nodes), fmt::format("{} nodes", Str(cfg, "node"))) +
                     Fig(fmt::format("{:.2f}", Num(sum, "nodes_exact")), "nodes before rounding up") +
                     Fig(Int(Num(cfg, "gpus")), "GPUs") + Fig(units::Rate(demand * 1e6), "demand");
  std::string charts;
  if (demand > 0 && node_mbps > 0) {
    BarChart b{"Demand vs what the nodes deliver", "MB/s", {}, 0};
    b.bars.push_back({"GPUs' demand", demand, units::Rate(demand * 1e6)});
    b.bars.push_back({fmt::format("{:.0f} x {} node", nodes, Str(cfg, "node")), nodes * node_mbps,
                      units::Rate(nodes * node_mbps * 1e6)});
    charts = RenderSvg(b);
  }
  std::string list = "<ul class=\"assume\">";
  for (const auto& a : Arr(sum, "assumptions")) list += "<li>" + Esc(Text(a)) + "</li>";
  return Banner("ok", fmt::format("{:.0f} {} node(s) deliver the {} the GPUs need", nodes, Str(cfg, "node"),
                                  units::Rate(demand * 1e6))) +
         "<div class=\"figs\">" + figs + "</div><div class=\"charts\">" + charts + "</div>" + list + "</ul>";
}

// `doctor`: what limits training for each image form, against the GPUs' demand.
std::string DoctorCard(const json& r) {
  const json& sum = Obj(r, "summary");
  const double demand = Num(sum, "demand_images_per_second"), cores = Num(sum, "cores");
  std::string figs =
      Fig(fmt::format("{:.0f}", demand), "images/s the GPUs need") + Fig(fmt::format("{:g}", cores), "decode cores") +
      Fig(units::Rate(1e6 * Num(sum, "storage_mb_per_second")), "storage") + Fig(Str(sum, "limit"), "limit as stored");
  BarChart delivered{
      "Images per second each form delivers with these cores (the GPUs' demand first)", "images/s", {}, 0};
  delivered.bars.push_back({"GPUs' demand", demand, fmt::format("{:.0f}", demand)});
  BarChart mbps{"MB/s per GPU each form needs from storage", "MB/s", {}, 0};
  std::string table =
      "<table><tr><th>form</th><th>bytes/image</th><th>images/s/core</th><th>cores needed</th><th>MB/s per "
      "GPU</th><th>MB/s total</th><th>nodes</th><th>GPU</th><th>limit</th><th>pack with</th></tr>";
  const std::string pick = Str(sum, "pick");
  for (const auto& f : Arr(sum, "forms")) {
    const std::string form = Str(f, "form");
    const double rate = std::min(demand, cores * Num(f, "images_per_second_per_core"));
    delivered.bars.push_back({form, rate, fmt::format("{:.0f}%", 100 * Num(f, "gpu_utilisation"))});
    mbps.bars.push_back({form, Num(f, "mb_per_second_per_gpu"), units::Rate(1e6 * Num(f, "mb_per_second_per_gpu"))});
    table += fmt::format(
        "<tr{}><td>{}</td><td>{}</td><td>{:.0f}</td><td>{:.1f}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0f}%</td>"
        "<td>{}</td><td><code>{}</code></td></tr>",
        form == pick ? " class=\"pick\"" : "", Esc(form) + (form == pick ? " (pick)" : ""),
        units::Bytes(Num(f, "bytes_per_image")), Num(f, "images_per_second_per_core"), Num(f, "cores_needed"),
        units::Rate(1e6 * Num(f, "mb_per_second_per_gpu")), units::Rate(1e6 * Num(f, "demand_mb_per_second")),
        Int(Num(f, "nodes")), 100 * Num(f, "gpu_utilisation"), Esc(Str(f, "limit")), Esc(Str(f, "pack_flags")));
  }
  table += "</table>";
  std::string charts;
  if (delivered.bars.size() > 1) charts = RenderSvg(delivered) + RenderSvg(mbps);
  std::string list = "<ul class=\"assume\">";
  for (const auto& a : Arr(sum, "assumptions")) list += "<li>" + Esc(Text(a)) + "</li>";
  for (const auto& a : Arr(sum, "warnings")) list += "<li>warning: " + Esc(Text(a)) + "</li>";
  const std::string verdict = Str(sum, "verdict");
  return Banner(Str(sum, "limit") == "gpu" ? "ok" : "info", verdict) + "<div class=\"figs\">" + figs +
         "</div><div class=\"charts\">" + charts + "</div>" + table + list + "</ul>";
}

// `bench checkpoint`: saves and restores per target against the local disk.
std::string CheckpointCard(const json& r) {
  const json& sum = Obj(r, "summary");
  const json& targets = Obj(sum, "targets");
  BarChart save{"Save MB/s (all ranks, the slowest counting)", "MB/s", {}, 0};
  BarChart restore{"Restore MB/s (rank r reads rank r+1's file)", "MB/s", {}, 0};
  std::string table =
      "<table><tr><th>target</th><th>save MB/s</th><th>x local</th><th>slowest rank</th><th>restore MB/s</th>"
      "<th>x local</th><th>slowest rank</th></tr>";
  for (const auto& [name, t] : targets.items()) {
    const json& sv = Obj(t, "save");
    const json& rs = Obj(t, "restore");
    save.bars.push_back({name, Num(sv, "median_total_mb_per_second"), fmt::format("{:.2f}x", Num(t, "save_vs_local"))});
    restore.bars.push_back(
        {name, Num(rs, "median_total_mb_per_second"), fmt::format("{:.2f}x", Num(t, "restore_vs_local"))});
    table += fmt::format(
        "<tr><td>{}</td><td>{:.1f}</td><td>{:.2f}x</td><td>{:.2f} s</td><td>{:.1f}</td><td>{:.2f}x</td><td>{:.2f} "
        "s</td></tr>",
        Esc(name), Num(sv, "median_total_mb_per_second"), Num(t, "save_vs_local"), Num(sv, "median_slowest_seconds"),
        Num(rs, "median_total_mb_per_second"), Num(t, "restore_vs_local"), Num(rs, "median_slowest_seconds"));
  }
  table += "</table>";
  std::string list = "<ul class=\"assume\">";
  for (const auto& a : Arr(sum, "semantics")) list += "<li>" + Esc(Text(a)) + "</li>";
  const std::string charts = save.bars.empty() ? "" : RenderSvg(save) + RenderSvg(restore);
  return Banner("info",
                fmt::format("{} ranks x {} ({}), medians of {} saves and restores", Int(Num(sum, "ranks")),
                            units::Bytes(Num(sum, "bytes_per_rank")), Str(sum, "scale"), Int(Num(sum, "saves")))) +
         "<div class=\"charts\">" + charts + "</div>" + table + list + "</ul>";
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
  return Banner("info", fmt::format("Dataset {}: {:.1f}% of reads hit the client's page cache; of the reads that reach "
                                    "storage, {:.1f}% come from its cache and {:.1f}% from media.",
                                    units::Bytes(Num(sum, "dataset_bytes")), 100 * Num(sum, "client_hit"),
                                    100 * Num(sum, "storage_hit"), 100 * Num(sum, "storage_media"))) +
         "<div class=\"charts\">" + RenderSvg(b) + "</div>";
}

std::string Card(const Input& in, size_t index) {
  const auto& r = in.result;
  const std::string cmd = Str(r, "command");
  SeriesView s(r);
  DataPath d = DescribeDataPath(r);
  std::string body;
  if (cmd == "bench storage") {
    body = StorageCard(r, s, d);
  } else if (cmd == "bench train") {
    body = Banner("info", d.note) + TrainCard(r, s);
  } else if (cmd == "bench pipeline") {
    body = Banner("info", d.note) + PipelineCard(r);
  } else if (cmd == "bench infer") {
    body = Banner("info", d.note) + InferCard(r);
  } else if (cmd.rfind("bench sweep", 0) == 0) {
    body = SweepCard(r);
  } else if (cmd == "size") {
    body = SizeCard(r);
  } else if (cmd == "model cache") {
    body = CacheCard(r);
  } else if (cmd == "doctor") {
    body = DoctorCard(r);
  } else if (cmd == "bench checkpoint") {
    body = CheckpointCard(r);
  } else {
    body = "<div class=\"verdict info\">No chart for this command; its summary is below.</div>";
  }
  std::string monitor = MonitorCharts(s);
  if (!monitor.empty()) body += "<h3>Machine during the run</h3><div class=\"charts\">" + monitor + "</div>";
  std::string argv;
  for (const auto& a : Arr(r, "argv")) argv += (argv.empty() ? "" : " ") + Text(a);
  return fmt::format(
      "<section class=\"card\" id=\"r{}\"><h2>{}{}</h2>{}<div class=\"src\">{} · {} · <code>{}</code></div>{}"
      "<details><summary>configuration and summary (JSON)</summary><pre>{}</pre><pre>{}</pre></details></section>\n",
      index, Esc(cmd), d.kind.empty() ? "" : " · " + Esc(d.kind),
      d.where.empty() ? "" : "<div class=\"path\">data: <b>" + Esc(d.kind) + "</b> " + Esc(d.where) + "</div>",
      Esc(in.path), Esc(Str(r, "started")), Esc(argv), body, Esc(Obj(r, "config").dump(1)),
      Esc(Obj(r, "summary").dump(1)));
}

// The key figure and verdict of one result, for the overview and the text summary.
std::pair<std::string, std::string> KeyAndVerdict(const json& r) {
  const json& sum = Obj(r, "summary");
  std::string cmd = Str(r, "command"), key, verdict;
  if (cmd == "bench storage") {
    key = fmt::format("{}, {:.1f} files/s, p99 {:.0f} µs", units::Rate(1e6 * Num(sum, "mb_per_second")),
                      Num(sum, "files_per_second"), Num(Obj(sum, "latency"), "p99_us"));
  }
  if (cmd == "bench train" || cmd == "bench pipeline") {
    key =
        fmt::format("{:.0f} images/s, {}", Num(sum, "images_per_second"), units::Rate(1e6 * Num(sum, "mb_per_second")));
  }
  if (cmd == "bench train") verdict = Str(sum, "verdict");
  if (cmd == "bench infer") {
    for (const auto& p : Arr(sum, "points")) {
      key += fmt::format("{}batch {}: {:.0f} images/s", key.empty() ? "" : ", ", Int(Num(p, "batch")),
                         Num(p, "images_per_second"));
      verdict +=
          fmt::format("{}batch {}: AU {:.1f}%", verdict.empty() ? "" : ", ", Int(Num(p, "batch")), 100 * Num(p, "au"));
    }
    if (const json& ev = Obj(sum, "evaluation"); !ev.empty()) {
      verdict += fmt::format("; top-1 {:.2f}% over {} images", 100 * Num(ev, "top1"), Int(Num(ev, "images")));
    }
  }
  if (cmd == "size") {
    key = fmt::format("{} GPUs, {}", Int(Num(Obj(r, "config"), "gpus")),
                      units::Rate(1e6 * Num(sum, "demand_mb_per_second")));
    verdict = fmt::format("{:.0f} {} node(s) ({:.2f} before rounding up)", Num(sum, "nodes"),
                          Str(Obj(r, "config"), "node"), Num(sum, "nodes_exact"));
  }
  if (cmd == "model cache") {
    key = "dataset " + units::Bytes(Num(sum, "dataset_bytes"));
    verdict = fmt::format("client {:.1f}%, storage cache {:.1f}%, media {:.1f}% of storage reads",
                          100 * Num(sum, "client_hit"), 100 * Num(sum, "storage_hit"), 100 * Num(sum, "storage_media"));
    if (sum.contains("measured") && sum["measured"].is_object()) {
      verdict += fmt::format("; measured client hits {:.1f}%", 100 * Num(Obj(sum, "measured"), "client_hit"));
    }
  }
  if (cmd == "bench checkpoint") {
    key = fmt::format("{} ranks x {}", Int(Num(sum, "ranks")), units::Bytes(Num(sum, "bytes_per_rank")));
    for (const auto& [name, t] : Obj(sum, "targets").items()) {
      verdict += fmt::format("{}{}: save {:.2f}x, restore {:.2f}x", verdict.empty() ? "" : "; ", name,
                             Num(t, "save_vs_local"), Num(t, "restore_vs_local"));
    }
  }
  if (cmd == "doctor") {
    key = fmt::format("{} ({}, {} images): {:.0f} images/s needed", Str(sum, "data"), Str(sum, "format"),
                      Int(Num(sum, "images")), Num(sum, "demand_images_per_second"));
    verdict = Str(sum, "verdict");
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
    std::string kind = DescribeDataPath(in.result).kind;
    out += fmt::format("  {:<18} {}{}\n", Str(in.result, "command"), key, kind.empty() ? "" : " [" + kind + "]");
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
    machine = fmt::format("{} · {} cores · {} · {}", Str(m, "cpu_model"), Int(Num(m, "cores")),
                          units::Bytes(Num(m, "memory_bytes")), Str(m, "kernel"));
  }
  std::string overview =
      "<table class=\"overview\"><tr><th>#</th><th>command</th><th>data</th><th>key figure</th><th>verdict / "
      "answer</th></tr>";
  std::string cards;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& r = inputs[i].result;
    std::string cmd = Str(r, "command");
    auto [key, verdict] = KeyAndVerdict(r);
    std::string kind = DescribeDataPath(r).kind;
    overview += fmt::format("<tr><td><a href=\"#r{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", i,
                            i + 1, Esc(cmd), Esc(kind), Esc(key), Esc(verdict));
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
  for (size_t p = html.find("<svg class=\"chart"); p != std::string::npos; p = html.find("<svg class=\"chart", p + 1)) {
    ++n;
  }
  return n;
}

}  // namespace aq::report
