#include "image/augment.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "image/jpeg.h"
#include "image/jpeg_region.h"
#include "image/resize.h"
#include "image/synth.h"

namespace aq::image {
namespace {

TEST(RandomResizedCrop, RespectsScaleAndRatioBounds) {
  const uint64_t seed = 77;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  Rng rng(seed);
  const int W = 500, H = 375;
  int fallbacks = 0;
  double area_sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    CropBox b = RandomResizedCrop(W, H, rng);
    ASSERT_GE(b.x, 0);
    ASSERT_GE(b.y, 0);
    ASSERT_LE(b.x + b.w, W);
    ASSERT_LE(b.y + b.h, H);
    double area = b.w * b.h / (W * H), ratio = b.w / b.h;
    area_sum += area;
    if (area > 1.0 - 1e-9) {
      ++fallbacks;
      continue;
    }
    // Rounding to whole pixels moves the bounds by at most a pixel.
    EXPECT_GE(area, 0.08 - 0.01);
    EXPECT_GE(ratio, 0.75 * (1 - 0.02));
    EXPECT_LE(ratio, 4.0 / 3.0 * (1 + 0.02));
  }
  // Uniform scale in [0.08, 1] with rejection of boxes that do not fit:
  // the mean area lands a little under 0.54 (torchvision's behaviour).
  EXPECT_GT(area_sum / n, 0.40);
  EXPECT_LT(area_sum / n, 0.56);
  EXPECT_LT(fallbacks, n / 50);
}

TEST(RandomResizedCrop, FallbackIsCentredAndClamped) {
  Rng rng(1);
  RandomResizedCropParams p;
  p.attempts = 0;  // force the fallback
  CropBox wide = RandomResizedCrop(1000, 100, rng, p);
  EXPECT_NEAR(wide.w / wide.h, 4.0 / 3.0, 0.02);
  EXPECT_NEAR(wide.x, (1000 - wide.w) / 2, 1);
}

TEST(CenterCrop, MatchesTorchvisionGeometry) {
  // 500x375: Resize(256) -> 341x256, CenterCrop(224) -> left 58, top 16.
  CropBox b = CenterCropAfterResize(500, 375, 256, 224);
  EXPECT_NEAR(b.x, 58 * 500.0 / 341, 1e-9);
  EXPECT_NEAR(b.y, 16 * 375.0 / 256, 1e-9);
  EXPECT_NEAR(b.w, 224 * 500.0 / 341, 1e-9);
}

TEST(RegionDecoder, RegionEqualsCropOfFullDecode) {
  SynthParams sp;
  sp.seed = 8;
  sp.width = 240;
  sp.height = 160;
  auto jpeg = EncodeJpeg(SynthesizePhoto(sp), {90});
  ASSERT_TRUE(jpeg.ok());
  RegionDecoder d;
  auto full = d.DecodeFull(*jpeg);
  ASSERT_TRUE(full.ok());
  Image reference = **full;
  RegionRequest req;
  req.x = 37;
  req.y = 51;
  req.w = 100;
  req.h = 60;
  req.out_w = 100;
  req.out_h = 60;
  auto r = d.Decode(*jpeg, req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->scale_denom, 1);
  for (int y = 0; y < 60; ++y) {
    for (int x = 0; x < 100; ++x) {
      const uint8_t* a = r->pixels->row(static_cast<int>(r->y) + y) + 3 * (static_cast<int>(r->x) + x);
      const uint8_t* b = reference.row(51 + y) + 3 * (37 + x);
      ASSERT_EQ(std::memcmp(a, b, 3), 0) << "at " << x << "," << y;
    }
  }
}

TEST(RegionDecoder, DctScalingWhenTheCropIsMuchLarger) {
  SynthParams sp;
  sp.width = 800;
  sp.height = 600;
  auto jpeg = EncodeJpeg(SynthesizePhoto(sp), {90});
  RegionDecoder d;
  RegionRequest req;
  req.w = 800;
  req.h = 600;
  req.out_w = req.out_h = 96;  // 6x larger: 1/4 scale
  auto r = d.Decode(*jpeg, req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->scale_denom, 4);
  EXPECT_NEAR(r->w, 200, 1e-9);
  // Close to the full-resolution path after resampling.
  Resampler rs;
  Image a, b;
  ASSERT_TRUE(rs.Run(*r->pixels, r->x, r->y, r->w, r->h, 96, 96, &a).ok());
  auto full = Resize(*DecodeJpeg(*jpeg), 96, 96);
  ASSERT_TRUE(full.ok());
  double mae = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) mae += std::abs(a.pixels[i] - full->pixels[i]);
  EXPECT_LT(mae / static_cast<double>(a.pixels.size()), 3.0);
  req.allow_dct_scaling = false;
  EXPECT_EQ(d.Decode(*jpeg, req)->scale_denom, 1);
}

