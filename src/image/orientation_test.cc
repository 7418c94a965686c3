#include "image/orientation.h"

#include <gtest/gtest.h>

#include <string>

#include "image/jpeg.h"

namespace aq::image {
namespace {

// A JPEG with an APP1 Exif segment whose IFD0 holds the orientation, in
// either byte order, before the rest of a real JPEG.
std::string WithExif(const std::string& jpeg, int orientation, bool little_endian) {
  auto u16 = [&](int v) {
    return little_endian ? std::string{static_cast<char>(v & 0xff), static_cast<char>(v >> 8)}
                         : std::string{static_cast<char>(v >> 8), static_cast<char>(v & 0xff)};
  };
  auto u32 = [&](int v) { return little_endian ? u16(v & 0xffff) + u16(v >> 16) : u16(v >> 16) + u16(v & 0xffff); };
  std::string tiff = (little_endian ? "II" : "MM") + u16(42) + u32(8);
  tiff += u16(2);                                                   // entries
  tiff += u16(0x010f) + u16(2) + u32(4) + std::string("cam\0", 4);  // Make
  tiff += u16(0x0112) + u16(3) + u32(1) + u16(orientation) + u16(0);
  tiff += u32(0);
  const std::string body = std::string("Exif\0\0", 6) + tiff;
  const size_t len = body.size() + 2;
  std::string app1 = "\xff\xe1";
  app1 += static_cast<char>(len >> 8);
  app1 += static_cast<char>(len & 0xff);
  return jpeg.substr(0, 2) + app1 + body + jpeg.substr(2);
}

TEST(ExifOrientation, ReadInBothByteOrdersAndDefaultsToOne) {
  Image img(4, 2, 3);
  const std::string jpeg = *EncodeJpeg(img, {90});
  EXPECT_EQ(ExifOrientation(jpeg), 1);
  for (int o = 1; o <= 8; ++o) {
    EXPECT_EQ(ExifOrientation(WithExif(jpeg, o, true)), o);
    EXPECT_EQ(ExifOrientation(WithExif(jpeg, o, false)), o);
  }
  EXPECT_EQ(ExifOrientation(WithExif(jpeg, 9, true)), 1);                // out of range
  EXPECT_EQ(ExifOrientation(WithExif(jpeg, 6, true).substr(0, 20)), 1);  // cut inside the segment
  EXPECT_EQ(ExifOrientation("not a jpeg"), 1);
  EXPECT_TRUE(DecodeJpeg(WithExif(jpeg, 6, true)).ok());  // still a valid JPEG
}

// Each turn on a 3x2 image of distinct pixels, against the picture:
//   a b c      orientation 6 (rotate 90° clockwise):  d a
//   d e f                                              e b
//                                                      f c
TEST(ExifOrientation, EveryTurnAsExifTransposeDoes) {
  Image img(3, 2, 1);
  const std::string src = "abcdef";
  for (int i = 0; i < 6; ++i) img.pixels[static_cast<size_t>(i)] = static_cast<uint8_t>(src[static_cast<size_t>(i)]);
  auto text = [](const Image& m) {
    std::string s;
    for (int y = 0; y < m.height; ++y) {
      for (int x = 0; x < m.width; ++x) s += static_cast<char>(m.row(y)[x]);
      s += '/';
    }
    return s;
  };
  EXPECT_EQ(text(ApplyOrientation(img, 1)), "abc/def/");
  EXPECT_EQ(text(ApplyOrientation(img, 2)), "cba/fed/");
  EXPECT_EQ(text(ApplyOrientation(img, 3)), "fed/cba/");
  EXPECT_EQ(text(ApplyOrientation(img, 4)), "def/abc/");
  EXPECT_EQ(text(ApplyOrientation(img, 5)), "ad/be/cf/");
  EXPECT_EQ(text(ApplyOrientation(img, 6)), "da/eb/fc/");
  EXPECT_EQ(text(ApplyOrientation(img, 7)), "fc/eb/da/");
  EXPECT_EQ(text(ApplyOrientation(img, 8)), "cf/be/ad/");
}

}  // namespace
}  // namespace aq::image
