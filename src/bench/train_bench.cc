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

// One pipeline per simulated GPU, its share of the cores, each reading
// through a counting view so storage MB/s can be sampled while it runs.
struct Fleet {
  std::vector<std::unique_ptr<io::MultiRootFileSystem>> views;
  std::vector<std::unique_ptr<pipeline::Pipeline>> pipes;  // after the views: destroyed before them
  uint64_t steps = UINT64_MAX;                             // per GPU, the fewest any pipeline has
};

Result<Fleet> MakeFleet(io::FileSystem& base, const TrainBenchOptions& o, const std::string& root, uint32_t epochs) {
  const size_t cores = o.pipeline.workers > 0 ? o.pipeline.workers : HardwareThreads();
  Fleet f;
  for (uint32_t g = 0; g < o.gpus; ++g) {
    pipeline::PipelineOptions p = o.pipeline;
    p.rank = o.node * o.gpus + g;
    p.world = o.nodes * o.gpus;
    p.workers = std::max<size_t>(1, cores / o.gpus);
    p.epochs = epochs;
    f.views.push_back(std::make_unique<io::MultiRootFileSystem>(base, std::vector<std::string>{root},
                                                                io::RootPolicy::kSpread, p.rank));
    f.pipes.push_back(AQ_TRY(pipeline::Pipeline::Create(*f.views.back(), p)));
    f.steps = std::min(f.steps, f.pipes.back()->steps_per_epoch() * p.epochs);
  }
  return f;
}

// The fleet for the run: as many passes over the data as a verdict needs
// when one pass is too short, cut to --steps.
Result<Fleet> PlanFleet(io::FileSystem& base, const TrainBenchOptions& o, TrainBenchReport& rep) {
  auto roots = AQ_TRY(io::SplitRoots(o.pipeline.data));
  rep.epochs = std::max<uint32_t>(1, o.pipeline.epochs);
  Fleet f = AQ_TRY(MakeFleet(base, o, roots[0], static_cast<uint32_t>(rep.epochs)));
  if (o.steps == 0 && f.steps < o.min_steps + 1 && f.steps > 0) {
    const uint64_t per_epoch = f.steps / rep.epochs;
    rep.epochs = (o.min_steps + 1 + per_epoch - 1) / per_epoch;
    f.pipes.clear();  // the old pipelines stop, before the views they read through go
    f.views.clear();
    f = AQ_TRY(MakeFleet(base, o, roots[0], static_cast<uint32_t>(rep.epochs)));
  }
  if (o.steps > 0) f.steps = std::min(f.steps, o.steps);
  if (f.steps < 2) {
    return InvalidArgument(
        fmt::format("only {} step(s) per GPU: the first step is excluded, so at least 2 are "
                    "needed (more data, fewer GPUs or a smaller batch)",
                    f.steps));
  }
  return f;
}

