#include "bench/storage_bench.h"

#include <fmt/format.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "bench/storage_readers.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/progress.h"
#include "dataset/dataset.h"
#include "monitor/latency_json.h"
#include "monitor/page_cache.h"
#include "monitor/prometheus.h"

namespace aq::bench {
namespace {

using Clock = std::chrono::steady_clock;

Status ListAll(io::FileSystem& fs, const std::string& dir, std::vector<FileEntry>& out, int depth) {
  if (depth > 16) return Status::Ok();
  auto entries = AQ_TRY(fs.List(dir));
  for (const auto& e : entries) {
    std::string p = io::JoinPath(dir, e.name);
    if (e.is_dir) {
      AQ_TRY(ListAll(fs, p, out, depth + 1));
    } else if (e.size > 0) {
      out.push_back({p, e.size});
    }
  }
  return Status::Ok();
}

// The dataset's record files when it is one, else every non-empty file below
// the directory (fio's files, anything else).
Result<std::vector<FileEntry>> ListFiles(io::FileSystem& fs, const std::string& path) {
  std::vector<FileEntry> out;
  auto ds = dataset::FindDataset(fs, path);
  if (ds.ok() && ds->format != dataset::Format::kFolder) {
    for (const auto& f : ds->files) out.push_back({f, AQ_TRY(fs.Stat(f)).size});
  } else {
    auto st = AQ_TRY(fs.Stat(path));
    if (!st.is_dir) {
      out.push_back({path, st.size});
    } else {
      AQ_TRY(ListAll(fs, path, out, 0));
    }
  }
  if (out.empty()) return NotFound(fmt::format("'{}': no non-empty files to read", path));
  return out;
}

}  // namespace

Result<std::string> DropStorageCaches(io::FileSystem& base, const std::string& data) {
  auto roots = AQ_TRY(io::SplitRoots(data));
  auto files = AQ_TRY(ListFiles(base, roots[0]));
  io::MultiRootFileSystem all(base, roots, io::RootPolicy::kSpread, 0);
  for (const auto& f : files) AQ_TRY(all.DropCache(f.path));
  std::string what = fmt::format("posix_fadvise(DONTNEED) on all {} files", files.size());
  std::ofstream drop("/proc/sys/vm/drop_caches");
  if (drop) {
    ::sync();
    drop << "3\n";
    drop.flush();
    if (drop) what += "; sync; echo 3 > /proc/sys/vm/drop_caches";
  }
  return what;
}

namespace {

Status CheckStorageOptions(const StorageBenchOptions& o) {
  if (o.readers == 0) return InvalidArgument("a storage bench needs at least 1 reader");
  if (o.request_bytes == 0) return InvalidArgument("the request size must be at least 1 byte");
  if (o.iodepth == 0 || o.iodepth > 4096) return InvalidArgument("the io_uring depth must be between 1 and 4096");
  if (o.request_bytes > (1u << 30)) return InvalidArgument("the request size must be at most 1 GiB");
  if (o.duration_seconds <= 0) return InvalidArgument("the duration must be positive");
  if (o.ramp_seconds < 0 || o.ramp_seconds >= o.duration_seconds) {
    return InvalidArgument(
        fmt::format("the ramp ({} s) must be shorter than the duration ({} s)", o.ramp_seconds, o.duration_seconds));
  }
  if (o.world == 0 || o.rank >= o.world) return InvalidArgument(fmt::format("rank {} of {} ranks", o.rank, o.world));
  return Status::Ok();
}

// The counters at the start and the end of the measured window.
struct Window {
  Clock::time_point start, end;
  uint64_t bytes = 0, requests = 0, files = 0;  // at the start; then the differences
};

// Watches the readers for the run's duration: the counters are taken when
// the ramp ends and when the duration is over (or a reader failed), the
// progress line drawn meanwhile.
Window Measure(const StorageBenchOptions& o, ReaderShared& sh, Progress& progress) {
  const auto start = Clock::now();
  const auto ramp_end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.ramp_seconds));
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_seconds));
  Window w;
  w.start = start;
  uint64_t shown_files = 0, shown_bytes = 0;
  bool ramped = o.ramp_seconds == 0;
  if (ramped) sh.measuring = true;
  while (!sh.stop.load()) {
    auto now = Clock::now();
    if (!ramped && now >= ramp_end) {
      w.bytes = sh.bytes.load();
      w.requests = sh.requests.load();
      w.files = sh.files.load();
      w.start = now;
      sh.measuring = true;
      ramped = true;
    }
    if (now >= end) break;
    std::this_thread::sleep_until(std::min(now + std::chrono::milliseconds(100), ramped ? end : ramp_end));
    uint64_t fb = sh.files.load(), bb = sh.bytes.load();
    progress.Add(fb - shown_files, bb - shown_bytes);
    shown_files = fb;
    shown_bytes = bb;
  }
  w.end = Clock::now();
  w.bytes = sh.bytes.load() - w.bytes;
  w.requests = sh.requests.load() - w.requests;
  w.files = sh.files.load() - w.files;
  return w;
}

