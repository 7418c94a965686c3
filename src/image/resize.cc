#include "image/resize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace aq::image {
namespace {

#if defined(__x86_64__)
// The horizontal pass for RGB with SSE: a tap of all three channels is one
// multiply-add of four floats [r g b r'] (the fourth lane is overwritten by
// the next pixel's store). `rf` is the row as floats indexed from column 0,
// with one float of slack after it; `out` has one float of slack too.
void HorizontalRgbSse(const float* rf, const int* first, const int* count, const float* weights, int max_taps, int ow,
                      float* out) {
  for (int ox = 0; ox < ow; ++ox) {
    const float* w = weights + static_cast<size_t>(ox) * max_taps;
    const float* p = rf + static_cast<size_t>(first[ox]) * 3;
    const int n = count[ox];
    __m128 acc = _mm_mul_ps(_mm_set1_ps(w[0]), _mm_loadu_ps(p));
    for (int k = 1; k < n; ++k) acc = _mm_add_ps(acc, _mm_mul_ps(_mm_set1_ps(w[k]), _mm_loadu_ps(p + 3 * k)));
    _mm_storeu_ps(out + 3 * ox, acc);
  }
}

// The horizontal pass for RGB with AVX2 + FMA, four output pixels at a
// time: pixels 0 and 1 of the group share one eight-float register (two
// [r g b r'] taps), pixels 2 and 3 another, so a tap of four pixels is two
// FMAs on two independent chains. `gw` holds each group's weights as
// [w0 w0 w0 w0 w1 w1 w1 w1 w2 w2 w2 w2 w3 w3 w3 w3] per tap (zero past a
// pixel's own taps), `gn` each group's tap count (the largest of its
// four). The row needs 3 * max_taps + 4 floats of finite slack after its
// last column (a short pixel's extra taps read there, weighted 0); `out`
// one float. Pixels past the last whole group go through the SSE code.
__attribute__((target("avx2,fma"))) void HorizontalRgbAvx2(const float* rf, const int* first, const int* count,
                                                           const float* weights, int max_taps, const float* gw,
                                                           const int* gn, int ow, float* out) {
  const int groups = ow / 4;
  for (int g = 0; g < groups; ++g) {
    const int ox = 4 * g;
    const float* p0 = rf + static_cast<size_t>(first[ox]) * 3;
    const float* p1 = rf + static_cast<size_t>(first[ox + 1]) * 3;
    const float* p2 = rf + static_cast<size_t>(first[ox + 2]) * 3;
    const float* p3 = rf + static_cast<size_t>(first[ox + 3]) * 3;
    const float* w = gw + static_cast<size_t>(g) * max_taps * 16;
    __m256 a01 = _mm256_setzero_ps(), a23 = _mm256_setzero_ps();
    for (int k = 0, n = gn[g]; k < n; ++k, w += 16) {
      const __m256 x01 =
          _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p0 + 3 * k)), _mm_loadu_ps(p1 + 3 * k), 1);
      const __m256 x23 =
          _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p2 + 3 * k)), _mm_loadu_ps(p3 + 3 * k), 1);
      a01 = _mm256_fmadd_ps(_mm256_loadu_ps(w), x01, a01);
      a23 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 8), x23, a23);
    }
    // In order: each store's fourth lane is overwritten by the next one.
    float* o = out + 3 * static_cast<size_t>(ox);
    _mm_storeu_ps(o, _mm256_castps256_ps128(a01));
    _mm_storeu_ps(o + 3, _mm256_extractf128_ps(a01, 1));
    _mm_storeu_ps(o + 6, _mm256_castps256_ps128(a23));
    _mm_storeu_ps(o + 9, _mm256_extractf128_ps(a23, 1));
  }
  const int done = 4 * groups;
  HorizontalRgbSse(rf, first + done, count + done, weights + static_cast<size_t>(done) * max_taps, max_taps, ow - done,
                   out + 3 * static_cast<size_t>(done));
}

