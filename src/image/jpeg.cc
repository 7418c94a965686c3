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

// One compressor per thread, replaced after a failure so no error state
// carries over to the next image.
TjHandle& Compressor() {
  thread_local TjHandle h(tjInitCompress());
  return h;
}

RegionDecoder& ThreadDecoder() {
  thread_local RegionDecoder decoder;
  return decoder;
}

}  // namespace

bool LooksLikeJpeg(std::string_view d) {
  return d.size() >= 3 && static_cast<uint8_t>(d[0]) == 0xff && static_cast<uint8_t>(d[1]) == 0xd8 &&
         static_cast<uint8_t>(d[2]) == 0xff;
}

Result<JpegInfo> ReadJpegInfo(std::string_view data) { return ThreadDecoder().ReadInfo(data); }

Result<Image> DecodeJpeg(std::string_view data) {
  // One decoder implementation: the region decoder's full-image path
  // (gray and CMYK JPEGs come out RGB), one per thread, reused.
  const Image* img = AQ_TRY(ThreadDecoder().DecodeFull(data));
  return *img;
}

Status CheckJpeg(std::string_view data, std::string* notice) {
  RegionDecoder& d = ThreadDecoder();
  AQ_TRY(d.DecodeFull(data));
  if (notice != nullptr) *notice = d.notice();
  return Status::Ok();
}

Result<std::string> EncodeJpeg(const Image& img, EncodeOptions opt) {
  if (img.channels != 1 && img.channels != 3) return InvalidArgument("EncodeJpeg: 1 or 3 channels only");
  if (img.width <= 0 || img.height <= 0) return InvalidArgument("EncodeJpeg: empty image");
  if (opt.quality < 1 || opt.quality > 100)
    return InvalidArgument(fmt::format("JPEG quality {} not in 1..100", opt.quality));
  TjHandle& handle = Compressor();
  if (handle == nullptr) handle.reset(tjInitCompress());
  if (handle == nullptr) return Internal("tjInitCompress failed");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  int pf = img.channels == 1 ? TJPF_GRAY : TJPF_RGB;
  int samp = img.channels == 1 ? TJSAMP_GRAY : (opt.subsample_420 ? TJSAMP_420 : TJSAMP_444);
  const int flags = opt.progressive ? TJFLAG_PROGRESSIVE : 0;
  if (tjCompress2(handle.get(), img.pixels.data(), img.width, 0, img.height, pf, &buf, &size, samp, opt.quality,
                  flags) != 0) {
    if (buf != nullptr) tjFree(buf);
    Status st = Internal(fmt::format("JPEG encode failed: {}", tjGetErrorStr2(handle.get())));
    handle.reset(tjInitCompress());
    return st;
  }
  std::string out(reinterpret_cast<const char*>(buf), size);
  tjFree(buf);
  // TurboJPEG keeps the progressive scan script in the handle: the next
  // sequential encode with it comes out with bad Huffman codes (libjpeg-
  // turbo 2.1). A progressive encode leaves a fresh handle behind.
  if (opt.progressive) handle.reset(tjInitCompress());
  return out;
}

}  // namespace aq::image
