// The pipeline's decode path on arbitrary bytes: header, crop window, DCT
// scaling and resampling, as a training worker runs them. The first bytes
// choose the crop so the fuzzer explores windows as well as JPEG syntax.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "image/jpeg_region.h"
#include "image/resize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  static aq::image::RegionDecoder decoder;  // reused, as in a worker: state must survive errors
  static aq::image::Resampler resampler;
  static aq::image::Image out;
  std::string_view jpeg(reinterpret_cast<const char*>(data + 4), size - 4);
  auto header = decoder.ReadInfo(jpeg);
  if (!header.ok()) return 0;
  if (static_cast<uint64_t>(header->width) * header->height > (1u << 22)) return 0;
  aq::image::RegionRequest req;
  req.x = header->width * (data[0] / 255.0);
  req.y = header->height * (data[1] / 255.0);
  req.w = header->width * (data[2] / 255.0) + 1;
  req.h = header->height * (data[3] / 255.0) + 1;
  req.out_w = req.out_h = 1 + data[0] % 64;
  req.fast_idct = (data[1] & 1) != 0;
  auto r = decoder.Decode(jpeg, req);
  if (!r.ok()) return 0;
  (void)resampler.Run(*r->pixels, r->x, r->y, r->w, r->h, req.out_w, req.out_h, &out);
  return 0;
}
