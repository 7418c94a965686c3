// aquifer bench pipeline
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>

#include "bench/infer_bench.h"
#include "bench/pipeline_bench.h"
#include "bench/result.h"
#include "bench/train_bench.h"
#include "cli/cli.h"
#include "cli/pipeline_flags.h"
#include "common/units.h"
#include "format/json_text.h"
#include "io/multi_root.h"
#include "pipeline/options_schema.h"

namespace aq::cli {
namespace {

// The default of a pipeline option as the schema writes it (pipeline/options_schema.h).

struct BenchFlags {
  bench::PipelineBenchOptions b;
  PipelineFlags options;  // every flag of pipeline::OptionSchema
  int64_t rank = -1, world = -1;
};

Status Resolve(BenchFlags& f, const Globals& g) {
  auto& p = f.b.pipeline;
  AQ_TRY(f.options.Apply(p));
  p.workers = g.threads;
  f.b.progress = !g.no_progress;
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
  std::printf("  storage    %s, %s read per image (x a GPU's images/s: its MB/s in this form; aquifer doctor)\n",
              units::Rate(r.mb_per_second * 1e6).c_str(), units::Bytes(r.bytes_per_image).c_str());
  if (r.batches > 0) {
    std::printf("  batches    %.1f / %.1f / %.1f ms apart (min / median / max)\n", 1e3 * r.batch_min_seconds,
                1e3 * r.batch_median_seconds, 1e3 * r.batch_max_seconds);
  }
  if (!r.enough_samples) {
    std::printf(
        "  WARNING    only %llu batches over %s measured (a stable figure needs %llu and %.0f s): "
        "more --epochs or data\n",
        static_cast<unsigned long long>(r.batches), units::Duration(r.seconds).c_str(),
        static_cast<unsigned long long>(bench::PipelineBenchReport::kMinBatches),
        bench::PipelineBenchReport::kMinSeconds);
  }
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
  if (!s.manifest.empty()) {
    std::printf("  manifest   %s; %llu samples not read to their end, %llu changed since (checked)\n",
                s.manifest.c_str(), static_cast<unsigned long long>(s.manifest_trusted),
                static_cast<unsigned long long>(s.manifest_changed));
  }
  if (s.planned > 0 || !s.plan_error.empty()) {
    std::printf("  read plan  %llu reads sent ahead, %llu taken up for staging%s%s\n",
                static_cast<unsigned long long>(s.planned), static_cast<unsigned long long>(s.plan_staged),
                s.plan_error.empty() ? "" : "; stopped: ", s.plan_error.c_str());
  }
  if (s.lost_parts > 0) {
    std::printf("  lost       %llu damaged part%s of record files not read (every record before each was):\n",
                static_cast<unsigned long long>(s.lost_parts), s.lost_parts == 1 ? "" : "s");
    for (size_t i = 0; i < s.problems.size() && i < s.lost_parts && i < 10; ++i) {
      std::printf("    %s\n", s.problems[i].message.c_str());
    }
  }
  if (s.bad_samples > 0) {
    std::printf("  bad samples %llu (replaced in their batch):\n", static_cast<unsigned long long>(s.bad_samples));
    for (size_t i = 0; i < s.problems.size() && i < 10; ++i) std::printf("    %s\n", s.problems[i].message.c_str());
    if (s.bad_samples > 10) {
      std::printf("    ... and %llu more (--json lists the first %zu)\n",
                  static_cast<unsigned long long>(s.bad_samples - 10), s.problems.size());
    }
  }
}

}  // namespace

// The input pipeline's flags, shared by bench pipeline and bench train:
// the schema's, then the bench's own.
void AddPipelineFlags(CLI::App* cmd, BenchFlags* f) {
  auto& p = f->b.pipeline;
  f->options.Add(cmd);
  cmd->add_option("--rank", f->rank, "This rank (default: RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, else 0)");
  cmd->add_option("--world", f->world,
                  "Number of ranks (default: WORLD_SIZE, OMPI_COMM_WORLD_SIZE, SLURM_NTASKS, else 1)");
  cmd->add_flag("--decode-only", p.decode_only, "Only decode every JPEG fully (the decoder's bound)");
  cmd->add_flag("--entropy-only", p.entropy_only,
                "Only entropy-decode every JPEG (Huffman, no IDCT or colour): the floor under any decode");
}

struct TrainFlags {
  BenchFlags pipe;
  bench::TrainBenchOptions t;
  ResultFlags out;
  bool inference = false;
  bool list_models = false;
  std::string node_stats;
};

// Where a node's block reads came from, from its /stats counters: staged
// ahead of a reader's plan, its RAM cache, or media (a cache miss that was
// not a staged block; a staged read counted its miss when it was staged).
struct NodeReads {
  double staged = 0, cache = 0, media = 0;
  static NodeReads From(const s3::NodeStatsDoc& doc) {
    NodeReads r;
    if (doc.staging) r.staged = static_cast<double>(doc.staging->hits + doc.staging->late_hits);
    if (doc.cache) {
      r.cache = static_cast<double>(doc.cache->hits);
      r.media = std::max(0.0, static_cast<double>(doc.cache->misses) - r.staged);
    }
    return r;
  }
  NodeReads operator-(const NodeReads& b) const {
    return {staged - b.staged, cache - b.cache, std::max(0.0, media - b.media)};
  }
  nlohmann::json Json() const {
    const double total = staged + cache + media;
    auto share = [&](double v) { return total > 0 ? v / total : 0.0; };
    return {{"staged", staged},
            {"cache", cache},
            {"media", media},
            {"staged_fraction", share(staged)},
            {"cache_fraction", share(cache)},
            {"media_fraction", share(media)}};
  }
};

// bench train --node-stats: the node's block reads by source, read at each
// epoch's end and sampled each second for the series.
class NodeReadWatch {
 public:
  explicit NodeReadWatch(std::string node) : node_(std::move(node)) {}
  Status Check() { return FetchStats(node_).status(); }
  void Hook(bench::TrainBenchOptions& t) {
    t.on_epoch = [this](uint64_t epoch) {
      auto j = FetchStats(node_);
      std::lock_guard<std::mutex> lock(mu_);
      if (j.ok()) {
        at_.emplace_back(epoch, NodeReads::From(*j));
      } else if (error_.empty()) {
        error_ = j.status().message();
      }
    };
    t.add_series = [this](monitor::Sampler& s) {
      s.AddCounter("node.reads.staged", "blocks/s", [this] { return Latest().staged; });
      s.AddCounter("node.reads.cache", "blocks/s", [this] { return Latest().cache; });
      s.AddCounter("node.reads.media", "blocks/s", [this] { return Latest().media; });
    };
  }
  // {"staged", "cache", "media" and their fractions, "epochs": [...]}
  nlohmann::json Json() const {
    std::lock_guard<std::mutex> lock(mu_);
    nlohmann::json epochs = nlohmann::json::array();
    for (size_t i = 1; i < at_.size(); ++i) {
      nlohmann::json e = (at_[i].second - at_[i - 1].second).Json();
      e["epoch"] = at_[i].first;
      epochs.push_back(std::move(e));
    }
    nlohmann::json out = at_.size() >= 2 ? (at_.back().second - at_.front().second).Json() : NodeReads{}.Json();
    out["node"] = node_;
    out["epochs"] = std::move(epochs);
    if (!error_.empty()) out["error"] = error_;
    return out;
  }

