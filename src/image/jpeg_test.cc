#include "image/jpeg.h"

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <utility>
#include <vector>

#include "image/jpeg_region.h"
#include "image/synth.h"
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

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

TEST(Jpeg, TruncatedHeaderIsAnError) {
  auto jpeg = EncodeJpeg(TestPhoto(), {90});
  ASSERT_TRUE(jpeg.ok());
  for (size_t cut : {3, 20, 100}) {
    auto info = ReadJpegInfo(std::string_view(*jpeg).substr(0, cut));
    EXPECT_FALSE(info.ok()) << "cut at " << cut;
  }
}

// ---- JPEGs written through libjpeg's own API, with what TurboJPEG cannot
// make: any sampling factors, restart markers, optimised Huffman tables.
struct LibjpegOptions {
  std::vector<std::pair<int, int>> sampling = {{2, 2}, {1, 1}, {1, 1}};
  bool progressive = false;
  bool optimize = false;
  int restart_rows = 0;
  int quality = 90;
};

std::string EncodeWithLibjpeg(const Image& img, const LibjpegOptions& o) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(img.width);
  c.image_height = static_cast<JDIMENSION>(img.height);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, o.quality, TRUE);
  for (size_t i = 0; i < o.sampling.size(); ++i) {
    c.comp_info[i].h_samp_factor = o.sampling[i].first;
    c.comp_info[i].v_samp_factor = o.sampling[i].second;
  }
  if (o.progressive) jpeg_simple_progression(&c);
  c.optimize_coding = o.optimize ? TRUE : FALSE;
  c.restart_in_rows = o.restart_rows;
  jpeg_start_compress(&c, TRUE);
  for (int y = 0; y < img.height; ++y) {
    JSAMPROW row = const_cast<uint8_t*>(img.row(y));
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string out(reinterpret_cast<char*>(buf), size);
  free(buf);
  return out;
}

// Removes every marker segment `marker` before the first scan.
std::string WithoutSegments(const std::string& jpeg, uint8_t marker) {
  std::string out = jpeg.substr(0, 2);
  size_t pos = 2;
  while (pos + 4 <= jpeg.size() && static_cast<uint8_t>(jpeg[pos + 1]) != 0xda) {
    const size_t len = static_cast<uint8_t>(jpeg[pos + 2]) * 256u + static_cast<uint8_t>(jpeg[pos + 3]);
    if (static_cast<uint8_t>(jpeg[pos + 1]) != marker) out += jpeg.substr(pos, 2 + len);
    pos += 2 + len;
  }
  return out + jpeg.substr(pos);
}

// Patches the frame header (SOF0/SOF2): precision, height, width.
std::string PatchFrame(std::string jpeg, int precision, int height, int width) {
  for (size_t i = 2; i + 9 < jpeg.size(); ++i) {
    const auto m = static_cast<uint8_t>(jpeg[i + 1]);
    if (static_cast<uint8_t>(jpeg[i]) == 0xff && (m == 0xc0 || m == 0xc1 || m == 0xc2)) {
      if (precision >= 0) jpeg[i + 4] = static_cast<char>(precision);
      if (height >= 0) {
        jpeg[i + 5] = static_cast<char>(height >> 8);
        jpeg[i + 6] = static_cast<char>(height & 0xff);
      }
      if (width >= 0) {
        jpeg[i + 7] = static_cast<char>(width >> 8);
        jpeg[i + 8] = static_cast<char>(width & 0xff);
      }
      return jpeg;
    }
  }
  ADD_FAILURE() << "no frame header";
  return jpeg;
}

// Renumbers the n-th restart marker so the decoder must resynchronise.
std::string BreakRestartMarker(std::string jpeg, int n) {
  int seen = 0;
  for (size_t i = 0; i + 1 < jpeg.size(); ++i) {
    const auto m = static_cast<uint8_t>(jpeg[i + 1]);
    if (static_cast<uint8_t>(jpeg[i]) == 0xff && m >= 0xd0 && m <= 0xd7 && ++seen == n) {
      jpeg[i + 1] = static_cast<char>(0xd0 + (m - 0xd0 + 4) % 8);
      return jpeg;
    }
  }
  ADD_FAILURE() << "fewer than " << n << " restart markers";
  return jpeg;
}

