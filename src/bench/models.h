// The emulated accelerator's speed: images/s per GPU for a model, GPU and
// precision, each with where the number comes from (docs/models.md lists
// them all). Measured figures come from the reference documents and
// NVIDIA's published results; the rest are derived from those by a stated
// ratio, and say so. `--step-time` overrides any of them.
//
// Thread safety: the table is immutable.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace aq::bench {

struct ModelEntry {
  std::string model;                   // resnet50, resnet152, inception3, inception4, vgg16, googlenet, alexnet
  std::string gpu;                     // v100, a100, h100
  std::string precision;               // fp16 (mixed), fp32 (TF32 on A100/H100)
  double train_images_per_second = 0;  // per GPU, training (forward + backward + update)
  int image_size = 224;
  bool measured = false;  // false: derived from a measured entry by a ratio
  std::string source;
};

const std::vector<ModelEntry>& ModelTable();
Result<ModelEntry> FindModel(const std::string& model, const std::string& gpu, const std::string& precision);

// Forward-only (inference) throughput relative to training: the forward
// pass is about a third of a training step's arithmetic.
inline constexpr double kInferenceSpeedup = 3.0;

}  // namespace aq::bench
