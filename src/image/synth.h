// Synthetic photographs: procedurally generated RGB images whose JPEGs
// compress like real photos (smooth gradients, multi-scale texture, hard
// edges and sensor grain), so that file sizes, decode cost and entropy are
// close to ImageNet's. Each class has its own palette and texture scale, so
// images are genuinely labelled.
//
// Thread safety: pure function of its arguments.
#pragma once

#include <cstdint>

#include "image/image.h"

namespace aq::image {

struct SynthParams {
  uint64_t seed = 0;   // per image
  uint32_t label = 0;  // class: picks palette and texture
  uint64_t class_seed = 0;
  int width = 500;
  int height = 375;
  float grain = 6.0f;   // per-pixel noise amplitude (0..255 scale)
  float detail = 1.0f;  // weight of fine texture octaves
};

Image SynthesizePhoto(const SynthParams& params);

// An image a small network can learn to classify, for end-to-end checks of
// labels, crops and normalisation: one object per image whose shape family
// (label % 10: disc, square, triangle, cross, ring, diamond, bars, checks,
// star, crescent) and hue (classes spread around the colour wheel by the
// golden ratio, jittered a little) identify the class, at a random position, scale and
// rotation, over a background, texture and noise that carry no class
// information.
Image SynthesizeLearnable(const SynthParams& params);

}  // namespace aq::image