// The files that used to leave the per-thread decoder broken for the
// images after them, and files that must be reported as damaged.
std::vector<std::pair<std::string, std::string>> BadJpegs(const std::string& good) {
  return {
      {"12-bit precision", PatchFrame(good, 12, -1, -1)},
      {"size 0x0", PatchFrame(good, -1, 0, 0)},
      {"cut inside the header", good.substr(0, 100)},
      {"start marker then garbage", std::string("\xff\xd8\xff\x01garbage garbage garbage", 26)},
      {"start marker only", good.substr(0, 2)},
      {"cut at 60%", good.substr(0, good.size() * 6 / 10)},
      {"no end marker", good.substr(0, good.size() - 2)},
      {"a PNG", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16)},
      {"empty", ""},
  };
}

TEST(Jpeg, ABadFileLeavesNothingBehindForTheNextOnTheSameThread) {
  const Image photo = TestPhoto();
  const std::string good = EncodeWithLibjpeg(photo, {});
  auto expected = DecodeJpeg(good);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  RegionDecoder region;  // a pipeline worker's decoder, reused
  for (const auto& [what, bad] : BadJpegs(good)) {
    EXPECT_FALSE(ReadJpegInfo(bad).ok()) << what;
    EXPECT_FALSE(CheckJpeg(bad).ok()) << what;
    EXPECT_FALSE(region.DecodeFull(bad).ok()) << what;
    EXPECT_FALSE(region.DecodeEntropy(bad).ok()) << what;
    // Then valid images, several times, on this thread and decoder.
    for (int k = 0; k < 3; ++k) {
      auto info = ReadJpegInfo(good);
      ASSERT_TRUE(info.ok()) << "after " << what << ": " << info.status().ToString();
      EXPECT_EQ(info->width, photo.width);
      auto again = DecodeJpeg(good);
      ASSERT_TRUE(again.ok()) << "after " << what << ": " << again.status().ToString();
      EXPECT_EQ(again->pixels, expected->pixels) << "after " << what;
      auto full = region.DecodeFull(good);
      ASSERT_TRUE(full.ok()) << "after " << what << ": " << full.status().ToString();
      EXPECT_EQ((*full)->pixels, expected->pixels) << "after " << what;
      EXPECT_TRUE(region.DecodeEntropy(good).ok()) << "after " << what;
    }
  }
}

TEST(Jpeg, EveryDamagedFileIsNamedForWhatItIs) {
  const std::string good = EncodeWithLibjpeg(TestPhoto(), {});
  auto code = [](const Status& s) { return s.code(); };
  EXPECT_EQ(code(ReadJpegInfo(PatchFrame(good, 12, -1, -1)).status()), StatusCode::kUnsupported);
  EXPECT_NE(ReadJpegInfo(PatchFrame(good, 12, -1, -1)).status().message().find("12-bit"), std::string::npos);
  EXPECT_EQ(code(ReadJpegInfo(good.substr(0, good.size() * 6 / 10)).status()), StatusCode::kTruncated);
  EXPECT_EQ(code(CheckJpeg(good.substr(0, good.size() - 2)).status()), StatusCode::kTruncated);
  EXPECT_EQ(code(ReadJpegInfo(PatchFrame(good, -1, 0, 0)).status()), StatusCode::kCorruption);
}

TEST(Jpeg, EncodesProgressiveOnRequest) {
  EncodeOptions o;
  o.progressive = true;
  auto progressive = EncodeJpeg(TestPhoto(), o);
  auto sequential = EncodeJpeg(TestPhoto());
  ASSERT_TRUE(progressive.ok() && sequential.ok());
  EXPECT_TRUE(ReadJpegInfo(*progressive)->progressive);
  EXPECT_FALSE(ReadJpegInfo(*sequential)->progressive);
  auto a = DecodeJpeg(*progressive), b = DecodeJpeg(*sequential);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a->pixels, b->pixels) << "the same coefficients, sent in several scans";
}

