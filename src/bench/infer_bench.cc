#include "bench/infer_bench.h"

#include <fmt/format.h>

namespace aq::bench {

Result<InferBenchReport> RunInferBench(io::FileSystem& fs, const InferBenchOptions& o) {
  if (o.batches.empty()) return InvalidArgument("bench infer: give at least one batch size");
  for (uint32_t b : o.batches) {
    if (b == 0) return InvalidArgument("bench infer: a batch size of 0");
  }
  if (!(o.batch_overhead_seconds >= 0)) return InvalidArgument("bench infer: the per-batch cost must be >= 0");
  InferBenchReport rep;
  const ModelEntry model = AQ_TRY(FindModel(o.base.model, o.base.gpu, o.base.precision));
  const double ips = model.train_images_per_second * kInferenceSpeedup;
  rep.assumptions = {
      fmt::format("{} on {} in {}: {:.0f} training images/s per GPU ({})", model.model, model.gpu, model.precision,
                  model.train_images_per_second, model.source),
      fmt::format("inference (forward only) = {:.0f}x training: {:.0f} images/s per GPU at large batches",
                  kInferenceSpeedup, ips),
      fmt::format("a fixed {:.2f} ms per batch (launches, host-to-device copy): batch b takes b / {:.0f} s + {:.2f} ms",
                  1e3 * o.batch_overhead_seconds, ips, 1e3 * o.batch_overhead_seconds),
      "evaluation transform: shorter side resized, centre crop, no flip; ranks do not wait for each other"};
  for (uint32_t b : o.batches) {
    TrainBenchOptions t = o.base;
    t.inference = true;
    t.pipeline.training = false;
    t.pipeline.batch_size = b;
    t.step_seconds = static_cast<double>(b) / ips + o.batch_overhead_seconds;
    auto r = RunTrainBench(fs, t);
    if (!r.ok()) {
      // A batch this data cannot fill (larger than a GPU's share, or too
      // few steps) is an invalid argument: say so and go on with the
      // others. The model was checked above; any other failure ends the run.
      if (r.status().code() == StatusCode::kInvalidArgument) {
        rep.skipped.push_back(fmt::format("batch {}: {}", b, r.status().message()));
        continue;
      }
      return Status(r.status().code(), fmt::format("batch {}: {}", b, r.status().message()));
    }
    rep.points.push_back({b, std::move(*r)});
  }
  if (rep.points.empty()) {
    std::string why;
    for (const auto& s : rep.skipped) why += "; " + s;
    return InvalidArgument("bench infer: no batch size could run" + why);
  }
  return rep;
}

nlohmann::json ConfigJson(const InferBenchOptions& o, const InferBenchReport& r) {
  nlohmann::json c = r.points.empty() ? nlohmann::json::object() : ConfigJson(o.base, r.points.back().report);
  c["mode"] = "inference";
  c["batches"] = o.batches;
  c["batch_overhead_seconds"] = o.batch_overhead_seconds;
  c.erase("batch_size");
  c.erase("step_seconds");
  return c;
}

nlohmann::json SummaryJson(const InferBenchReport& r) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : r.points) {
    nlohmann::json s = SummaryJson(p.report);
    s.erase("gpus");
    s["batch"] = p.batch;
    s["step_seconds"] = p.report.step_seconds;
    points.push_back(std::move(s));
  }
  return {{"points", points}, {"skipped", r.skipped}, {"assumptions", r.assumptions}};
}

}  // namespace aq::bench
