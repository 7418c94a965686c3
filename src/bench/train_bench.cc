#include "bench/train_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <mutex>
#include <thread>

#include "common/mutex.h"
#include "common/progress.h"
#include "common/thread_pool.h"
#include "io/multi_root.h"
#include "monitor/page_cache.h"
#include "monitor/prometheus.h"

namespace aq::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Result<TrainBenchReport> RunTrainBench(io::FileSystem& base, const TrainBenchOptions& o) {
  if (o.gpus == 0) return InvalidArgument("a training bench needs at least 1 GPU");
  if (o.nodes == 0 || o.node >= o.nodes) return InvalidArgument(fmt::format("node {} of {}", o.node, o.nodes));
  TrainBenchReport rep;
  rep.model = AQ_TRY(FindModel(o.model, o.gpu, o.precision));
  double ips = rep.model.train_images_per_second * (o.inference ? kInferenceSpeedup : 1.0);
  rep.step_seconds = o.step_seconds > 0 ? o.step_seconds : o.pipeline.batch_size / ips;
  if (o.step_seconds > 0) ips = o.pipeline.batch_size / o.step_seconds;
  rep.demand_images_per_second = ips * o.gpus;

  // One pipeline per simulated GPU, its share of the cores, reading through
  // a counting view so storage MB/s can be sampled while it runs.
  auto roots = AQ_TRY(io::SplitRoots(o.pipeline.data));
  const size_t cores = o.pipeline.workers > 0 ? o.pipeline.workers : HardwareThreads();
  std::vector<std::unique_ptr<io::MultiRootFileSystem>> views;
  std::vector<std::unique_ptr<pipeline::Pipeline>> pipes;
  uint64_t steps = UINT64_MAX;
  auto make_pipes = [&](uint32_t epochs) -> Status {
    pipes.clear();  // before the views they read through
    views.clear();
    steps = UINT64_MAX;
    for (uint32_t g = 0; g < o.gpus; ++g) {
      pipeline::PipelineOptions p = o.pipeline;
      p.rank = o.node * o.gpus + g;
      p.world = o.nodes * o.gpus;
      p.workers = std::max<size_t>(1, cores / o.gpus);
      p.epochs = epochs;
      views.push_back(std::make_unique<io::MultiRootFileSystem>(base, std::vector<std::string>{roots[0]},
                                                                io::RootPolicy::kSpread, p.rank));
      pipes.push_back(AQ_TRY(pipeline::Pipeline::Create(*views.back(), p)));
      steps = std::min(steps, pipes.back()->steps_per_epoch() * p.epochs);
    }
    return Status::Ok();
  };
  rep.epochs = std::max<uint32_t>(1, o.pipeline.epochs);
  AQ_TRY(make_pipes(static_cast<uint32_t>(rep.epochs)));
  if (o.steps == 0 && steps < o.min_steps + 1 && steps > 0) {
    // One pass is too short for a verdict: as many passes as it takes.
    const uint64_t per_epoch = steps / rep.epochs;
    rep.epochs = (o.min_steps + 1 + per_epoch - 1) / per_epoch;
    AQ_TRY(make_pipes(static_cast<uint32_t>(rep.epochs)));
  }
  if (o.steps > 0) steps = std::min(steps, o.steps);
  if (steps < 2) {
    return InvalidArgument(
        fmt::format("only {} step(s) per GPU: the first step is excluded, so at least 2 are "
                    "needed (more data, fewer GPUs or a smaller batch)",
                    steps));
  }