// The simulated GPUs of one run and what they share while it lasts.
class Run {
 public:
  Run(const TrainBenchOptions& o, Fleet& fleet, TrainBenchReport& rep)
      : o_(o),
        fleet_(fleet),
        rep_(rep),
        step_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(rep.step_seconds))),
        computing_since_(o.gpus),
        allreduce_(static_cast<std::ptrdiff_t>(o.gpus), OnSync{this}),
        progress_(
            {o.inference ? "bench train (inference)" : "bench train", fleet.steps * o.gpus, 0, "steps", o.progress}) {
    for (auto& c : computing_since_) c = -1;
    rep_.gpus.resize(o.gpus);
  }

  // The sampled series: images/s, storage MB/s and accelerator busy %.
  void AddSeries(monitor::Sampler& sampler) {
    sampler.AddCounter("bench.images", "images/s", [this] { return static_cast<double>(images_done_.load()); });
    sampler.AddCounter(
        "bench.read", "MB/s",
        [this] {
          uint64_t b = 0;
          for (const auto& v : fleet_.views) b += v->bytes_read(0);
          return static_cast<double>(b);
        },
        1e-6);
    sampler.AddCounter(
        "bench.au", "%", [this] { return BusyNanoseconds(); }, 1e-9 * 100.0 / o_.gpus);
  }

  // Runs every GPU to the end; the first error a pipeline returned.
  Status RunAll() {
    std::vector<std::thread> threads;
    std::atomic<bool> done{false};
    std::thread epochs;
    if (o_.on_epoch) epochs = std::thread([this, &done] { WatchEpochs(done); });
    for (uint32_t g = 0; g < o_.gpus; ++g) threads.emplace_back([this, g] { Gpu(g); });
    for (auto& t : threads) t.join();
    done = true;
    if (epochs.joinable()) epochs.join();
    progress_.Finish();
    MutexLock lock(mu_);
    return error_;
  }

 private:
  struct OnSync {
    Run* run;
    void operator()() noexcept {
      if (run->OutOfTime()) run->stop_ = true;
    }
  };

  // Epochs as the pipelines read them (their read stages run ahead of the
  // GPUs, by as much as their read-ahead memory holds): on_epoch(k) once
  // the samples read reach k epochs' worth, and for the last, partial one.
  void WatchEpochs(const std::atomic<bool>& done) {
    uint64_t per_epoch = 0;
    for (const auto& p : fleet_.pipes) per_epoch += p->samples_per_epoch();
    per_epoch = std::max<uint64_t>(1, per_epoch);
    o_.on_epoch(0);
    uint64_t told = 0, read = 0;
    for (bool last = false; !last;) {
      last = done.load();
      read = 0;
      for (const auto& p : fleet_.pipes) {
        for (const auto& st : p->Stats().stages) {
          if (st.name == "read") read += st.items;
        }
      }
      for (; told < read / per_epoch; ++told) o_.on_epoch(told + 1);
      if (!last) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (read % per_epoch != 0) o_.on_epoch(told + 1);
  }

  int64_t NsSinceStart(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - start_).count();
  }
  bool OutOfTime() const { return o_.max_seconds > 0 && Seconds(Clock::now() - start_) >= o_.max_seconds; }

  // Accelerator busy time for the AU series: finished steps plus the part
  // of each step in progress, so a sample between step ends reads the
  // true fraction (never above 100%). The first step counts here too.
  double BusyNanoseconds() const {
    const int64_t now = NsSinceStart(Clock::now());
    double busy = static_cast<double>(compute_ns_.load());
    for (const auto& c : computing_since_) {
      int64_t since = c.load();
      if (since >= 0) busy += static_cast<double>(now - since);
    }
    return busy;
  }

  // One GPU: wait for a batch, compute for the step time, meet the others
  // at the all-reduce (training only). The first step is not measured.
  void Gpu(uint32_t g) {
    GpuStats& s = rep_.gpus[g];
    s.rank = o_.node * o_.gpus + g;
    Clock::time_point first_end{};
    for (uint64_t i = 0; i < fleet_.steps && !stop_.load(); ++i) {
      auto t0 = Clock::now();
      auto batch = fleet_.pipes[g]->Next();
      if (!batch.ok() || *batch == nullptr) {
        MutexLock lock(mu_);
        if (!batch.ok() && error_.ok()) error_ = batch.status();
        stop_ = true;
        break;
      }
      auto t1 = Clock::now();
      computing_since_[g] = NsSinceStart(t1);
      std::this_thread::sleep_until(t1 + step_);  // the accelerator computes
      auto t2 = Clock::now();
      compute_ns_.fetch_add(static_cast<uint64_t>(NsSinceStart(t2) - computing_since_[g].exchange(-1)),
                            std::memory_order_relaxed);
      if (!o_.inference) allreduce_.arrive_and_wait();
      auto t3 = o_.inference ? t2 : Clock::now();
      // Training stops together: the barrier's completion decides for all.
      if (o_.inference && OutOfTime()) stop_ = true;
      if (i == 0) {
        first_end = t3;
      } else {
        ++s.steps;
        s.images += (*batch)->size;
        s.wait_seconds += Seconds(t1 - t0);
        s.compute_seconds += rep_.step_seconds;
        s.sync_seconds += Seconds(t3 - t2);
        s.elapsed_seconds = Seconds(t3 - first_end);
        s.step_seconds.push_back(Seconds(t3 - t0));
        images_done_.fetch_add((*batch)->size, std::memory_order_relaxed);
      }
      progress_.Add(1, 0);
    }
    if (!o_.inference) allreduce_.arrive_and_drop();
  }

  const TrainBenchOptions& o_;
  Fleet& fleet_;
  TrainBenchReport& rep_;  // each GPU thread writes only its own rep_.gpus[g]
  const Clock::duration step_;
  const Clock::time_point start_ = Clock::now();
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> images_done_{0};
  std::atomic<uint64_t> compute_ns_{0};
  std::vector<std::atomic<int64_t>> computing_since_;  // ns since start; -1 when idle
  std::barrier<OnSync> allreduce_;
  Progress progress_;
  Mutex mu_;
  Status error_ AQ_GUARDED_BY(mu_);
};

