#include "bench/pipeline_bench.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "common/progress.h"
#include "dataset/commands.h"
#include "format/json_text.h"

namespace aq::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string_view LayoutName(image::Layout l) { return l == image::Layout::kNCHW ? "NCHW" : "NHWC"; }
std::string_view DTypeName(image::DType t) {
  return t == image::DType::kUint8 ? "uint8" : (t == image::DType::kFloat16 ? "fp16" : "fp32");
}

Status Dump(const std::string& path, const pipeline::Batch& b, const pipeline::Pipeline& p,
            const PipelineBenchOptions& o) {
  {
    std::ofstream raw(path, std::ios::binary);
    raw.write(static_cast<const char*>(b.data), static_cast<std::streamsize>(b.size * b.sample_bytes));
    if (!raw) return IoError(fmt::format("cannot write '{}'", path));
  }
  nlohmann::json j;
  j["size"] = b.size;
  j["image_size"] = o.pipeline.image_size;
  j["layout"] = LayoutName(o.pipeline.store.layout);
  j["dtype"] = DTypeName(o.pipeline.store.dtype);
  j["labels"] = std::vector<int32_t>(b.labels, b.labels + b.size);
  j["samples"] = std::vector<uint32_t>(b.samples, b.samples + b.size);
  j["files"] = p.files();
  // Each sample's file (index into files) and record number in it.
  nlohmann::json where = nlohmann::json::array();
  for (uint32_t i = 0; i < b.size; ++i) {
    const auto w = p.where(b.samples[i]);
    where.push_back({w.file, w.record});
  }
  j["where"] = std::move(where);
  std::ofstream meta(path + ".json");
  meta << format::DumpJson(j, 1);
  if (!meta) return IoError(fmt::format("cannot write '{}.json'", path));
  return Status::Ok();
}

}  // namespace

Result<PipelineBenchReport> RunPipelineBench(io::FileSystem& fs, const PipelineBenchOptions& o) {
  auto pipe = AQ_TRY(pipeline::Pipeline::Create(fs, o.pipeline));
  const uint64_t all = pipe->steps_per_epoch() * o.pipeline.epochs;
  const uint64_t want = o.batches == 0 ? all : std::min(o.batches, all);
  const uint64_t warm = want > o.warmup_batches ? o.warmup_batches : 0;
  Progress progress({"bench pipeline", want, 0, "batches", o.progress});
  PipelineBenchReport r;
  Clock::time_point t0 = Clock::now(), last = t0;
  std::vector<double> gaps;
  for (uint64_t i = 0; i < want; ++i) {
    const pipeline::Batch* b = AQ_TRY(pipe->Next());
    if (b == nullptr) break;
    const auto now = Clock::now();
    if (i == 0 && !o.dump.empty()) AQ_TRY(Dump(o.dump, *b, *pipe, o));
    if (i + 1 == warm) t0 = now;
    if (i >= warm) {
      ++r.batches;
      r.images += b->size;
      gaps.push_back(std::chrono::duration<double>(now - last).count());
    }
    last = Clock::now();  // the dump's time is not the pipeline's
    progress.Add(1, 0);
  }
  progress.Finish();
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.stats = pipe->Stats();
  r.images_per_second = r.seconds > 0 ? static_cast<double>(r.images) / r.seconds : 0;
  if (!gaps.empty()) {
    std::sort(gaps.begin(), gaps.end());
    r.batch_min_seconds = gaps.front();
    r.batch_median_seconds = gaps[gaps.size() / 2];
    r.batch_max_seconds = gaps.back();
  }
  r.enough_samples = r.batches >= PipelineBenchReport::kMinBatches && r.seconds >= PipelineBenchReport::kMinSeconds;
  // Readers run ahead of the consumer (by the shuffle buffer), so storage
  // throughput is taken over the whole run, not only after the warm-up.
  r.mb_per_second =
      r.stats.elapsed_seconds > 0 ? static_cast<double>(r.stats.bytes_read) / 1e6 / r.stats.elapsed_seconds : 0;
  if (r.stats.stages[0].items > 0) {
    r.bytes_per_image = static_cast<double>(r.stats.bytes_read) / static_cast<double>(r.stats.stages[0].items);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  r.max_rss_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  const auto& p = o.pipeline;
  r.config =
      fmt::format("{} {}x{} {} {}, batch {}, {} workers, {} readers, shuffle buffer {}{}{}",
                  p.training ? "train" : "eval", p.image_size, p.image_size, LayoutName(p.store.layout),
                  DTypeName(p.store.dtype), p.batch_size, r.stats.stages[1].threads, r.stats.stages[0].threads,
                  p.shuffle_buffer, p.entropy_only ? ", entropy decode only" : (p.decode_only ? ", decode only" : ""),
                  p.dct_scaling ? "" : ", no DCT scaling");
  return r;
}

nlohmann::json ToJson(const PipelineBenchReport& r, const PipelineBenchOptions& o) {
  using nlohmann::json;
  json stages = json::array();
  for (const auto& s : r.stats.stages) {
    stages.push_back({{"name", s.name},
                      {"threads", s.threads},
                      {"busy_seconds", s.busy_seconds},
                      {"utilisation", s.utilisation},
                      {"items", s.items},
                      {"bytes", s.bytes}});
  }
  json roots = json::array();
  for (const auto& rt : r.stats.roots) roots.push_back({{"path", rt.path}, {"opens", rt.opens}, {"bytes", rt.bytes}});
  return {{"command", "bench pipeline"},
          {"roots", roots},
          {"data", o.pipeline.data},
          {"config", r.config},
          {"images_per_second", r.images_per_second},
          {"mb_per_second", r.mb_per_second},
          {"bytes_per_image", r.bytes_per_image},
          {"batches", r.batches},
          {"images", r.images},
          {"seconds", r.seconds},
          {"warmup_batches", o.warmup_batches},
          {"limiting_stage", r.stats.limiting_stage},
          {"batch_seconds",
           {{"min", r.batch_min_seconds}, {"median", r.batch_median_seconds}, {"max", r.batch_max_seconds}}},
          {"enough_samples", r.enough_samples},
          {"stages", stages},
          {"worker_wait_input_seconds", r.stats.worker_wait_input_seconds},
          {"worker_wait_output_seconds", r.stats.worker_wait_output_seconds},
          {"consumer_wait_seconds", r.stats.consumer_wait_seconds},
          {"mean_payloads_held", r.stats.mean_payloads_held},
          {"payload_capacity", r.stats.payload_capacity},
          {"memory_bound_bytes", r.stats.memory_bound_bytes},
          {"max_rss_bytes", r.max_rss_bytes},
          {"dct_scaled_samples", r.stats.dct_scaled},
          {"bad_samples", r.stats.bad_samples},
          {"lost_parts", r.stats.lost_parts},
          {"manifest", r.stats.manifest},
          {"manifest_trusted", r.stats.manifest_trusted},
          {"manifest_changed", r.stats.manifest_changed},
          {"planned", r.stats.planned},
          {"plan_staged", r.stats.plan_staged},
          {"plan_error", r.stats.plan_error},
          {"problems", dataset::ToJson(r.stats.problems)},
          {"rank", r.stats.rank},
          {"world", r.stats.world},
          {"steps_per_epoch", r.stats.steps_per_epoch},
          {"catalog_samples", r.stats.catalog_samples}};
}

}  // namespace aq::bench
