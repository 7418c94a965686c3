#include "image/augment.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/cpu.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace aq::image {

CropBox RandomResizedCrop(int width, int height, Rng& rng, const RandomResizedCropParams& p) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(p.ratio_min), log_hi = std::log(p.ratio_max);
  for (int i = 0; i < p.attempts; ++i) {
    double target = area * rng.Uniform(p.scale_min, p.scale_max);
    double aspect = std::exp(rng.Uniform(log_lo, log_hi));
    int w = static_cast<int>(std::nearbyint(std::sqrt(target * aspect)));
    int h = static_cast<int>(std::nearbyint(std::sqrt(target / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      int y = static_cast<int>(rng.Between(0, height - h));
      int x = static_cast<int>(rng.Between(0, width - w));
      return {static_cast<double>(x), static_cast<double>(y), static_cast<double>(w), static_cast<double>(h)};
    }
  }
  // Centre crop, clamped to the ratio range.
  double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < p.ratio_min) {
    h = static_cast<int>(std::nearbyint(w / p.ratio_min));
  } else if (in_ratio > p.ratio_max) {
    w = static_cast<int>(std::nearbyint(h * p.ratio_max));
  }
  return {static_cast<double>((width - w) / 2), static_cast<double>((height - h) / 2), static_cast<double>(w),
          static_cast<double>(h)};
}

CropBox CenterCropAfterResize(int width, int height, int resize_to, int crop) {
  // torchvision Resize(int): the shorter side becomes resize_to, the longer
  // int(resize_to * long / short).
  int new_w, new_h;
  if (width <= height) {
    new_w = resize_to;
    new_h = static_cast<int>(static_cast<double>(resize_to) * height / width);
  } else {
    new_h = resize_to;
    new_w = static_cast<int>(static_cast<double>(resize_to) * width / height);
  }
  // CenterCrop: int(round((size - crop) / 2)) with Python's round-half-even.
  double top = std::nearbyint((new_h - crop) / 2.0);
  double left = std::nearbyint((new_w - crop) / 2.0);
  double sx = static_cast<double>(width) / new_w, sy = static_cast<double>(height) / new_h;
  return {left * sx, top * sy, crop * sx, crop * sy};
}

CropBox DistortedBoundingBoxCrop(int width, int height, const std::vector<NormBox>& boxes, Rng& rng) {
  NormBox obj = boxes.empty() ? NormBox{0, 0, 1, 1} : boxes[rng.Below(boxes.size())];
  const double W = width, H = height;
  const double ox0 = obj.xmin * W, oy0 = obj.ymin * H, ox1 = obj.xmax * W, oy1 = obj.ymax * H;
  const double obj_area = std::max(1.0, (ox1 - ox0) * (oy1 - oy0));
  for (int i = 0; i < 100; ++i) {
    double area = rng.Uniform(0.05, 1.0) * W * H;
    double ratio = rng.Uniform(0.75, 1.33);
    double w = std::sqrt(area * ratio), h = std::sqrt(area / ratio);
    if (w > W || h > H || w < 1 || h < 1) continue;
    double x = rng.Uniform(0, W - w), y = rng.Uniform(0, H - h);
    double ix = std::max(0.0, std::min(x + w, ox1) - std::max(x, ox0));
    double iy = std::max(0.0, std::min(y + h, oy1) - std::max(y, oy0));
    if (ix * iy >= 0.1 * obj_area) return {std::floor(x), std::floor(y), std::floor(w), std::floor(h)};
  }
  return {0, 0, W, H};
}

