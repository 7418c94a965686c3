#include "image/orientation.h"

#include <cstdint>

namespace aq::image {
namespace {

uint32_t Get(std::string_view d, size_t at, int n, bool le) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) {
    const auto b = static_cast<uint8_t>(d[at + static_cast<size_t>(le ? n - 1 - i : i)]);
    v = (v << 8) | b;
  }
  return v;
}

// The orientation in a TIFF structure (the Exif payload): IFD0's tag 0x0112.
int FromTiff(std::string_view t) {
  if (t.size() < 8) return 1;
  const bool le = t.substr(0, 2) == "II";
  if (!le && t.substr(0, 2) != "MM") return 1;
  const uint64_t ifd = Get(t, 4, 4, le);
  if (ifd + 2 > t.size()) return 1;
  const uint32_t entries = Get(t, static_cast<size_t>(ifd), 2, le);
  for (uint32_t i = 0; i < entries; ++i) {
    const uint64_t e = ifd + 2 + 12ull * i;
    if (e + 12 > t.size()) return 1;
    if (Get(t, static_cast<size_t>(e), 2, le) != 0x0112) continue;
    const uint32_t type = Get(t, static_cast<size_t>(e) + 2, 2, le);
    if (type != 3) return 1;  // SHORT
    const uint32_t v = Get(t, static_cast<size_t>(e) + 8, 2, le);
    return v >= 1 && v <= 8 ? static_cast<int>(v) : 1;
  }
  return 1;
}

}  // namespace

int ExifOrientation(std::string_view d) {
  if (d.size() < 4 || static_cast<uint8_t>(d[0]) != 0xff || static_cast<uint8_t>(d[1]) != 0xd8) return 1;
  size_t p = 2;
  while (p + 4 <= d.size()) {
    if (static_cast<uint8_t>(d[p]) != 0xff) return 1;
    const auto marker = static_cast<uint8_t>(d[p + 1]);
    if (marker == 0xff) {  // fill byte
      ++p;
      continue;
    }
    if (marker == 0xda || marker == 0xd9) return 1;  // the scan: no Exif before it
    const size_t len = Get(d, p + 2, 2, false);
    if (len < 2 || p + 2 + len > d.size()) return 1;
    const std::string_view body = d.substr(p + 4, len - 2);
    if (marker == 0xe1 && body.size() > 6 && body.substr(0, 6) == std::string_view("Exif\0\0", 6)) {
      return FromTiff(body.substr(6));
    }
    p += 2 + len;
  }
  return 1;
}

Image ApplyOrientation(const Image& in, int o) {
  if (o < 2 || o > 8) return in;
  const bool swap = o >= 5;
  const int w = in.width, h = in.height, c = in.channels;
  Image out(swap ? h : w, swap ? w : h, c);
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      // The source pixel of output (x, y).
      int sx = x, sy = y;
      switch (o) {
        case 2: sx = w - 1 - x; break;
        case 3: sx = w - 1 - x, sy = h - 1 - y; break;
        case 4: sy = h - 1 - y; break;
        case 5: sx = y, sy = x; break;
        case 6: sx = y, sy = h - 1 - x; break;
        case 7: sx = w - 1 - y, sy = h - 1 - x; break;
        case 8: sx = w - 1 - y, sy = x; break;
      }
      const uint8_t* s = in.row(sy) + static_cast<size_t>(sx) * c;
      uint8_t* t = out.row(y) + static_cast<size_t>(x) * c;
      for (int k = 0; k < c; ++k) t[k] = s[k];
    }
  }
  return out;
}

}  // namespace aq::image
