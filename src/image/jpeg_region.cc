#include "image/jpeg_region.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>

#include "image/decode.h"
#include "image/jpeg.h"
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
// The warning codes (JWRN_*).
#include <jerror.h>

namespace aq::image {

// A memory source that hands libjpeg the file in slices shorter than the
// smallest span its fast Huffman path needs (BUFSIZE = 512 bytes per block
// of an MCU, jdhuff.c), so every MCU is decoded by the path that warns of
// a bad Huffman code. With the whole file in one buffer (jpeg_mem_src)
// libjpeg-turbo takes the fast path almost everywhere, and that path reads
// a bad code as a zero without a word: damaged data decodes to garbage
// rows and the only sign left is where the scan ends. Used wherever the
// file is checked for damage; the slices cost a call per 480 bytes.
struct SliceSource {
  static constexpr size_t kSlice = 480;
  jpeg_source_mgr pub;  // first: libjpeg holds a pointer to it
  const JOCTET* data = nullptr;
  size_t size = 0;
  size_t handed = 0;      // bytes given to libjpeg so far
  bool past_end = false;  // the fake end-of-image marker was handed out
  static const JOCTET kEoi[2];

  void Attach(j_decompress_ptr c, std::string_view bytes) {
    data = reinterpret_cast<const JOCTET*>(bytes.data());
    size = bytes.size();
    handed = 0;
    past_end = false;
    pub.next_input_byte = data;
    pub.bytes_in_buffer = 0;
    pub.init_source = [](j_decompress_ptr) {};
    pub.term_source = [](j_decompress_ptr) {};
    pub.resync_to_restart = jpeg_resync_to_restart;
    pub.fill_input_buffer = [](j_decompress_ptr c) -> boolean {
      auto* s = reinterpret_cast<SliceSource*>(c->src);
      if (s->handed >= s->size) {
        // As jpeg_mem_src: warn and insert a fake end-of-image marker.
        WARNMS(c, JWRN_JPEG_EOF);
        s->past_end = true;
        s->pub.next_input_byte = kEoi;
        s->pub.bytes_in_buffer = 2;
        return TRUE;
      }
      const size_t n = std::min(kSlice, s->size - s->handed);
      s->pub.next_input_byte = s->data + s->handed;
      s->pub.bytes_in_buffer = n;
      s->handed += n;
      return TRUE;
    };
    pub.skip_input_data = [](j_decompress_ptr c, long n) {
      if (n <= 0) return;
      auto* s = reinterpret_cast<SliceSource*>(c->src);
      const size_t skip = static_cast<size_t>(n);
      if (skip <= s->pub.bytes_in_buffer) {
        s->pub.next_input_byte += skip;
        s->pub.bytes_in_buffer -= skip;
        return;
      }
      // Past this slice: move the read position and let the next read fill.
      const size_t at = std::min(s->size, s->Consumed() + skip);
      s->handed = at;
      s->pub.next_input_byte = s->data + at;
      s->pub.bytes_in_buffer = 0;
    };
    c->src = &pub;
  }
  // Bytes of the file libjpeg has read.
  size_t Consumed() const { return past_end ? size : handed - pub.bytes_in_buffer; }
  // Hands libjpeg the rest of the file at once: the fast Huffman path from
  // here on, for decodes that do not check the file.
  void Unslice() {
    if (past_end) return;
    pub.bytes_in_buffer = size - Consumed();
    handed = size;
  }
};
const JOCTET SliceSource::kEoi[2] = {0xFF, JPEG_EOI};

struct RegionDecoder::State {
  struct ErrorManager {
    jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
    // Warnings that mean the data is damaged: how many, the first one.
    int damage;
    int damage_code;
    char warning[JMSG_LENGTH_MAX];
    // Bytes between header segments that are not a marker (libjpeg skips
    // them): outside the coded data, so harmless alone.
    int extraneous;
    char notice[JMSG_LENGTH_MAX];
    // Set once the headers are read: from then on every marker follows
    // entropy-coded data, and bytes skipped before one are coded data the
    // decoder did not consume.
    bool in_scans;
  };
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  SliceSource slices;
  bool created = false;
  Image out;                  // reused across images
  Image cmyk;                 // scratch for CMYK/YCCK conversion
  std::vector<uint8_t> tail;  // the last row, read to reach the end of the data

