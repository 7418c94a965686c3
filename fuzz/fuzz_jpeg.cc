// JPEG header parsing and decoding of arbitrary bytes through libjpeg-turbo.
#include <cstddef>
#include <cstdint>
#include <string>

#include "image/jpeg.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto info = aq::image::ReadJpegInfo(bytes);
  // Decode only modest frames so the fuzzer explores parsers, not memory.
  if (info.ok() && static_cast<uint64_t>(info->width) * info->height <= (1u << 20)) {
    (void)aq::image::DecodeJpeg(bytes);
  }
  return 0;
}