 private:
  // One /stats per sampler tick: the three series read the same answer.
  NodeReads Latest() {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - fetched_ > std::chrono::milliseconds(500)) {
      fetched_ = now;
      if (auto j = FetchStats(node_); j.ok()) latest_ = NodeReads::From(*j);
    }
    return latest_;
  }
  const std::string node_;
  mutable std::mutex mu_;
  std::vector<std::pair<uint64_t, NodeReads>> at_;
  std::string error_;
  NodeReads latest_;
  std::chrono::steady_clock::time_point fetched_{};
};

void PrintNodeReads(const nlohmann::json& j) {
  auto pct = [](const nlohmann::json& e, const char* k) { return 100 * e.value(k, 0.0); };
  std::printf("  node reads %.0f%% staged, %.0f%% RAM cache, %.0f%% media (%.0f blocks; node %s)\n",
              pct(j, "staged_fraction"), pct(j, "cache_fraction"), pct(j, "media_fraction"),
              j.value("staged", 0.0) + j.value("cache", 0.0) + j.value("media", 0.0),
              j.value("node", std::string()).c_str());
  for (const auto& e : j["epochs"]) {
    std::printf("    epoch %llu: %.0f%% staged, %.0f%% RAM cache, %.0f%% media\n",
                static_cast<unsigned long long>(e.value("epoch", uint64_t{0})), pct(e, "staged_fraction"),
                pct(e, "cache_fraction"), pct(e, "media_fraction"));
  }
  if (j.contains("error")) std::printf("    (a reading failed: %s)\n", j["error"].get<std::string>().c_str());
}

