#include "image/decode.h"

#include <fmt/format.h>
#include <gif_lib.h>
#include <png.h>
#include <tiffio.h>
#include <webp/decode.h>

#include <cctype>
#include <csetjmp>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "image/jpeg.h"
#include "image/orientation.h"

// stb_image for BMP only: its other decoders are not used.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MAX_DIMENSIONS (1 << 16)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wtype-limits"
#include <stb_image.h>
#pragma GCC diagnostic pop

namespace aq::image {
namespace {

bool StartsWith(std::string_view d, std::string_view magic) { return d.substr(0, magic.size()) == magic; }

Status TooLarge(std::string_view format, uint64_t w, uint64_t h, uint64_t max) {
  return Unsupported(fmt::format("{} of {}x{} pixels is larger than the limit of {} pixels", format, w, h, max));
}

// ---------------------------------------------------------------- PNG
struct PngJob {
  std::string_view data;
  size_t pos = 0;
  std::string error;
  bool too_large = false;
  uint32_t width = 0, height = 0;
  std::vector<png_bytep> rows;
  std::vector<uint8_t> wide;  // 16-bit gray rows, big-endian, before clamping
  Image* out = nullptr;
  uint64_t max_pixels = kMaxImagePixels;
};

void PngRead(png_structp png, png_bytep dst, size_t n) {
  auto* job = static_cast<PngJob*>(png_get_io_ptr(png));
  if (n > job->data.size() - job->pos) png_error(png, "the file ends early");
  std::memcpy(dst, job->data.data() + job->pos, n);
  job->pos += n;
}

[[noreturn]] void PngError(png_structp png, png_const_charp message) {
  static_cast<PngJob*>(png_get_error_ptr(png))->error = message;
  png_longjmp(png, 1);
}

// Ancillary-chunk problems (a bad ICC profile, a CRC error in a text chunk)
// leave the pixels intact; libpng discards the chunk and so do we.
void PngWarning(png_structp, png_const_charp) {}

// setjmp/longjmp: everything that outlives a jump lives in *job.
bool RunPng(PngJob* job) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job, PngError, PngWarning);
  if (png == nullptr) {
    job->error = "out of memory";
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    job->error = "out of memory";
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, job, PngRead);
  png_set_user_limits(png, 1u << 20, 1u << 20);
  png_read_info(png, info);
  png_uint_32 w = 0, h = 0;
  int depth = 0, color = 0;
  png_get_IHDR(png, info, &w, &h, &depth, &color, nullptr, nullptr, nullptr);
  job->width = w;
  job->height = h;
  if (static_cast<uint64_t>(w) * h > job->max_pixels) {
    job->too_large = true;
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  // 16-bit gray: PIL opens it as I;16 and clamps to 255 on conversion;
  // other 16-bit images: the high byte, as PIL.
  const bool gray16 = depth == 16 && color == PNG_COLOR_TYPE_GRAY;
  if (depth == 16 && !gray16) png_set_strip_16(png);
  // Alpha channels, and the alpha that expanding a tRNS chunk adds, are
  // dropped (no-op without alpha).
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int channels = png_get_channels(png, info);
  const size_t bytes_per_sample = gray16 ? 2 : 1;
  if ((channels != 1 && channels != 3) ||
      png_get_rowbytes(png, info) != static_cast<size_t>(w) * channels * bytes_per_sample) {
    png_error(png, "unexpected pixel layout after conversion");
  }
  Image& out = *job->out;
  out.width = static_cast<int>(w);
  out.height = static_cast<int>(h);
  out.channels = channels;
  out.pixels.resize(static_cast<size_t>(w) * h * channels);
  job->rows.resize(h);
  if (gray16) {
    job->wide.resize(static_cast<size_t>(w) * h * 2);
    for (png_uint_32 y = 0; y < h; ++y) job->rows[y] = job->wide.data() + static_cast<size_t>(y) * w * 2;
  } else {
    for (png_uint_32 y = 0; y < h; ++y) job->rows[y] = out.row(static_cast<int>(y));
  }
  png_read_image(png, job->rows.data());
  png_destroy_read_struct(&png, &info, nullptr);
  if (gray16) {
    for (size_t i = 0; i < out.pixels.size(); ++i) {
      const unsigned v = static_cast<unsigned>(job->wide[2 * i]) << 8 | job->wide[2 * i + 1];
      out.pixels[i] = static_cast<uint8_t>(std::min(v, 255u));
    }
  }
  return true;
}

Result<Image> DecodePng(std::string_view data, uint64_t max_pixels) {
  Image out;
  PngJob job;
  job.data = data;
  job.out = &out;
  job.max_pixels = max_pixels;
  if (RunPng(&job)) return out;
  if (job.too_large) return TooLarge("PNG", job.width, job.height, max_pixels);
  if (job.error == "the file ends early") return Truncated("PNG data ends early (the file is cut short)");
  return Corruption(fmt::format("damaged PNG: {}", job.error));
}

// ---------------------------------------------------------------- GIF
struct GifSource {
  std::string_view data;
  size_t pos = 0;
};

int GifRead(GifFileType* gif, GifByteType* dst, int n) {
  auto* src = static_cast<GifSource*>(gif->UserData);
  const size_t k = std::min(static_cast<size_t>(n), src->data.size() - src->pos);
  std::memcpy(dst, src->data.data() + src->pos, k);
  src->pos += k;
  return static_cast<int>(k);
}

struct GifCloser {
  void operator()(GifFileType* gif) const {
    int err = 0;
    DGifCloseFile(gif, &err);
  }
};

Status GifStatus(int code) {
  const char* why = GifErrorString(code);
  std::string m = why != nullptr ? why : fmt::format("giflib error {}", code);
  if (code == D_GIF_ERR_READ_FAILED) return Truncated(fmt::format("GIF data ends early ({})", m));
  return Corruption(fmt::format("damaged GIF: {}", m));
}

// The first frame on the logical screen, the rest of which takes the
// background colour.
Result<Image> DecodeGif(std::string_view data, uint64_t max_pixels) {
  GifSource src{data, 0};
  int err = 0;
  std::unique_ptr<GifFileType, GifCloser> gif(DGifOpen(&src, GifRead, &err));
  if (gif == nullptr) return GifStatus(err);
  const int sw = gif->SWidth, sh = gif->SHeight;
  while (true) {
    GifRecordType type = UNDEFINED_RECORD_TYPE;
    if (DGifGetRecordType(gif.get(), &type) == GIF_ERROR) return GifStatus(gif->Error);
    if (type == TERMINATE_RECORD_TYPE) return Corruption("damaged GIF: it holds no image");
    if (type == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* ext = nullptr;
      if (DGifGetExtension(gif.get(), &code, &ext) == GIF_ERROR) return GifStatus(gif->Error);
      while (ext != nullptr) {
        if (DGifGetExtensionNext(gif.get(), &ext) == GIF_ERROR) return GifStatus(gif->Error);
      }
      continue;
    }
    if (type != IMAGE_DESC_RECORD_TYPE) continue;
    if (DGifGetImageDesc(gif.get()) == GIF_ERROR) return GifStatus(gif->Error);
    const GifImageDesc& d = gif->Image;
    const ColorMapObject* map = d.ColorMap != nullptr ? d.ColorMap : gif->SColorMap;
    if (map == nullptr) return Corruption("damaged GIF: the first image has no colour table");
    const int w = sw > 0 ? sw : d.Width, h = sh > 0 ? sh : d.Height;
    if (w <= 0 || h <= 0 || d.Width <= 0 || d.Height <= 0) {
      return Corruption(fmt::format("damaged GIF: image of {}x{} pixels", d.Width, d.Height));
    }
    if (static_cast<uint64_t>(w) * static_cast<uint64_t>(h) > max_pixels) return TooLarge("GIF", w, h, max_pixels);
    Image out(w, h, 3);
    GifColorType bg{0, 0, 0};
    if (gif->SColorMap != nullptr && gif->SBackGroundColor < gif->SColorMap->ColorCount) {
      bg = gif->SColorMap->Colors[gif->SBackGroundColor];
    }
    for (size_t i = 0; i < out.pixels.size(); i += 3) {
      out.pixels[i] = bg.Red;
      out.pixels[i + 1] = bg.Green;
      out.pixels[i + 2] = bg.Blue;
    }
    std::vector<GifPixelType> line(static_cast<size_t>(d.Width));
    auto put = [&](int y) {
      const int oy = d.Top + y;
      if (oy < 0 || oy >= h) return;
      uint8_t* row = out.row(oy);
      for (int x = 0; x < d.Width; ++x) {
        const int ox = d.Left + x;
        if (ox < 0 || ox >= w) continue;
        const GifPixelType idx = line[static_cast<size_t>(x)];
        const GifColorType c = idx < map->ColorCount ? map->Colors[idx] : GifColorType{0, 0, 0};
        row[3 * ox] = c.Red;
        row[3 * ox + 1] = c.Green;
        row[3 * ox + 2] = c.Blue;
      }
    };
    if (d.Interlace) {
      static constexpr int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
      for (int pass = 0; pass < 4; ++pass) {
        for (int y = kStart[pass]; y < d.Height; y += kStep[pass]) {
          if (DGifGetLine(gif.get(), line.data(), d.Width) == GIF_ERROR) return GifStatus(gif->Error);
          put(y);
        }
      }
    } else {
      for (int y = 0; y < d.Height; ++y) {
        if (DGifGetLine(gif.get(), line.data(), d.Width) == GIF_ERROR) return GifStatus(gif->Error);
        put(y);
      }
    }
    return out;
  }
}

// ---------------------------------------------------------------- BMP
uint32_t Le32(std::string_view d, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(d[at + static_cast<size_t>(i)]);
  return v;
}

// stb_image reads missing bytes as zeros; the pixel array's extent is
// checked here first so a cut file is an error, not a black band.
Status CheckBmpExtent(std::string_view d) {
  if (d.size() < 30) return Truncated(fmt::format("BMP data ends early: {} bytes, shorter than its headers", d.size()));
  const uint32_t offset = Le32(d, 10), header = Le32(d, 14);
  int64_t w = 0, h = 0;
  uint32_t bits = 0, compression = 0;
  if (header == 12) {  // OS/2 BITMAPCOREHEADER
    w = static_cast<uint8_t>(d[18]) | static_cast<uint8_t>(d[19]) << 8;
    h = static_cast<uint8_t>(d[20]) | static_cast<uint8_t>(d[21]) << 8;
    bits = static_cast<uint8_t>(d[24]) | static_cast<uint8_t>(d[25]) << 8;
  } else {
    if (d.size() < 34) return Truncated("BMP data ends early, inside its headers");
    w = static_cast<int32_t>(Le32(d, 18));
    h = static_cast<int32_t>(Le32(d, 22));
    bits = static_cast<uint8_t>(d[28]) | static_cast<uint8_t>(d[29]) << 8;
    compression = Le32(d, 30);
  }
  if (compression != 0 && compression != 3 && compression != 6) {
    return Unsupported(fmt::format("BMP compression {} (embedded JPEG or PNG) is not decoded", compression));
  }
  if (w <= 0 || h == 0 || bits == 0) return Corruption(fmt::format("damaged BMP: {}x{} at {} bits", w, h, bits));
  const uint64_t row = (static_cast<uint64_t>(bits) * static_cast<uint64_t>(w) + 31) / 32 * 4;
  const uint64_t need = offset + row * static_cast<uint64_t>(h < 0 ? -h : h);
  if (need > d.size()) {
    return Truncated(fmt::format("BMP data ends early: {} bytes, its pixels need {}", d.size(), need));
  }
  return Status::Ok();
}

// RLE8 (compression 1) and RLE4 (2), which stb_image does not read: runs
// of one palette index, absolute runs (padded to 16 bits), end of line,
// end of bitmap and deltas, rows bottom-up. Pixels the data skips (a delta,
// an early end of line or bitmap) are palette index 0, as Windows and PIL
// leave them. Runs past a row's end are cut at it; data that ends before
// the end-of-bitmap mark is a cut file.
Result<Image> DecodeBmpRle(std::string_view d, uint64_t max_pixels) {
  if (d.size() < 54) return Truncated("BMP data ends early, inside its headers");
  const uint32_t offset = Le32(d, 10), header = Le32(d, 14);
  const int64_t w = static_cast<int32_t>(Le32(d, 18)), h = static_cast<int32_t>(Le32(d, 22));
  const int bits = static_cast<uint8_t>(d[28]) | static_cast<uint8_t>(d[29]) << 8;
  const uint32_t compression = Le32(d, 30);
  uint32_t colors = Le32(d, 46);
  if ((compression == 1 && bits != 8) || (compression == 2 && bits != 4) || w <= 0 || h <= 0) {
    return Corruption(
        fmt::format("damaged BMP: {}x{} at {} bits with run-length compression {}", w, h, bits, compression));
  }
  if (static_cast<uint64_t>(w) * static_cast<uint64_t>(h) > max_pixels) return TooLarge("BMP", w, h, max_pixels);
  if (colors == 0 || colors > (1u << bits)) colors = 1u << bits;
  const uint64_t palette_at = 14 + static_cast<uint64_t>(header);
  if (palette_at + 4ull * colors > d.size() || offset > d.size()) return Truncated("BMP data ends inside its palette");
  std::vector<uint8_t> index(static_cast<size_t>(w * h), 0);
  size_t p = offset;
  int64_t x = 0, y = 0;  // y counts rows from the bottom
  auto put = [&](uint8_t v) {
    if (x < w && y < h) index[static_cast<size_t>((h - 1 - y) * w + x)] = v;
    ++x;
  };
  for (bool end = false; !end;) {
    if (p + 2 > d.size()) return Truncated("BMP run-length data ends before its end-of-bitmap mark");
    const uint8_t n = static_cast<uint8_t>(d[p]), v = static_cast<uint8_t>(d[p + 1]);
    p += 2;
    if (n > 0) {
      for (int i = 0; i < n; ++i) put(bits == 8 ? v : (i % 2 == 0 ? v >> 4 : v & 0x0f));
    } else if (v == 0) {
      x = 0;
      ++y;
    } else if (v == 1) {
      end = true;
    } else if (v == 2) {
      if (p + 2 > d.size()) return Truncated("BMP run-length data ends inside a delta");
      x += static_cast<uint8_t>(d[p]);
      y += static_cast<uint8_t>(d[p + 1]);
      p += 2;
    } else {
      const size_t bytes = bits == 8 ? v : (v + 1u) / 2;
      if (p + bytes > d.size()) return Truncated("BMP run-length data ends inside an absolute run");
      for (int i = 0; i < v; ++i) {
        const auto b = static_cast<uint8_t>(d[p + static_cast<size_t>(bits == 8 ? i : i / 2)]);
        put(bits == 8 ? b : (i % 2 == 0 ? b >> 4 : b & 0x0f));
      }
      p += bytes + (bytes % 2);
    }
    if (y >= h) end = true;  // every row written: what follows is not read
  }
  Image out(static_cast<int>(w), static_cast<int>(h), 3);
  for (size_t i = 0; i < index.size(); ++i) {
    const size_t at = palette_at + 4 * std::min<size_t>(index[i], colors - 1);
    out.pixels[3 * i] = static_cast<uint8_t>(d[at + 2]);
    out.pixels[3 * i + 1] = static_cast<uint8_t>(d[at + 1]);
    out.pixels[3 * i + 2] = static_cast<uint8_t>(d[at]);
  }
  return out;
}

Result<Image> DecodeBmp(std::string_view data, uint64_t max_pixels) {
  if (data.size() >= 34 && Le32(data, 14) >= 40 && (Le32(data, 30) == 1 || Le32(data, 30) == 2)) {
    return DecodeBmpRle(data, max_pixels);
  }
  AQ_TRY(CheckBmpExtent(data));
  const auto* bytes = reinterpret_cast<const stbi_uc*>(data.data());
  const int len = static_cast<int>(std::min<size_t>(data.size(), INT32_MAX));
  int w = 0, h = 0, n = 0;
  if (stbi_info_from_memory(bytes, len, &w, &h, &n) == 0) {
    return Corruption(fmt::format("damaged BMP: {}", stbi_failure_reason()));
  }
  // stb_image's info gives a top-down BMP's height as stored (negative);
  // its loader reads such a file the right way up.
  h = h < 0 ? -h : h;
  if (static_cast<uint64_t>(w) * static_cast<uint64_t>(h) > max_pixels) return TooLarge("BMP", w, h, max_pixels);
  std::unique_ptr<stbi_uc, void (*)(void*)> px(stbi_load_from_memory(bytes, len, &w, &h, &n, 0), stbi_image_free);
  if (px == nullptr) return Corruption(fmt::format("damaged BMP: {}", stbi_failure_reason()));
  const int channels = n <= 2 ? 1 : 3;  // alpha dropped
  Image out(w, h, channels);
  const size_t count = static_cast<size_t>(w) * static_cast<size_t>(h);
  for (size_t i = 0; i < count; ++i) {
    for (int c = 0; c < channels; ++c) out.pixels[i * channels + c] = px.get()[i * n + c];
  }
  return out;
}

// ---------------------------------------------------------------- PNM
// Binary PPM (P6) and PGM (P5), any maximum value; the plain-text forms
// are refused by name.
Result<Image> DecodePnm(std::string_view data, uint64_t max_pixels) {
  if (data[1] != '5' && data[1] != '6') {
    return Unsupported(
        fmt::format("a plain-text or bitmap PNM (P{}) is not decoded (binary PPM and PGM are)", data[1]));
  }
  // The header: magic, width, height, maxval (comments allowed), one
  // whitespace byte, then the samples. stb_image reads missing samples as
  // zeros, so the extent is checked here.
  size_t p = 2;
  uint64_t fields[3] = {0, 0, 0};
  for (auto& v : fields) {
    while (p < data.size() && (std::isspace(static_cast<unsigned char>(data[p])) || data[p] == '#')) {
      if (data[p] == '#') {
        while (p < data.size() && data[p] != '\n') ++p;
      } else {
        ++p;
      }
    }
    if (p >= data.size() || !std::isdigit(static_cast<unsigned char>(data[p]))) {
      return p >= data.size() ? Truncated("PNM data ends early, inside its header")
                              : Corruption("damaged PNM: its header is not width, height and maximum value");
    }
    while (p < data.size() && std::isdigit(static_cast<unsigned char>(data[p])) && v < (1ull << 32)) {
      v = v * 10 + static_cast<uint64_t>(data[p++] - '0');
    }
  }
  const auto [w, h, maxval] = fields;
  if (w == 0 || h == 0 || maxval == 0 || maxval > 65535) {
    return Corruption(fmt::format("damaged PNM: {}x{} with maximum value {}", w, h, maxval));
  }
  if (w * h > max_pixels) return TooLarge("PNM", w, h, max_pixels);
  const uint64_t need = p + 1 + w * h * (data[1] == '6' ? 3 : 1) * (maxval > 255 ? 2 : 1);
  if (need > data.size()) {
    return Truncated(fmt::format("PNM data ends early: {} bytes, its samples need {}", data.size(), need));
  }
  // The samples, as PIL's convert("RGB") gives them: a maximum value other
  // than 255 is scaled to 0..255 (rounded), except a 16-bit PGM, which PIL
  // opens as 32-bit integers scaled to 0..65535 and clamps to 255 on
  // conversion (so most of such an image comes out white, as in PIL).
  const bool color = data[1] == '6';
  const bool wide = maxval > 255;
  const int channels = color ? 3 : 1;
  Image out(static_cast<int>(w), static_cast<int>(h), channels);
  const auto* in = reinterpret_cast<const uint8_t*>(data.data()) + p + 1;
  const size_t count = out.pixels.size();
  for (size_t i = 0; i < count; ++i) {
    const uint32_t v = wide ? (static_cast<uint32_t>(in[2 * i]) << 8 | in[2 * i + 1]) : in[i];
    const uint32_t bounded = std::min<uint32_t>(v, static_cast<uint32_t>(maxval));
    uint32_t px;
    if (maxval == 255) {
      px = v;
    } else if (wide && !color) {
      const uint64_t scaled = (static_cast<uint64_t>(bounded) * 65535 + maxval / 2) / maxval;
      px = static_cast<uint32_t>(std::min<uint64_t>(scaled, 255));
    } else {
      px = (bounded * 255 + static_cast<uint32_t>(maxval) / 2) / static_cast<uint32_t>(maxval);
    }
    out.pixels[i] = static_cast<uint8_t>(px);
  }
  return out;
}

// ---------------------------------------------------------------- WebP
Result<Image> DecodeWebp(std::string_view data, uint64_t max_pixels) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  WebPBitstreamFeatures f;
  const VP8StatusCode st = WebPGetFeatures(bytes, data.size(), &f);
  if (st == VP8_STATUS_NOT_ENOUGH_DATA) return Truncated("WebP data ends early, inside its headers");
  if (st != VP8_STATUS_OK) return Corruption(fmt::format("damaged WebP (libwebp status {})", static_cast<int>(st)));
  if (f.has_animation) return Unsupported("an animated WebP is not decoded (still WebP images are)");
  if (static_cast<uint64_t>(f.width) * static_cast<uint64_t>(f.height) > max_pixels) {
    return TooLarge("WebP", f.width, f.height, max_pixels);
  }
  Image out(f.width, f.height, 3);
  if (WebPDecodeRGBInto(bytes, data.size(), out.pixels.data(), out.pixels.size(), f.width * 3) == nullptr) {
    // The headers were whole: the image data is cut or damaged.
    const uint64_t riff = data.size() >= 8 ? Le32(data, 4) + 8ull : 0;
    if (riff > data.size()) {
      return Truncated(fmt::format("WebP data ends early: {} bytes, its RIFF header says {}", data.size(), riff));
    }
    return Corruption("damaged WebP: libwebp cannot decode its image data");
  }
  return out;
}

