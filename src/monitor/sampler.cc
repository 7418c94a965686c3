#include "monitor/sampler.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/mutex.h"
#include "monitor/proc.h"

namespace aq::monitor {
namespace {

bool IsWholeDisk(const std::string& name) {
  if (name.rfind("loop", 0) == 0 || name.rfind("ram", 0) == 0 || name.rfind("zram", 0) == 0) return false;
  struct stat st {};
  return ::stat(("/sys/block/" + name).c_str(), &st) == 0;
}

// The few NVML entry points used, resolved with dlsym so nothing links
// against the driver.
struct Nvml {
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned*);
  using HandleFn = int (*)(unsigned, void**);
  struct Util {
    unsigned gpu, memory;
  };
  struct Mem {
    unsigned long long total, free, used;
  };
  using UtilFn = int (*)(void*, Util*);
  using MemFn = int (*)(void*, Mem*);
  CountFn count = nullptr;
  HandleFn handle = nullptr;
  UtilFn util = nullptr;
  MemFn mem = nullptr;
  unsigned devices = 0;
};

}  // namespace

const Column* Series::Find(const std::string& name) const {
  for (const auto& c : columns) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

nlohmann::json Series::ToJson() const {
  nlohmann::json cols = nlohmann::json::array();
  for (const auto& c : columns) cols.push_back({{"name", c.name}, {"unit", c.unit}, {"values", c.values}});
  return {{"interval_seconds", interval_seconds}, {"t", t}, {"columns", cols}, {"notes", notes}};
}

struct Sampler::Probe {
  std::string name, unit;
  std::function<double()> read;
  bool counter = false;
  double scale = 1;
  double last = 0;
};

Sampler::Sampler(SamplerOptions options) : options_(std::move(options)) {
  series_.interval_seconds = options_.interval_seconds;
}

Sampler::~Sampler() { Stop(); }

void Sampler::AddCounter(std::string name, std::string unit, std::function<double()> read, double scale) {
  probes_.push_back({std::move(name), std::move(unit), std::move(read), true, scale, 0});
}

void Sampler::AddGauge(std::string name, std::string unit, std::function<double()> read) {
  probes_.push_back({std::move(name), std::move(unit), std::move(read), false, 1, 0});
}

// Long by design: one probe registration per counter family (CPU, memory,
// disks, network, process, GPU), each a few lines.
void Sampler::Start() {
  if (thread_.joinable()) return;
  const std::string proc = options_.proc_root;
  if (options_.system) {
    // CPU: the three percentages share one read of /proc/stat per tick,
    // cached in a shared snapshot refreshed by the first probe.
    struct CpuState {
      CpuTimes prev, cur;
    };
    auto cpu = std::make_shared<CpuState>();
    cpu->prev = cpu->cur = ParseProcStat(ReadProcFile(proc + "/stat"));
    auto pct = [cpu](uint64_t CpuTimes::*a, uint64_t CpuTimes::*b, uint64_t CpuTimes::*c) {
      uint64_t total = cpu->cur.Total() - cpu->prev.Total();
      if (total == 0) return 0.0;
      uint64_t part =
          (cpu->cur.*a - cpu->prev.*a) + (b ? cpu->cur.*b - cpu->prev.*b : 0) + (c ? cpu->cur.*c - cpu->prev.*c : 0);
      return 100.0 * static_cast<double>(part) / static_cast<double>(total);
    };
    AddGauge("cpu.user", "%", [cpu, proc, pct] {
      cpu->prev = cpu->cur;
      cpu->cur = ParseProcStat(ReadProcFile(proc + "/stat"));
      return pct(&CpuTimes::user, &CpuTimes::nice, nullptr);
    });
    AddGauge("cpu.system", "%", [pct] { return pct(&CpuTimes::system, &CpuTimes::irq, &CpuTimes::softirq); });
    AddGauge("cpu.iowait", "%", [pct] { return pct(&CpuTimes::iowait, nullptr, nullptr); });

    auto mem = std::make_shared<std::map<std::string, uint64_t>>();
    AddGauge("mem.used", "bytes", [mem, proc] {
      *mem = ParseMeminfo(ReadProcFile(proc + "/meminfo"));
      return static_cast<double>((*mem)["MemTotal"] - (*mem)["MemAvailable"]);
    });
    AddGauge("mem.page_cache", "bytes", [mem] { return static_cast<double>((*mem)["Cached"]); });

    for (const auto& d : ParseDiskstats(ReadProcFile(proc + "/diskstats"))) {
      if (!IsWholeDisk(d.name)) continue;
      auto field = [proc, name = d.name](uint64_t DiskCounters::*f) {
        return [proc, name, f] {
          for (const auto& x : ParseDiskstats(ReadProcFile(proc + "/diskstats"))) {
            if (x.name == name) return static_cast<double>(x.*f);
          }
          return 0.0;
        };
      };
      AddCounter("disk." + d.name + ".read", "MB/s", field(&DiskCounters::read_sectors), 512 / 1e6);
      AddCounter("disk." + d.name + ".read_iops", "IOPS", field(&DiskCounters::reads));
      AddCounter("disk." + d.name + ".write", "MB/s", field(&DiskCounters::write_sectors), 512 / 1e6);
    }
    for (const auto& n : ParseNetDev(ReadProcFile(proc + "/net/dev"))) {
      auto field = [proc, name = n.name](uint64_t NetCounters::*f) {
        return [proc, name, f] {
          for (const auto& x : ParseNetDev(ReadProcFile(proc + "/net/dev"))) {
            if (x.name == name) return static_cast<double>(x.*f);
          }
          return 0.0;
        };
      };
      AddCounter("net." + n.name + ".rx", "MB/s", field(&NetCounters::rx_bytes), 1 / 1e6);
      AddCounter("net." + n.name + ".tx", "MB/s", field(&NetCounters::tx_bytes), 1 / 1e6);
    }
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    AddCounter(
        "process.cpu", "%",
        [proc] { return static_cast<double>(ParseProcessCpuTicks(ReadProcFile(proc + "/self/stat"))); }, 100.0 / tick);
    // This process's own reads (/proc/self/io), so charts can tell the
    // benchmark's I/O from the machine-wide disk counters above, which
    // include every other process on the machine.
    AddCounter(
        "process.read", "MB/s",
        [proc] { return static_cast<double>(ParseProcessIo(ReadProcFile(proc + "/self/io")).read_bytes); }, 1 / 1e6);
    AddCounter(
        "process.rchar", "MB/s",
        [proc] { return static_cast<double>(ParseProcessIo(ReadProcFile(proc + "/self/io")).rchar); }, 1 / 1e6);
    const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
    AddGauge("process.rss", "bytes", [proc, page] {
      std::istringstream in(ReadProcFile(proc + "/self/statm"));
      uint64_t size = 0, resident = 0;
      in >> size >> resident;
      return static_cast<double>(resident) * page;
    });

    // GPUs through NVML, if the driver's library is installed.
    nvml_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    std::string gpu_note = "GPU: NVML (libnvidia-ml.so.1) not present, no GPU series";
    if (nvml_ != nullptr) {
      auto nv = std::make_shared<Nvml>();
      auto init = reinterpret_cast<Nvml::InitFn>(dlsym(nvml_, "nvmlInit_v2"));
      nv->count = reinterpret_cast<Nvml::CountFn>(dlsym(nvml_, "nvmlDeviceGetCount_v2"));
      nv->handle = reinterpret_cast<Nvml::HandleFn>(dlsym(nvml_, "nvmlDeviceGetHandleByIndex_v2"));
      nv->util = reinterpret_cast<Nvml::UtilFn>(dlsym(nvml_, "nvmlDeviceGetUtilizationRates"));
      nv->mem = reinterpret_cast<Nvml::MemFn>(dlsym(nvml_, "nvmlDeviceGetMemoryInfo"));
      if (init && nv->count && nv->handle && nv->util && nv->mem && init() == 0 && nv->count(&nv->devices) == 0) {
        gpu_note = "GPU: " + std::to_string(nv->devices) + " device(s) through NVML";
        for (unsigned i = 0; i < nv->devices; ++i) {
          AddGauge("gpu" + std::to_string(i) + ".util", "%", [nv, i] {
            void* h = nullptr;
            Nvml::Util u{};
            return nv->handle(i, &h) == 0 && nv->util(h, &u) == 0 ? static_cast<double>(u.gpu) : 0.0;
          });
          AddGauge("gpu" + std::to_string(i) + ".mem_used", "bytes", [nv, i] {
            void* h = nullptr;
            Nvml::Mem m{};
            return nv->handle(i, &h) == 0 && nv->mem(h, &m) == 0 ? static_cast<double>(m.used) : 0.0;
          });
        }
      } else {
        gpu_note = "GPU: NVML present but not initialised (no driver or no device)";
      }
    }
    MutexLock lock(mu_);
    series_.notes.push_back(gpu_note);
  }
  for (auto& p : probes_) {
    if (p.counter) p.last = p.read();
  }
  {
    MutexLock lock(mu_);
    for (const auto& p : probes_) series_.columns.push_back({p.name, p.unit, {}});
    stop_ = false;
  }
  start_ = std::chrono::steady_clock::now();
  last_t_ = 0;
  if (options_.interval_seconds > 0) thread_ = std::thread([this] { Run(); });
}

double Sampler::Elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Sampler::SampleNow() {
  double t = Elapsed();
  SampleOnce(t - last_t_);
  last_t_ = t;
  MutexLock lock(mu_);
  series_.t.push_back(t);
  // Trimmed a quarter at a time, so that a sample costs O(1) amortised.
  const size_t keep = options_.keep_samples;
  if (keep > 0 && series_.t.size() > keep + keep / 4 + 1) {
    const auto drop = static_cast<std::ptrdiff_t>(series_.t.size() - keep);
    series_.t.erase(series_.t.begin(), series_.t.begin() + drop);
    for (auto& c : series_.columns) {
      if (static_cast<std::ptrdiff_t>(c.values.size()) >= drop)
        c.values.erase(c.values.begin(), c.values.begin() + drop);
    }
  }
}

void Sampler::Stop() {
  if (thread_.joinable()) {
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    cv_.SignalAll();
    thread_.join();
  }
  if (nvml_ != nullptr) {
    if (auto shutdown = reinterpret_cast<int (*)()>(dlsym(nvml_, "nvmlShutdown"))) shutdown();
    dlclose(nvml_);
    nvml_ = nullptr;
  }
}

void Sampler::Run() {
  for (uint64_t tick = 1;; ++tick) {
    auto next = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(options_.interval_seconds * static_cast<double>(tick)));
    bool stopping;
    {
      MutexLock lock(mu_);
      stopping = cv_.WaitUntil(next, [this]() AQ_REQUIRES(mu_) { return stop_; });
    }
    if (stopping && Elapsed() - last_t_ < options_.interval_seconds / 2) return;
    SampleNow();
    if (stopping) return;
  }
}

void Sampler::SampleOnce(double dt) {
  std::vector<double> row(probes_.size());
  for (size_t i = 0; i < probes_.size(); ++i) {
    auto& p = probes_[i];
    double v = p.read();
    if (p.counter) {
      row[i] = dt > 0 ? (v - p.last) / dt * p.scale : 0;
      p.last = v;
    } else {
      row[i] = v;
    }
  }
  MutexLock lock(mu_);
  for (size_t i = 0; i < row.size(); ++i) series_.columns[i].values.push_back(row[i]);
}

std::vector<std::pair<std::string, double>> Sampler::Latest() const {
  MutexLock lock(mu_);
  std::vector<std::pair<std::string, double>> out;
  for (const auto& c : series_.columns) out.emplace_back(c.name, c.values.empty() ? 0.0 : c.values.back());
  return out;
}

Series Sampler::Take() const {
  MutexLock lock(mu_);
  return series_;
}

}  // namespace aq::monitor