TEST(Jpeg, HeaderWithoutScanDataIsCutShort) {
  for (bool progressive : {false, true}) {
    LibjpegOptions o;
    o.progressive = progressive;
    const std::string good = EncodeWithLibjpeg(TestPhoto(), o);
    // Cut right after the first scan's header.
    size_t sos = good.find("\xff\xda");
    ASSERT_NE(sos, std::string::npos);
    const size_t len = static_cast<uint8_t>(good[sos + 2]) * 256u + static_cast<uint8_t>(good[sos + 3]);
    const std::string cut = good.substr(0, sos + 2 + len);
    auto info = ReadJpegInfo(cut);
    ASSERT_FALSE(info.ok()) << "progressive " << progressive;
    EXPECT_EQ(info.status().code(), StatusCode::kTruncated);
    EXPECT_FALSE(CheckJpeg(cut).ok());
  }
}

TEST(Jpeg, TruncatedImagesNeverComeOutGrey) {
  for (bool progressive : {false, true}) {
    LibjpegOptions o;
    o.progressive = progressive;
    const std::string good = EncodeWithLibjpeg(TestPhoto(), o);
    for (size_t keep : {60u, 95u}) {
      const std::string cut = good.substr(0, good.size() * keep / 100);
      EXPECT_FALSE(DecodeJpeg(cut).ok()) << keep << "% progressive " << progressive;
      // The pipeline's path: a crop at the top, above the cut.
      RegionDecoder d;
      RegionRequest top;
      top.w = 40;
      top.h = 10;
      EXPECT_FALSE(d.Decode(cut, top).ok()) << keep << "% progressive " << progressive;
    }
  }
}

TEST(Jpeg, DamagedDataIsAnErrorNotAWarning) {
  LibjpegOptions o;
  o.restart_rows = 1;
  const std::string broken = BreakRestartMarker(EncodeWithLibjpeg(TestPhoto(), o), 3);
  auto full = CheckJpeg(broken);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.code(), StatusCode::kCorruption);
  EXPECT_NE(full.message().find("Corrupt JPEG data"), std::string::npos) << full.message();
  // A crop above the damage decodes, unless the whole file is read.
  RegionDecoder d;
  RegionRequest top;
  top.w = 40;
  top.h = 8;
  EXPECT_TRUE(d.Decode(broken, top).ok());
  top.read_to_end = true;
  auto checked = d.Decode(broken, top);
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().code(), StatusCode::kCorruption);
  // The entropy-only pass reads every block too.
  EXPECT_EQ(d.DecodeEntropy(broken).code(), StatusCode::kCorruption);
}

// Bytes between header segments that are not a marker: libjpeg skips them
// with a warning and decodes every row (PIL says nothing). They lie outside
// the coded data, so the file is kept, with a notice; beside real damage
// they are damage.
TEST(Jpeg, ExtraneousBytesBetweenHeaderSegmentsAreANoticeBesideDamageAnError) {
  const std::string clean = *EncodeJpeg(TestPhoto(), {90});
  const size_t dqt = clean.find("\xff\xdb");
  ASSERT_NE(dqt, std::string::npos);
  const std::string extra = clean.substr(0, dqt) + std::string(3, '\0') + clean.substr(dqt);
  std::string notice;
  ASSERT_TRUE(CheckJpeg(extra, &notice).ok());
  EXPECT_NE(notice.find("3 extraneous bytes before marker 0xdb"), std::string::npos) << "[" << notice << "]";
  EXPECT_EQ(DecodeJpeg(extra)->pixels, DecodeJpeg(clean)->pixels);
  ASSERT_TRUE(CheckJpeg(clean, &notice).ok());
  EXPECT_EQ(notice, "");  // nothing left over from the file before
  LibjpegOptions o;
  o.restart_rows = 1;
  const std::string broken = BreakRestartMarker(EncodeWithLibjpeg(TestPhoto(), o), 3);
  const size_t broken_dqt = broken.find("\xff\xdb");
  const std::string both = broken.substr(0, broken_dqt) + "\x12\x34" + broken.substr(broken_dqt);
  EXPECT_EQ(CheckJpeg(both).code(), StatusCode::kCorruption);
}

