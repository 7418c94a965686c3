#include "image/synth.h"

#include <gtest/gtest.h>

#include "image/jpeg.h"

namespace aq::image {
namespace {

TEST(Synth, DeterministicBySeed) {
  SynthParams p;
  p.seed = 11;
  p.label = 2;
  p.width = 120;
  p.height = 90;
  Image a = SynthesizePhoto(p), b = SynthesizePhoto(p);
  EXPECT_EQ(a.pixels, b.pixels);
  p.seed = 12;
  EXPECT_NE(SynthesizePhoto(p).pixels, a.pixels);
}

TEST(Synth, CompressesLikeAPhotoNotAFlatColour) {
  // At ImageNet's size and quality 95 a photograph is ~100 KB; flat colours
  // would be a few KB. The profile's parameters must land in that range.
  SynthParams p;
  p.seed = 5;
  p.grain = 16.f;
  p.detail = 2.6f;
  auto jpeg = EncodeJpeg(SynthesizePhoto(p), {95, true});
  ASSERT_TRUE(jpeg.ok());
  EXPECT_GT(jpeg->size(), 60'000u);
  EXPECT_LT(jpeg->size(), 200'000u);
}

}  // namespace
}  // namespace aq::image