  if (o.drop_caches) {
    for (const auto& f : pipes[0]->files()) AQ_TRY(base.DropCache(f));
  }
  rep.page_cache_before = monitor::PageCacheResidency(pipes[0]->files()).fraction();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> images_done{0};
  const auto start = Clock::now();
  // Accelerator busy time for the AU series: finished steps plus the part
  // of each step in progress, so a sample between step ends reads the
  // true fraction (never above 100%). The first step counts here too.
  std::atomic<uint64_t> compute_ns{0};
  std::vector<std::atomic<int64_t>> computing_since(o.gpus);  // ns since start; -1 when idle
  for (auto& c : computing_since) c = -1;
  auto ns_since_start = [&](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - start).count();
  };
  Mutex mu;
  Status error AQ_GUARDED_BY(mu);
  rep.gpus.resize(o.gpus);
  auto out_of_time = [&] { return o.max_seconds > 0 && Seconds(Clock::now() - start) >= o.max_seconds; };
  auto on_sync = [&]() noexcept {
    if (out_of_time()) stop = true;
  };
  std::barrier allreduce(static_cast<std::ptrdiff_t>(o.gpus), on_sync);
  const auto step = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(rep.step_seconds));
  Progress progress({o.inference ? "bench train (inference)" : "bench train", steps * o.gpus, 0, "steps", o.progress});

  auto gpu = [&](uint32_t g) {
    GpuStats& s = rep.gpus[g];
    s.rank = o.node * o.gpus + g;
    Clock::time_point first_end{};
    for (uint64_t i = 0; i < steps && !stop.load(); ++i) {
      auto t0 = Clock::now();
      auto batch = pipes[g]->Next();
      if (!batch.ok() || *batch == nullptr) {
        MutexLock lock(mu);
        if (!batch.ok() && error.ok()) error = batch.status();
        stop = true;
        break;
      }
      auto t1 = Clock::now();
      computing_since[g] = ns_since_start(t1);
      std::this_thread::sleep_until(t1 + step);  // the accelerator computes
      auto t2 = Clock::now();
      compute_ns.fetch_add(static_cast<uint64_t>(ns_since_start(t2) - computing_since[g].exchange(-1)),
                           std::memory_order_relaxed);
      if (!o.inference) allreduce.arrive_and_wait();
      auto t3 = o.inference ? t2 : Clock::now();
      // Training stops together: the barrier's completion decides for all.
      if (o.inference && out_of_time()) stop = true;
      if (i == 0) {
        first_end = t3;
      } else {
        ++s.steps;
        s.images += (*batch)->size;
        s.wait_seconds += Seconds(t1 - t0);
        s.compute_seconds += rep.step_seconds;
        s.sync_seconds += Seconds(t3 - t2);
        s.elapsed_seconds = Seconds(t3 - first_end);
        s.step_seconds.push_back(Seconds(t3 - t0));
        images_done.fetch_add((*batch)->size, std::memory_order_relaxed);
      }
      progress.Add(1, 0);
    }
    if (!o.inference) allreduce.arrive_and_drop();
  };

  monitor::Sampler sampler(o.sampler);
  sampler.AddCounter("bench.images", "images/s", [&] { return static_cast<double>(images_done.load()); });
  sampler.AddCounter(
      "bench.read", "MB/s",
      [&] {
        uint64_t b = 0;
        for (const auto& v : views) b += v->bytes_read(0);
        return static_cast<double>(b);
      },
      1e-6);
  sampler.AddCounter(
      "bench.au", "%",
      [&] {
        const int64_t now = ns_since_start(Clock::now());
        double busy = static_cast<double>(compute_ns.load());
        for (const auto& c : computing_since) {
          int64_t since = c.load();
          if (since >= 0) busy += static_cast<double>(now - since);
        }
        return busy;
      },
      1e-9 * 100.0 / o.gpus);
  sampler.Start();
  auto exporter = AQ_TRY(monitor::ExportIfAsked(sampler, o.sampler));
  std::vector<std::thread> threads;
  for (uint32_t g = 0; g < o.gpus; ++g) threads.emplace_back(gpu, g);
  for (auto& t : threads) t.join();
  progress.Finish();
  sampler.Stop();
  rep.seconds = Seconds(Clock::now() - start);
  {
    MutexLock lock(mu);
    if (!error.ok()) return error;
  }

  double elapsed = 0, au_sum = 0;
  rep.au_min = 1;
  for (uint32_t g = 0; g < o.gpus; ++g) {
    auto& s = rep.gpus[g];
    s.au = s.elapsed_seconds > 0 ? s.compute_seconds / s.elapsed_seconds : 0;
    au_sum += s.au;
    rep.au_min = std::min(rep.au_min, s.au);
    elapsed = std::max(elapsed, s.elapsed_seconds);
    rep.images += s.images;
    auto st = pipes[g]->Stats();
    s.limiting_stage = st.limiting_stage;
    rep.bytes_read += st.bytes_read;
    for (const auto& stage : st.stages) {
      auto it = std::find_if(rep.stages.begin(), rep.stages.end(), [&](const auto& x) { return x.name == stage.name; });
      if (it == rep.stages.end()) {
        rep.stages.push_back(stage);
      } else {
        it->threads += stage.threads;
        it->busy_seconds += stage.busy_seconds;
        it->items += stage.items;
        it->bytes += stage.bytes;
      }
    }
  }
  for (auto& stage : rep.stages) {
    stage.utilisation = rep.seconds > 0 && stage.threads > 0 ? stage.busy_seconds / (rep.seconds * stage.threads) : 0;
  }
  rep.au = au_sum / o.gpus;
  rep.au_ok = rep.au >= o.au_threshold;
  rep.images_per_second = elapsed > 0 ? static_cast<double>(rep.images) / elapsed : 0;
  rep.mb_per_second = rep.seconds > 0 ? static_cast<double>(rep.bytes_read) / 1e6 / rep.seconds : 0;
  rep.mb_per_second_per_gpu = rep.mb_per_second / o.gpus;
  uint64_t decoded = 0;
  for (const auto& stage : rep.stages) {
    if (stage.name == "decode") decoded = stage.items;
  }
  rep.mean_image_bytes = decoded > 0 ? static_cast<double>(rep.bytes_read) / static_cast<double>(decoded) : 0;
  rep.series = sampler.Take();
  rep.page_cache_after = monitor::PageCacheResidency(pipes[0]->files()).fraction();

  std::vector<double> step_times;
  rep.measured_steps = UINT64_MAX;
  for (const auto& g : rep.gpus) {
    step_times.insert(step_times.end(), g.step_seconds.begin(), g.step_seconds.end());
    rep.measured_steps = std::min(rep.measured_steps, g.steps);
  }
  if (!step_times.empty()) {
    std::sort(step_times.begin(), step_times.end());
    rep.step_min_seconds = step_times.front();
    rep.step_max_seconds = step_times.back();
    const size_t n = step_times.size();
    rep.step_median_seconds = n % 2 ? step_times[n / 2] : (step_times[n / 2 - 1] + step_times[n / 2]) / 2;
  }

  if (rep.measured_steps < o.min_steps) {
    rep.au_ok = false;
    rep.bound = "insufficient";
    rep.verdict = fmt::format(
        "not enough samples: {} measured step(s) per GPU, a verdict needs {} (AU {:.1f}% is not a verdict); give "
        "more data, a longer --max-seconds or a larger --steps",
        rep.measured_steps, o.min_steps, 100 * rep.au);
  } else if (rep.au_ok) {
    rep.bound = "gpu";
    rep.verdict = fmt::format("GPU-bound: AU {:.1f}% >= {:.0f}%, storage and input pipeline keep up", 100 * rep.au,
                              100 * o.au_threshold);
  } else {
    const pipeline::StageStats* read = nullptr;
    const pipeline::StageStats* decode = nullptr;
    for (const auto& s : rep.stages) {
      if (s.name == "read") read = &s;
      if (s.name == "decode") decode = &s;
    }
    const double ru = read ? read->utilisation : 0, du = decode ? decode->utilisation : 0;
    if (ru > du) {
      rep.bound = "storage";
      rep.verdict = fmt::format(
          "storage-bound: AU {:.1f}% < {:.0f}%; readers busy {:.0f}% of the time delivering {:.1f} MB/s, decoders "
          "{:.0f}%",
          100 * rep.au, 100 * o.au_threshold, 100 * ru, rep.mb_per_second, 100 * du);
    } else {
      rep.bound = "decode";
      rep.verdict = fmt::format(
          "input-bound (decode, CPU): AU {:.1f}% < {:.0f}%; decoders busy {:.0f}%, readers {:.0f}%; the simulated GPUs "
          "want {:.0f} images/s, the CPU delivers {:.0f}",
          100 * rep.au, 100 * o.au_threshold, 100 * du, 100 * ru, rep.demand_images_per_second, rep.images_per_second);
    }
  }
  return rep;
}

