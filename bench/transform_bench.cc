// The fixed per-image work after decode: the crop's antialiased resample to
// 224x224 and the store into a batch slot (flip, normalise, layout, dtype).
// Measures each kernel on a photo-sized source; the pipeline benches measure
// them in context. Run: build/transform_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "common/random.h"
#include "image/augment.h"
#include "image/resize.h"

namespace {

aq::image::Image Photo(int w, int h) {
  aq::image::Image img;
  img.width = w;
  img.height = h;
  img.channels = 3;
  img.pixels.resize(static_cast<size_t>(w) * h * 3);
  aq::Rng rng(7);
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    // Smooth gradients plus noise: photo-like, not constant.
    img.pixels[i] = static_cast<uint8_t>((i / 3 % w + (i / 3 / w) * 2 + rng.Below(24)) & 0xff);
  }
  return img;
}

// A typical RandomResizedCrop: a box of about half the image, shrunk to 224.
void BM_ResampleCrop(benchmark::State& state) {
  const auto src = Photo(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  aq::image::Resampler r;
  // Third argument: 0 portable, 1 SSE, 2 AVX2 + FMA (levels the CPU lacks are skipped).
  const auto level = static_cast<aq::image::Resampler::Kernels>(state.range(2));
  if (level > aq::image::Resampler::BestKernels()) {
    state.SkipWithError("kernels not available on this CPU");
    return;
  }
  r.set_kernels(level);
  aq::image::Image out;
  for (auto _ : state) {
    auto s = r.Run(src, src.width * 0.1, src.height * 0.15, src.width * 0.7, src.height * 0.6, 224, 224, &out);
    benchmark::DoNotOptimize(out.pixels.data());
    if (!s.ok()) state.SkipWithError(s.message().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
// Each kernel level in the same run, for the SIMD paths' ratios.
BENCHMARK(BM_ResampleCrop)
    ->ArgsProduct({{500}, {375}, {0, 1, 2}})
    ->ArgsProduct({{250}, {188}, {0, 1, 2}})
    ->ArgsProduct({{1600}, {1200}, {0, 1, 2}});

void BM_StoreFp32Nchw(benchmark::State& state) {
  const auto img = Photo(224, 224);
  std::vector<float> slot(224 * 224 * 3);
  aq::image::StoreOptions o;
  o.portable = state.range(0) != 0;
  bool flip = false;
  for (auto _ : state) {
    aq::image::StoreSample(img, flip, o, slot.data());
    flip = !flip;
    benchmark::DoNotOptimize(slot.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StoreFp32Nchw)->Arg(0)->Arg(1);  // 1: the portable code

}  // namespace

BENCHMARK_MAIN();
