#include "image/resize.h"

#include <gtest/gtest.h>

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

TEST(Resize, RejectsEmptySizes) {
  Image img(4, 4, 3);
  EXPECT_FALSE(Resize(img, 0, 4).ok());
  EXPECT_FALSE(Resize(Image(), 4, 4).ok());
}

}  // namespace
}  // namespace aq::image
