// The other image formats of JPEG datasets (PNG through libpng, GIF through
// giflib, BMP through stb_image and the run-length decoder, WebP through
// libwebp, TIFF through libtiff, PPM/PGM through stb_image) on arbitrary
// bytes, as pack and the pipeline decode them, the check verify runs on any
// image, and the EXIF orientation reader with the turn it asks for.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "image/decode.h"
#include "image/orientation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // Modest frames only, so the fuzzer explores parsers, not memory.
  constexpr uint64_t kMaxPixels = 1u << 20;
  auto img = aq::image::DecodeImage(bytes, kMaxPixels);
  if (img.ok()) (void)aq::image::ApplyOrientation(aq::image::ToRgb(*img), aq::image::ExifOrientation(bytes));
  (void)aq::image::CheckImage(bytes, true, kMaxPixels);
  (void)aq::image::ExifOrientation(bytes);
  return 0;
}