void ApplyColorJitter(Image& img, const ColorJitter& j, Rng& rng) {
  if (!j.enabled() || img.channels != 3) return;
  auto factor = [&](float x) { return x > 0 ? static_cast<float>(rng.Uniform(1 - x, 1 + x)) : 1.f; };
  const float b = factor(j.brightness), c = factor(j.contrast), s = factor(j.saturation);
  const size_t n = static_cast<size_t>(img.width) * img.height;
  uint8_t* p = img.pixels.data();
  auto clamp8 = [](float v) { return static_cast<uint8_t>(std::clamp(v + 0.5f, 0.f, 255.f)); };
  if (b != 1.f) {
    for (size_t i = 0; i < 3 * n; ++i) p[i] = clamp8(p[i] * b);
  }
  if (c != 1.f) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += 0.299 * p[3 * i] + 0.587 * p[3 * i + 1] + 0.114 * p[3 * i + 2];
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    for (size_t i = 0; i < 3 * n; ++i) p[i] = clamp8((p[i] - mean) * c + mean);
  }
  if (s != 1.f) {
    for (size_t i = 0; i < n; ++i) {
      float g = 0.299f * p[3 * i] + 0.587f * p[3 * i + 1] + 0.114f * p[3 * i + 2];
      for (int k = 0; k < 3; ++k) p[3 * i + k] = clamp8((p[3 * i + k] - g) * s + g);
    }
  }
}

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kUint8: return 1;
    case DType::kFloat16: return 2;
    case DType::kFloat32: return 4;
  }
  return 4;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));  // inf/nan
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);                                        // overflow
  if (exp <= 0) {                                                                                    // subnormal
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // round to nearest even
  return static_cast<uint16_t>(half);
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000 | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

#if defined(__x86_64__)
__attribute__((target("f16c,avx"))) void FloatsToHalvesF16c(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = FloatToHalf(in[i]);
}
bool DetectF16c() {
  unsigned a, b, c, d;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  if ((c & bit_F16C) == 0 || (c & bit_AVX) == 0 || (c & bit_OSXSAVE) == 0) return false;
  uint32_t lo, hi;  // XCR0: the OS must save SSE and AVX register state
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 6) == 6;
}
const bool kHaveF16c = DetectF16c();

// One row of RGB bytes to three planes of normalised floats (NCHW), 16
// pixels at a time: pshufb gathers each channel's bytes from the three
// 16-byte loads (reversed for a flipped row), then widen, convert,
// multiply-add. Returns how many output pixels it wrote; the caller does the
// rest. `row` is the row's first pixel.
__attribute__((target("ssse3"))) int RowToPlanesSsse3(const uint8_t* row, int W, bool flip, const float* scale,
                                                      const float* bias, float* r, float* g, float* b) {
  const __m128i z = _mm_setzero_si128();
  // Byte k of channel c over the 48 bytes: 3k + c; the masks pick the ones in
  // each 16-byte load (0x80: none).
  __m128i masks[3][3];
  for (int c = 0; c < 3; ++c) {
    for (int part = 0; part < 3; ++part) {
      alignas(16) int8_t m[16];
      for (int k = 0; k < 16; ++k) {
        const int byte = 3 * k + c - 16 * part;
        m[k] = (byte >= 0 && byte < 16) ? static_cast<int8_t>(byte) : static_cast<int8_t>(0x80);
      }
      masks[c][part] = _mm_load_si128(reinterpret_cast<const __m128i*>(m));
    }
  }
  const __m128i reverse = _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  float* planes[3] = {r, g, b};
  int x = 0;
  for (; x + 16 <= W; x += 16) {
    // Output pixels x..x+15 come from source pixels x..x+15, or for a
    // flipped row from W-16-x .. W-1-x in reverse.
    const uint8_t* p = row + 3 * static_cast<size_t>(flip ? W - 16 - x : x);
    const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
    const __m128i a2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32));
    for (int c = 0; c < 3; ++c) {
      __m128i v = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a0, masks[c][0]), _mm_shuffle_epi8(a1, masks[c][1])),
                               _mm_shuffle_epi8(a2, masks[c][2]));
      if (flip) v = _mm_shuffle_epi8(v, reverse);
      const __m128i lo = _mm_unpacklo_epi8(v, z), hi = _mm_unpackhi_epi8(v, z);
      const __m128i q[4] = {_mm_unpacklo_epi16(lo, z), _mm_unpackhi_epi16(lo, z), _mm_unpacklo_epi16(hi, z),
                            _mm_unpackhi_epi16(hi, z)};
      const __m128 sc = _mm_set1_ps(scale[c]), bi = _mm_set1_ps(bias[c]);
      for (int k = 0; k < 4; ++k) {
        _mm_storeu_ps(planes[c] + x + 4 * k, _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(q[k]), sc), bi));
      }
    }
  }
  return x;
}
const bool kHaveSsse3 = __builtin_cpu_supports("ssse3");
#endif