// ---------------------------------------------------------------- TIFF
struct TiffMemory {
  std::string_view data;
  uint64_t pos = 0;
  std::string error;
};

tmsize_t TiffRead(thandle_t h, void* buf, tmsize_t n) {
  auto* m = static_cast<TiffMemory*>(h);
  if (m->pos >= m->data.size()) return 0;
  const auto got = static_cast<tmsize_t>(std::min<uint64_t>(static_cast<uint64_t>(n), m->data.size() - m->pos));
  std::memcpy(buf, m->data.data() + m->pos, static_cast<size_t>(got));
  m->pos += static_cast<uint64_t>(got);
  return got;
}
tmsize_t TiffWrite(thandle_t, void*, tmsize_t) { return -1; }
toff_t TiffSeek(thandle_t h, toff_t off, int whence) {
  auto* m = static_cast<TiffMemory*>(h);
  const uint64_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->data.size() : 0;
  m->pos = base + off;
  return m->pos;
}
int TiffClose(thandle_t) { return 0; }
toff_t TiffSize(thandle_t h) { return static_cast<TiffMemory*>(h)->data.size(); }
int TiffMap(thandle_t, void**, toff_t*) { return 0; }
void TiffUnmap(thandle_t, void*, toff_t) {}

// Per-handle error handlers (libtiff 4.5): no global state between threads.
int TiffError(TIFF*, void* user, const char*, const char* fmt, va_list ap) {
  auto* m = static_cast<TiffMemory*>(user);
  char msg[512];
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  if (m->error.empty()) m->error = msg;
  return 1;
}
int TiffWarning(TIFF*, void*, const char*, const char*, va_list) { return 1; }  // unknown tags and the like

