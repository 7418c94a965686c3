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

bool Resampler::Simd() {
#if defined(__x86_64__)
  return !force_portable_ && !SimdDisabled();
#else
  return false;
#endif
}

void Resampler::Compute(Taps* t, int in, double box0, double box, int out) {
  const double scale = box / out;
  const double filter_scale = std::max(1.0, scale);
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
    double sum = 0;
    int n = 0;
    for (int x = lo; x < hi && n < t->max_taps; ++x, ++n) {
      double d = std::fabs((x - center + 0.5) / filter_scale);
      double v = d < 1.0 ? 1.0 - d : 0.0;
      w[n] = static_cast<float>(v);
      sum += v;
    }
    if (n == 0) {  // degenerate box at the border: nearest pixel
      lo = std::clamp(static_cast<int>(center), 0, in - 1);
      w[0] = 1.f;
      n = 1;
      sum = 1;
    }
    for (int k = 0; k < n; ++k) w[k] = static_cast<float>(w[k] / sum);
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
    while (n > 1 && w[n - 1] == 0.f) --n;
    t->first[i] = lo;
    t->count[i] = n;
  }
}

// Built for AVX2 as well as the x86-64 baseline; the loader picks one.
Status Resampler::Run(const Image& src, double x, double y, double w, double h, int ow, int oh, Image* out) {
  return Resample(src, x, y, w, h, ow, oh, out, nullptr);
}

Status Resampler::Run(const Image& src, double x, double y, double w, double h, int ow, int oh, const RowSink& row) {
  return Resample(src, x, y, w, h, ow, oh, nullptr, &row);
}

AQ_HOT_CLONES Status Resampler::Resample(const Image& src, double x, double y, double w, double h, int ow, int oh,
                                         Image* out, const RowSink* sink) {
  if (ow <= 0 || oh <= 0 || src.width <= 0 || src.height <= 0 || !(w > 0) || !(h > 0)) {
    return InvalidArgument(
        fmt::format("resize {}x{} box {}x{} -> {}x{}: sizes must be positive", src.width, src.height, w, h, ow, oh));
  }
  const int c = src.channels;
  Compute(&tx_, src.width, x, w, ow);
  Compute(&ty_, src.height, y, h, oh);
  // Only the source rows some output row needs go through the horizontal pass.
  const int row_lo = ty_.first.front();
  const int row_hi = ty_.first.back() + ty_.count.back();
  const size_t row_len = static_cast<size_t>(ow) * c;
  mid_.resize(static_cast<size_t>(row_hi - row_lo) * row_len);
  // The source columns any output column needs.
  const int col_lo = tx_.first.front();
  const int col_hi = tx_.first.back() + tx_.count.back();
  row_f_.resize(static_cast<size_t>(col_hi - col_lo) * c);
#if defined(__x86_64__)
  if (c == 3 && Simd()) {
    const size_t nin = static_cast<size_t>(col_hi - col_lo) * 3;
    row_f_.resize(nin + 4);  // slack: four floats are loaded for three
    mid_.resize(mid_.size() + 4);
    const float* rf = row_f_.data() - static_cast<ptrdiff_t>(col_lo) * 3;
    for (int sy = row_lo; sy < row_hi; ++sy) {
      const uint8_t* in = src.row(sy) + static_cast<size_t>(col_lo) * 3;
      for (size_t i = 0; i < nin; ++i) row_f_[i] = in[i];
      HorizontalRgbSse(rf, tx_.first.data(), tx_.count.data(), tx_.weights.data(), tx_.max_taps, ow,
                       &mid_[static_cast<size_t>(sy - row_lo) * row_len]);
    }
    return Vertical(oh, row_lo, row_len, c, ow, out, sink);
  }
#endif
  for (int sy = row_lo; sy < row_hi; ++sy) {
    // Convert the row to floats once (vectorised), then filter.
    const uint8_t* in = src.row(sy) + static_cast<size_t>(col_lo) * c;
    const size_t nin = row_f_.size();
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
  return Vertical(oh, row_lo, row_len, c, ow, out, sink);
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
