// aquifer bench pipeline: drives the input pipeline as fast as it will go
// (the consumer takes each batch and hands it straight back) and reports
// images/s, storage MB/s, per-stage utilisation and the limiting stage.
//
// Thread safety: one call at a time.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "pipeline/pipeline.h"

namespace aq::bench {

struct PipelineBenchOptions {
  pipeline::PipelineOptions pipeline;
  uint64_t batches = 0;         // stop after this many (0 = all epochs)
  uint64_t warmup_batches = 2;  // excluded from the rates
  std::string dump;             // write the first batch (raw data + JSON) here
  bool progress = true;
};

struct PipelineBenchReport {
  pipeline::PipelineStats stats;
  uint64_t batches = 0, images = 0;
  double seconds = 0;  // measured part (after warm-up)
  double images_per_second = 0;
  double mb_per_second = 0;  // storage bytes read, SI MB
  // Bytes read per record read (the stored form's size with its framing):
  // times a GPU's images/s, the MB/s one GPU would need in this form.
  double bytes_per_image = 0;
  // Time between consecutive measured batches at the consumer: the spread
  // says how steady the rate was. Fewer than kMinBatches measured batches,
  // or under kMinSeconds, is too little for a stable figure (a warning).
  double batch_min_seconds = 0, batch_median_seconds = 0, batch_max_seconds = 0;
  bool enough_samples = false;
  static constexpr uint64_t kMinBatches = 20;
  static constexpr double kMinSeconds = 1.0;
  uint64_t max_rss_bytes = 0;
  std::string config;  // one line describing the run
};

Result<PipelineBenchReport> RunPipelineBench(io::FileSystem& fs, const PipelineBenchOptions& options);
nlohmann::json ToJson(const PipelineBenchReport& report, const PipelineBenchOptions& options);

}  // namespace aq::bench