// One output row of the vertical pass with AVX2 + FMA, fused with the
// rounding to bytes: 32 values at a time are summed over the taps in
// registers, rounded half up, clamped and packed, so no float row is
// written and read back. Rounding as RoundToBytes.
__attribute__((target("avx2,fma"))) void VerticalRowAvx2(const float* const* rows, const float* w, int n, size_t len,
                                                         uint8_t* out) {
  const __m256 half = _mm256_set1_ps(0.5f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    __m256 a = half, b = half, c = half, d = half;
    for (int k = 0; k < n; ++k) {
      const __m256 wk = _mm256_set1_ps(w[k]);
      const float* r = rows[k] + i;
      a = _mm256_fmadd_ps(wk, _mm256_loadu_ps(r), a);
      b = _mm256_fmadd_ps(wk, _mm256_loadu_ps(r + 8), b);
      c = _mm256_fmadd_ps(wk, _mm256_loadu_ps(r + 16), c);
      d = _mm256_fmadd_ps(wk, _mm256_loadu_ps(r + 24), d);
    }
    // packs/packus work within 128-bit lanes; the permute puts the four
    // groups of four back in order.
    const __m256i ab = _mm256_packs_epi32(_mm256_cvttps_epi32(a), _mm256_cvttps_epi32(b));
    const __m256i cd = _mm256_packs_epi32(_mm256_cvttps_epi32(c), _mm256_cvttps_epi32(d));
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), bytes);
  }
  for (; i < len; ++i) {
    float s = 0.5f;
    for (int k = 0; k < n; ++k) s = std::fma(w[k], rows[k][i], s);
    int v = static_cast<int>(s);
    out[i] = static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
  }
}
#endif

}  // namespace

void RoundToBytes(const float* in, uint8_t* out, size_t n) {
  size_t i = 0;
#if defined(__x86_64__)
  // SSE2 (every x86-64): truncation after +0.5 as below; the saturating
  // packs are the clamp to 0..255.
  const __m128 half = _mm_set1_ps(0.5f);
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm_cvttps_epi32(_mm_add_ps(_mm_loadu_ps(in + i), half));
    const __m128i b = _mm_cvttps_epi32(_mm_add_ps(_mm_loadu_ps(in + i + 4), half));
    const __m128i c = _mm_cvttps_epi32(_mm_add_ps(_mm_loadu_ps(in + i + 8), half));
    const __m128i d = _mm_cvttps_epi32(_mm_add_ps(_mm_loadu_ps(in + i + 12), half));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm_packus_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d)));
  }
#endif
  for (; i < n; ++i) {
    int v = static_cast<int>(in[i] + 0.5f);
    v = v < 0 ? 0 : (v > 255 ? 255 : v);
    out[i] = static_cast<uint8_t>(v);
  }
}