// Coded data left over when the decoder has every block: a decoder knocked
// out of step by damaged data finishes early and leaves the rest of the
// scan unread, and nothing else may show it. djpeg calls it "Corrupt JPEG
// data"; so does every checking path here, whatever the marker after it.
// (The bit reader looks up to 8 bytes ahead and drops what it holds at the
// end of a scan unseen, by djpeg too: 10 bytes are always seen.)
TEST(Jpeg, CodedDataLeftOverAfterTheLastBlockIsDamage) {
  const std::string clean = *EncodeJpeg(TestPhoto(), {90});
  const std::string left_over("\x12\x34\x56\x78\x9a\xbc\xde\xf0\x11\x22", 10);
  const std::string before_eoi = clean.substr(0, clean.size() - 2) + left_over + clean.substr(clean.size() - 2);
  auto full = CheckJpeg(before_eoi);
  ASSERT_EQ(full.code(), StatusCode::kCorruption) << full.ToString();
  EXPECT_NE(full.message().find("extraneous bytes before marker 0xd9"), std::string::npos) << full.message();
  RegionDecoder d;
  EXPECT_EQ(d.DecodeEntropy(before_eoi).code(), StatusCode::kCorruption);
  RegionRequest top;
  top.w = 40;
  top.h = 8;
  top.read_to_end = true;
  EXPECT_EQ(d.Decode(before_eoi, top).status().code(), StatusCode::kCorruption);
  top.read_to_end = false;  // a crop that stops above it never sees it
  EXPECT_TRUE(d.Decode(before_eoi, top).ok());
  // Before a restart marker, inside the scan.
  LibjpegOptions o;
  o.restart_rows = 1;
  const std::string rst = EncodeWithLibjpeg(TestPhoto(), o);
  const size_t r3 = rst.find("\xff\xd2");
  ASSERT_NE(r3, std::string::npos);
  const std::string before_rst = rst.substr(0, r3) + left_over + rst.substr(r3);
  EXPECT_EQ(CheckJpeg(before_rst).code(), StatusCode::kCorruption);
  // Between the scans of a progressive JPEG.
  LibjpegOptions p;
  p.progressive = true;
  const std::string prog = EncodeWithLibjpeg(TestPhoto(), p);
  const size_t second_scan = prog.find("\xff\xda", prog.find("\xff\xda") + 2);
  ASSERT_NE(second_scan, std::string::npos);
  const std::string between = prog.substr(0, second_scan) + left_over + prog.substr(second_scan);
  EXPECT_EQ(CheckJpeg(between).code(), StatusCode::kCorruption);
  EXPECT_EQ(d.Decode(between, top).status().code(), StatusCode::kCorruption);  // every scan is read up front
}

// libjpeg-turbo's fast Huffman path, taken where a whole file sits in one
// buffer, reads a bad code as a zero without a word; a checking decode
// hands the file over in slices too short for it, so the bad code is
// named where it is. Sixteen 1-bits in a row are never a valid code.
TEST(Jpeg, ABadHuffmanCodeIsNamedWhereverItIs) {
  const std::string clean = *EncodeJpeg(TestPhoto(640, 480), {90});
  const size_t sos = clean.find("\xff\xda");
  ASSERT_NE(sos, std::string::npos);
  const size_t mid = sos + (clean.size() - sos) / 2;
  std::string bad = clean;
  bad.replace(mid, 8, std::string("\xff\x00\xff\x00\xff\x00\xff\x00", 8));
  auto full = CheckJpeg(bad);
  ASSERT_EQ(full.code(), StatusCode::kCorruption) << full.ToString();
  EXPECT_NE(full.message().find("bad Huffman code"), std::string::npos) << full.message();
  RegionDecoder d;
  auto entropy = d.DecodeEntropy(bad);
  EXPECT_NE(entropy.message().find("bad Huffman code"), std::string::npos) << entropy.ToString();
  RegionRequest crop;
  crop.x = 100;
  crop.y = 100;
  crop.w = 200;
  crop.h = 150;
  crop.out_w = 50;
  crop.out_h = 50;
  crop.read_to_end = true;
  auto region = d.Decode(bad, crop);
  ASSERT_FALSE(region.ok());
  EXPECT_NE(region.status().message().find("bad Huffman code"), std::string::npos) << region.status().ToString();
  // The same decoder, straight after, decodes the clean file whole.
  EXPECT_TRUE(d.DecodeFull(clean).ok());
}

