// JPEG through libjpeg-turbo: header inspection and full decode (libjpeg
// API, shared with the region decoder), encoding (TurboJPEG API).
//
// Thread safety: all functions may be called concurrently; each thread keeps
// its own decoder and TurboJPEG handle.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "image/image.h"

namespace aq::image {

enum class JpegColorspace { kRGB, kYCbCr, kGray, kCMYK, kYCCK, kUnknown };

struct JpegInfo {
  int width = 0;
  int height = 0;
  int components = 0;  // 1, 3 or 4
  JpegColorspace colorspace = JpegColorspace::kUnknown;
  // "4:4:4", "4:2:2", "4:2:0", "4:4:0", "4:1:1", "4:1:0", "gray", or the
  // sampling factors when they fit no name ("2x2,2x1,1x1").
  std::string subsampling;
  bool progressive = false;
  bool arithmetic = false;
};

// True if data starts with a JPEG SOI marker (FF D8 FF).
bool LooksLikeJpeg(std::string_view data);

// Parses the headers up to the first scan. kCorruption if the bytes are not
// a JPEG or the header is damaged, kTruncated if the file ends without an
// end-of-image marker after its scan data, kUnsupported for what libjpeg
// cannot decode (12-bit samples, lossless); the message says why.
Result<JpegInfo> ReadJpegInfo(std::string_view data);

// Decodes the whole image to RGB (3 channels); gray and CMYK/YCCK images
// are converted. Any damage libjpeg notices on the way (a warning about the
// data) is an error. (Through RegionDecoder: see jpeg_region.h.)
Result<Image> DecodeJpeg(std::string_view data);

// Decodes the whole image and discards the pixels: ok when libjpeg reads
// every row and the end-of-image marker without an error or damage warning.
// `notice`: set to what was passed over without harm (RegionDecoder::notice).
Status CheckJpeg(std::string_view data, std::string* notice = nullptr);

struct EncodeOptions {
  int quality = 90;           // 1..100
  bool subsample_420 = true;  // 4:2:0 chroma; false = 4:4:4
  bool progressive = false;   // libjpeg's simple progression instead of one sequential scan
};
Result<std::string> EncodeJpeg(const Image& image, EncodeOptions options = {});

}  // namespace aq::image
