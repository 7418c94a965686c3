#include "image/decode.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "image/jpeg.h"

namespace aq::image {
namespace {

#include "image/testdata/small_images.inc"

template <size_t N>
std::string_view Bytes(const unsigned char (&a)[N]) {
  return {reinterpret_cast<const char*>(a), N};
}
template <size_t N>
std::vector<uint8_t> Pixels(const uint8_t (&a)[N]) {
  return {a, a + N};
}

// PIL encoded these; DecodeImage must see what PIL's convert("RGB") sees.
TEST(DecodeImage, MatchesPilOnEveryFormatItConverts) {
  struct Case {
    const char* name;
    std::string_view data;
    std::vector<uint8_t> rgb;
    ImageFormat format;
    const int* size;  // PIL's (width, height)
  };
  const std::vector<Case> cases = {
      {"PNG RGB", Bytes(kPngRgb), Pixels(kPngRgbRgb), ImageFormat::kPng, kPngRgbSize},
      {"PNG RGBA (alpha dropped)", Bytes(kPngRgba), Pixels(kPngRgbaRgb), ImageFormat::kPng, kPngRgbaSize},
      {"PNG palette with tRNS", Bytes(kPngPaletteTrns), Pixels(kPngPaletteTrnsRgb), ImageFormat::kPng,
       kPngPaletteTrnsSize},
      {"PNG gray", Bytes(kPngGray), Pixels(kPngGrayRgb), ImageFormat::kPng, kPngGraySize},
      {"GIF", Bytes(kGif), Pixels(kGifRgb), ImageFormat::kGif, kGifSize},
      {"BMP", Bytes(kBmp), Pixels(kBmpRgb), ImageFormat::kBmp, kBmpSize},
      {"BMP RLE8", Bytes(kBmpRle8), Pixels(kBmpRle8Rgb), ImageFormat::kBmp, kBmpRle8Size},
      {"BMP RLE4", Bytes(kBmpRle4), Pixels(kBmpRle4Rgb), ImageFormat::kBmp, kBmpRle4Size},
      {"WebP lossless", Bytes(kWebpLossless), Pixels(kWebpLosslessRgb), ImageFormat::kWebp, kWebpLosslessSize},
      {"WebP lossy", Bytes(kWebpLossy), Pixels(kWebpLossyRgb), ImageFormat::kWebp, kWebpLossySize},
      {"WebP alpha (dropped)", Bytes(kWebpAlpha), Pixels(kWebpAlphaRgb), ImageFormat::kWebp, kWebpAlphaSize},
      {"TIFF", Bytes(kTiffRaw), Pixels(kTiffRawRgb), ImageFormat::kTiff, kTiffRawSize},
      {"TIFF LZW", Bytes(kTiffLzw), Pixels(kTiffLzwRgb), ImageFormat::kTiff, kTiffLzwSize},
      {"TIFF deflate", Bytes(kTiffDeflate), Pixels(kTiffDeflateRgb), ImageFormat::kTiff, kTiffDeflateSize},
      {"TIFF gray", Bytes(kTiffGray), Pixels(kTiffGrayRgb), ImageFormat::kTiff, kTiffGraySize},
      {"PPM", Bytes(kPpm), Pixels(kPpmRgb), ImageFormat::kPnm, kPpmSize},
      {"PGM", Bytes(kPgm), Pixels(kPgmRgb), ImageFormat::kPnm, kPgmSize},
      {"PPM maxval 15 (scaled)", Bytes(kPpmMax15), Pixels(kPpmMax15Rgb), ImageFormat::kPnm, kPpmMax15Size},
      {"PPM maxval 1023 (16-bit, scaled)", Bytes(kPpmMax1023), Pixels(kPpmMax1023Rgb), ImageFormat::kPnm,
       kPpmMax1023Size},
      {"PPM maxval 65535", Bytes(kPpmMax65535), Pixels(kPpmMax65535Rgb), ImageFormat::kPnm, kPpmMax65535Size},
      {"PGM maxval 100 (scaled)", Bytes(kPgmMax100), Pixels(kPgmMax100Rgb), ImageFormat::kPnm, kPgmMax100Size},
      {"PGM maxval 1023 (clamped, as PIL)", Bytes(kPgmMax1023), Pixels(kPgmMax1023Rgb), ImageFormat::kPnm,
       kPgmMax1023Size},
      {"BMP top-down", Bytes(kBmpTopDown), Pixels(kBmpTopDownRgb), ImageFormat::kBmp, kBmpTopDownSize},
      {"TIFF RGBA (alpha dropped, not multiplied in)", Bytes(kTiffRgba), Pixels(kTiffRgbaRgb), ImageFormat::kTiff,
       kTiffRgbaSize},
      {"TIFF RGBA LZW", Bytes(kTiffRgbaLzw), Pixels(kTiffRgbaLzwRgb), ImageFormat::kTiff, kTiffRgbaLzwSize},
      {"TIFF orientation 3", Bytes(kTiffOrientation3), Pixels(kTiffOrientation3Rgb), ImageFormat::kTiff,
       kTiffOrientation3Size},
      {"TIFF orientation 6", Bytes(kTiffOrientation6), Pixels(kTiffOrientation6Rgb), ImageFormat::kTiff,
       kTiffOrientation6Size},
      {"TIFF orientation 8", Bytes(kTiffOrientation8), Pixels(kTiffOrientation8Rgb), ImageFormat::kTiff,
       kTiffOrientation8Size},
      {"TIFF gray orientation 5", Bytes(kTiffGrayOrientation5), Pixels(kTiffGrayOrientation5Rgb), ImageFormat::kTiff,
       kTiffGrayOrientation5Size},
      {"PNG gray 16-bit", Bytes(kPngGray16), Pixels(kPngGray16Rgb), ImageFormat::kPng, kPngGray16Size},
      {"TIFF gray 16-bit", Bytes(kTiffGray16), Pixels(kTiffGray16Rgb), ImageFormat::kTiff, kTiffGray16Size},
      {"TIFF LZW orientation 7", Bytes(kTiffLzwOrientation7), Pixels(kTiffLzwOrientation7Rgb), ImageFormat::kTiff,
       kTiffLzwOrientation7Size},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(SniffImageFormat(c.data), c.format) << c.name;
    auto img = DecodeImage(c.data);
    ASSERT_TRUE(img.ok()) << c.name << ": " << img.status().ToString();
    EXPECT_EQ(img->width, c.size[0]) << c.name;
    EXPECT_EQ(img->height, c.size[1]) << c.name;
    EXPECT_EQ(ToRgb(*img).pixels, c.rgb) << c.name;
    auto checked = CheckImage(c.data, true);
    ASSERT_TRUE(checked.ok()) << c.name;
    EXPECT_EQ(checked->format, c.format);
  }
  // Gray stays one channel until asked.
  for (auto gray : {Bytes(kPngGray), Bytes(kTiffGray), Bytes(kPgm)}) EXPECT_EQ(DecodeImage(gray)->channels, 1);
}

// A delta (0, 2, dx, dy) moves right and up; what it skips is palette
// index 0, as the format says. (Pillow 9 reads a delta as four bytes, so
// this case is checked against the specification, not against PIL.)
TEST(DecodeImage, BmpRunLengthDeltasSkipToIndexZero) {
  std::string bmp(Bytes(kBmpRle8).substr(0, 70));  // headers and palette of the 4x3 RLE8 image
  const std::string runs = {2, 1, 0, 2, 1, 1, 1,
                            2, 0, 0, 4, 3, 0, 1};  // row 0: 1 1; delta; row 1: . . . 2; row 2: 3 x4
  bmp += runs;
  auto img = DecodeImage(bmp);
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  auto px = [&](int x, int y) { return img->pixels[3 * static_cast<size_t>(y * 4 + x)]; };  // red channel
  // Palette: 0 (10,20,30), 1 (200,100,50), 2 (0,255,0), 3 (255,255,255); rows top-down here.
  EXPECT_EQ(px(0, 2), 200);
  EXPECT_EQ(px(1, 2), 200);
  EXPECT_EQ(px(2, 2), 10);  // skipped by the delta
  EXPECT_EQ(px(2, 1), 10);
  EXPECT_EQ(px(3, 1), 0);
  EXPECT_EQ(px(0, 0), 255);
  // Cut before the end-of-bitmap mark: a cut file, not a black band.
  EXPECT_EQ(DecodeImage(bmp.substr(0, bmp.size() - 6)).status().code(), StatusCode::kTruncated);
}

// Cut inside the pixel data. (A file missing only its end chunk or trailer
// byte still holds every pixel; PIL reads those too.)
TEST(DecodeImage, CutFilesAreErrorsNotBlackBands) {
  EXPECT_FALSE(DecodeImage(Bytes(kBmp).substr(0, sizeof(kBmp) - 1)).ok());
  for (std::string_view full : {Bytes(kPngRgb), Bytes(kGif), Bytes(kBmp), Bytes(kBmpRle8), Bytes(kWebpLossless),
                                Bytes(kWebpLossy), Bytes(kTiffRaw), Bytes(kTiffLzw), Bytes(kPpm)}) {
    for (size_t keep : {full.size() * 6 / 10, size_t{20}, size_t{8}}) {
      auto img = DecodeImage(full.substr(0, keep));
      EXPECT_FALSE(img.ok()) << ImageFormatName(SniffImageFormat(full)) << " cut to " << keep << " of " << full.size();
    }
  }
  auto png = DecodeImage(Bytes(kPngRgb).substr(0, 60));
  EXPECT_EQ(png.status().code(), StatusCode::kTruncated) << png.status().ToString();
  auto bmp = DecodeImage(Bytes(kBmp).substr(0, 70));
  EXPECT_EQ(bmp.status().code(), StatusCode::kTruncated) << bmp.status().ToString();
}

TEST(DecodeImage, DamagedBytesAreCorruption) {
  std::string png(Bytes(kPngRgb));
  png[45] = static_cast<char>(png[45] ^ 0x55);  // inside IDAT: its CRC no longer matches
  auto img = DecodeImage(png);
  ASSERT_FALSE(img.ok());
  EXPECT_NE(img.status().message().find("PNG"), std::string::npos) << img.status().ToString();
}

TEST(DecodeImage, OtherFormatsAreNamedAndRefused) {
  auto plain = DecodeImage("P3\n1 1\n255\n0 0 0\n");
  EXPECT_EQ(plain.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(plain.status().message().find("P3"), std::string::npos);
  auto webp = DecodeImage(std::string("RIFF\x10\0\0\0WEBPVP8 ", 16));
  EXPECT_FALSE(webp.ok());
  EXPECT_NE(webp.status().message().find("WebP"), std::string::npos);
  EXPECT_EQ(DecodeImage("<html>404</html>").status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(DecodeImage("").status().code(), StatusCode::kUnsupported);
  // CheckImage names what non-images look like, through the JPEG reader.
  auto html = CheckImage("<html>404</html>", false);
  ASSERT_FALSE(html.ok());
  EXPECT_NE(html.status().message().find("not a JPEG"), std::string::npos);
  EXPECT_EQ(SniffImageFormat(std::string("II*\0", 4)), ImageFormat::kTiff);
  // Found by fuzz_image_decode: a short "RIFF" prefix threw out_of_range.
  EXPECT_EQ(SniffImageFormat("RIFFT`\xff"), ImageFormat::kUnknown);
}

TEST(DecodeImage, ConvertedImagesEncodeAsJpeg) {
  auto img = DecodeImage(Bytes(kPngRgba));
  ASSERT_TRUE(img.ok());
  auto jpeg = EncodeJpeg(*img, {100, false});
  ASSERT_TRUE(jpeg.ok());
  auto back = DecodeJpeg(*jpeg);
  ASSERT_TRUE(back.ok());
  double mae = 0;
  for (size_t i = 0; i < back->pixels.size(); ++i) mae += std::abs(back->pixels[i] - img->pixels[i]);
  EXPECT_LT(mae / static_cast<double>(back->pixels.size()), 6.0);  // random pixels: the hardest case for JPEG
}

}  // namespace
}  // namespace aq::image
