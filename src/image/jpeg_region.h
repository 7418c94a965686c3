// Decoding only what the output needs: a region of a JPEG, optionally
// downscaled in the DCT domain, through libjpeg-turbo's libjpeg API
// (jpeg_crop_scanline, jpeg_skip_scanlines, scale_num/scale_denom).
//
// A training crop covers on average about half of the image; decoding skips
// the IDCT and colour conversion of columns outside it, never decodes rows
// below it, and when the crop is at least 2x, 4x or 8x larger than the output
// in both directions, decodes at 1/2, 1/4 or 1/8 scale (the IDCT then
// produces fewer pixels directly).
//
// Damage is an error, never grey pixels: libjpeg's warnings about the data
// (premature end, bad Huffman codes, lost restart markers, coded data left
// over before a marker) fail the decode, and so does a file with no
// end-of-image marker after its scan data (cut short), even where the rows
// that were decoded are intact. A decode that reads to the end checks every
// Huffman code: libjpeg-turbo's fast path, which reads a bad code as a zero
// without a warning, is kept out by handing libjpeg the file in slices.
// Each image starts from a fresh libjpeg object, so nothing one image left
// behind (an error state, Huffman tables) can touch the next.
//
// Thread safety: a RegionDecoder belongs to one thread; keep one per worker
// so its buffers are reused.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "image/image.h"
#include "image/jpeg.h"

namespace aq::image {

struct RegionRequest {
  // Region of the full-resolution image, in pixels (fractional allowed).
  double x = 0, y = 0, w = 0, h = 0;
  // The region will be resampled to this size; DCT scaling keeps the decoded
  // region at least this large.
  int out_w = 0, out_h = 0;
  bool allow_dct_scaling = true;
  bool fast_idct = false;  // JDCT_IFAST: faster, slightly less accurate
  // Entropy-decode the rows below the region too and read to the end
  // marker, so damage anywhere in the file fails the decode (a progressive
  // JPEG is read whole anyway). Costs Huffman decoding of those rows.
  bool read_to_end = false;
};

struct DecodedRegion {
  const Image* pixels = nullptr;  // RGB rows covering the region (owned by the decoder)
  int scale_denom = 1;            // 1, 2, 4 or 8
  // The requested region in `pixels` coordinates.
  double x = 0, y = 0, w = 0, h = 0;
};

struct JpegHeader {
  int width = 0, height = 0, components = 0;
};

class RegionDecoder {
 public:
  RegionDecoder();
  ~RegionDecoder();
  RegionDecoder(const RegionDecoder&) = delete;
  RegionDecoder& operator=(const RegionDecoder&) = delete;

  // Reads the headers up to the first scan and checks that the file is not
  // cut short (an end-of-image marker follows the scan data).
  Result<JpegInfo> ReadInfo(std::string_view jpeg);
  // Decodes the requested region (clamped to the image). The result points
  // into this decoder and is valid until the next call.
  Result<DecodedRegion> Decode(std::string_view jpeg, const RegionRequest& request);
  // The same, with the region chosen from the header once it is read (a
  // random crop needs the image size); the header is parsed only once.
  using RegionChooser = RegionRequest (*)(const JpegHeader& header, void* context);
  Result<DecodedRegion> Decode(std::string_view jpeg, RegionChooser choose, void* context);
  // Decodes the whole image at full size, to the end-of-image marker, so
  // damage anywhere in the file is found (verify, pack, the decode-only
  // bound).
  Result<const Image*> DecodeFull(std::string_view jpeg, bool fast_idct = false);
  // Entropy-decodes every block's coefficients to the end-of-image marker
  // and stops there: no IDCT, upsampling or colour conversion. The floor
  // under any decode of a sequential JPEG's pixels at full or partial size
  // (every row above a crop's bottom must be entropy-decoded), measured by
  // the entropy-only bound.
  Status DecodeEntropy(std::string_view jpeg);

  // What the last successful decode passed over that a strict reader
  // warns about but that left every pixel decoded: bytes between header
  // segments ("Corrupt JPEG data: 3 extraneous bytes before marker 0xdb",
  // as djpeg says), or "". PIL and torchvision decode such files without a
  // word.
  std::string notice() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace aq::image