Resampler::Kernels Resampler::BestKernels() {
#if defined(__x86_64__)
  static const Kernels best = [] {
    if (SimdDisabled()) return Kernels::kPortable;
    // libgcc's check includes the OS saving the AVX registers (XCR0).
    if (!Avx2Disabled() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Kernels::kAvx2;
    return Kernels::kSse;  // SSE2 is in every x86-64
  }();
  return best;
#else
  return Kernels::kPortable;
#endif
}

void Resampler::Compute(Taps* t, int in, double box0, double box, int out) {
  const double scale = box / out;
  const double filter_scale = std::max(1.0, scale);
  const double inv_filter_scale = 1.0 / filter_scale;
  const double support = 1.0 * filter_scale;  // triangle filter, radius 1
  t->max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  t->first.resize(out);
  t->count.resize(out);
  t->weights.assign(static_cast<size_t>(out) * t->max_taps, 0.f);
  for (int i = 0; i < out; ++i) {
    const double center = box0 + (i + 0.5) * scale;
    int lo = std::max(0, static_cast<int>(center - support + 0.5));
    int hi = std::min(in, static_cast<int>(center + support + 0.5));
    float* w = &t->weights[static_cast<size_t>(i) * t->max_taps];
    double v[64], sum = 0;  // a tap count past 64 (a > 31x shrink) takes the slow path below
    int n = 0;
    const int limit = std::min(hi - lo, t->max_taps);
    if (limit <= 64) {
      for (; n < limit; ++n) {
        const double d = std::fabs((lo + n - center + 0.5) * inv_filter_scale);
        v[n] = d < 1.0 ? 1.0 - d : 0.0;
        sum += v[n];
      }
      if (n > 0) {
        const double inv_sum = 1.0 / sum;
        for (int k = 0; k < n; ++k) w[k] = static_cast<float>(v[k] * inv_sum);
      }
    } else {
      for (; n < limit; ++n) {
        const double d = std::fabs((lo + n - center + 0.5) * inv_filter_scale);
        const double x = d < 1.0 ? 1.0 - d : 0.0;
        w[n] = static_cast<float>(x);
        sum += x;
      }
      for (int k = 0; k < n; ++k) w[k] = static_cast<float>(w[k] / sum);
    }
    if (n == 0) {  // degenerate box at the border: nearest pixel
      lo = std::clamp(static_cast<int>(center), 0, in - 1);
      w[0] = 1.f;
      n = 1;
    }
    // Drop zero-weight taps at both ends: with a widened support a third of
    // the taps can be zero, and every tap costs three multiply-adds per pixel.
    int skip = 0;
    while (skip < n - 1 && w[skip] == 0.f) ++skip;
    if (skip > 0) {
      for (int k = skip; k < n; ++k) w[k - skip] = w[k];
      for (int k = n - skip; k < n; ++k) w[k] = 0.f;
      lo += skip;
      n -= skip;
    }
    while (n > 1 && w[n - 1] == 0.f) w[--n] = 0.f;
    t->first[i] = lo;
    t->count[i] = n;
  }
}

Status Resampler::Run(const Image& src, double x, double y, double w, double h, int ow, int oh, Image* out) {
  return Resample(src, x, y, w, h, ow, oh, out, nullptr);
}

Status Resampler::Run(const Image& src, double x, double y, double w, double h, int ow, int oh, const RowSink& row) {
  return Resample(src, x, y, w, h, ow, oh, nullptr, &row);
}

Status Resampler::Resample(const Image& src, double x, double y, double w, double h, int ow, int oh, Image* out,
                           const RowSink* sink) {
  if (ow <= 0 || oh <= 0 || src.width <= 0 || src.height <= 0 || !(w > 0) || !(h > 0)) {
    return InvalidArgument(
        fmt::format("resize {}x{} box {}x{} -> {}x{}: sizes must be positive", src.width, src.height, w, h, ow, oh));
  }
  Compute(&tx_, src.width, x, w, ow);
  Compute(&ty_, src.height, y, h, oh);
  // Only the source rows some output row needs go through the horizontal
  // pass, and only the columns some output column needs.
  const int row_lo = ty_.first.front();
  const int row_hi = ty_.first.back() + ty_.count.back();
  const int col_lo = tx_.first.front();
  const int col_hi = tx_.first.back() + tx_.count.back();
  Horizontal(src, row_lo, row_hi, col_lo, col_hi, ow);
  return Vertical(oh, row_lo, static_cast<size_t>(ow) * src.channels, src.channels, ow, out, sink);
}

// Built for AVX2 as well as the x86-64 baseline; the loader picks one (the
// portable loops vectorise).
AQ_HOT_CLONES void Resampler::Horizontal(const Image& src, int row_lo, int row_hi, int col_lo, int col_hi, int ow) {
  const int c = src.channels;
  const size_t row_len = static_cast<size_t>(ow) * c;
  const size_t nin = static_cast<size_t>(col_hi - col_lo) * c;
  // Slack after the row and the output for the SIMD loads and stores (see
  // the kernels), zero so a zero weight never meets a non-finite value.
  const size_t slack = 3 * static_cast<size_t>(tx_.max_taps) + 4;
  row_f_.assign(nin + slack, 0.f);
  mid_.resize(static_cast<size_t>(row_hi - row_lo) * row_len + 4);
#if defined(__x86_64__)
  if (c == 3 && kernels_ != Kernels::kPortable) {
    const float* rf = row_f_.data() - static_cast<ptrdiff_t>(col_lo) * 3;
    const bool avx2 = kernels_ == Kernels::kAvx2;
    if (avx2) {
      const int groups = ow / 4, mt = tx_.max_taps;
      group_w_.assign(static_cast<size_t>(groups) * mt * 16, 0.f);
      group_n_.resize(groups);
      for (int g = 0; g < groups; ++g) {
        int n = 0;
        for (int j = 0; j < 4; ++j) {
          const int ox = 4 * g + j;
          n = std::max(n, tx_.count[ox]);
          for (int k = 0; k < tx_.count[ox]; ++k) {
            float* dst = &group_w_[(static_cast<size_t>(g) * mt + k) * 16 + 4 * j];
            dst[0] = dst[1] = dst[2] = dst[3] = tx_.weights[static_cast<size_t>(ox) * mt + k];
          }
        }
        group_n_[g] = n;
      }
    }
    for (int sy = row_lo; sy < row_hi; ++sy) {
      const uint8_t* in = src.row(sy) + static_cast<size_t>(col_lo) * 3;
      for (size_t i = 0; i < nin; ++i) row_f_[i] = in[i];
      float* o = &mid_[static_cast<size_t>(sy - row_lo) * row_len];
      if (avx2) {
        HorizontalRgbAvx2(rf, tx_.first.data(), tx_.count.data(), tx_.weights.data(), tx_.max_taps, group_w_.data(),
                          group_n_.data(), ow, o);
      } else {
        HorizontalRgbSse(rf, tx_.first.data(), tx_.count.data(), tx_.weights.data(), tx_.max_taps, ow, o);
      }
    }
    return;
  }
#endif
  for (int sy = row_lo; sy < row_hi; ++sy) {
    // Convert the row to floats once (vectorised), then filter.
    const uint8_t* in = src.row(sy) + static_cast<size_t>(col_lo) * c;
    for (size_t i = 0; i < nin; ++i) row_f_[i] = in[i];
    float* o = &mid_[static_cast<size_t>(sy - row_lo) * row_len];
    const float* rf = row_f_.data() - static_cast<ptrdiff_t>(col_lo) * c;
    if (c == 3) {
      for (int ox = 0; ox < ow; ++ox) {
        const float* wt = &tx_.weights[static_cast<size_t>(ox) * tx_.max_taps];
        const float* p = rf + static_cast<size_t>(tx_.first[ox]) * 3;
        const int n = tx_.count[ox];
        float r = 0, g = 0, b = 0;
        for (int k = 0; k < n; ++k) {
          r += wt[k] * p[3 * k];
          g += wt[k] * p[3 * k + 1];
          b += wt[k] * p[3 * k + 2];
        }
        o[3 * ox] = r;
        o[3 * ox + 1] = g;
        o[3 * ox + 2] = b;
      }
    } else {
      for (int ox = 0; ox < ow; ++ox) {
        const float* wt = &tx_.weights[static_cast<size_t>(ox) * tx_.max_taps];
        const float* p = rf + static_cast<size_t>(tx_.first[ox]) * c;
        for (int ch = 0; ch < c; ++ch) {
          float a = 0;
          for (int k = 0; k < tx_.count[ox]; ++k) a += wt[k] * p[k * c + ch];
          o[ox * c + ch] = a;
        }
      }
    }
  }
}

AQ_HOT_CLONES Status Resampler::Vertical(int oh, int row_lo, size_t row_len, int c, int ow, Image* out,
                                         const RowSink* sink) {
  if (sink == nullptr) {
    out->width = ow;
    out->height = oh;
    out->channels = c;
    out->pixels.resize(row_len * oh);
  } else {
    row_out_.resize(row_len);
  }
#if defined(__x86_64__)
  if (kernels_ == Kernels::kAvx2) {
    tap_rows_.resize(ty_.max_taps);
    for (int oy = 0; oy < oh; ++oy) {
      const int n = ty_.count[oy];
      for (int k = 0; k < n; ++k) tap_rows_[k] = &mid_[static_cast<size_t>(ty_.first[oy] + k - row_lo) * row_len];
      uint8_t* dst = sink == nullptr ? out->row(oy) : row_out_.data();
      VerticalRowAvx2(tap_rows_.data(), &ty_.weights[static_cast<size_t>(oy) * ty_.max_taps], n, row_len, dst);
      if (sink != nullptr) (*sink)(oy, row_out_.data());
    }
    return Status::Ok();
  }
#endif
  acc_.resize(row_len);
  for (int oy = 0; oy < oh; ++oy) {
    std::fill(acc_.begin(), acc_.end(), 0.f);
    const float* wt = &ty_.weights[static_cast<size_t>(oy) * ty_.max_taps];
    for (int k = 0; k < ty_.count[oy]; ++k) {
      const float* r = &mid_[static_cast<size_t>(ty_.first[oy] + k - row_lo) * row_len];
      const float wk = wt[k];
      for (size_t i = 0; i < row_len; ++i) acc_[i] += wk * r[i];
    }
    if (sink == nullptr) {
      RoundToBytes(acc_.data(), out->row(oy), row_len);
    } else {
      RoundToBytes(acc_.data(), row_out_.data(), row_len);
      (*sink)(oy, row_out_.data());
    }
  }
  return Status::Ok();
}

Result<Image> Resize(const Image& src, int out_width, int out_height) {
  Resampler r;
  Image out;
  AQ_TRY(r.Run(src, 0, 0, src.width, src.height, out_width, out_height, &out));
  return out;
}

}  // namespace aq::image
