// JPEG through libjpeg-turbo: header inspection and encoding (TurboJPEG
// API), full decode (libjpeg API, shared with the region decoder).
//
// Thread safety: all functions may be called concurrently; each thread keeps
// its own TurboJPEG handles.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "image/image.h"

namespace aq::image {

enum class JpegColorspace { kRGB, kYCbCr, kGray, kCMYK, kYCCK, kUnknown };
std::string_view JpegColorspaceName(JpegColorspace cs);

struct JpegInfo {
  int width = 0;
  int height = 0;
  int components = 0;  // 1, 3 or 4
  JpegColorspace colorspace = JpegColorspace::kUnknown;
  std::string_view subsampling;  // "4:4:4", "4:2:0", ...
};

// True if data starts with a JPEG SOI marker (FF D8 FF).
bool LooksLikeJpeg(std::string_view data);

// Parses the headers up to the frame header. kCorruption if the bytes are
// not a JPEG or the header is damaged; the message says why.
Result<JpegInfo> ReadJpegInfo(std::string_view data);

// Decodes the whole image to RGB (3 channels); gray and CMYK/YCCK images
// are converted. (Through RegionDecoder: see jpeg_region.h.)
Result<Image> DecodeJpeg(std::string_view data);

struct EncodeOptions {
  int quality = 90;           // 1..100
  bool subsample_420 = true;  // 4:2:0 chroma; false = 4:4:4
};
Result<std::string> EncodeJpeg(const Image& image, EncodeOptions options = {});

}  // namespace aq::image
