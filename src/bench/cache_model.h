// aquifer model cache: the documents' caching model. Training readers pick a
// record file at random, read it whole, then pick another, so a cache of C
// bytes over a dataset of D bytes serves about C / D of the reads:
//   client hits          = min(1, client RAM / D)        of the application's reads
//   storage cache hits   = min(1, storage cache / D)     of the reads reaching storage
//   storage L3 hits      = min(1 - storage cache hits, storage L3 / D)  (SSD in front of HDD pools)
//   from storage media   = 1 - storage cache hits - L3 hits  of the reads reaching storage
//   staged ahead         = media × min(1, staging / (demand × media))  with readers' plans
//                          (docs/architecture.md, plan staging): the media reads the nodes
//                          read ahead of need, when they can read `staging` blocks/s from
//                          media (stage threads × nodes / media latency) and the readers
//                          ask `demand` blocks/s of storage (unknown: staging keeps up)
// (512 GB of client RAM over 22.2 TB: ~2%; 2 TB of storage cache: ~9%, so
// ~91% of storage reads come from SSD.) Beside the model, measurements:
// the page cache's residency of the dataset (mincore) and the fraction of a
// bench's reads that did not reach the disks (monitor's disk counters).
//
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace aq::bench {

struct CacheModelInput {
  double dataset_bytes = 0;
  double client_cache_bytes = 0;        // page cache available on one client
  double storage_cache_bytes = 0;       // all storage nodes' RAM cache together
  double storage_l3_bytes = 0;          // all storage nodes' L3 (SSD) caches together
  double staging_reads_per_second = 0;  // blocks/s the nodes' plan staging reads from media (0: no plans)
  double demand_reads_per_second = 0;   // blocks/s the readers ask of storage (0: unknown)
};

struct CacheModel {
  double client_hit = 0;      // fraction of application reads
  double storage_hit = 0;     // fraction of reads reaching storage (RAM)
  double storage_l3 = 0;      // fraction of reads reaching storage (L3)
  double storage_media = 0;   // fraction of reads reaching storage
  double media_of_all = 0;    // fraction of application reads that reach storage media
  double storage_staged = 0;  // fraction of reads reaching storage: from media, read ahead by plan staging
  double storage_waited = 0;  // fraction of reads reaching storage: from media while the reader waits
};

Result<CacheModel> ModelCache(const CacheModelInput& in);

// Measured: what a bench result says about caching. From the monitor's
// series, bytes the disks read during the run vs bytes the bench read.
struct CacheMeasurement {
  std::string source;  // the result file
  double bench_bytes = 0, disk_bytes = 0;
  double client_hit = 0;                                    // 1 - disk / bench, clamped to [0, 1]
  std::optional<double> residency_before, residency_after;  // page cache residency of the dataset
};
Result<CacheMeasurement> MeasureCacheFromResult(const nlohmann::json& result, const std::string& where);

nlohmann::json ToJson(const CacheModelInput& in, const CacheModel& m);

}  // namespace aq::bench