void PrintModels(bool json) {
  nlohmann::json rows = nlohmann::json::array();
  if (!json)
    std::printf("%-11s %-5s %-9s %10s %5s  %-8s %s\n", "model", "gpu", "precision", "images/s", "size", "kind",
                "source");
  for (const auto& e : bench::ModelTable()) {
    if (json) {
      rows.push_back({{"model", e.model},
                      {"gpu", e.gpu},
                      {"precision", e.precision},
                      {"train_images_per_second", e.train_images_per_second},
                      {"image_size", e.image_size},
                      {"measured", e.measured},
                      {"source", e.source}});
    } else {
      std::printf("%-11s %-5s %-9s %10.0f %5d  %-8s %s\n", e.model.c_str(), e.gpu.c_str(), e.precision.c_str(),
                  e.train_images_per_second, e.image_size, e.measured ? "measured" : "derived", e.source.c_str());
    }
  }
  if (json) std::cout << format::DumpJson(rows, 1) << std::endl;
}

void PrintTrain(const bench::TrainBenchReport& r, const bench::TrainBenchOptions& o) {
  std::printf("bench train: %u x %s %s %s %s, batch %u, step %.3f s per GPU\n", o.gpus, r.model.gpu.c_str(),
              r.model.model.c_str(), r.model.precision.c_str(), o.inference ? "inference" : "training",
              o.pipeline.batch_size, r.step_seconds);
  std::printf("  model      %.0f images/s per GPU: %s\n", r.demand_images_per_second / o.gpus,
              o.step_seconds > 0 ? "--step-time" : r.model.source.c_str());
  std::printf("  images/s   %.1f delivered; the GPUs could take %.1f\n", r.images_per_second,
              r.demand_images_per_second);
  std::printf("  storage    %s (%s per GPU), %.0f bytes per image\n", units::Rate(r.mb_per_second * 1e6).c_str(),
              units::Rate(r.mb_per_second_per_gpu * 1e6).c_str(), r.mean_image_bytes);
  std::printf("  AU         %.1f%% (lowest GPU %.1f%%)\n", 100 * r.au, 100 * r.au_min);
  std::printf(
      "  steps      %llu measured per GPU (first excluded; %llu pass(es) over the data); step time min %.3f s, "
      "median %.3f s, max %.3f s\n",
      static_cast<unsigned long long>(r.measured_steps), static_cast<unsigned long long>(r.epochs), r.step_min_seconds,
      r.step_median_seconds, r.step_max_seconds);
  for (const auto& g : r.gpus) {
    std::printf("    rank %-3u %llu steps, waited %.2fs for data, %.2fs at the all-reduce, AU %.1f%%, limiting %s\n",
                g.rank, static_cast<unsigned long long>(g.steps), g.wait_seconds, g.sync_seconds, 100 * g.au,
                g.limiting_stage.c_str());
  }
  for (const auto& st : r.stages) {
    std::printf("  stage      %-7s %3zu threads %5.0f%% busy\n", st.name.c_str(), st.threads, 100 * st.utilisation);
  }
  std::printf("  page cache %.0f%% of the dataset resident before, %.0f%% after\n", 100 * r.page_cache_before,
              100 * r.page_cache_after);
  if (r.planned > 0 || !r.plan_error.empty()) {
    std::printf("  read plan  %llu reads sent ahead, %llu taken up for staging%s%s\n",
                static_cast<unsigned long long>(r.planned), static_cast<unsigned long long>(r.plan_staged),
                r.plan_error.empty() ? "" : "; stopped: ", r.plan_error.c_str());
  }
  std::printf("  verdict    %s\n", r.verdict.c_str());
}