nlohmann::json ConfigJson(const TrainBenchOptions& o, const TrainBenchReport& r) {
  const auto& p = o.pipeline;
  return {{"data", p.data},
          {"gpus", o.gpus},
          {"node", o.node},
          {"nodes", o.nodes},
          {"mode", o.inference ? "inference" : "training"},
          {"model", o.model},
          {"gpu", o.gpu},
          {"precision", o.precision},
          {"model_images_per_second_per_gpu", r.model.train_images_per_second * (o.inference ? kInferenceSpeedup : 1)},
          {"model_source", o.step_seconds > 0 ? std::string("the step time given") : r.model.source},
          {"model_measured", o.step_seconds > 0 ? false : r.model.measured},
          {"step_seconds", r.step_seconds},
          {"batch_size", p.batch_size},
          {"image_size", p.image_size},
          {"readers_per_gpu", p.readers},
          {"au_threshold", o.au_threshold},
          {"drop_caches", o.drop_caches},
          {"steps_limit", o.steps},
          {"min_steps", o.min_steps},
          {"epochs", r.epochs},
          {"max_seconds", o.max_seconds},
          {"seed", p.seed}};
}

nlohmann::json SummaryJson(const TrainBenchReport& r) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : r.gpus) {
    gpus.push_back({{"rank", g.rank},
                    {"steps", g.steps},
                    {"images", g.images},
                    {"au", g.au},
                    {"compute_seconds", g.compute_seconds},
                    {"wait_seconds", g.wait_seconds},
                    {"sync_seconds", g.sync_seconds},
                    {"elapsed_seconds", g.elapsed_seconds},
                    {"limiting_stage", g.limiting_stage}});
  }
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : r.stages) {
    stages.push_back(
        {{"name", s.name}, {"threads", s.threads}, {"busy_seconds", s.busy_seconds}, {"utilisation", s.utilisation}});
  }
  return {{"images_per_second", r.images_per_second},
          {"demand_images_per_second", r.demand_images_per_second},
          {"mb_per_second", r.mb_per_second},
          {"mb_per_second_per_gpu", r.mb_per_second_per_gpu},
          {"mean_image_bytes", r.mean_image_bytes},
          {"au", r.au},
          {"au_min", r.au_min},
          {"au_ok", r.au_ok},
          {"bound", r.bound},
          {"verdict", r.verdict},
          {"measured_steps", r.measured_steps},
          {"measured_step_seconds",
           {{"min", r.step_min_seconds}, {"median", r.step_median_seconds}, {"max", r.step_max_seconds}}},
          {"seconds", r.seconds},
          {"images", r.images},
          {"bytes_read", r.bytes_read},
          {"page_cache_before", r.page_cache_before},
          {"page_cache_after", r.page_cache_after},
          {"gpus", gpus},
          {"stages", stages}};
}

}  // namespace aq::bench
