// EXIF orientation: the tag (0x0112) in a JPEG's APP1 "Exif" segment that
// says how the stored pixels are to be turned for display, and that turn.
// PIL's Image.open and torchvision ignore the tag (only
// ImageOps.exif_transpose applies it); `dataset pack --exif-orientation
// apply` applies it as exif_transpose does.
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include "image/image.h"

namespace aq::image {

// The orientation (1..8) in the first APP1 Exif segment before the first
// scan; 1 (as stored) when there is none or it is unreadable or out of range.
int ExifOrientation(std::string_view jpeg);

// The pixels turned as orientation says: 2 mirror, 3 rotate 180°, 4 flip,
// 5 transpose, 6 rotate 90° clockwise, 7 transverse, 8 rotate 90°
// counter-clockwise (PIL's exif_transpose table); 1 and others: a copy.
Image ApplyOrientation(const Image& image, int orientation);

}  // namespace aq::image
