#include "image/resize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace aq::image {
namespace {

// For each output index: the first input index and the normalised weights.
struct Taps {
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weights;  // count[i] weights starting at i * max_taps
  int max_taps = 0;
};

Taps ComputeTaps(int in, int out) {
  Taps t;
  const double scale = static_cast<double>(in) / out;
  const double filter_scale = std::max(1.0, scale);
  const double support = 1.0 * filter_scale;  // triangle filter radius 1
  t.max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(out);
  t.count.resize(out);
  t.weights.assign(static_cast<size_t>(out) * t.max_taps, 0.f);
  for (int i = 0; i < out; ++i) {
    const double center = (i + 0.5) * scale;
    int lo = std::max(0, static_cast<int>(center - support + 0.5));
    int hi = std::min(in, static_cast<int>(center + support + 0.5));
    double sum = 0;
    float* w = &t.weights[static_cast<size_t>(i) * t.max_taps];
    int n = 0;
    for (int x = lo; x < hi && n < t.max_taps; ++x, ++n) {
      double d = std::fabs((x - center + 0.5) / filter_scale);
      double v = d < 1.0 ? 1.0 - d : 0.0;
      w[n] = static_cast<float>(v);
      sum += v;
    }
    if (sum > 0) {
      for (int k = 0; k < n; ++k) w[k] = static_cast<float>(w[k] / sum);
    }
    t.first[i] = lo;
    t.count[i] = n;
  }
  return t;
}

inline uint8_t Clamp8(float v) { return static_cast<uint8_t>(std::clamp(v + 0.5f, 0.f, 255.f)); }

}  // namespace

Result<Image> Resize(const Image& src, int ow, int oh) {
  if (ow <= 0 || oh <= 0 || src.width <= 0 || src.height <= 0) {
    return InvalidArgument(fmt::format("resize {}x{} -> {}x{}: sizes must be positive", src.width, src.height, ow, oh));
  }
  const int c = src.channels;
  const Taps tx = ComputeTaps(src.width, ow);
  const Taps ty = ComputeTaps(src.height, oh);
  // Horizontal pass over every input row into floats.
  std::vector<float> mid(static_cast<size_t>(src.height) * ow * c);
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* in = src.row(y);
    float* out = &mid[static_cast<size_t>(y) * ow * c];
    for (int x = 0; x < ow; ++x) {
      const float* w = &tx.weights[static_cast<size_t>(x) * tx.max_taps];
      const uint8_t* p = in + static_cast<size_t>(tx.first[x]) * c;
      for (int ch = 0; ch < c; ++ch) {
        float acc = 0;
        for (int k = 0; k < tx.count[x]; ++k) acc += w[k] * p[k * c + ch];
        out[x * c + ch] = acc;
      }
    }
  }
  Image dst(ow, oh, c);
  const size_t row_len = static_cast<size_t>(ow) * c;
  std::vector<float> acc(row_len);
  for (int y = 0; y < oh; ++y) {
    std::fill(acc.begin(), acc.end(), 0.f);
    const float* w = &ty.weights[static_cast<size_t>(y) * ty.max_taps];
    for (int k = 0; k < ty.count[y]; ++k) {
      const float* r = &mid[static_cast<size_t>(ty.first[y] + k) * row_len];
      const float wk = w[k];
      for (size_t i = 0; i < row_len; ++i) acc[i] += wk * r[i];
    }
    uint8_t* out = dst.row(y);
    for (size_t i = 0; i < row_len; ++i) out[i] = Clamp8(acc[i]);
  }
  return dst;
}

}  // namespace aq::image
