// aquifer bench train: the training benchmark with an emulated accelerator,
// as MLPerf Storage and DLIO do. The real input pipeline feeds G simulated
// GPUs (one pipeline per GPU, each reading its rank's share of the data).
// Each step a GPU waits for its batch, "computes" for the model's step time
// (batch / images per second from the model table, or --step-time), then in
// training all GPUs meet at a barrier (the gradient all-reduce); forward-only
// inference does not synchronise, so fast ranks run ahead.
//
// Accelerator utilisation AU = compute time / elapsed time, first step
// excluded (warm-up). The verdict: GPU-bound when AU >= threshold (the
// documents and MLPerf Storage use 90%), else input-bound in the stage that
// limited the pipelines (read = storage, decode = CPU); "not enough
// samples" when fewer than min_steps steps per GPU were measured. By
// default a run covers the data once, and more passes when one pass is
// shorter than min_steps. The spread of the measured step times
// (min/median/max over all GPUs) is reported with the means.
//
// Thread safety: one call at a time.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/models.h"
#include "monitor/sampler.h"
#include "pipeline/pipeline.h"

namespace aq::bench {

struct TrainBenchOptions {
  pipeline::PipelineOptions pipeline;  // per GPU; rank and world are set per GPU
  uint32_t gpus = 1;                   // simulated GPUs in this process
  uint32_t node = 0, nodes = 1;        // this host among hosts (ranks = nodes * gpus)
  std::string model = "resnet50", gpu = "v100", precision = "fp16";
  bool inference = false;
  double step_seconds = 0;  // overrides the model table when > 0
  uint64_t steps = 0;       // per GPU; 0 = one epoch, repeated until min_steps are measured
  // Measured steps per GPU (the first excluded) a verdict needs: with
  // fewer (a small --steps or --max-seconds) the verdict says "not enough
  // samples" instead of naming a bound.
  uint64_t min_steps = 20;
  double max_seconds = 0;  // stop after this long (0 = no limit)
  double au_threshold = 0.9;
  bool drop_caches = false;  // evict the dataset's files from the page cache first
  bool progress = true;
  monitor::SamplerOptions sampler;
  // Readings from outside this process (a storage node's /stats): called
  // with 0 before the first read, then as the pipelines finish reading each
  // epoch (and for the last, partial one), from a thread of the bench's, so
  // a caller can split what it reads by epoch. Also series of its own for
  // the sampler.
  std::function<void(uint64_t epoch)> on_epoch;
  std::function<void(monitor::Sampler&)> add_series;
};

struct GpuStats {
  uint32_t rank = 0;
  uint64_t steps = 0, images = 0;
  double compute_seconds = 0, wait_seconds = 0, sync_seconds = 0, elapsed_seconds = 0;  // first step excluded
  std::vector<double> step_seconds;                                                     // each measured step
  double au = 0;
  std::string limiting_stage;
};

struct TrainBenchReport {
  ModelEntry model;
  double step_seconds = 0;
  double demand_images_per_second = 0;  // what the simulated GPUs could take
  double images_per_second = 0;         // delivered, first step excluded
  double mb_per_second = 0;             // storage, whole run
  double mb_per_second_per_gpu = 0;
  double mean_image_bytes = 0;
  double au = 0, au_min = 0;
  bool au_ok = false;
  std::string verdict, bound;   // bound: "gpu", "storage", "decode", "insufficient" (too few steps)
  uint64_t measured_steps = 0;  // per GPU, the fewest of any GPU (first step excluded)
  uint64_t epochs = 1;          // passes over the data the run was planned for
  // Measured step times (wait + compute + all-reduce), all GPUs pooled.
  double step_min_seconds = 0, step_median_seconds = 0, step_max_seconds = 0;
  double seconds = 0;
  uint64_t bytes_read = 0, images = 0;
  double page_cache_before = 0, page_cache_after = 0;  // fraction of the dataset resident
  // The read plan (PipelineOptions::plan_ahead): reads sent ahead to the
  // store, those it took up for staging, and why it stopped ("" if not).
  uint64_t planned = 0, plan_staged = 0;
  std::string plan_error;
  std::vector<GpuStats> gpus;
  std::vector<pipeline::StageStats> stages;  // summed over the pipelines
  monitor::Series series;
};

Result<TrainBenchReport> RunTrainBench(io::FileSystem& fs, const TrainBenchOptions& options);
// The verdict of a measured run: sets au_ok, bound and verdict from the
// report's AU, measured steps and stage utilisations (pure).
void JudgeTrainRun(const TrainBenchOptions& options, TrainBenchReport& report);
nlohmann::json ConfigJson(const TrainBenchOptions& options, const TrainBenchReport& report);
nlohmann::json SummaryJson(const TrainBenchReport& report);

}  // namespace aq::bench
