// The storage bench's readers: each reads whole files one request at a time
// (RunBlockingReader), or keeps `iodepth` requests in flight through
// io_uring on the file's descriptor (RunUringReader, fio's libaio iodepth),
// choosing files at random or round-robin, with an optional request-rate
// cap and, in sync mode, a barrier after every step. The bench owns the
// threads; these are the loops they run.
//
// Thread safety: one reader per thread; ReaderShared is their meeting point.
#pragma once

#include <atomic>
#include <barrier>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/storage_bench.h"
#include "common/latency.h"
#include "common/mutex.h"
#include "common/status.h"
#include "io/file_system.h"

namespace aq::bench {

struct FileEntry {
  std::string path;
  uint64_t size = 0;
};

// What all readers of one run share.
struct ReaderShared {
  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{false};  // past the ramp: record latencies
  std::atomic<uint64_t> bytes{0}, requests{0}, files{0};
  Mutex mu;
  Status error AQ_GUARDED_BY(mu);  // the first failure
  // Records the first failure and stops every reader.
  void Fail(Status s);
};

struct ReaderResult {
  LatencyHistogram latency;
  double sync_wait = 0;
  uint64_t steps = 0;
};

struct ReaderContext {
  const StorageBenchOptions& options;
  const std::vector<FileEntry>& files;
  uint64_t global_readers = 1;  // readers across every rank (round-robin stride)
  uint64_t request = 0;         // bytes per request (aligned for O_DIRECT)
  ReaderShared& shared;
  std::barrier<>& step_barrier;
};

// Reader `index` of this rank, reading through `fs`, its results in `result`.
void RunBlockingReader(const ReaderContext& c, size_t index, io::FileSystem& fs, ReaderResult& result);
void RunUringReader(const ReaderContext& c, size_t index, io::FileSystem& fs, ReaderResult& result);

}  // namespace aq::bench
