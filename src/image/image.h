// Image: an 8-bit interleaved pixel buffer (HWC), the unit the image layer
// decodes into, resizes and encodes from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace aq::image {

struct Image {
  int width = 0;
  int height = 0;
  int channels = 3;             // 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;  // height * width * channels

  Image() = default;
  Image(int w, int h, int c) : width(w), height(h), channels(c), pixels(static_cast<size_t>(w) * h * c) {}
  uint8_t* row(int y) { return pixels.data() + static_cast<size_t>(y) * width * channels; }
  const uint8_t* row(int y) const { return pixels.data() + static_cast<size_t>(y) * width * channels; }
};

}  // namespace aq::image
