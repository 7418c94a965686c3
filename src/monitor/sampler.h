#include "common/mutex.h"
// The monitor: while a bench runs, a thread samples the machine once a
// second, as the documents' dashboards did: CPU (user, system, iowait),
// memory and page cache, read/write MB/s and IOPS per disk, receive/transmit
// MB/s per network interface, this process's CPU and RSS, GPU utilisation and
// memory when NVML is present (libnvidia-ml is loaded at run time, so builds
// need no CUDA). Benches add their own counters (bytes read, images) so the
// same time axis carries the workload and the machine.
//
// Columns are fixed by the first sample; a counter becomes a per-second rate
// (value difference / elapsed * scale), a gauge is recorded as read.
//
// Thread safety: Add*() before Start(); Start/Stop from one thread; Latest()
// and Take() from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace aq::monitor {

struct Column {
  std::string name;
  std::string unit;  // "%", "MB/s", "bytes", "IOPS", "images/s", ...
  std::vector<double> values;
};

struct Series {
  double interval_seconds = 1;
  std::vector<double> t;  // seconds since Start()
  std::vector<Column> columns;
  std::vector<std::string> notes;  // e.g. "GPU: NVML not present"

  const Column* Find(const std::string& name) const;
  nlohmann::json ToJson() const;
};

struct SamplerOptions {
  double interval_seconds = 1.0;
  bool system = true;  // CPU, memory, disks, network, process, GPU
  std::string proc_root = "/proc";
  // Serve the latest values for Prometheus on this port while sampling
  // (-1 = off, 0 = any free port); see prometheus.h.
  int prometheus_port = -1;
  std::string prometheus_host = "127.0.0.1";
  // Samples kept (0 = all, for a bench's whole run). A long-running process
  // (a node's metrics) keeps the last few minutes: its memory, and the cost
  // of Take(), stay bounded however long it runs.
  size_t keep_samples = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions options = {});
  ~Sampler();  // stops the thread
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // A cumulative counter sampled as a rate: (now - before) / seconds * scale.
  void AddCounter(std::string name, std::string unit, std::function<double()> read, double scale = 1);
  // A value recorded as read.
  void AddGauge(std::string name, std::string unit, std::function<double()> read);

  // Starts sampling every interval_seconds; with interval_seconds <= 0 no
  // thread runs and samples are taken only by SampleNow() (tests).
  void Start();
  void Stop();  // takes a last sample if at least half an interval has passed
  // Takes one sample now. REQUIRES: Start() with interval_seconds <= 0.
  void SampleNow();

  // Latest value of every column (for Prometheus), and the whole series
  // (the last keep_samples or more, when bounded).
  std::vector<std::pair<std::string, double>> Latest() const;
  Series Take() const;

 private:
  struct Probe;
  void Run();
  void SampleOnce(double dt);
  double Elapsed() const;

  SamplerOptions options_;
  std::vector<Probe> probes_;  // fixed after Start(); touched by the thread only
  void* nvml_ = nullptr;

  mutable Mutex mu_;
  CondVar cv_{mu_};
  bool stop_ AQ_GUARDED_BY(mu_) = false;
  Series series_ AQ_GUARDED_BY(mu_);
  std::thread thread_;
  std::chrono::steady_clock::time_point start_;
  double last_t_ = 0;  // time of the last sample; touched by the sampling thread only
};

}  // namespace aq::monitor
