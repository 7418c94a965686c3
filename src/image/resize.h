// Resampling with an antialiased triangle (bilinear) filter whose support
// widens when shrinking: PIL's BILINEAR resize, which torchvision uses for
// PIL images. A source region (fractional box) can be given, like PIL's
// resize(box=...), so crop + resize is one pass whose edge pixels match
// resizing the whole image and then cropping.
//
// Thread safety: a Resampler belongs to one thread; it keeps its buffers
// between calls so steady-state resizing allocates nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.h"
#include "image/image.h"

namespace aq::image {

class Resampler {
 public:
  // Resizes the box (x, y, w, h) of src to out_w x out_h into *out (its
  // buffer is reused). REQUIRES: out != &src.
  Status Run(const Image& src, double x, double y, double w, double h, int out_w, int out_h, Image* out);
  // The same, handing each output row (out_w x channels bytes, valid during
  // the call) to `row` in order instead of keeping the image.
  using RowSink = std::function<void(int y, const uint8_t* row)>;
  Status Run(const Image& src, double x, double y, double w, double h, int out_w, int out_h, const RowSink& row);

  // The hot loops' code: portable C++ (vectorised by the compiler), SSE
  // (a four-float multiply-add per tap of an RGB pixel) or AVX2 + FMA (four
  // pixels' taps in two eight-float FMAs; the vertical pass fused with the
  // rounding to bytes). Every path equals the portable one within one level.
  enum class Kernels { kPortable, kSse, kAvx2 };
  // The best this CPU runs (kPortable under AQUIFER_NO_SIMD=1).
  static Kernels BestKernels();
  // Tests and benchmarks: a lower level than the best (a higher one than
  // the CPU has is lowered to BestKernels()).
  void set_kernels(Kernels k) { kernels_ = std::min(k, BestKernels()); }
  Kernels kernels() const { return kernels_; }

 private:
  struct Taps {
    std::vector<int> first, count;
    std::vector<float> weights;
    int max_taps = 0;
  };
  static void Compute(Taps* t, int in_size, double box_start, double box_size, int out_size);
  void Horizontal(const Image& src, int row_lo, int row_hi, int col_lo, int col_hi, int ow);
  Status Resample(const Image& src, double x, double y, double w, double h, int out_w, int out_h, Image* out,
                  const RowSink* sink);
  Status Vertical(int out_h, int row_lo, size_t row_len, int channels, int out_w, Image* out, const RowSink* sink);

  Kernels kernels_ = BestKernels();

  Taps tx_, ty_;
  std::vector<float> row_f_;  // one source row as floats
  std::vector<float> mid_;    // horizontally resampled rows
  std::vector<float> acc_;
  std::vector<float> group_w_;          // AVX2: tap weights of four output pixels, each broadcast 4x
  std::vector<int> group_n_;            // AVX2: taps of each group of four output pixels
  std::vector<const float*> tap_rows_;  // AVX2: the vertical taps' rows
  std::vector<uint8_t> row_out_;        // one output row, for a sink
};

// out[i] = in[i] rounded half up and clamped to 0..255 (SIMD where there is).
void RoundToBytes(const float* in, uint8_t* out, size_t n);

// Convenience: whole image to out_width x out_height.
Result<Image> Resize(const Image& src, int out_width, int out_height);

}  // namespace aq::image