void Summarize(const Window& w, const std::vector<ReaderResult>& results, uint64_t total_bytes,
               StorageBenchReport& rep) {
  rep.seconds = std::chrono::duration<double>(w.end - w.start).count();
  rep.bytes = w.bytes;
  rep.requests = w.requests;
  rep.files = w.files;
  rep.total_bytes = total_bytes;
  if (rep.seconds > 0) {
    rep.mb_per_second = static_cast<double>(rep.bytes) / 1e6 / rep.seconds;
    rep.mib_per_second = static_cast<double>(rep.bytes) / (1 << 20) / rep.seconds;
    rep.files_per_second = static_cast<double>(rep.files) / rep.seconds;
    rep.requests_per_second = static_cast<double>(rep.requests) / rep.seconds;
  }
  for (const auto& r : results) {
    rep.latency.Merge(r.latency);
    rep.sync_wait_seconds += r.sync_wait;
    rep.sync_steps = std::max(rep.sync_steps, r.steps);
  }
}

}  // namespace

Result<StorageBenchReport> RunStorageBench(io::FileSystem& base, const StorageBenchOptions& o) {
  AQ_TRY(CheckStorageOptions(o));
  const uint64_t request =
      o.direct ? (o.request_bytes + io::kDirectAlignment - 1) / io::kDirectAlignment * io::kDirectAlignment
               : o.request_bytes;
  auto roots = AQ_TRY(io::SplitRoots(o.data));
  auto files = AQ_TRY(ListFiles(base, roots[0]));

  StorageBenchReport rep;
  rep.file_count = files.size();
  for (const auto& f : files) rep.dataset_bytes += f.size;

  // One view per reader: with several roots, reader i reads through root
  // i % roots (pinned) or spreads its files over all of them.
  std::vector<std::unique_ptr<io::MultiRootFileSystem>> views;
  const uint64_t global_readers = static_cast<uint64_t>(o.world) * o.readers;
  for (size_t i = 0; i < o.readers; ++i) {
    const uint32_t global = static_cast<uint32_t>(o.rank * o.readers + i);
    views.push_back(std::make_unique<io::MultiRootFileSystem>(base, roots, o.root_policy, global));
  }

  rep.cache_drop = o.drop_caches ? AQ_TRY(DropStorageCaches(base, o.data)) : "none (page cache as found)";

  std::vector<std::string> paths;
  for (const auto& f : files) paths.push_back(f.path);
  rep.page_cache_before = monitor::PageCacheResidency(paths).fraction();

  ReaderShared sh;
  std::vector<ReaderResult> results(o.readers);
  std::barrier<> step_barrier(static_cast<std::ptrdiff_t>(o.readers));
  const ReaderContext context{o, files, global_readers, request, sh, step_barrier};

  monitor::Sampler sampler(o.sampler);
  sampler.AddCounter(
      "bench.read", "MB/s", [&sh] { return static_cast<double>(sh.bytes.load()); }, 1e-6);
  sampler.AddCounter("bench.requests", "IOPS", [&sh] { return static_cast<double>(sh.requests.load()); });
  sampler.AddCounter("bench.files", "files/s", [&sh] { return static_cast<double>(sh.files.load()); });
  sampler.Start();
  auto exporter = AQ_TRY(monitor::ExportIfAsked(sampler, o.sampler));

  Progress progress({"bench storage", 0, 0, "files", o.progress});
  std::vector<std::thread> threads;
  for (size_t i = 0; i < o.readers; ++i) {
    threads.emplace_back([&, i] {
      if (o.iodepth > 1) {
        RunUringReader(context, i, *views[i], results[i]);
      } else {
        RunBlockingReader(context, i, *views[i], results[i]);
      }
      // A reader that leaves must not hold the others at the barrier.
      if (o.mode == StorageMode::kSync) step_barrier.arrive_and_drop();
    });
  }
  const Window window = Measure(o, sh, progress);
  sh.stop = true;
  for (auto& t : threads) t.join();
  progress.Finish();
  sampler.Stop();
  {
    MutexLock lock(sh.mu);
    if (!sh.error.ok()) return sh.error;
  }
  Summarize(window, results, sh.bytes.load(), rep);
  rep.series = sampler.Take();
  rep.page_cache_after = monitor::PageCacheResidency(paths).fraction();
  return rep;
}