// The emulated accelerators of bench train and bench infer.
void AddEmulatedGpuFlags(CLI::App* cmd, bench::TrainBenchOptions& t) {
  cmd->add_option("-g,--gpus", t.gpus, "Simulated GPUs in this process")->capture_default_str();
  cmd->add_option("-m,--model", t.model,
                  "resnet50, resnet152, inception3, inception4, vgg16, googlenet, alexnet (docs/models.md)")
      ->capture_default_str();
  cmd->add_option("--gpu", t.gpu, "v100, a100 or h100")->capture_default_str();
  cmd->add_option("--precision", t.precision, "fp16 (mixed) or fp32 (TF32 on A100/H100)")->capture_default_str();
  cmd->add_option("--au-threshold", t.au_threshold, "AU at or above which a run counts as GPU-bound")
      ->capture_default_str();
}

// The pipeline and sampler settings both benches take from the flags.
void ApplyPipelineFlags(const BenchFlags& pipe, const ResultFlags& out, const Globals& g, bench::TrainBenchOptions& t) {
  t.pipeline = pipe.b.pipeline;
  t.pipeline.workers = g.threads;
  t.node = t.pipeline.rank;
  t.nodes = t.pipeline.world;
  t.progress = !g.no_progress && !g.json;
  t.sampler.interval_seconds = out.interval;
  t.sampler.prometheus_port = out.prometheus;
}

void RegisterTrainCommand(CLI::App& group, Globals& g) {
  auto* f = g.Own<TrainFlags>();
  auto* cmd = group.add_subcommand(
      "train",
      "Training with emulated GPUs: the real pipeline feeds G simulated GPUs that compute for the model's step "
      "time; reports images/s, storage MB/s, accelerator utilisation and whether storage or the CPU is the limit");
  AddPipelineFlags(cmd, &f->pipe);
  // The model table needs no data: --models prints it and exits.
  cmd->get_option("data")->required(false);
  cmd->add_flag("--models", f->list_models, "Print the model table (images/s per GPU and sources) and exit");
  auto& t = f->t;
  AddEmulatedGpuFlags(cmd, t);
  cmd->add_flag("--inference", f->inference, "Forward only: no all-reduce, ranks do not wait for each other");
  cmd->add_option("--step-time", t.step_seconds, "Seconds per step per GPU (overrides the model table)");
  cmd->add_option("--steps", t.steps,
                  "Steps per GPU (0 = one pass over the rank's share, more passes while it is under --min-steps)")
      ->capture_default_str();
  cmd->add_option("--min-steps", t.min_steps,
                  "Measured steps per GPU a verdict needs; with fewer it says 'not enough samples'")
      ->capture_default_str();
  cmd->add_option("--max-seconds", t.max_seconds, "Stop after this long (0 = no limit)")->capture_default_str();
  cmd->add_flag("--drop-caches", t.drop_caches, "Evict the dataset from the page cache first (a cold start)");
  cmd->add_option("--node-stats", f->node_stats,
                  "A storage node's metrics address (HOST:PORT, serve --metrics): its block reads by source (staged, "
                  "RAM cache, media) per epoch, in the summary, the series and the report");
  AddResultFlags(cmd, f->out, true);
  AddOutputFlags(cmd, g);
  cmd->callback([f, &g] {
    if (f->list_models) return PrintModels(g.json);
    Status s = Resolve(f->pipe, g);  // the flags, the data among them
    if (s.ok() && f->pipe.b.pipeline.data.empty()) {
      Fail(g, InvalidArgument("bench train: give the dataset (or --models)"));
      g.exit_code = 2;
      return;
    }
    if (!s.ok()) {
      Fail(g, s);
      g.exit_code = 2;
      return;
    }
    auto& t = f->t;
    ApplyPipelineFlags(f->pipe, f->out, g, t);
    t.inference = f->inference;
    std::unique_ptr<NodeReadWatch> watch;
    if (!f->node_stats.empty()) {
      watch = std::make_unique<NodeReadWatch>(f->node_stats);
      if (Status c = watch->Check(); !c.ok()) {
        Fail(g, c.WithContext("--node-stats"));
        g.exit_code = 2;
        return;
      }
      watch->Hook(t);
    }
    auto r = bench::RunTrainBench(*g.fs, t);
    t.on_epoch = nullptr;
    t.add_series = nullptr;
    if (!r.ok()) return Fail(g, r.status());
    auto roots = io::SplitRoots(t.pipeline.data);
    nlohmann::json summary = bench::SummaryJson(*r);
    const nlohmann::json node_reads = watch ? watch->Json() : nlohmann::json();
    if (watch) summary["node_reads"] = node_reads;
    EmitResult(g, f->out, "bench train", roots.ok() ? *roots : std::vector<std::string>{}, bench::ConfigJson(t, *r),
               summary, &r->series, [&](const nlohmann::json&) {
                 PrintTrain(*r, t);
                 if (watch) PrintNodeReads(node_reads);
               });
  });
}

