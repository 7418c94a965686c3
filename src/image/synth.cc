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

namespace {

// Hue (0..1), saturation, value -> RGB on 0..255.
Rgb Hsv(float h, float sat, float val) {
  h = h - std::floor(h);
  const float c = val * sat, x = c * (1 - std::fabs(std::fmod(h * 6, 2.f) - 1)), m = val - c;
  float r = 0, g = 0, b = 0;
  switch (static_cast<int>(h * 6) % 6) {
    case 0: r = c, g = x; break;
    case 1: r = x, g = c; break;
    case 2: g = c, b = x; break;
    case 3: g = x, b = c; break;
    case 4: r = x, b = c; break;
    default: r = c, b = x; break;
  }
  return {(r + m) * 255, (g + m) * 255, (b + m) * 255};
}

// Whether (u, v), in the object's frame (unit radius), is inside shape k.
bool InShape(int k, float u, float v) {
  const float r = std::sqrt(u * u + v * v), au = std::fabs(u), av = std::fabs(v);
  switch (k) {
    case 0: return r < 1;                                                                // disc
    case 1: return au < 0.8f && av < 0.8f;                                               // square
    case 2: return v > -0.7f && v < 0.9f && au < (0.9f - v) * 0.62f;                     // triangle
    case 3: return (au < 0.28f && av < 0.95f) || (av < 0.28f && au < 0.95f);             // cross
    case 4: return r < 1 && r > 0.55f;                                                   // ring
    case 5: return au + av < 1;                                                          // diamond
    case 6: return au < 0.9f && av < 0.9f && static_cast<int>((v + 1) * 3.5f) % 2 == 0;  // bars
    case 7: return au < 0.9f && av < 0.9f && (static_cast<int>((u + 1) * 3) + static_cast<int>((v + 1) * 3)) % 2 == 0;
    case 8: {  // five-pointed star
      const float a = std::atan2(v, u);
      return r < 0.45f + 0.5f * std::pow(std::fabs(std::cos(2.5f * a)), 3.f);
    }
    default: return r < 1 && ((u - 0.45f) * (u - 0.45f) + v * v) > 0.55f;  // crescent
  }
}

}  // namespace

Image SynthesizeLearnable(const SynthParams& p) {
  const int w = std::max(1, p.width), h = std::max(1, p.height);
  Rng rng(p.seed);
  // Background: any two colours, any texture scale; nothing of the class.
  const Rgb b0 = RandomColor(rng), b1 = RandomColor(rng);
  const float ang = static_cast<float>(rng.Uniform(0, 6.2831853));
  const float gx = std::cos(ang) / w, gy = std::sin(ang) / h;
  const float m = static_cast<float>(std::min(w, h));
  ValueNoise tex(rng, w, h, static_cast<float>(rng.Uniform(0.04, 0.2)) * m);
  ValueNoise fine(rng, w, h, std::max(1.5f, 0.02f * m));
  // The object: shape family and hue from the class; place, size, turn and
  // shade from the image's seed.
  const int shape = static_cast<int>(p.label % 10);
  const float hue = static_cast<float>(p.label) * 0.61803398875f + static_cast<float>(rng.Uniform(-0.03, 0.03));
  const Rgb fg = Hsv(hue, static_cast<float>(rng.Uniform(0.65, 1.0)), static_cast<float>(rng.Uniform(0.6, 1.0)));
  const float radius = static_cast<float>(rng.Uniform(0.28, 0.45)) * m;
  const float cx = static_cast<float>(rng.Uniform(0.35, 0.65)) * w,
              cy = static_cast<float>(rng.Uniform(0.35, 0.65)) * h;
  const float turn = static_cast<float>(rng.Uniform(-0.6, 0.6)), ct = std::cos(turn), st = std::sin(turn);
  Image img(w, h, 3);
  std::vector<float> t(w), f(w);
  Rng grain(p.seed ^ 0x9e3779b97f4a7c15ull);
  for (int y = 0; y < h; ++y) {
    std::fill(t.begin(), t.end(), 0.f);
    std::fill(f.begin(), f.end(), 0.f);
    tex.Row(y, w, t.data(), 30.f);
    fine.Row(y, w, f.data(), 10.f);
    uint8_t* out = img.row(y);
    for (int x = 0; x < w; ++x) {
      const float k = std::clamp(0.5f + (x * gx + y * gy), 0.f, 1.f);
      Rgb c{b0.r + (b1.r - b0.r) * k + t[x], b0.g + (b1.g - b0.g) * k + t[x], b0.b + (b1.b - b0.b) * k + t[x]};
      const float dx = (x - cx) / radius, dy = (y - cy) / radius;
      if (InShape(shape, ct * dx + st * dy, -st * dx + ct * dy)) c = {fg.r + f[x], fg.g + f[x], fg.b + f[x]};
      const uint64_t n = grain.Next();
      const float noise =
          ((static_cast<float>(n & 0xffff) + static_cast<float>((n >> 16) & 0xffff)) / 65535.f - 1.f) * p.grain;
      out[3 * x] = static_cast<uint8_t>(std::clamp(c.r + noise, 0.f, 255.f));
      out[3 * x + 1] = static_cast<uint8_t>(std::clamp(c.g + noise, 0.f, 255.f));
      out[3 * x + 2] = static_cast<uint8_t>(std::clamp(c.b + noise, 0.f, 255.f));
    }
  }
  return img;
}

}  // namespace aq::image