// The first page as PIL's Image.open + convert("RGB") gives it: 8-bit
// RGB, RGBA and gray strips are read as stored (alpha dropped, never
// multiplied in: libtiff's RGBA interface premultiplies unassociated
// alpha, PIL does not); every other photometric, bit depth and layout
// libtiff reads goes through TIFFReadRGBAImage. The Orientation tag is
// then applied, as PIL's TIFF reader applies it on open. Gray stays gray
// when the page is 8-bit gray.
Result<Image> DecodeTiff(std::string_view data, uint64_t max_pixels) {
  TiffMemory m{data, 0, {}};
  TIFFOpenOptions* opts = TIFFOpenOptionsAlloc();
  TIFFOpenOptionsSetErrorHandlerExtR(opts, TiffError, &m);
  TIFFOpenOptionsSetWarningHandlerExtR(opts, TiffWarning, &m);
  TIFF* tif =
      TIFFClientOpenExt("tiff", "rm", &m, TiffRead, TiffWrite, TiffSeek, TiffClose, TiffSize, TiffMap, TiffUnmap, opts);
  TIFFOpenOptionsFree(opts);
  auto damaged = [&](std::string_view what) -> Status {
    const std::string why = m.error.empty() ? std::string(what) : m.error;
    const bool cut = why.find("Read error") != std::string::npos || why.find("end of file") != std::string::npos ||
                     why.find("past end") != std::string::npos || why.find("Not enough data") != std::string::npos;
    return cut ? Truncated(fmt::format("TIFF data ends early ({})", why))
               : Corruption(fmt::format("damaged TIFF: {}", why));
  };
  if (tif == nullptr) return damaged("libtiff cannot open it");
  std::unique_ptr<TIFF, void (*)(TIFF*)> close(tif, TIFFClose);
  uint32_t w = 0, h = 0;
  uint16_t samples = 1, bits = 8, photometric = PHOTOMETRIC_MINISBLACK, planar = PLANARCONFIG_CONTIG;
  uint16_t orientation = ORIENTATION_TOPLEFT;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &samples);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PHOTOMETRIC, &photometric);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  TIFFGetFieldDefaulted(tif, TIFFTAG_ORIENTATION, &orientation);
  if (orientation < 1 || orientation > 8) orientation = ORIENTATION_TOPLEFT;
  if (w == 0 || h == 0) return Corruption(fmt::format("damaged TIFF: {}x{} pixels", w, h));
  if (static_cast<uint64_t>(w) * h > max_pixels) return TooLarge("TIFF", w, h, max_pixels);
  const bool gray =
      samples == 1 && bits == 8 && (photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE);
  Image out(static_cast<int>(w), static_cast<int>(h), gray ? 1 : 3);
  const bool plain_rgb = photometric == PHOTOMETRIC_RGB && bits == 8 && (samples == 3 || samples == 4) &&
                         planar == PLANARCONFIG_CONTIG && !TIFFIsTiled(tif);
  // 16-bit gray: PIL opens it as I;16 and clamps to 255 on conversion.
  const bool gray16 = photometric == PHOTOMETRIC_MINISBLACK && bits == 16 && samples == 1 && !TIFFIsTiled(tif);
  if (gray16 && static_cast<uint64_t>(TIFFScanlineSize64(tif)) == static_cast<uint64_t>(w) * 2) {
    Image g(static_cast<int>(w), static_cast<int>(h), 1);
    std::vector<uint16_t> line(w);
    for (uint32_t y = 0; y < h; ++y) {
      if (TIFFReadScanline(tif, line.data(), y, 0) < 0 || !m.error.empty()) {
        return damaged(fmt::format("libtiff cannot read row {}", y));
      }
      uint8_t* row = g.row(static_cast<int>(y));
      for (uint32_t x = 0; x < w; ++x) row[x] = static_cast<uint8_t>(std::min<unsigned>(line[x], 255u));
    }
    return orientation != ORIENTATION_TOPLEFT ? ApplyOrientation(g, orientation) : g;
  }
  if (plain_rgb && static_cast<uint64_t>(TIFFScanlineSize64(tif)) == static_cast<uint64_t>(w) * samples) {
    std::vector<uint8_t> line(static_cast<size_t>(w) * samples);
    for (uint32_t y = 0; y < h; ++y) {
      if (TIFFReadScanline(tif, line.data(), y, 0) < 0 || !m.error.empty()) {
        return damaged(fmt::format("libtiff cannot read row {}", y));
      }
      uint8_t* row = out.row(static_cast<int>(y));
      for (uint32_t x = 0; x < w; ++x) std::memcpy(row + 3 * x, line.data() + x * samples, 3);
    }
  } else {
    // Asked for in the file's own orientation, libtiff flips nothing: the
    // pixels come as stored, and the turn is applied below for every case.
    std::vector<uint32_t> raster(static_cast<size_t>(w) * h);
    if (TIFFReadRGBAImageOriented(tif, w, h, raster.data(), orientation, 0) == 0 || !m.error.empty()) {
      return damaged("libtiff cannot read its pixels");
    }
    for (size_t i = 0; i < raster.size(); ++i) {
      if (gray) {
        out.pixels[i] = static_cast<uint8_t>(TIFFGetR(raster[i]));
      } else {
        out.pixels[3 * i] = static_cast<uint8_t>(TIFFGetR(raster[i]));
        out.pixels[3 * i + 1] = static_cast<uint8_t>(TIFFGetG(raster[i]));
        out.pixels[3 * i + 2] = static_cast<uint8_t>(TIFFGetB(raster[i]));
      }
    }
  }
  if (orientation != ORIENTATION_TOPLEFT) return ApplyOrientation(out, orientation);
  return out;
}

}  // namespace