TEST(RegionDecoder, BadBytesAreErrorsNotCrashes) {
  RegionDecoder d;
  RegionRequest req;
  req.w = req.h = 10;
  EXPECT_FALSE(d.Decode("not a jpeg", req).ok());
  auto jpeg = EncodeJpeg(Image(64, 64, 3), {90});
  EXPECT_FALSE(d.Decode(std::string_view(*jpeg).substr(0, 40), req).ok());
  // The decoder is still usable afterwards.
  EXPECT_TRUE(d.Decode(*jpeg, req).ok());
}

// The SIMD row path equals the scalar one for every width (the 16-pixel
// blocks and the scalar tail), flipped or not, in every output type.
TEST(Store, SimdRowsEqualPortable) {
  Rng rng(3);
  for (int W : {1, 2, 15, 16, 17, 31, 32, 33, 47, 100, 224, 225}) {
    const int H = 3;
    Image img(W, H, 3);
    for (auto& v : img.pixels) v = static_cast<uint8_t>(rng.Below(256));
    for (bool flip : {false, true}) {
      for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
        for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kUint8}) {
          StoreOptions simd;
          simd.dtype = dt;
          simd.layout = layout;
          StoreOptions portable = simd;
          portable.portable = true;
          const size_t bytes = static_cast<size_t>(W) * H * 3 * DTypeSize(dt);
          std::vector<uint8_t> a(bytes), b(bytes);
          StoreSample(img, flip, simd, a.data());
          StoreSample(img, flip, portable, b.data());
          ASSERT_EQ(a, b) << "width " << W << " flip " << flip << " layout " << static_cast<int>(layout) << " dtype "
                          << static_cast<int>(dt);
          if (dt != DType::kFloat32) continue;
          // Against the formula: (pixel - mean) / std at the flipped column.
          std::vector<float> f(static_cast<size_t>(W) * H * 3);
          std::memcpy(f.data(), a.data(), bytes);
          for (int y = 0; y < H; ++y) {
            for (int x = 0; x < W; ++x) {
              for (int c = 0; c < 3; ++c) {
                const int sx = flip ? W - 1 - x : x;
                const float want = (img.row(y)[3 * sx + c] - simd.mean[c]) / simd.std[c];
                const size_t at = layout == Layout::kNCHW ? (static_cast<size_t>(c) * H + y) * W + x
                                                          : (static_cast<size_t>(y) * W + x) * 3 + c;
                ASSERT_NEAR(f[at], want, 1e-4) << "width " << W << " flip " << flip << " at " << x << "," << y;
              }
            }
          }
        }
      }
    }
  }
}

TEST(Store, LayoutsFlipAndHalfFloats) {
  Image img(2, 1, 3);
  img.pixels = {10, 20, 30, 40, 50, 60};
  StoreOptions o;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNCHW;
  uint8_t chw[6];
  StoreSample(img, false, o, chw);
  EXPECT_EQ(std::vector<uint8_t>(chw, chw + 6), (std::vector<uint8_t>{10, 40, 20, 50, 30, 60}));
  o.layout = Layout::kNHWC;
  uint8_t hwc[6];
  StoreSample(img, true, o, hwc);
  EXPECT_EQ(std::vector<uint8_t>(hwc, hwc + 6), (std::vector<uint8_t>{40, 50, 60, 10, 20, 30}));
  o.dtype = DType::kFloat16;
  uint16_t half[6];
  StoreSample(img, false, o, half);
  EXPECT_NEAR(HalfToFloat(half[0]), (10 - 0.485f * 255) / (0.229f * 255), 1e-3);
  for (float f : {0.f, 1.f, -2.5f, 65504.f, 1e-6f, 3.14159f})
    EXPECT_NEAR(HalfToFloat(FloatToHalf(f)), f, std::fabs(f) * 1e-3 + 1e-7);
}

}  // namespace
}  // namespace aq::image