struct InferFlags {
  BenchFlags pipe;
  bench::InferBenchOptions o;
  ResultFlags out;
  std::string checkpoint, python;
  uint32_t eval_batch = 64;
};

// The directory of this executable's Python package (a build tree keeps it
// in python/ beside the binary), for the evaluation child's PYTHONPATH.
std::string BuiltPythonDir() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  std::string dir(self, static_cast<size_t>(n));
  dir = dir.substr(0, dir.rfind('/')) + "/python";
  return ::access((dir + "/aquifer/evaluate.py").c_str(), R_OK) == 0 ? dir : "";
}

// Top-1 of a trained checkpoint on the CPU, through aquifer.Loader with the
// evaluation transform: python3 -m aquifer.evaluate, its JSON read back.
Result<nlohmann::json> EvaluateCheckpoint(const InferFlags& f, const Globals& g, const std::string& data) {
  std::vector<std::string> argv = {f.python,
                                   "-m",
                                   "aquifer.evaluate",
                                   "--checkpoint",
                                   f.checkpoint,
                                   "--data",
                                   data,
                                   "--batch-size",
                                   std::to_string(f.eval_batch),
                                   "--threads",
                                   std::to_string(g.threads),
                                   "--json"};
  if (!g.credentials.file.empty()) argv.insert(argv.end(), {"--credentials", g.credentials.file});
  if (!g.credentials.profile.empty()) argv.insert(argv.end(), {"--profile", g.credentials.profile});
  std::vector<std::string> env;
  if (std::string dir = BuiltPythonDir(); !dir.empty()) {
    const char* old = std::getenv("PYTHONPATH");
    env.push_back("PYTHONPATH=" + dir + (old != nullptr && *old != '\0' ? ":" + std::string(old) : ""));
  }
  std::string out =
      AQ_TRY(Collect(AQ_TRY(Spawn(argv, env, f.python + " -m aquifer.evaluate --checkpoint " + f.checkpoint))));
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("top1")) {
    return Status(StatusCode::kInternal, fmt::format("the evaluation of {} printed no result", f.checkpoint));
  }
  return j;
}

