// aquifer bench pipeline
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "bench/pipeline_bench.h"
#include "cli/cli.h"
#include "common/units.h"

namespace aq::cli {
namespace {

struct BenchFlags {
  bench::PipelineBenchOptions b;
  std::string layout = "nchw", dtype = "fp32", remainder = "drop", memory = "1GiB", on_error = "skip", format = "auto";
  std::string jitter;
  std::string root_policy = "spread";
  int64_t rank = -1, world = -1;
  bool eval = false, no_dct = false, no_file_shuffle = false, raw_labels = false;
};

Status Resolve(BenchFlags& f, const Globals& g) {
  auto& p = f.b.pipeline;
  p.workers = g.threads;
  f.b.progress = !g.no_progress;
  p.training = !f.eval;
  p.dct_scaling = !f.no_dct;
  p.shuffle_files = !f.no_file_shuffle;
  p.labels_zero_based = !f.raw_labels;
  if (f.layout == "nchw") {
    p.store.layout = image::Layout::kNCHW;
  } else if (f.layout == "nhwc") {
    p.store.layout = image::Layout::kNHWC;
  } else {
    return InvalidArgument(fmt::format("--layout {}: expected nchw or nhwc", f.layout));
  }
  if (f.dtype == "u8" || f.dtype == "uint8") {
    p.store.dtype = image::DType::kUint8;
  } else if (f.dtype == "fp16") {
    p.store.dtype = image::DType::kFloat16;
  } else if (f.dtype == "fp32") {
    p.store.dtype = image::DType::kFloat32;
  } else {
    return InvalidArgument(fmt::format("--dtype {}: expected u8, fp16 or fp32", f.dtype));
  }
  if (f.remainder == "drop") {
    p.remainder = pipeline::Remainder::kDrop;
  } else if (f.remainder == "pad") {
    p.remainder = pipeline::Remainder::kPad;
  } else {
    return InvalidArgument(fmt::format("--remainder {}: expected drop or pad", f.remainder));
  }
  p.memory_limit = AQ_TRY(units::ParseBytes(f.memory));
  p.policy = AQ_TRY(format::ParseErrorPolicy(f.on_error));
  p.format = AQ_TRY(dataset::ParseFormat(f.format));
  p.root_policy = AQ_TRY(io::ParseRootPolicy(f.root_policy));
  if (!f.jitter.empty()) {
    float b = 0, c = 0, s = 0;
    if (std::sscanf(f.jitter.c_str(), "%f,%f,%f", &b, &c, &s) != 3 || b < 0 || c < 0 || s < 0) {
      return InvalidArgument(
          fmt::format("--jitter {}: expected brightness,contrast,saturation e.g. 0.4,0.4,0.4", f.jitter));
    }
    p.jitter = {b, c, s};
  }
  auto rank = AQ_TRY(pipeline::ResolveRank(f.rank, f.world));
  p.rank = rank.rank;
  p.world = rank.world;
  return Status::Ok();
}

void PrintReport(const bench::PipelineBenchReport& r) {
  const auto& s = r.stats;
  std::printf("bench pipeline: %s\n", r.config.c_str());
  std::printf("  rank %u of %u, %llu steps per epoch, %llu samples in the dataset\n", s.rank, s.world,
              static_cast<unsigned long long>(s.steps_per_epoch), static_cast<unsigned long long>(s.catalog_samples));
  std::printf("  images/s   %.1f  (%llu images in %s, after warm-up)\n", r.images_per_second,
              static_cast<unsigned long long>(r.images), units::Duration(r.seconds).c_str());
  std::printf("  storage    %s\n", units::Rate(r.mb_per_second * 1e6).c_str());
  std::printf("  %-8s %8s %10s %12s\n", "stage", "threads", "busy", "utilisation");
  for (const auto& st : s.stages) {
    std::printf("  %-8s %8zu %9.2fs %11.0f%%\n", st.name.c_str(), st.threads, st.busy_seconds, 100 * st.utilisation);
  }
  std::printf("  workers waited %.2fs for input, %.2fs for a free batch buffer; consumer waited %.2fs\n",
              s.worker_wait_input_seconds, s.worker_wait_output_seconds, s.consumer_wait_seconds);
  std::printf("  limiting   %s\n", s.limiting_stage.c_str());
  std::printf("  memory     %s peak RSS (pipeline bound %s); payload slots %.1f of %llu used on average\n",
              units::Bytes(static_cast<double>(r.max_rss_bytes)).c_str(),
              units::Bytes(static_cast<double>(s.memory_bound_bytes)).c_str(), s.mean_payloads_held,
              static_cast<unsigned long long>(s.payload_capacity));
  for (const auto& rt : s.roots) {
    std::printf("  root       %-40s %8llu files %12s\n", rt.path.c_str(), static_cast<unsigned long long>(rt.opens),
                units::Bytes(static_cast<double>(rt.bytes)).c_str());
  }
  if (s.dct_scaled > 0) std::printf("  DCT-scaled decodes: %llu\n", static_cast<unsigned long long>(s.dct_scaled));
  if (s.bad_samples > 0) {
    std::printf("  bad samples %llu (replaced in their batch):\n", static_cast<unsigned long long>(s.bad_samples));
    for (size_t i = 0; i < s.problems.size() && i < 10; ++i) std::printf("    %s\n", s.problems[i].message.c_str());
  }
}

}  // namespace

void RegisterBenchCommands(CLI::App& app, Globals& g) {
  auto* group = app.add_subcommand("bench", "Measure: the input pipeline (more to come)");
  group->require_subcommand(1);
  auto* f = g.Own<BenchFlags>();
  auto& p = f->b.pipeline;
  auto* cmd = group->add_subcommand(
      "pipeline", "Run the input pipeline flat out: images/s, storage MB/s, per-stage utilisation, limiting stage");
  cmd->add_option("data", p.data,
                  "TFRecord shards, .rec files or image folder; several mounts of the same data as ROOT1:ROOT2:...")
      ->required();
  cmd->add_option("--root-policy", f->root_policy,
                  "With several roots: spread (files over all roots) or pinned (rank r reads root r % roots)")
      ->capture_default_str();
  cmd->add_option("-f,--format", f->format, "auto, tfrecord, recordio or folder")->capture_default_str();
  cmd->add_option("-b,--batch", p.batch_size, "Batch size")->capture_default_str();
  cmd->add_option("--size", p.image_size, "Output image size (224; 299 for Inception)")->capture_default_str();
  cmd->add_flag("--eval", f->eval, "Evaluation transform: resize shorter side to --eval-resize, centre crop");
  cmd->add_option("--eval-resize", p.eval_resize, "Shorter side before the centre crop")->capture_default_str();
  cmd->add_flag("--bbox-crop", p.bbox_crop, "Training crops from the records' bounding boxes (TensorFlow's method)");
  cmd->add_option("--jitter", f->jitter, "Colour jitter brightness,contrast,saturation (e.g. 0.4,0.4,0.4)");
  cmd->add_option("--layout", f->layout, "nchw or nhwc")->capture_default_str();
  cmd->add_option("--dtype", f->dtype, "u8, fp16 or fp32 (u8 is not normalised)")->capture_default_str();
  cmd->add_option("--readers", p.readers, "Reader threads")->capture_default_str();
  cmd->add_option("--prefetch", p.prefetch_batches, "Batches prepared ahead of the consumer")->capture_default_str();
  cmd->add_option("--shuffle-buffer", p.shuffle_buffer, "Samples in the shuffle buffer (1 = no sample shuffle)")
      ->capture_default_str();
  cmd->add_flag("--no-file-shuffle", f->no_file_shuffle, "Keep files in name order");
  cmd->add_option("--seed", p.seed, "Seed of file order, shuffle and augmentation")->capture_default_str();
  cmd->add_option("--epochs", p.epochs, "Epochs")->capture_default_str();
  cmd->add_option("--batches", f->b.batches, "Stop after this many batches (0 = all)")->capture_default_str();
  cmd->add_option("--warmup", f->b.warmup_batches, "Batches excluded from the rates")->capture_default_str();
  cmd->add_option("--rank", f->rank, "This rank (default: RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, else 0)");
  cmd->add_option("--world", f->world,
                  "Number of ranks (default: WORLD_SIZE, OMPI_COMM_WORLD_SIZE, SLURM_NTASKS, else 1)");
  cmd->add_option("--remainder", f->remainder, "Equal steps per rank by: drop or pad")->capture_default_str();
  cmd->add_option("--memory-limit", f->memory, "Most the pipeline may hold (batches, payloads, scratch)")
      ->capture_default_str();
  cmd->add_option("--on-error", f->on_error, "Bad samples: skip (replace within the batch) or fail")
      ->capture_default_str();
  cmd->add_flag("--fast-idct", p.fast_idct, "libjpeg's fast integer IDCT (slightly less accurate)");
  cmd->add_flag("--no-dct-scaling", f->no_dct, "Never decode at 1/2, 1/4, 1/8 scale");
  cmd->add_flag("--decode-only", p.decode_only, "Only decode every JPEG fully (the decoder's bound)");
  cmd->add_flag("--raw-labels", f->raw_labels, "Keep TFRecord's 1-based labels");
  cmd->add_option("--dump", f->b.dump, "Write the first batch to FILE (raw) and FILE.json (labels, samples)");
  AddOutputFlags(cmd, g);
  cmd->callback([f, &g] {
    Status s = Resolve(*f, g);
    if (!s.ok()) {
      Fail(g, s);
      g.exit_code = 2;  // a bad flag value is a usage error
      return;
    }
    auto r = bench::RunPipelineBench(*g.fs, f->b);
    if (!r.ok()) return Fail(g, r.status());
    if (g.json) {
      std::cout << bench::ToJson(*r, f->b).dump(2) << std::endl;
      return;
    }
    PrintReport(*r);
  });
}

}  // namespace aq::cli