ImageFormat SniffImageFormat(std::string_view d) {
  if (StartsWith(d, "\xff\xd8")) return ImageFormat::kJpeg;
  if (StartsWith(d, "\x89PNG\r\n\x1a\n")) return ImageFormat::kPng;
  if (StartsWith(d, "GIF87a") || StartsWith(d, "GIF89a")) return ImageFormat::kGif;
  if (StartsWith(d, "BM") && d.size() >= 18) return ImageFormat::kBmp;
  if (StartsWith(d, "RIFF") && d.size() >= 12 && d.substr(8, 4) == "WEBP") return ImageFormat::kWebp;
  if (StartsWith(d, std::string_view("II*\0", 4)) || StartsWith(d, std::string_view("MM\0*", 4))) {
    return ImageFormat::kTiff;
  }
  if (d.size() >= 3 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6' && std::isspace(static_cast<unsigned char>(d[2]))) {
    return ImageFormat::kPnm;
  }
  return ImageFormat::kUnknown;
}

std::string_view ImageFormatName(ImageFormat f) {
  switch (f) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kTiff: return "TIFF";
    case ImageFormat::kPnm: return "PNM";
    case ImageFormat::kUnknown: return "unknown";
  }
  return "unknown";
}

bool IsConvertible(ImageFormat f) { return f != ImageFormat::kJpeg && f != ImageFormat::kUnknown; }