void FloatsToHalves(const float* in, uint16_t* out, size_t n) {
#if defined(__x86_64__)
  if (kHaveF16c) return FloatsToHalvesF16c(in, out, n);
#endif
  for (size_t i = 0; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

}  // namespace

void StoreSample(const Image& img, bool flip, const StoreOptions& o, void* dst) {
  for (int y = 0; y < img.height; ++y) StoreRow(img.row(y), img.width, y, img.height, flip, o, dst);
}

AQ_HOT_CLONES void StoreRow(const uint8_t* rgb, int W, int y, int H, bool flip, const StoreOptions& o, void* dst) {
  const size_t plane = static_cast<size_t>(W) * H;
  float scale[3], bias[3];
  for (int c = 0; c < 3; ++c) {
    const bool norm = o.normalize && o.dtype != DType::kUint8;
    scale[c] = norm ? 1.f / o.std[c] : 1.f;
    bias[c] = norm ? -o.mean[c] / o.std[c] : 0.f;
  }
  // Pixel x of an output row comes from source column sx(x).
  const ptrdiff_t step = flip ? -3 : 3;
  const size_t first = flip ? static_cast<size_t>(W - 1) * 3 : 0;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(W) * 3);
  {
    const uint8_t* src = rgb + first;
    const size_t at = static_cast<size_t>(y) * W;
    if (o.dtype == DType::kUint8) {
      auto* d = static_cast<uint8_t*>(dst);
      if (o.layout == Layout::kNHWC) {
        uint8_t* out = d + at * 3;
        for (int x = 0; x < W; ++x, src += step) {
          out[3 * x] = src[0];
          out[3 * x + 1] = src[1];
          out[3 * x + 2] = src[2];
        }
      } else {
        uint8_t *r = d + at, *g = d + plane + at, *b = d + 2 * plane + at;
        for (int x = 0; x < W; ++x, src += step) {
          r[x] = src[0];
          g[x] = src[1];
          b[x] = src[2];
        }
      }
      return;
    }
    // Normalised floats for this row, in the output layout's order: fp32
    // straight into the slot, fp16 through a row of floats.
    const bool direct = o.dtype == DType::kFloat32;
    float* f = direct && o.layout == Layout::kNHWC ? static_cast<float*>(dst) + at * 3 : row.data();
    if (o.layout == Layout::kNHWC) {
      for (int x = 0; x < W; ++x, src += step) {
        f[3 * x] = src[0] * scale[0] + bias[0];
        f[3 * x + 1] = src[1] * scale[1] + bias[1];
        f[3 * x + 2] = src[2] * scale[2] + bias[2];
      }
    } else {
      float *r = f, *g = f + W, *b = f + 2 * W;
      if (direct) {
        float* d = static_cast<float*>(dst) + at;
        r = d;
        g = d + plane;
        b = d + 2 * plane;
      }
      int x = 0;
#if defined(__x86_64__)
      if (kHaveSsse3 && !o.portable && !SimdDisabled()) {
        x = RowToPlanesSsse3(rgb, W, flip, scale, bias, r, g, b);
        src += step * x;
      }
#endif
      for (; x < W; ++x, src += step) {
        r[x] = src[0] * scale[0] + bias[0];
        g[x] = src[1] * scale[1] + bias[1];
        b[x] = src[2] * scale[2] + bias[2];
      }
    }
    if (!direct) {
      auto* d = static_cast<uint16_t*>(dst);
      if (o.layout == Layout::kNHWC) {
        FloatsToHalves(f, d + at * 3, static_cast<size_t>(W) * 3);
      } else {
        for (int c = 0; c < 3; ++c) FloatsToHalves(f + c * W, d + c * plane + at, W);
      }
    }
  }
}

}  // namespace aq::image