void PrintInfer(const bench::InferBenchReport& r, const bench::InferBenchOptions& o, const nlohmann::json& eval) {
  const auto& first = r.points.front().report;
  std::printf("bench infer: %u x %s %s %s, forward only, evaluation transform, %zu batch size(s)\n", o.base.gpus,
              first.model.gpu.c_str(), first.model.model.c_str(), first.model.precision.c_str(), r.points.size());
  std::printf("  %5s %10s %12s %6s %12s %12s %22s  %s\n", "batch", "images/s", "GPUs take", "AU", "storage", "per GPU",
              "step ms min/med/max", "verdict");
  for (const auto& p : r.points) {
    const auto& x = p.report;
    std::string verdict = x.bound == "gpu"            ? "GPU-bound"
                          : x.bound == "insufficient" ? "not enough samples"
                          : x.bound == "storage"      ? "storage-bound"
                                                      : "input-bound (CPU decode)";
    std::printf("  %5u %10.1f %12.1f %5.1f%% %12s %12s %6.1f/%6.1f/%6.1f ms  %s\n", p.batch, x.images_per_second,
                x.demand_images_per_second, 100 * x.au, units::Rate(x.mb_per_second * 1e6).c_str(),
                units::Rate(x.mb_per_second_per_gpu * 1e6).c_str(), 1e3 * x.step_min_seconds,
                1e3 * x.step_median_seconds, 1e3 * x.step_max_seconds, verdict.c_str());
  }
  for (const auto& s : r.skipped) std::printf("  skipped    %s\n", s.c_str());
  for (const auto& a : r.assumptions) std::printf("  assumes    %s\n", a.c_str());
  if (!eval.is_null()) {
    std::printf("  top-1      %.4f (top-5 %.4f) over %llu images, %s from %s; %.0f images/s on this CPU\n",
                eval.value("top1", 0.0), eval.value("top5", 0.0),
                static_cast<unsigned long long>(eval.value("images", 0)), eval.value("arch", "").c_str(),
                eval.value("checkpoint", "").c_str(), eval.value("images_per_second", 0.0));
  }
}

void RegisterInferCommand(CLI::App& group, Globals& g) {
  auto* f = g.Own<InferFlags>();
  auto* cmd = group.add_subcommand(
      "infer",
      "Inference with emulated GPUs (forward only, evaluation transform) at several batch sizes: images/s, storage "
      "MB/s and accelerator utilisation; --checkpoint also measures a trained model's top-1 through aquifer.Loader");
  AddPipelineFlags(cmd, &f->pipe);
  // The batch sizes come from --batches and the transform is always the
  // evaluation one.
  cmd->remove_option(cmd->get_option("--batch"));
  cmd->remove_option(cmd->get_option("--eval"));
  auto& t = f->o.base;
  cmd->add_option("--batches", f->o.batches, "Batch sizes to measure, e.g. 1,8,32,128")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batch-overhead", f->o.batch_overhead_seconds,
                  "Fixed seconds per batch on the emulated GPU (launches, host-to-device copy)")
      ->capture_default_str();
  AddEmulatedGpuFlags(cmd, t);
  cmd->add_option("--steps", t.steps, "Steps per GPU for each batch size (0 = a pass, more under --min-steps)")
      ->capture_default_str();
  cmd->add_option("--min-steps", t.min_steps, "Measured steps per GPU a verdict needs")->capture_default_str();
  cmd->add_option("--max-seconds", t.max_seconds, "Stop each batch size after this long (0 = no limit)")
      ->capture_default_str();
  cmd->add_flag("--drop-caches", t.drop_caches, "Evict the dataset from the page cache before each batch size");
  cmd->add_option("--checkpoint", f->checkpoint,
                  "Also evaluate this examples/train_imagenet.py checkpoint on the CPU: top-1/top-5 over the data, "
                  "each sample once");
  cmd->add_option("--eval-batch", f->eval_batch, "Batch size of the --checkpoint evaluation")->capture_default_str();
  f->python = ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  cmd->add_option("--python", f->python, "Python with torch and torchvision, for --checkpoint")->capture_default_str();
  AddResultFlags(cmd, f->out, true);
  AddOutputFlags(cmd, g);
  cmd->callback([f, &g] {
    Status s = Resolve(f->pipe, g);
    if (!s.ok()) {
      Fail(g, s);
      g.exit_code = 2;
      return;
    }
    auto& t = f->o.base;
    ApplyPipelineFlags(f->pipe, f->out, g, t);
    auto r = bench::RunInferBench(*g.fs, f->o);
    if (!r.ok()) return Fail(g, r.status());
    nlohmann::json eval;
    if (!f->checkpoint.empty()) {
      auto e = EvaluateCheckpoint(*f, g, t.pipeline.data);
      if (!e.ok()) return Fail(g, e.status());
      eval = std::move(*e);
    }
    nlohmann::json config = bench::ConfigJson(f->o, *r);
    nlohmann::json summary = bench::SummaryJson(*r);
    if (!eval.is_null()) {
      config["checkpoint"] = f->checkpoint;
      summary["evaluation"] = eval;
    }
    auto roots = io::SplitRoots(t.pipeline.data);
    EmitResult(g, f->out, "bench infer", roots.ok() ? *roots : std::vector<std::string>{}, config, summary,
               &r->points.back().report.series, [&](const nlohmann::json&) { PrintInfer(*r, f->o, eval); });
  });
}