nlohmann::json ConfigJson(const StorageBenchOptions& o) {
  return {{"data", o.data},
          {"readers", o.readers},
          {"request_bytes", o.request_bytes},
          {"iodepth", o.iodepth},
          {"mode", o.mode == StorageMode::kSync ? "sync" : "async"},
          {"step_bytes", o.mode == StorageMode::kSync ? nlohmann::json(o.step_bytes) : nlohmann::json(nullptr)},
          {"selection", o.selection == FileSelection::kRandom ? "random" : "round-robin"},
          {"root_policy", o.root_policy == io::RootPolicy::kPinned ? "pinned" : "spread"},
          {"direct", o.direct},
          {"drop_caches", o.drop_caches},
          {"duration_seconds", o.duration_seconds},
          {"ramp_seconds", o.ramp_seconds},
          {"rate_iops_per_reader", o.rate_iops},
          {"seed", o.seed},
          {"rank", o.rank},
          {"world", o.world}};
}

nlohmann::json SummaryJson(const StorageBenchReport& r) {
  return {{"mb_per_second", r.mb_per_second},
          {"mib_per_second", r.mib_per_second},
          {"files_per_second", r.files_per_second},
          {"requests_per_second", r.requests_per_second},
          {"seconds", r.seconds},
          {"bytes", r.bytes},
          {"requests", r.requests},
          {"files", r.files},
          {"total_bytes", r.total_bytes},
          {"file_count", r.file_count},
          {"dataset_bytes", r.dataset_bytes},
          {"sync_wait_seconds", r.sync_wait_seconds},
          {"sync_steps", r.sync_steps},
          {"latency", monitor::LatencyJson(r.latency)},
          {"cache_drop", r.cache_drop},
          {"page_cache_before", r.page_cache_before},
          {"page_cache_after", r.page_cache_after}};
}

nlohmann::json MergeStorageResults(const std::vector<nlohmann::json>& results, monitor::Series* series) {
  nlohmann::json sum = nlohmann::json::object();
  nlohmann::json per = nlohmann::json::array();
  const char* quantiles[] = {"p50_us", "p90_us", "p99_us", "p999_us", "max_us"};
  double worst[5] = {0, 0, 0, 0, 0};
  double count = 0, mean_weighted = 0;
  for (const auto& r : results) {
    const auto& s = r["summary"];
    for (const char* k : {"mb_per_second", "mib_per_second", "files_per_second", "requests_per_second", "bytes",
                          "requests", "files", "total_bytes", "sync_wait_seconds"}) {
      sum[k] = sum.value(k, 0.0) + s.value(k, 0.0);
    }
    sum["seconds"] = std::max(sum.value("seconds", 0.0), s.value("seconds", 0.0));
    sum["sync_steps"] = std::max(sum.value("sync_steps", 0.0), s.value("sync_steps", 0.0));
    const auto& l = s.value("latency", nlohmann::json::object());
    for (int q = 0; q < 5; ++q) worst[q] = std::max(worst[q], l.value(quantiles[q], 0.0));
    count += l.value("count", 0.0);
    mean_weighted += l.value("mean_us", 0.0) * l.value("count", 0.0);
    per.push_back({{"rank", r.value("config", nlohmann::json::object()).value("rank", 0)},
                   {"mb_per_second", s.value("mb_per_second", 0.0)},
                   {"files_per_second", s.value("files_per_second", 0.0)},
                   {"latency", l}});
  }
  sum["latency"] = {{"count", count}, {"mean_us", count > 0 ? mean_weighted / count : 0}};
  for (int q = 0; q < 5; ++q) sum["latency"][quantiles[q]] = worst[q];
  sum["latency"]["note"] = "percentiles: the worst process's";
  if (!results.empty()) {
    const auto& first = results[0]["summary"];
    sum["file_count"] = first.value("file_count", 0);
    sum["dataset_bytes"] = first.value("dataset_bytes", 0);
    sum["page_cache_before"] = first.value("page_cache_before", 0.0);
    sum["page_cache_after"] = first.value("page_cache_after", 0.0);
  }
  sum["processes"] = per;
  if (series != nullptr) {
    for (const char* name : {"bench.read", "bench.requests", "bench.files"}) {
      monitor::Column col{name, "", {}};
      for (const auto& r : results) {
        if (!r.contains("series") || !r["series"].contains("columns")) continue;
        for (const auto& c : r["series"]["columns"]) {
          if (c.value("name", "") != name) continue;
          col.unit = c.value("unit", "");
          const auto& v = c["values"];
          if (col.values.size() < v.size()) col.values.resize(v.size(), 0);
          for (size_t i = 0; i < v.size(); ++i) col.values[i] += v[i].get<double>();
        }
      }
      col.values.resize(series->t.size(), 0);
      series->columns.push_back(std::move(col));
    }
  }
  return sum;
}

}  // namespace aq::bench
