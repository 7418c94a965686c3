// aquifer dataset synth: an ImageNet-like image folder made of synthetic
// photographs (see image/synth.h), deterministic by seed and independent of
// the thread count.
#include "image/synth.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>

#include "common/progress.h"
#include "common/random.h"
#include "common/thread_pool.h"
#include "dataset/commands.h"
#include "image/jpeg.h"

namespace aq::dataset {

Result<SizeProfile> ParseSizeProfile(std::string_view s) {
  if (s == "tiny") return SizeProfile::kTiny;
  if (s == "small") return SizeProfile::kSmall;
  if (s == "large") return SizeProfile::kLarge;
  return InvalidArgument(fmt::format("unknown size profile '{}' (expected tiny, small or large)", s));
}

namespace {

// Profile parameters, tuned so average JPEG sizes match the documents:
// ~110 KB for ImageNet-like images, ~1.3 MB for the 3x, quality-100 set.
struct Profile {
  int width, height, quality;
  bool subsample_420;
  float grain, detail;
};
constexpr Profile kTiny{160, 120, 90, true, 8.f, 1.0f};  // quick tests and training checks
constexpr Profile kSmall{500, 375, 95, true, 16.f, 2.6f};
constexpr Profile kLarge{1500, 1125, 100, false, 4.0f, 0.6f};

std::string SynsetName(uint32_t c) { return fmt::format("n{:08d}", 1000000 + c * 7919); }

}  // namespace

Result<SynthReport> Synthesize(io::FileSystem& fs, const SynthOptions& o) {
  if (o.out.empty()) return InvalidArgument("synth: an output directory is required");
  if (o.classes == 0) return InvalidArgument("synth: at least 1 class");
  if (o.images == 0) return InvalidArgument("synth: at least 1 image");
  if (o.quality < 0 || o.quality > 100) return InvalidArgument("synth: JPEG quality must be in 1..100");
  const Profile prof = o.profile == SizeProfile::kTiny ? kTiny : o.profile == SizeProfile::kSmall ? kSmall : kLarge;
  const int quality = o.quality > 0 ? o.quality : prof.quality;
  AQ_TRY(PrepareOutputDir(fs, o.out, o.overwrite));
  const uint32_t classes = static_cast<uint32_t>(std::min<uint64_t>(o.classes, o.images));
  std::string labels;
  for (uint32_t c = 0; c < classes; ++c) {
    AQ_TRY(fs.MakeDirs(io::JoinPath(o.out, SynsetName(c))));
    labels += fmt::format("{} synthetic class {}\n", SynsetName(c), c);
  }
  AQ_TRY(io::WriteFileAtomic(fs, io::JoinPath(o.out, "synset_labels.txt"), labels));

  auto t0 = std::chrono::steady_clock::now();
  Progress progress({"synth", o.images, 0, "images", o.common.progress});
  std::atomic<uint64_t> bytes{0};
  AQ_TRY(ParallelFor(o.images, o.common.threads, [&](size_t i) -> Status {
    Rng rng = Rng::Derive(o.seed, i);
    const uint32_t c = static_cast<uint32_t>(i % classes);
    // ImageNet images vary in size and shape: width +-20%, a few aspect ratios.
    static constexpr double kAspect[] = {0.75, 0.75, 0.75, 1.0, 1.333, 0.5625, 0.667};
    double aspect = kAspect[rng.Below(std::size(kAspect))];
    double area = static_cast<double>(prof.width) * prof.height * rng.Uniform(0.64, 1.44);
    image::SynthParams p;
    p.seed = rng.Next();
    p.label = c;
    p.class_seed = o.seed;
    p.width = std::max(16, static_cast<int>(std::sqrt(area / aspect)));
    p.height = std::max(16, static_cast<int>(std::sqrt(area * aspect)));
    p.grain = prof.grain;
    p.detail = prof.detail;
    image::Image img = o.learnable ? image::SynthesizeLearnable(p) : image::SynthesizePhoto(p);
    std::string jpeg = AQ_TRY(image::EncodeJpeg(img, {quality, prof.subsample_420}));
    std::string name = fmt::format("{}_{}.JPEG", SynsetName(c), i);
    std::string path = io::JoinPath(io::JoinPath(o.out, SynsetName(c)), name);
    auto f = AQ_TRY(io::CreateFresh(fs, path));
    AQ_TRY(f->Append(jpeg));
    AQ_TRY(f->Close());
    bytes += jpeg.size();
    progress.Add(1, jpeg.size());
    return Status::Ok();
  }));
  progress.Finish();
  SynthReport r;
  r.out = o.out;
  r.classes = classes;
  r.images = o.images;
  r.bytes = bytes.load();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace aq::dataset
