// The geometry and colour of training and evaluation transforms, matching
// torchvision (RandomResizedCrop, CenterCrop after Resize, horizontal flip,
// ColorJitter's brightness/contrast/saturation, Normalize) and TensorFlow's
// bounding-box-driven crop (sample_distorted_bounding_box).
//
// Thread safety: pure functions; randomness comes from the caller's Rng.
#pragma once

#include <cstdint>
#include <vector>

#include "common/random.h"
#include "image/image.h"

namespace aq::image {

// A region of the original image, in pixels.
struct CropBox {
  double x = 0, y = 0, w = 0, h = 0;
};

struct RandomResizedCropParams {
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  int attempts = 10;
};

// torchvision.transforms.RandomResizedCrop.get_params: up to `attempts`
// random (area, log-uniform aspect) draws that fit, else a centre crop
// clamped to the ratio range.
CropBox RandomResizedCrop(int width, int height, Rng& rng, const RandomResizedCropParams& p = {});

// Resize(resize_to) + CenterCrop(crop) expressed as a box of the original
// image (torchvision: shorter side to resize_to, then the centred crop).
CropBox CenterCropAfterResize(int width, int height, int resize_to, int crop);

// TF's sample_distorted_bounding_box (min_object_covered 0.1, aspect
// 0.75..1.33, area 0.05..1, 100 attempts), given normalised boxes; falls back
// to the whole image.
struct NormBox {
  float xmin, ymin, xmax, ymax;
};
CropBox DistortedBoundingBoxCrop(int width, int height, const std::vector<NormBox>& boxes, Rng& rng);

struct ColorJitter {
  float brightness = 0, contrast = 0, saturation = 0;  // 0 = off; factors drawn from [1-x, 1+x]
  bool enabled() const { return brightness > 0 || contrast > 0 || saturation > 0; }
};
// Applies jitter in place to an RGB image (torchvision order: brightness,
// contrast, saturation; factors drawn from rng).
void ApplyColorJitter(Image& img, const ColorJitter& jitter, Rng& rng);

enum class Layout { kNCHW, kNHWC };
enum class DType { kUint8, kFloat16, kFloat32 };
size_t DTypeSize(DType t);

struct StoreOptions {
  Layout layout = Layout::kNCHW;
  DType dtype = DType::kFloat32;
  float mean[3] = {0.485f * 255, 0.456f * 255, 0.406f * 255};  // on the 0..255 scale
  float std[3] = {0.229f * 255, 0.224f * 255, 0.225f * 255};
  bool normalize = true;  // ignored for uint8 (raw pixels)
  bool portable = false;  // tests: the scalar code even where a SIMD path exists
};

// Writes one RGB image (size x size) into a batch slot: optional horizontal
// flip, (x - mean) / std, layout and dtype conversion.
void StoreSample(const Image& img, bool flip, const StoreOptions& o, void* dst);
// One row (y of an image W x H, RGB bytes) of StoreSample: for producers
// that make the image a row at a time (Resampler::Run with a row sink), so
// no full-size intermediate image is written and read back.
void StoreRow(const uint8_t* rgb, int W, int y, int H, bool flip, const StoreOptions& o, void* dst);

uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

}  // namespace aq::image
