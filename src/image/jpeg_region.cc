#include "image/jpeg_region.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>

#include "image/jpeg.h"
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

namespace aq::image {

struct RegionDecoder::State {
  struct ErrorManager {
    jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
  };
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  Image out;   // reused across images
  Image cmyk;  // scratch for CMYK/YCCK conversion
  std::vector<JSAMPROW> rows;

  State() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = [](j_common_ptr c) {
      auto* e = reinterpret_cast<ErrorManager*>(c->err);
      (*c->err->format_message)(c, e->message);
      longjmp(e->jump, 1);
    };
    err.pub.output_message = [](j_common_ptr) {};  // warnings: counted, not printed
    jpeg_create_decompress(&cinfo);
  }
  ~State() { jpeg_destroy_decompress(&cinfo); }
};

RegionDecoder::RegionDecoder() : s_(std::make_unique<State>()) {}
RegionDecoder::~RegionDecoder() = default;

namespace {

// The not-a-JPEG error with its hints (PNG? WebP?) comes from ReadJpegInfo.
Status NotJpeg(std::string_view d) { return ReadJpegInfo(d).status(); }

// Adobe CMYK JPEGs store inverted values: R = C * K / 255.
void CmykRowToRgb(const uint8_t* in, uint8_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    int k = in[4 * i + 3];
    out[3 * i] = static_cast<uint8_t>(in[4 * i] * k / 255);
    out[3 * i + 1] = static_cast<uint8_t>(in[4 * i + 1] * k / 255);
    out[3 * i + 2] = static_cast<uint8_t>(in[4 * i + 2] * k / 255);
  }
}

}  // namespace

// setjmp/longjmp: no C++ objects with destructors may be created between
// the setjmp and a libjpeg call that can jump, in these functions.
Result<JpegHeader> RegionDecoder::ReadHeader(std::string_view jpeg) {
  if (!LooksLikeJpeg(jpeg)) return NotJpeg(jpeg);
  auto& c = s_->cinfo;
  if (setjmp(s_->err.jump)) {
    jpeg_abort_decompress(&c);
    return Corruption(fmt::format("bad JPEG header: {}", s_->err.message));
  }
  jpeg_mem_src(&c, reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size());
  jpeg_read_header(&c, TRUE);
  JpegHeader h{static_cast<int>(c.image_width), static_cast<int>(c.image_height), c.num_components};
  jpeg_abort_decompress(&c);
  return h;
}

Result<DecodedRegion> RegionDecoder::Decode(std::string_view jpeg, const RegionRequest& request) {
  auto fixed = [](const JpegHeader&, void* ctx) { return *static_cast<const RegionRequest*>(ctx); };
  return Decode(jpeg, fixed, const_cast<RegionRequest*>(&request));
}

Result<DecodedRegion> RegionDecoder::Decode(std::string_view jpeg, RegionChooser choose, void* context) {
  if (!LooksLikeJpeg(jpeg)) return NotJpeg(jpeg);
  auto& c = s_->cinfo;
  Image& out = s_->out;
  DecodedRegion r;
  if (setjmp(s_->err.jump)) {
    jpeg_abort_decompress(&c);
    return Corruption(fmt::format("JPEG decode failed: {}", s_->err.message));
  }
  jpeg_mem_src(&c, reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size());
  jpeg_read_header(&c, TRUE);
  const int W = static_cast<int>(c.image_width), H = static_cast<int>(c.image_height);
  if (static_cast<uint64_t>(W) * static_cast<uint64_t>(H) > (1ull << 28)) {
    jpeg_abort_decompress(&c);
    return Unsupported(fmt::format("JPEG of {}x{} pixels is larger than the 2^28 pixel limit", W, H));
  }
  const RegionRequest req = choose(JpegHeader{W, H, c.num_components}, context);
  // Clamp the region to the image.
  double rx = std::clamp(req.x, 0.0, static_cast<double>(W - 1));
  double ry = std::clamp(req.y, 0.0, static_cast<double>(H - 1));
  double rw = std::clamp(req.w, 1.0, W - rx);
  double rh = std::clamp(req.h, 1.0, H - ry);
  int denom = 1;
  if (req.allow_dct_scaling && req.out_w > 0 && req.out_h > 0) {
    while (denom < 8 && rw / (denom * 2) >= req.out_w && rh / (denom * 2) >= req.out_h) denom *= 2;
  }
  c.scale_num = 1;
  c.scale_denom = static_cast<unsigned>(denom);
  c.dct_method = req.fast_idct ? JDCT_IFAST : JDCT_ISLOW;
  const bool cmyk = c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
  c.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&c);
  const int ow = static_cast<int>(c.output_width), oh = static_cast<int>(c.output_height);
  // Region in scaled coordinates, widened to whole pixels.
  const double sx = rx / denom, sy = ry / denom, sw = rw / denom, sh = rh / denom;
  // Resampling taps reach up to one output pixel beyond the region; decode
  // a small margin so edge pixels match a full decode.
  const int margin = 2;
  int x0 = std::max(0, static_cast<int>(std::floor(sx)) - margin);
  int y0 = std::max(0, static_cast<int>(std::floor(sy)) - margin);
  int x1 = std::min(ow, static_cast<int>(std::ceil(sx + sw)) + margin);
  int y1 = std::min(oh, static_cast<int>(std::ceil(sy + sh)) + margin);
  JDIMENSION xoff = static_cast<JDIMENSION>(x0), cw = static_cast<JDIMENSION>(x1 - x0);
  if (cw < static_cast<JDIMENSION>(ow)) jpeg_crop_scanline(&c, &xoff, &cw);  // widens to iMCU boundaries
  const int width = static_cast<int>(cw);
  const int rows = y1 - y0;
  out.width = width;
  out.height = rows;
  out.channels = 3;
  out.pixels.resize(static_cast<size_t>(width) * rows * 3);
  if (cmyk) s_->cmyk.pixels.resize(static_cast<size_t>(width) * 4);
  if (y0 > 0) jpeg_skip_scanlines(&c, static_cast<JDIMENSION>(y0));
  for (int y = 0; y < rows; ++y) {
    JSAMPROW row = cmyk ? s_->cmyk.pixels.data() : out.row(y);
    if (jpeg_read_scanlines(&c, &row, 1) != 1) {
      jpeg_abort_decompress(&c);
      return Truncated(fmt::format("JPEG ends early: row {} of {} missing", y0 + y, oh));
    }
    if (cmyk) CmykRowToRgb(s_->cmyk.pixels.data(), out.row(y), width);
  }
  // Rows below the region are never decoded.
  jpeg_abort_decompress(&c);
  r.pixels = &out;
  r.scale_denom = denom;
  r.x = sx - static_cast<double>(xoff);
  r.y = sy - y0;
  r.w = sw;
  r.h = sh;
  return r;
}

Result<const Image*> RegionDecoder::DecodeFull(std::string_view jpeg, bool fast_idct) {
  auto h = AQ_TRY(ReadHeader(jpeg));
  RegionRequest req;
  req.w = h.width;
  req.h = h.height;
  req.allow_dct_scaling = false;
  req.fast_idct = fast_idct;
  auto r = AQ_TRY(Decode(jpeg, req));
  return r.pixels;
}

}  // namespace aq::image
