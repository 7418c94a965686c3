// aquifer bench storage: the storage-only reader of the documents (read
// TFRecords, count bytes, nothing else), the ceiling that training can
// never exceed. R reader threads each pick a file (at random, or the next of
// their round-robin share), read it sequentially and completely at a fixed
// request size, then the next. Async: readers are independent. Sync: every
// reader waits at a barrier after each step of S bytes, as synchronous
// data-parallel training does after each batch, so the slowest reader sets
// the pace. Ranks (--rank/--world, or MPI/Slurm variables) split the
// round-robin shares across processes or hosts.
//
// Reports MB/s (SI) and MiB/s, files/s, request latency percentiles and a
// per-second series, over the measured window (after the ramp-up).
// --iodepth N keeps N requests in flight per reader with io_uring, as fio's
// libaio engine does with iodepth.
//
// Thread safety: one call at a time.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/latency.h"
#include "io/file_system.h"
#include "io/multi_root.h"
#include "monitor/sampler.h"

namespace aq::bench {

enum class StorageMode { kAsync, kSync };
enum class FileSelection { kRandom, kRoundRobin };

struct StorageBenchOptions {
  std::string data;                                      // a directory (or ROOT1:ROOT2:... mounts of the same data)
  io::RootPolicy root_policy = io::RootPolicy::kPinned;  // reader i -> root i % roots
  size_t readers = 4;
  uint64_t request_bytes = 1 << 20;
  // Requests each reader keeps in flight (fio's iodepth). 1: plain pread,
  // through any io::FileSystem. >1: io_uring on the local file descriptor,
  // the reader moving to its next file while the last requests of the
  // previous one complete.
  uint32_t iodepth = 1;
  StorageMode mode = StorageMode::kAsync;
  uint64_t step_bytes = 32'000'000;  // sync: bytes each reader reads per step
  FileSelection selection = FileSelection::kRandom;
  bool direct = false;       // O_DIRECT
  bool drop_caches = false;  // evict the files from the page cache first
  double duration_seconds = 10;
  double ramp_seconds = 2;  // excluded from the summary
  double rate_iops = 0;     // per reader, 0 = unlimited (fio's rate_iops)
  uint64_t seed = 1;
  uint32_t rank = 0, world = 1;
  bool progress = true;
  monitor::SamplerOptions sampler;
};

struct StorageBenchReport {
  uint64_t file_count = 0, dataset_bytes = 0;
  double seconds = 0;                           // measured window
  uint64_t bytes = 0, requests = 0, files = 0;  // in the window (files: completed)
  double mb_per_second = 0, mib_per_second = 0, files_per_second = 0, requests_per_second = 0;
  uint64_t total_bytes = 0;      // including the ramp
  double sync_wait_seconds = 0;  // summed over readers
  uint64_t sync_steps = 0;
  LatencyHistogram latency;                            // requests in the window
  std::string cache_drop;                              // what was done to start cold
  double page_cache_before = 0, page_cache_after = 0;  // fraction of the files resident
  monitor::Series series;
};

// Evicts the data's files from the page cache (every root's copy), and the
// whole page cache when this user may; says what was done.
Result<std::string> DropStorageCaches(io::FileSystem& fs, const std::string& data);

Result<StorageBenchReport> RunStorageBench(io::FileSystem& fs, const StorageBenchOptions& options);
nlohmann::json ConfigJson(const StorageBenchOptions& options);
nlohmann::json SummaryJson(const StorageBenchReport& report);
// One summary from the results (ResultJson's form) of processes that ran
// the same storage bench at once (bench storage --processes): rates and
// counts summed, the longest run's seconds, latency percentiles of the
// worst process (count and mean over all), and each process's rate under
// "processes". The processes' bench.* columns are added to `series` (the
// machine as the parent sampled it), aligned by sample index.
nlohmann::json MergeStorageResults(const std::vector<nlohmann::json>& results, monitor::Series* series);

}  // namespace aq::bench