  // A fresh libjpeg object per image: after an error libjpeg's state is not
  // guaranteed to be reusable, and Huffman/quantisation tables persist in a
  // decompressor across images (for abbreviated streams), so an image
  // without its own tables would silently decode with the previous image's.
  // Creating one costs microseconds against milliseconds of decoding.
  void Reset() {
    if (created) jpeg_destroy_decompress(&cinfo);
    cinfo = jpeg_decompress_struct{};
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = [](j_common_ptr c) {
      auto* e = reinterpret_cast<ErrorManager*>(c->err);
      (*c->err->format_message)(c, e->message);
      longjmp(e->jump, 1);
    };
    err.pub.emit_message = [](j_common_ptr c, int level) {
      if (level >= 0) return;  // trace messages
      auto* e = reinterpret_cast<ErrorManager*>(c->err);
      ++c->err->num_warnings;
      if (c->err->msg_code == JWRN_EXTRANEOUS_DATA && !e->in_scans) {
        if (e->extraneous++ == 0) (*c->err->format_message)(c, e->notice);
        return;
      }
      if (!IsDamage(c->err->msg_code)) return;
      if (e->damage++ == 0) {
        e->damage_code = c->err->msg_code;
        (*c->err->format_message)(c, e->warning);
      }
    };
    err.damage = 0;
    err.damage_code = 0;
    err.extraneous = 0;
    err.in_scans = false;
    jpeg_create_decompress(&cinfo);
    created = true;
  }

  // libjpeg warns and carries on (filling grey) where the entropy-coded
  // data is damaged; those warnings are errors here. The others are about
  // metadata (an unknown JFIF revision or Adobe transform code, a bad ICC
  // marker) and leave the pixels as the encoder meant them. Extraneous
  // bytes before a marker that follows coded data (a restart marker, the
  // next scan, the end of the image) are damage: a decoder knocked out of
  // step by damaged data finishes its blocks early and leaves the rest of
  // the scan unread, and djpeg says "Corrupt JPEG data" for it. Before the
  // first scan they lie between header segments, outside the coded data:
  // a notice (see notice()), as long as nothing else is wrong.
  static bool IsDamage(int code) {
    switch (code) {
      case JWRN_EXTRANEOUS_DATA:
      case JWRN_JPEG_EOF:
      case JWRN_HIT_MARKER:
      case JWRN_HUFF_BAD_CODE:
      case JWRN_ARITH_BAD_CODE:
      case JWRN_MUST_RESYNC:
      case JWRN_BOGUS_PROGRESSION:
      case JWRN_NOT_SEQUENTIAL: return true;
      default: return false;
    }
  }

  Status DamageStatus() const {
    if (err.damage_code == JWRN_JPEG_EOF) return Truncated(fmt::format("JPEG data ends early ({})", err.warning));
    if (err.damage_code == JWRN_EXTRANEOUS_DATA) {
      return Corruption(
          fmt::format("damaged JPEG data: coded data left over when every block was decoded ({})", err.warning));
    }
    const int all = err.damage + err.extraneous;
    return Corruption(
        fmt::format("damaged JPEG data ({}{})", err.warning, all > 1 ? fmt::format("; {} warnings in all", all) : ""));
  }

