// Images in the formats real JPEG datasets also hold (ImageNet has a PNG
// and CMYK JPEGs named .JPEG; torchvision's ImageFolder loads WebP, TIFF
// and PPM/PGM too): recognising them by their bytes, and decoding PNG
// (libpng), GIF (giflib, first frame), BMP (stb_image; RLE8 and RLE4 here),
// WebP (libwebp, still images), TIFF (libtiff, first page) and binary
// PPM/PGM (stb_image) as PIL's Image.convert("RGB") sees them, so a
// converted image matches what a torchvision pipeline would have read:
// alpha is dropped (not composited; libtiff premultiplies a TIFF's
// unassociated alpha, PIL does not), palettes are expanded, 16-bit samples
// keep their high byte, gamma and colour profiles are ignored.
//
// Thread safety: all functions may be called concurrently.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"
#include "image/image.h"

namespace aq::image {

enum class ImageFormat { kJpeg, kPng, kGif, kBmp, kWebp, kTiff, kPnm, kUnknown };

// By the first bytes (magic numbers), never by the file name.
ImageFormat SniffImageFormat(std::string_view data);
std::string_view ImageFormatName(ImageFormat f);  // "JPEG", "PNG", ..., "unknown"

// True for the formats DecodeImage reads besides JPEG.
bool IsConvertible(ImageFormat f);

// The most pixels an image may have (the JPEG decoder's limit too): a few
// bytes of header must not make the decoder allocate gigabytes.
inline constexpr uint64_t kMaxImagePixels = 1ull << 28;

// Decodes a PNG, GIF, BMP, WebP, TIFF or PPM/PGM to 8-bit gray (1 channel,
// for gray sources) or RGB (3 channels). kCorruption or kTruncated for damaged files with the
// decoder's reason; kUnsupported for other formats (JPEG included: use
// DecodeJpeg) and for images over max_pixels.
Result<Image> DecodeImage(std::string_view data, uint64_t max_pixels = kMaxImagePixels);

// Whether an encoded image can be read, and its size: a JPEG's headers
// (full = true: every pixel too, see CheckJpeg), other formats by decoding
// them. The error says what the bytes are and what is wrong.
struct ImageCheck {
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0, height = 0;
};
Result<ImageCheck> CheckImage(std::string_view data, bool full, uint64_t max_pixels = kMaxImagePixels);

// Gray to RGB by repeating the sample (PIL's convert("RGB")); RGB as is.
Image ToRgb(Image image);

}  // namespace aq::image
