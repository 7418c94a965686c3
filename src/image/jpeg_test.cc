#include "image/jpeg.h"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cmath>

#include "image/synth.h"

namespace aq::image {
namespace {

Image TestPhoto(int w = 160, int h = 120) {
  SynthParams p;
  p.seed = 3;
  p.width = w;
  p.height = h;
  return SynthesizePhoto(p);
}

double MeanAbsDiff(const Image& a, const Image& b) {
  double s = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) s += std::abs(a.pixels[i] - b.pixels[i]);
  return s / static_cast<double>(a.pixels.size());
}

TEST(Jpeg, EncodeDecodeRoundTrip) {
  Image img = TestPhoto();
  auto jpeg = EncodeJpeg(img, {95, false});
  ASSERT_TRUE(jpeg.ok());
  auto info = ReadJpegInfo(*jpeg);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->width, 160);
  EXPECT_EQ(info->height, 120);
  EXPECT_EQ(info->components, 3);
  EXPECT_EQ(info->subsampling, "4:4:4");
  auto back = DecodeJpeg(*jpeg);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->pixels.size(), img.pixels.size());
  EXPECT_LT(MeanAbsDiff(img, *back), 4.0);
}

TEST(Jpeg, GrayImages) {
  Image g(64, 48, 1);
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 64; ++x) g.row(y)[x] = static_cast<uint8_t>(x * 4);
  auto jpeg = EncodeJpeg(g, {90});
  ASSERT_TRUE(jpeg.ok());
  auto info = ReadJpegInfo(*jpeg);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->components, 1);
  EXPECT_EQ(info->colorspace, JpegColorspace::kGray);
  auto rgb = DecodeJpeg(*jpeg);  // gray decodes to RGB by default
  ASSERT_TRUE(rgb.ok());
  EXPECT_EQ(rgb->channels, 3);
}

TEST(Jpeg, CmykImagesDecodeToRgb) {
  // TurboJPEG writes a CMYK JPEG from CMYK pixels.
  const int w = 32, h = 16;
  std::vector<uint8_t> cmyk(w * h * 4, 255);  // inverted (Adobe) CMYK white
  tjhandle c = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(c, cmyk.data(), w, 0, h, TJPF_CMYK, &buf, &size, TJSAMP_444, 95, 0), 0);
  std::string jpeg(reinterpret_cast<char*>(buf), size);
  tjFree(buf);
  tjDestroy(c);
  auto info = ReadJpegInfo(jpeg);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->components, 4);
  auto img = DecodeJpeg(jpeg);
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  EXPECT_EQ(img->channels, 3);
  EXPECT_GT(img->pixels[0], 240);
}

TEST(Jpeg, NonJpegBytesAreAClearError) {
  auto png = ReadJpegInfo(std::string("\x89PNG\r\n\x1a\n....", 12));
  ASSERT_FALSE(png.ok());
  EXPECT_EQ(png.status().code(), StatusCode::kCorruption);
  EXPECT_NE(png.status().message().find("not a JPEG"), std::string::npos);
  EXPECT_NE(png.status().message().find("PNG"), std::string::npos);
  EXPECT_FALSE(ReadJpegInfo("").ok());
  EXPECT_FALSE(DecodeJpeg("hello world").ok());
}

TEST(Jpeg, TruncatedHeaderIsCorruption) {
  auto jpeg = EncodeJpeg(TestPhoto(), {90});
  ASSERT_TRUE(jpeg.ok());
  for (size_t cut : {3, 20, 100}) {
    auto info = ReadJpegInfo(std::string_view(*jpeg).substr(0, cut));
    EXPECT_FALSE(info.ok()) << "cut at " << cut;
  }
}

TEST(Jpeg, EncodeRejectsBadArguments) {
  EXPECT_FALSE(EncodeJpeg(Image(), {90}).ok());
  EXPECT_FALSE(EncodeJpeg(TestPhoto(), {0}).ok());
  EXPECT_FALSE(EncodeJpeg(Image(4, 4, 2), {90}).ok());
}

}  // namespace
}  // namespace aq::image