  // The error that longjmp'ed out of libjpeg, with the cause named where
  // libjpeg's own words are terse.
  Status ErrorStatus(std::string_view what) const {
    if (cinfo.data_precision != 0 && cinfo.data_precision != 8) {
      return Unsupported(
          fmt::format("{}-bit JPEG samples: only 8-bit JPEGs are decoded ({})", cinfo.data_precision, err.message));
    }
    std::string_view m(err.message);
    if (m.find("Unsupported") != std::string_view::npos) return Unsupported(fmt::format("{}: {}", what, m));
    // libjpeg ran out of data (and said so in a warning) before the error.
    if (m.find("Premature end") != std::string_view::npos || err.damage_code == JWRN_JPEG_EOF) {
      return Truncated(fmt::format("{}: the file ends inside the JPEG headers ({})", what, m));
    }
    return Corruption(fmt::format("{}: {}", what, m));
  }

  // Points libjpeg at the file, in slices (see SliceSource).
  void Source(std::string_view jpeg) { slices.Attach(&cinfo, jpeg); }
  // Bytes of the file libjpeg has read so far.
  size_t Consumed() const { return slices.Consumed(); }
  // Reads the headers up to the first scan; from here on, skipped bytes are
  // coded data (ErrorManager::in_scans).
  void ReadHeader() {
    jpeg_read_header(&cinfo, TRUE);
    err.in_scans = true;
  }

