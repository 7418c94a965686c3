#include "image/synth.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/random.h"

namespace aq::image {
namespace {

struct Rgb {
  float r, g, b;
};

Rgb RandomColor(Rng& rng) {
  return {static_cast<float>(rng.Uniform(20, 235)), static_cast<float>(rng.Uniform(20, 235)),
          static_cast<float>(rng.Uniform(20, 235))};
}

// Value noise: a random lattice every `cell` pixels, smoothly interpolated.
class ValueNoise {
 public:
  ValueNoise(Rng& rng, int width, int height, float cell) : cell_(cell) {
    gw_ = static_cast<int>(width / cell) + 3;
    gh_ = static_cast<int>(height / cell) + 3;
    grid_.resize(static_cast<size_t>(gw_) * gh_);
    for (auto& v : grid_) v = static_cast<float>(rng.Uniform(-1, 1));
  }
  // Fills out[x] for one row.
  void Row(int y, int width, float* out, float amp) const {
    float fy = y / cell_;
    int iy = static_cast<int>(fy);
    float ty = Smooth(fy - iy);
    const float* r0 = &grid_[static_cast<size_t>(iy) * gw_];
    const float* r1 = r0 + gw_;
    for (int x = 0; x < width; ++x) {
      float fx = x / cell_;
      int ix = static_cast<int>(fx);
      float tx = Smooth(fx - ix);
      float a = r0[ix] + (r0[ix + 1] - r0[ix]) * tx;
      float b = r1[ix] + (r1[ix + 1] - r1[ix]) * tx;
      out[x] += amp * (a + (b - a) * ty);
    }
  }

 private:
  static float Smooth(float t) { return t * t * (3 - 2 * t); }
  float cell_;
  int gw_, gh_;
  std::vector<float> grid_;
};

struct Shape {
  bool ellipse;
  float cx, cy, rx, ry;
  Rgb color;
  float alpha;
};

}  // namespace

Image SynthesizePhoto(const SynthParams& p) {
  const int w = std::max(1, p.width), h = std::max(1, p.height);
  Rng cls = Rng::Derive(p.class_seed, p.label);
  Rgb pal[3] = {RandomColor(cls), RandomColor(cls), RandomColor(cls)};
  const float class_scale = static_cast<float>(cls.Uniform(0.6, 1.6));  // texture size per class
  Rng rng(p.seed);

  // Illumination gradient between two palette colours at a random angle.
  const float ang = static_cast<float>(rng.Uniform(0, 6.2831853));
  const float gx = std::cos(ang) / w, gy = std::sin(ang) / h;
  const Rgb c0 = pal[0], c1 = pal[1];

  const float s = class_scale * static_cast<float>(std::max(w, h)) / 500.f;
  ValueNoise lum_coarse(rng, w, h, 90 * s), lum_mid(rng, w, h, 24 * s), lum_fine(rng, w, h, 6 * s),
      lum_finest(rng, w, h, 2.2f * std::max(1.f, s * 0.8f));
  ValueNoise chroma_r(rng, w, h, 60 * s), chroma_b(rng, w, h, 45 * s);

  std::vector<Shape> shapes(static_cast<size_t>(rng.Between(3, 9)));
  for (auto& sh : shapes) {
    sh.ellipse = rng.Below(2) == 0;
    sh.cx = static_cast<float>(rng.Uniform(0, w));
    sh.cy = static_cast<float>(rng.Uniform(0, h));
    sh.rx = static_cast<float>(rng.Uniform(0.05, 0.35) * w);
    sh.ry = static_cast<float>(rng.Uniform(0.05, 0.35) * h);
    sh.color = rng.Below(3) == 0 ? RandomColor(rng) : pal[2];
    sh.alpha = static_cast<float>(rng.Uniform(0.4, 0.9));
  }

  Image img(w, h, 3);
  std::vector<float> lum(w), cr(w), cb(w);
  Rng grain(p.seed ^ 0x5bd1e995u);
  for (int y = 0; y < h; ++y) {
    std::fill(lum.begin(), lum.end(), 0.f);
    std::fill(cr.begin(), cr.end(), 0.f);
    std::fill(cb.begin(), cb.end(), 0.f);
    lum_coarse.Row(y, w, lum.data(), 40.f);
    lum_mid.Row(y, w, lum.data(), 22.f);
    lum_fine.Row(y, w, lum.data(), 14.f * p.detail);
    lum_finest.Row(y, w, lum.data(), 9.f * p.detail);
    chroma_r.Row(y, w, cr.data(), 18.f);
    chroma_b.Row(y, w, cb.data(), 18.f);
    uint8_t* out = img.row(y);
    for (int x = 0; x < w; ++x) {
      float t = std::clamp(0.5f + (x * gx + y * gy), 0.f, 1.f);
      float r = c0.r + (c1.r - c0.r) * t, g = c0.g + (c1.g - c0.g) * t, b = c0.b + (c1.b - c0.b) * t;
      for (const auto& sh : shapes) {
        float dx = (x - sh.cx) / sh.rx, dy = (y - sh.cy) / sh.ry;
        bool inside = sh.ellipse ? dx * dx + dy * dy < 1.f : std::fabs(dx) < 1.f && std::fabs(dy) < 1.f;
        if (inside) {
          r += (sh.color.r - r) * sh.alpha;
          g += (sh.color.g - g) * sh.alpha;
          b += (sh.color.b - b) * sh.alpha;
        }
      }
      // Two uniform draws from one 64-bit number: cheap, roughly bell-shaped grain.
      uint64_t n = grain.Next();
      float noise = (static_cast<float>(n & 0xffff) + static_cast<float>((n >> 16) & 0xffff)) / 65535.f - 1.f;
      float l = lum[x] + noise * p.grain;
      out[3 * x] = static_cast<uint8_t>(std::clamp(r + l + cr[x], 0.f, 255.f));
      out[3 * x + 1] = static_cast<uint8_t>(std::clamp(g + l, 0.f, 255.f));
      out[3 * x + 2] = static_cast<uint8_t>(std::clamp(b + l + cb[x], 0.f, 255.f));
    }
  }
  return img;
}

}  // namespace aq::image
