#include "bench/models.h"

#include <fmt/format.h>

namespace aq::bench {
namespace {

// The documents: "Overall FP16 is 65% to 91% faster than FP32" (Dell EMC,
// C4140 V100 study); the midpoint 1.78 turns a V100 fp16 figure into fp32.
constexpr double kV100Fp16OverFp32 = 1.78;
// NVIDIA DeepLearningExamples, PyTorch ResNet-50 v1.5, 1 GPU, pytorch-21.03:
// DGX-1 V100 16GB 1200 img/s mixed / 367 FP32; DGX A100 80GB 2470 mixed /
// 938 TF32. Their ratios carry the other models from V100 to A100.
constexpr double kA100OverV100Mixed = 2470.0 / 1200.0;
constexpr double kA100OverV100Fp32 = 938.0 / 367.0;
// No per-GPU CNN training figure for H100 is in the sources. Assumption: 2x
// A100 (dense FP16 tensor peak is 989 vs 312 TFLOPS, 3.2x, but CNN training
// is far from peak-bound); measure yours and pass --step-time.
constexpr double kH100OverA100 = 2.0;

struct Base {
  const char* model;
  double v100_fp16;
  int size;
  const char* source;
};

// V100 mixed-precision (fp16) training, images/s per GPU.
constexpr Base kBase[] = {
    {"resnet50", 819, 224,
     "Dell EMC DSS 8440 paper, Table 3: TensorFlow CNN benchmarks, ResNet-50, 1x V100-PCIe-32GB, 19.03-py3, fp16"},
    {"googlenet", 1658, 224, "Dell EMC DSS 8440 paper, Table 3: GoogleNet, 1x V100-PCIe-32GB, fp16"},
    {"inception3", 520, 299, "Dell EMC DSS 8440 paper, Table 3: Inception V3, 1x V100-PCIe-32GB, fp16"},
    {"vgg16", 1590.0 / 4, 224,
     "Dell EMC C4140 paper, Table 7: VGG16 1,590 img/s on one node with 4 V100-SXM2, fp16 (per GPU: /4)"},
    {"alexnet", 7095.0 / 4, 224,
     "Dell EMC C4140 paper, Table 7: AlexNet 7,095 img/s on one node with 4 V100-SXM2, fp16 (per GPU: /4)"},
    {"inception4", 19895.0 / 1.3 / 72, 299,
     "Dell EMC DGX-1 paper: large images, Inception-v4, 72 V100 at 98% utilisation read 19,895 MB/s of 1.3 MB "
     "images (= 15,304 img/s, /72 GPUs)"},
    {"resnet152", 819 * 4.1 / 11.5, 224,
     "derived: ResNet-50's 819 img/s x FLOP ratio 4.1/11.5 GFLOPs (He et al. 2016); no measured figure in the "
     "sources"},
};

std::vector<ModelEntry> Build() {
  std::vector<ModelEntry> t;
  for (const auto& b : kBase) {
    const bool base_measured = std::string(b.model) != "resnet152";
    t.push_back({b.model, "v100", "fp16", b.v100_fp16, b.size, base_measured, b.source});
    t.push_back(
        {b.model, "v100", "fp32", b.v100_fp16 / kV100Fp16OverFp32, b.size, false,
         fmt::format("derived: V100 fp16 / {:.2f} (the documents: fp16 65-91% faster than fp32)", kV100Fp16OverFp32)});
    const bool rn50 = std::string(b.model) == "resnet50";
    double a16 = rn50 ? 2470 : b.v100_fp16 * kA100OverV100Mixed;
    double a32 = rn50 ? 938 : b.v100_fp16 / kV100Fp16OverFp32 * kA100OverV100Fp32;
    t.push_back({b.model, "a100", "fp16", a16, b.size, rn50,
                 rn50 ? "NVIDIA DeepLearningExamples PyTorch ResNet-50 v1.5, DGX A100 80GB, 1 GPU, mixed precision"
                      : fmt::format("derived: V100 fp16 x {:.2f} (ResNet-50 A100/V100 mixed precision, NVIDIA "
                                    "DeepLearningExamples)",
                                    kA100OverV100Mixed)});
    t.push_back({b.model, "a100", "fp32", a32, b.size, rn50,
                 rn50 ? "NVIDIA DeepLearningExamples PyTorch ResNet-50 v1.5, DGX A100 80GB, 1 GPU, TF32"
                      : fmt::format("derived: V100 fp32 x {:.2f} (ResNet-50 A100 TF32 / V100 FP32, NVIDIA "
                                    "DeepLearningExamples)",
                                    kA100OverV100Fp32)});
    t.push_back({b.model, "h100", "fp16", a16 * kH100OverA100, b.size, false,
                 fmt::format("assumption: A100 x {:.1f}; no per-GPU H100 figure in the sources", kH100OverA100)});
    t.push_back({b.model, "h100", "fp32", a32 * kH100OverA100, b.size, false,
                 fmt::format("assumption: A100 x {:.1f}; no per-GPU H100 figure in the sources", kH100OverA100)});
  }
  return t;
}

}  // namespace

const std::vector<ModelEntry>& ModelTable() {
  static const std::vector<ModelEntry> table = Build();
  return table;
}

Result<ModelEntry> FindModel(const std::string& model, const std::string& gpu, const std::string& precision) {
  std::string models;
  for (const auto& e : ModelTable()) {
    if (e.model == model && e.gpu == gpu && e.precision == precision) return e;
    if (e.gpu == "v100" && e.precision == "fp16") models += (models.empty() ? "" : ", ") + e.model;
  }
  return NotFound(
      fmt::format("no model entry for {} on {} in {} (models: {}; GPUs: v100, a100, h100; "
                  "precision: fp16, fp32)",
                  model, gpu, precision, models));
}

}  // namespace aq::bench