  ~State() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

RegionDecoder::RegionDecoder() : s_(std::make_unique<State>()) {}

std::string RegionDecoder::notice() const { return s_->err.extraneous > 0 ? std::string(s_->err.notice) : ""; }
RegionDecoder::~RegionDecoder() = default;

namespace {

// The not-a-JPEG error with its hints (PNG? WebP?).
Status NotJpeg(std::string_view d) {
  std::string first;
  for (size_t i = 0; i < d.size() && i < 4; ++i)
    first += fmt::format("{}{:02x}", i ? " " : "", static_cast<uint8_t>(d[i]));
  if (first.empty()) return Corruption("not a JPEG: the file is empty");
  const ImageFormat f = SniffImageFormat(d);
  if (f == ImageFormat::kJpeg) {
    return Corruption(
        fmt::format("damaged JPEG: {} bytes starting with {}, no marker after start-of-image", d.size(), first));
  }
  std::string hint = f == ImageFormat::kUnknown ? "" : fmt::format(" (a {} image)", ImageFormatName(f));
  return Corruption(fmt::format("not a JPEG: {} bytes starting with {}{}, expected ff d8 ff", d.size(), first, hint));
}

// Adobe CMYK JPEGs store inverted values: R = C * K / 255.
void CmykRowToRgb(const uint8_t* in, uint8_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    int k = in[4 * i + 3];
    out[3 * i] = static_cast<uint8_t>(in[4 * i] * k / 255);
    out[3 * i + 1] = static_cast<uint8_t>(in[4 * i + 1] * k / 255);
    out[3 * i + 2] = static_cast<uint8_t>(in[4 * i + 2] * k / 255);
  }
}

// A complete JPEG has an end-of-image marker (FF D9) after its scan data.
// Entropy-coded data cannot contain FF D9 (an FF data byte is stuffed as
// FF 00), so its absence after the first scan means the file was cut.
// Searched from the end: the marker is usually the last two bytes.
bool HasEndMarker(std::string_view jpeg, size_t scan_start) {
  for (size_t i = jpeg.size(); i >= scan_start + 2; --i) {
    if (static_cast<uint8_t>(jpeg[i - 1]) == 0xd9 && static_cast<uint8_t>(jpeg[i - 2]) == 0xff) return true;
  }
  return false;
}

std::string SubsamplingName(const jpeg_decompress_struct& c) {
  if (c.num_components == 1) return "gray";
  const jpeg_component_info* ci = c.comp_info;
  const int h0 = ci[0].h_samp_factor, v0 = ci[0].v_samp_factor;
  const int h1 = ci[1].h_samp_factor, v1 = ci[1].v_samp_factor;
  bool named =
      c.num_components >= 3 && ci[2].h_samp_factor == h1 && ci[2].v_samp_factor == v1 && h0 % h1 == 0 && v0 % v1 == 0;
  // A fourth component (K of CMYK/YCCK) must sample like the first.
  for (int i = 3; i < c.num_components; ++i) named &= ci[i].h_samp_factor == h0 && ci[i].v_samp_factor == v0;
  if (named) {
    const int hr = h0 / h1, vr = v0 / v1;
    if (hr == 1 && vr == 1) return "4:4:4";
    if (hr == 2 && vr == 1) return "4:2:2";
    if (hr == 2 && vr == 2) return "4:2:0";
    if (hr == 1 && vr == 2) return "4:4:0";
    if (hr == 4 && vr == 1) return "4:1:1";
    if (hr == 4 && vr == 2) return "4:1:0";
  }
  std::string s;
  for (int i = 0; i < c.num_components; ++i) {
    s += fmt::format("{}{}x{}", i ? "," : "", ci[i].h_samp_factor, ci[i].v_samp_factor);
  }
  return s;
}

JpegColorspace FromLibjpeg(J_COLOR_SPACE cs) {
  switch (cs) {
    case JCS_RGB: return JpegColorspace::kRGB;
    case JCS_YCbCr: return JpegColorspace::kYCbCr;
    case JCS_GRAYSCALE: return JpegColorspace::kGray;
    case JCS_CMYK: return JpegColorspace::kCMYK;
    case JCS_YCCK: return JpegColorspace::kYCCK;
    default: return JpegColorspace::kUnknown;
  }
}

}  // namespace

// setjmp/longjmp: no C++ objects with destructors may be created between
// the setjmp and a libjpeg call that can jump, in these functions.
Result<JpegInfo> RegionDecoder::ReadInfo(std::string_view jpeg) {
  if (!LooksLikeJpeg(jpeg)) return NotJpeg(jpeg);
  s_->Reset();
  auto& c = s_->cinfo;
  if (setjmp(s_->err.jump)) return s_->ErrorStatus("bad JPEG header");
  s_->Source(jpeg);
  s_->ReadHeader();
  if (s_->err.damage > 0) return s_->DamageStatus();
  if (!HasEndMarker(jpeg, s_->Consumed())) {
    return Truncated(
        fmt::format("JPEG is cut short: no end-of-image marker after the scan data ({} bytes)", jpeg.size()));
  }
  JpegInfo info;
  info.width = static_cast<int>(c.image_width);
  info.height = static_cast<int>(c.image_height);
  info.components = c.num_components;
  info.colorspace = FromLibjpeg(c.jpeg_color_space);
  info.subsampling = SubsamplingName(c);
  info.progressive = c.progressive_mode != 0;
  info.arithmetic = c.arith_code != 0;
  return info;
}

Result<DecodedRegion> RegionDecoder::Decode(std::string_view jpeg, const RegionRequest& request) {
  auto fixed = [](const JpegHeader&, void* ctx) { return *static_cast<const RegionRequest*>(ctx); };
  return Decode(jpeg, fixed, const_cast<RegionRequest*>(&request));
}

// Long by design: libjpeg reports errors by longjmp, so the decompress
// object, its setjmp frame and every call that may fail share one frame.
Result<DecodedRegion> RegionDecoder::Decode(std::string_view jpeg, RegionChooser choose, void* context) {
  if (!LooksLikeJpeg(jpeg)) return NotJpeg(jpeg);
  s_->Reset();
  auto& c = s_->cinfo;
  Image& out = s_->out;
  DecodedRegion r;
  if (setjmp(s_->err.jump)) return s_->ErrorStatus("JPEG decode failed");
  s_->Source(jpeg);
  s_->ReadHeader();
  if (!HasEndMarker(jpeg, s_->Consumed())) {
    return Truncated(
        fmt::format("JPEG is cut short: no end-of-image marker after the scan data ({} bytes)", jpeg.size()));
  }
  const int W = static_cast<int>(c.image_width), H = static_cast<int>(c.image_height);
  if (static_cast<uint64_t>(W) * static_cast<uint64_t>(H) > (1ull << 28)) {
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
  // A decode that reads to the end checks the file and keeps the slices:
  // every bad Huffman code is warned of. Others take the fast path.
  if (!req.read_to_end) s_->slices.Unslice();
  jpeg_start_decompress(&c);  // reads every scan of a progressive JPEG
  if (s_->err.damage > 0) return s_->DamageStatus();
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
      return Truncated(fmt::format("JPEG ends early: row {} of {} missing", y0 + y, oh));
    }
    if (cmyk) CmykRowToRgb(s_->cmyk.pixels.data(), out.row(y), width);
  }
  // Rows below the region are not decoded, unless asked for: then their
  // coefficients are entropy-decoded and dropped (jpeg_skip_scanlines) up
  // to the last row, which is read, since skipping to the very end would
  // stop reading. A progressive JPEG's data was all read at the start.
  if (y1 < oh && req.read_to_end && !jpeg_has_multiple_scans(&c)) {
    if (y1 < oh - 1) jpeg_skip_scanlines(&c, static_cast<JDIMENSION>(oh - 1 - y1));
    s_->tail.resize(static_cast<size_t>(width) * 4);
    JSAMPROW row = s_->tail.data();
    if (jpeg_read_scanlines(&c, &row, 1) != 1) return Truncated(fmt::format("JPEG ends early: last row missing"));
    y1 = oh;
  }
  // When every row was read, read on to the end-of-image marker so damage
  // after the last row (extraneous bytes, a missing marker) is seen too.
  if (y1 == oh) jpeg_finish_decompress(&c);
  if (s_->err.damage > 0) return s_->DamageStatus();
  r.pixels = &out;
  r.scale_denom = denom;
  r.x = sx - static_cast<double>(xoff);
  r.y = sy - y0;
  r.w = sw;
  r.h = sh;
  return r;
}