// Per-GPU AU, the pipelines' stages summed, and the run's rates.
void Summarize(const TrainBenchOptions& o, const Fleet& fleet, TrainBenchReport& rep) {
  double elapsed = 0, au_sum = 0;
  rep.au_min = 1;
  for (uint32_t g = 0; g < o.gpus; ++g) {
    auto& s = rep.gpus[g];
    s.au = s.elapsed_seconds > 0 ? s.compute_seconds / s.elapsed_seconds : 0;
    au_sum += s.au;
    rep.au_min = std::min(rep.au_min, s.au);
    elapsed = std::max(elapsed, s.elapsed_seconds);
    rep.images += s.images;
    auto st = fleet.pipes[g]->Stats();
    s.limiting_stage = st.limiting_stage;
    rep.bytes_read += st.bytes_read;
    rep.planned += st.planned;
    rep.plan_staged += st.plan_staged;
    if (rep.plan_error.empty()) rep.plan_error = st.plan_error;
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
  rep.images_per_second = elapsed > 0 ? static_cast<double>(rep.images) / elapsed : 0;
  rep.mb_per_second = rep.seconds > 0 ? static_cast<double>(rep.bytes_read) / 1e6 / rep.seconds : 0;
  rep.mb_per_second_per_gpu = rep.mb_per_second / o.gpus;
  uint64_t decoded = 0;
  for (const auto& stage : rep.stages) {
    if (stage.name == "decode") decoded = stage.items;
  }
  rep.mean_image_bytes = decoded > 0 ? static_cast<double>(rep.bytes_read) / static_cast<double>(decoded) : 0;

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
}

}  // namespace

void JudgeTrainRun(const TrainBenchOptions& o, TrainBenchReport& rep) {
  rep.au_ok = rep.au >= o.au_threshold;
  if (rep.measured_steps < o.min_steps) {
    rep.au_ok = false;
    rep.bound = "insufficient";
    rep.verdict = fmt::format(
        "not enough samples: {} measured step(s) per GPU, a verdict needs {} (AU {:.1f}% is not a verdict); give "
        "more data, a longer --max-seconds or a larger --steps",
        rep.measured_steps, o.min_steps, 100 * rep.au);
    return;
  }
  if (rep.au_ok) {
    rep.bound = "gpu";
    rep.verdict = fmt::format("GPU-bound: AU {:.1f}% >= {:.0f}%, storage and input pipeline keep up", 100 * rep.au,
                              100 * o.au_threshold);
    return;
  }
  double ru = 0, du = 0;
  for (const auto& s : rep.stages) {
    if (s.name == "read") ru = s.utilisation;
    if (s.name == "decode") du = s.utilisation;
  }
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

Result<TrainBenchReport> RunTrainBench(io::FileSystem& base, const TrainBenchOptions& o) {
  if (o.gpus == 0) return InvalidArgument("a training bench needs at least 1 GPU");
  if (o.nodes == 0 || o.node >= o.nodes) return InvalidArgument(fmt::format("node {} of {}", o.node, o.nodes));
  TrainBenchReport rep;
  rep.model = AQ_TRY(FindModel(o.model, o.gpu, o.precision));
  double ips = rep.model.train_images_per_second * (o.inference ? kInferenceSpeedup : 1.0);
  rep.step_seconds = o.step_seconds > 0 ? o.step_seconds : o.pipeline.batch_size / ips;
  if (o.step_seconds > 0) ips = o.pipeline.batch_size / o.step_seconds;
  rep.demand_images_per_second = ips * o.gpus;

  Fleet fleet = AQ_TRY(PlanFleet(base, o, rep));
  const auto& files = fleet.pipes[0]->files();
  if (o.drop_caches) {
    for (const auto& f : files) AQ_TRY(base.DropCache(f));
  }
  rep.page_cache_before = monitor::PageCacheResidency(files).fraction();

  const auto start = Clock::now();
  Run run(o, fleet, rep);
  monitor::Sampler sampler(o.sampler);
  run.AddSeries(sampler);
  if (o.add_series) o.add_series(sampler);
  sampler.Start();
  auto exporter = AQ_TRY(monitor::ExportIfAsked(sampler, o.sampler));
  Status ran = run.RunAll();
  sampler.Stop();
  rep.seconds = Seconds(Clock::now() - start);
  AQ_TRY(ran);

  Summarize(o, fleet, rep);
  rep.series = sampler.Take();
  rep.page_cache_after = monitor::PageCacheResidency(files).fraction();
  JudgeTrainRun(o, rep);
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
          {"planned", r.planned},
          {"plan_staged", r.plan_staged},
          {"plan_error", r.plan_error},
          {"gpus", gpus},
          {"stages", stages}};
}

}  // namespace aq::bench