TEST(Jpeg, EverySamplingLibjpegDecodesIsAccepted) {
  const Image photo = TestPhoto(161, 119);  // not a multiple of any MCU
  struct Case {
    std::vector<std::pair<int, int>> sampling;
    std::string name;
  };
  const std::vector<Case> cases = {
      {{{1, 1}, {1, 1}, {1, 1}}, "4:4:4"},       {{{2, 1}, {1, 1}, {1, 1}}, "4:2:2"},
      {{{2, 2}, {1, 1}, {1, 1}}, "4:2:0"},       {{{1, 2}, {1, 1}, {1, 1}}, "4:4:0"},
      {{{4, 1}, {1, 1}, {1, 1}}, "4:1:1"},       {{{4, 2}, {1, 1}, {1, 1}}, "4:1:0"},
      {{{2, 2}, {2, 1}, {1, 1}}, "2x2,2x1,1x1"}, {{{2, 2}, {1, 2}, {1, 1}}, "2x2,1x2,1x1"},
      {{{1, 1}, {2, 2}, {1, 1}}, "1x1,2x2,1x1"}, {{{3, 1}, {1, 1}, {1, 1}}, "3x1,1x1,1x1"},
  };
  for (const auto& c : cases) {
    for (bool progressive : {false, true}) {
      LibjpegOptions o;
      o.sampling = c.sampling;
      o.progressive = progressive;
      const std::string jpeg = EncodeWithLibjpeg(photo, o);
      auto info = ReadJpegInfo(jpeg);
      ASSERT_TRUE(info.ok()) << c.name << ": " << info.status().ToString();
      EXPECT_EQ(info->subsampling, c.name);
      EXPECT_EQ(info->progressive, progressive);
      auto img = DecodeJpeg(jpeg);
      ASSERT_TRUE(img.ok()) << c.name << ": " << img.status().ToString();
      EXPECT_LT(MeanAbsDiff(photo, *img), 8.0) << c.name;
    }
  }
}

// libjpeg keeps Huffman tables in a decompressor between images (for
// abbreviated streams): an image without its own tables (MJPEG style) must
// get the standard ones, not the previous image's.
TEST(Jpeg, AnImageWithoutHuffmanTablesGetsTheStandardOnes) {
  const Image photo = TestPhoto();
  const std::string standard = EncodeWithLibjpeg(photo, {});  // libjpeg's default: the standard tables
  const std::string no_tables = WithoutSegments(standard, 0xc4);
  ASSERT_LT(no_tables.size(), standard.size());
  LibjpegOptions optimized;
  optimized.optimize = true;  // custom tables
  const std::string custom = EncodeWithLibjpeg(photo, optimized);
  auto expected = DecodeJpeg(standard);
  ASSERT_TRUE(expected.ok());
  ASSERT_TRUE(DecodeJpeg(custom).ok());
  auto after_custom = DecodeJpeg(no_tables);
  ASSERT_TRUE(after_custom.ok()) << after_custom.status().ToString();
  EXPECT_EQ(after_custom->pixels, expected->pixels);
}

TEST(Jpeg, EncodeRejectsBadArguments) {
  EXPECT_FALSE(EncodeJpeg(Image(), {90}).ok());
  EXPECT_FALSE(EncodeJpeg(TestPhoto(), {0}).ok());
  EXPECT_FALSE(EncodeJpeg(Image(4, 4, 2), {90}).ok());
}

}  // namespace
}  // namespace aq::image
