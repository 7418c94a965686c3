// Resampling with an antialiased triangle (bilinear) filter whose support
// widens when shrinking, as PIL's BILINEAR and torchvision's antialiased
// resize do. Separable: a horizontal pass into a float row buffer, then a
// vertical pass.
//
// Thread safety: pure function.
#pragma once

#include "common/status.h"
#include "image/image.h"

namespace aq::image {

// REQUIRES: out_width, out_height > 0.
Result<Image> Resize(const Image& src, int out_width, int out_height);

}  // namespace aq::image
