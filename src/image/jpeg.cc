#include "image/jpeg.h"

#include <fmt/format.h>
#include <turbojpeg.h>

#include <memory>

#include "image/jpeg_region.h"

namespace aq::image {
namespace {

struct TjDeleter {
  void operator()(void* h) const { tjDestroy(h); }
};
using TjHandle = std::unique_ptr<void, TjDeleter>;

tjhandle Decompressor() {
  thread_local TjHandle h(tjInitDecompress());
  return h.get();
}
tjhandle Compressor() {
  thread_local TjHandle h(tjInitCompress());
  return h.get();
}

JpegColorspace FromTj(int cs) {
  switch (cs) {
    case TJCS_RGB: return JpegColorspace::kRGB;
    case TJCS_YCbCr: return JpegColorspace::kYCbCr;
    case TJCS_GRAY: return JpegColorspace::kGray;
    case TJCS_CMYK: return JpegColorspace::kCMYK;
    case TJCS_YCCK: return JpegColorspace::kYCCK;
    default: return JpegColorspace::kUnknown;
  }
}

std::string_view SubsampName(int s) {
  switch (s) {
    case TJSAMP_444: return "4:4:4";
    case TJSAMP_422: return "4:2:2";
    case TJSAMP_420: return "4:2:0";
    case TJSAMP_GRAY: return "gray";
    case TJSAMP_440: return "4:4:0";
    case TJSAMP_411: return "4:1:1";
    default: return "unknown";
  }
}

std::string FirstBytes(std::string_view d) {
  std::string s;
  for (size_t i = 0; i < d.size() && i < 4; ++i) s += fmt::format("{}{:02x}", i ? " " : "", static_cast<uint8_t>(d[i]));
  return s.empty() ? "nothing (empty)" : s;
}

Status NotJpeg(std::string_view data) {
  std::string hint;
  if (data.substr(0, 4) == "\x89PNG") hint = " (a PNG image?)";
  if (data.substr(0, 2) == "BM") hint = " (a BMP image?)";
  if (data.substr(0, 4) == "RIFF") hint = " (a WebP image?)";
  if (data.substr(0, 3) == "GIF") hint = " (a GIF image?)";
  return Corruption(
      fmt::format("not a JPEG: {} bytes starting with {}{}, expected ff d8 ff", data.size(), FirstBytes(data), hint));
}

}  // namespace

std::string_view JpegColorspaceName(JpegColorspace cs) {
  switch (cs) {
    case JpegColorspace::kRGB: return "RGB";
    case JpegColorspace::kYCbCr: return "YCbCr";
    case JpegColorspace::kGray: return "gray";
    case JpegColorspace::kCMYK: return "CMYK";
    case JpegColorspace::kYCCK: return "YCCK";
    case JpegColorspace::kUnknown: return "unknown";
  }
  return "unknown";
}

bool LooksLikeJpeg(std::string_view d) {
  return d.size() >= 3 && static_cast<uint8_t>(d[0]) == 0xff && static_cast<uint8_t>(d[1]) == 0xd8 &&
         static_cast<uint8_t>(d[2]) == 0xff;
}

Result<JpegInfo> ReadJpegInfo(std::string_view data) {
  if (!LooksLikeJpeg(data)) return NotJpeg(data);
  tjhandle h = Decompressor();
  if (h == nullptr) return Internal("tjInitDecompress failed");
  int w = 0, hgt = 0, subsamp = 0, cs = 0;
  if (tjDecompressHeader3(h, reinterpret_cast<const unsigned char*>(data.data()), data.size(), &w, &hgt, &subsamp,
                          &cs) != 0) {
    return Corruption(fmt::format("bad JPEG header: {}", tjGetErrorStr2(h)));
  }
  if (w <= 0 || hgt <= 0) return Corruption(fmt::format("bad JPEG header: size {}x{}", w, hgt));
  JpegInfo info;
  info.width = w;
  info.height = hgt;
  info.colorspace = FromTj(cs);
  info.components = cs == TJCS_GRAY ? 1 : (cs == TJCS_CMYK || cs == TJCS_YCCK ? 4 : 3);
  info.subsampling = SubsampName(subsamp);
  return info;
}

Result<Image> DecodeJpeg(std::string_view data) {
  // One decoder implementation: the region decoder's full-image path
  // (gray and CMYK JPEGs come out RGB), one per thread, reused.
  thread_local RegionDecoder decoder;
  const Image* img = AQ_TRY(decoder.DecodeFull(data));
  return *img;
}

Result<std::string> EncodeJpeg(const Image& img, EncodeOptions opt) {
  if (img.channels != 1 && img.channels != 3) return InvalidArgument("EncodeJpeg: 1 or 3 channels only");
  if (img.width <= 0 || img.height <= 0) return InvalidArgument("EncodeJpeg: empty image");
  if (opt.quality < 1 || opt.quality > 100)
    return InvalidArgument(fmt::format("JPEG quality {} not in 1..100", opt.quality));
  tjhandle h = Compressor();
  if (h == nullptr) return Internal("tjInitCompress failed");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  int pf = img.channels == 1 ? TJPF_GRAY : TJPF_RGB;
  int samp = img.channels == 1 ? TJSAMP_GRAY : (opt.subsample_420 ? TJSAMP_420 : TJSAMP_444);
  if (tjCompress2(h, img.pixels.data(), img.width, 0, img.height, pf, &buf, &size, samp, opt.quality, 0) != 0) {
    if (buf != nullptr) tjFree(buf);
    return Internal(fmt::format("JPEG encode failed: {}", tjGetErrorStr2(h)));
  }
  std::string out(reinterpret_cast<const char*>(buf), size);
  tjFree(buf);
  return out;
}

}  // namespace aq::image
