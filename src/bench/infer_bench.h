// aquifer bench infer: the inference half of the measurement method. The
// documents validated inference (forward only, ResNet-50 on 72 GPUs: 11,825
// MB/s from storage, GPU 68%, CPU-bound) next to training: images/s from
// storage at several batch sizes, and a top-1 check that the images the
// pipeline delivers are the right ones.
//
// Each batch size is a `bench train --inference` run with the evaluation
// transform (shorter side to eval_resize, centre crop, no flip): emulated
// GPUs that compute for batch / (model's inference images/s) plus a fixed
// cost per batch (kernel launches and the host-to-device copy; an
// assumption, printed, that makes small batches cost more per image as on
// real accelerators), without a barrier between ranks. Batch sizes larger
// than a GPU's share of the data are left out and said so.
//
// Thread safety: one call at a time.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/train_bench.h"

namespace aq::bench {

struct InferBenchOptions {
  TrainBenchOptions base;  // data, GPUs, model, precision, steps; inference and eval are set here
  std::vector<uint32_t> batches = {8, 32, 128};
  double batch_overhead_seconds = 0.0005;  // fixed cost per batch on the emulated accelerator
};

struct InferPoint {
  uint32_t batch = 0;
  TrainBenchReport report;
};

struct InferBenchReport {
  std::vector<InferPoint> points;
  std::vector<std::string> skipped;      // batch sizes left out, with why
  std::vector<std::string> assumptions;  // every number the emulation rests on, with its source
};

Result<InferBenchReport> RunInferBench(io::FileSystem& fs, const InferBenchOptions& options);
nlohmann::json ConfigJson(const InferBenchOptions& options, const InferBenchReport& report);
nlohmann::json SummaryJson(const InferBenchReport& report);

}  // namespace aq::bench