Result<Image> DecodeImage(std::string_view data, uint64_t max_pixels) {
  switch (SniffImageFormat(data)) {
    case ImageFormat::kPng: return DecodePng(data, max_pixels);
    case ImageFormat::kGif: return DecodeGif(data, max_pixels);
    case ImageFormat::kBmp: return DecodeBmp(data, max_pixels);
    case ImageFormat::kWebp: return DecodeWebp(data, max_pixels);
    case ImageFormat::kTiff: return DecodeTiff(data, max_pixels);
    case ImageFormat::kPnm: return DecodePnm(data, max_pixels);
    case ImageFormat::kJpeg: return Unsupported("a JPEG: decode it with DecodeJpeg");
    case ImageFormat::kUnknown: break;
  }
  return Unsupported("not an image in a format aquifer decodes (JPEG, PNG, GIF, BMP, WebP, TIFF, PPM/PGM)");
}

Result<ImageCheck> CheckImage(std::string_view data, bool full, uint64_t max_pixels) {
  ImageCheck c;
  c.format = SniffImageFormat(data);
  if (IsConvertible(c.format)) {
    Image img = AQ_TRY(DecodeImage(data, max_pixels));
    c.width = img.width;
    c.height = img.height;
    return c;
  }
  // JPEG, or bytes that are not an image aquifer reads: the JPEG reader's
  // error names what they look like.
  JpegInfo info = AQ_TRY(ReadJpegInfo(data));
  if (static_cast<uint64_t>(info.width) * static_cast<uint64_t>(info.height) > max_pixels) {
    return TooLarge("JPEG", info.width, info.height, max_pixels);
  }
  if (full) AQ_TRY(CheckJpeg(data));
  c.format = ImageFormat::kJpeg;
  c.width = info.width;
  c.height = info.height;
  return c;
}

Image ToRgb(Image img) {
  if (img.channels == 3) return img;
  Image rgb(img.width, img.height, 3);
  const size_t n = static_cast<size_t>(img.width) * static_cast<size_t>(img.height);
  for (size_t i = 0; i < n; ++i) rgb.pixels[3 * i] = rgb.pixels[3 * i + 1] = rgb.pixels[3 * i + 2] = img.pixels[i];
  return rgb;
}

}  // namespace aq::image