void RegisterBenchCommands(CLI::App& app, Globals& g) {
  auto* group = app.add_subcommand(
      "bench", "Measure: storage-only reads, the input pipeline, training with emulated GPUs, scaling sweeps");
  group->require_subcommand(1);
  auto* f = g.Own<BenchFlags>();
  auto* cmd = group->add_subcommand(
      "pipeline", "Run the input pipeline flat out: images/s, storage MB/s, per-stage utilisation, limiting stage");
  AddPipelineFlags(cmd, f);
  cmd->add_option("--batches", f->b.batches, "Stop after this many batches (0 = all)")->capture_default_str();
  cmd->add_option("--warmup", f->b.warmup_batches, "Batches excluded from the rates")->capture_default_str();
  cmd->add_option("--dump", f->b.dump, "Write the first batch to FILE (raw) and FILE.json (labels, samples)");
  auto* out = g.Own<ResultFlags>();
  AddResultFlags(cmd, *out, false);
  AddOutputFlags(cmd, g);
  cmd->callback([f, out, &g] {
    Status s = Resolve(*f, g);
    if (!s.ok()) {
      Fail(g, s);
      g.exit_code = 2;  // a bad flag value is a usage error
      return;
    }
    auto r = bench::RunPipelineBench(*g.fs, f->b);
    if (!r.ok()) return Fail(g, r.status());
    std::string written;
    if (!out->out.empty()) {
      // --json keeps its flat form (scripts read it); the file under --out
      // is a result like every other command's, for aquifer report.
      auto roots = io::SplitRoots(f->b.pipeline.data);
      nlohmann::json flat = bench::ToJson(*r, f->b);
      nlohmann::json config = {{"data", f->b.pipeline.data},
                               {"pipeline", flat["config"]},
                               {"batch_size", f->b.pipeline.batch_size},
                               {"image_size", f->b.pipeline.image_size},
                               {"warmup_batches", f->b.warmup_batches}};
      auto result = bench::MakeResult({"bench pipeline", g.argv, roots.ok() ? *roots : std::vector<std::string>{}},
                                      config, flat, nullptr);
      auto path = bench::WriteResult(out->out, result);
      if (!path.ok()) return Fail(g, path.status());
      written = *path;
    }
    if (g.json) {
      std::cout << format::DumpJson(bench::ToJson(*r, f->b), 2) << std::endl;
      return;
    }
    PrintReport(*r);
    if (!written.empty()) std::printf("  result     %s\n", written.c_str());
  });
  RegisterTrainCommand(*group, g);
  RegisterInferCommand(*group, g);
  RegisterMeasureCommands(app, *group, g);
  RegisterCheckpointCommand(*group, g);
}

}  // namespace aq::cli