Status RegionDecoder::DecodeEntropy(std::string_view jpeg) {
  if (!LooksLikeJpeg(jpeg)) return NotJpeg(jpeg);
  s_->Reset();
  auto& c = s_->cinfo;
  if (setjmp(s_->err.jump)) return s_->ErrorStatus("JPEG decode failed");
  s_->Source(jpeg);  // kept in slices: this pass checks every code
  s_->ReadHeader();
  if (!HasEndMarker(jpeg, s_->Consumed())) {
    return Truncated(
        fmt::format("JPEG is cut short: no end-of-image marker after the scan data ({} bytes)", jpeg.size()));
  }
  // Not jpeg_read_coefficients: that keeps every block of the image in a
  // whole-image array, which costs more than decoding large images. Rows
  // skipped whole are only entropy-decoded; the last row is read (at 1/8
  // scale, a DC-only IDCT) so the decoder reaches the end-of-image marker.
  // A progressive JPEG's scans are all entropy-decoded by the start.
  c.scale_num = 1;
  c.scale_denom = 8;
  jpeg_start_decompress(&c);
  if (s_->err.damage > 0) return s_->DamageStatus();
  if (c.output_height > 1) jpeg_skip_scanlines(&c, c.output_height - 1);
  s_->tail.resize(static_cast<size_t>(c.output_width) * c.output_components);
  JSAMPROW row = s_->tail.data();
  if (jpeg_read_scanlines(&c, &row, 1) != 1) return Truncated("JPEG ends early: last row missing");
  jpeg_finish_decompress(&c);
  if (s_->err.damage > 0) return s_->DamageStatus();
  return Status::Ok();
}

Result<const Image*> RegionDecoder::DecodeFull(std::string_view jpeg, bool fast_idct) {
  RegionRequest req;
  req.x = 0;
  req.y = 0;
  req.w = 1e9;  // clamped to the image
  req.h = 1e9;
  req.allow_dct_scaling = false;
  req.fast_idct = fast_idct;
  req.read_to_end = true;  // every row is read anyway: check every code too
  auto r = AQ_TRY(Decode(jpeg, req));
  return r.pixels;
}

}  // namespace aq::image
