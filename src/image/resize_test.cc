#include "image/resize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "common/random.h"

namespace aq::image {
namespace {

TEST(Resize, ConstantImageStaysConstant) {
  Image img(37, 23, 3);
  std::fill(img.pixels.begin(), img.pixels.end(), 123);
  for (auto [w, h] : {std::pair{10, 7}, {111, 69}, {37, 23}, {1, 1}}) {
    auto out = Resize(img, w, h);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->width, w);
    EXPECT_EQ(out->height, h);
    for (uint8_t v : out->pixels) ASSERT_EQ(v, 123);
  }
}

TEST(Resize, DownscaleAveragesFineDetail) {
  // A 1-pixel checkerboard shrunk 4x must become flat grey (antialiasing),
  // not a moire of black and white.
  Image img(64, 64, 1);
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x) img.row(y)[x] = ((x + y) % 2) ? 255 : 0;
  auto out = Resize(img, 16, 16);
  ASSERT_TRUE(out.ok());
  for (int y = 1; y < 15; ++y)
    for (int x = 1; x < 15; ++x) EXPECT_NEAR(out->row(y)[x], 128, 8);
}

TEST(Resize, UpscaleInterpolatesMonotonically) {
  Image img(2, 1, 1);
  img.pixels = {0, 200};
  auto out = Resize(img, 8, 1);
  ASSERT_TRUE(out.ok());
  for (int x = 1; x < 8; ++x) EXPECT_GE(out->pixels[x], out->pixels[x - 1]);
  EXPECT_LT(out->pixels[0], 30);
  EXPECT_GT(out->pixels[7], 170);
}

// Each SIMD path (SSE, AVX2) and the portable one agree within one level on
// random images, boxes and sizes, edge cases included (1-pixel crops and
// outputs, boxes touching every border, very wide strips, shrinks past 31x
// whose tap counts take the long path).
TEST(Resize, SimdPathEqualsPortableWithinOneLevel) {
  using K = Resampler::Kernels;
  std::vector<K> levels;
  for (K k : {K::kSse, K::kAvx2}) {
    if (k <= Resampler::BestKernels()) levels.push_back(k);
  }
  if (levels.empty()) GTEST_SKIP() << "no SIMD kernels on this CPU (or AQUIFER_NO_SIMD=1)";
  if (levels.back() != K::kAvx2) std::cerr << "note: no AVX2 + FMA on this CPU; only the SSE kernels are checked\n";
  Rng rng(42);
  struct Case {
    int sw, sh;
    double x, y, w, h;
    int ow, oh;
  };
  std::vector<Case> cases = {{1, 1, 0, 0, 1, 1, 1, 1},
                             {1, 1, 0, 0, 1, 1, 224, 224},
                             {500, 375, 0, 0, 500, 375, 224, 224},
                             {500, 375, 499, 374, 1, 1, 224, 224},
                             {10000, 3, 0, 0, 10000, 3, 224, 224},
                             {10000, 3, 0, 0, 10000, 3, 9999, 2},
                             {3, 2000, 0, 0, 3, 2000, 1, 1},
                             {4000, 40, 0, 0, 4000, 40, 7, 5},
                             {5, 4, 0, 0, 5, 4, 9, 3},
                             {7, 5, 0.5, 0.25, 6.1, 4.5, 3, 2}};
  for (int i = 0; i < 200; ++i) {
    Case c;
    c.sw = static_cast<int>(rng.Between(1, 700));
    c.sh = static_cast<int>(rng.Between(1, 500));
    c.w = rng.Uniform(0.5, c.sw);
    c.h = rng.Uniform(0.5, c.sh);
    c.x = rng.Uniform(0, c.sw - c.w);
    c.y = rng.Uniform(0, c.sh - c.h);
    c.ow = static_cast<int>(rng.Between(1, 300));
    c.oh = static_cast<int>(rng.Between(1, 300));
    cases.push_back(c);
  }
  // RGB (the SIMD horizontal pass) and gray (the vertical pass only).
  for (const Case& c : cases) {
    for (int ch : {3, 1}) {
      Image src(c.sw, c.sh, ch);
      for (auto& v : src.pixels) v = static_cast<uint8_t>(rng.Below(256));
      Resampler portable;
      portable.set_kernels(K::kPortable);
      Image b;
      ASSERT_TRUE(portable.Run(src, c.x, c.y, c.w, c.h, c.ow, c.oh, &b).ok());
      for (K level : levels) {
        Resampler simd;
        simd.set_kernels(level);
        Image a;
        ASSERT_TRUE(simd.Run(src, c.x, c.y, c.w, c.h, c.ow, c.oh, &a).ok());
        ASSERT_EQ(a.pixels.size(), b.pixels.size());
        for (size_t i = 0; i < a.pixels.size(); ++i) {
          ASSERT_LE(std::abs(a.pixels[i] - b.pixels[i]), 1)
              << "kernels " << static_cast<int>(level) << ", " << ch << " channels: " << c.sw << "x" << c.sh << " box "
              << c.x << "," << c.y << " " << c.w << "x" << c.h << " -> " << c.ow << "x" << c.oh << " at byte " << i;
        }
        // The row sink (the pipeline's path) gives the same rows.
        Image rows(c.ow, c.oh, ch);
        ASSERT_TRUE(simd.Run(src, c.x, c.y, c.w, c.h, c.ow, c.oh,
                             [&](int y, const uint8_t* row) {
                               std::copy(row, row + static_cast<size_t>(c.ow) * ch, rows.row(y));
                             })
                        .ok());
        ASSERT_EQ(rows.pixels, a.pixels);
      }
    }
  }
}

TEST(Resize, RoundToBytesRoundsAndClamps) {
  std::vector<float> in = {-300.f, -0.6f, -0.4f,  0.f,    0.49f, 0.5f, 1.5f,  127.5f, 254.4f,
                           254.5f, 255.f, 255.4f, 255.6f, 300.f, 1e9f, -1e9f, 17.2f,  99.99f};
  std::vector<uint8_t> out(in.size());
  RoundToBytes(in.data(), out.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    int v = static_cast<int>(in[i] + 0.5f);
    v = v < 0 ? 0 : (v > 255 ? 255 : v);
    EXPECT_EQ(out[i], v) << in[i];
  }
}

TEST(Resize, RejectsEmptySizes) {
  Image img(4, 4, 3);
  EXPECT_FALSE(Resize(img, 0, 4).ok());
  EXPECT_FALSE(Resize(Image(), 4, 4).ok());
}

}  // namespace
}  // namespace aq::image
