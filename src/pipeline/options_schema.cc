#include "pipeline/options_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "common/units.h"
#include "dataset/dataset.h"
#include "format/error_policy.h"
#include "format/tar.h"
#include "io/multi_root.h"

namespace aq::pipeline {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The option being set, for messages (set by SetOption around each call).
thread_local std::string_view current;

Status Wrong(std::string_view expected) {
  return InvalidArgument(fmt::format("option {}: expected {}", current, expected));
}

Result<bool> AsBool(const OptionValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return Wrong("True or False");
}

Result<int64_t> AsInt(const OptionValue& v, int64_t lo = 0, int64_t hi = std::numeric_limits<int64_t>::max()) {
  int64_t n;
  if (const auto* i = std::get_if<int64_t>(&v)) {
    n = *i;
  } else if (const auto* d = std::get_if<double>(&v);
             d != nullptr && std::isfinite(*d) && *d == std::floor(*d) && std::abs(*d) < 9e18) {
    n = static_cast<int64_t>(*d);
  } else {
    return Wrong("a whole number");
  }
  if (n < lo || n > hi) return Wrong(fmt::format("a whole number from {} to {}, not {}", lo, hi, n));
  return n;
}

Result<std::string> AsText(const OptionValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  return Wrong("a string");
}

Result<std::vector<double>> AsFloats(const OptionValue& v, size_t count) {
  if (const auto* f = std::get_if<std::vector<double>>(&v); f != nullptr && f->size() == count) {
    for (double x : *f) {
      if (!std::isfinite(x)) return Wrong(fmt::format("{} finite numbers", count));
    }
    return *f;
  }
  return Wrong(fmt::format("{} numbers", count));
}

// Applies a parse of text (with its own message) under the option's name.
template <typename T>
Result<T> Spelled(Result<T> r) {
  if (!r.ok()) return InvalidArgument(fmt::format("option {}: {}", current, r.status().message()));
  return r;
}

OptionValue Floats(std::initializer_list<double> v) { return std::vector<double>(v); }

// Long by design: one entry per option, each a few lines, in the Loader's order.
const std::vector<OptionSpec>& Table() {
  using O = PipelineOptions;
  using V = OptionValue;
  static const std::vector<OptionSpec> table = {
      {"data",
       OptionType::kText,
       "",
       "TFRecord shards, .rec files, WebDataset .tar shards or an image folder; several roots of the same data as "
       "ROOT1:ROOT2",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.data = AQ_TRY(AsText(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.data; }},
      {"format",
       OptionType::kText,
       "auto",
       "auto, tfrecord, recordio, wds (WebDataset) or folder",
       {"auto", "tfrecord", "recordio", "wds", "webdataset", "folder"},
       0,
       [](O& o, const V& v) -> Status {
         o.format = AQ_TRY(Spelled(dataset::ParseFormat(AQ_TRY(AsText(v)))));
         return Status::Ok();
       },
       [](const O& o) -> V { return std::string(dataset::FormatName(o.format)); }},
      {"root_policy",
       OptionType::kText,
       "spread",
       "with several roots: spread (files over all) or pinned (rank r reads root r % roots)",
       {"spread", "pinned"},
       0,
       [](O& o, const V& v) -> Status {
         o.root_policy = AQ_TRY(Spelled(io::ParseRootPolicy(AQ_TRY(AsText(v)))));
         return Status::Ok();
       },
       [](const O& o) -> V { return std::string(o.root_policy == io::RootPolicy::kPinned ? "pinned" : "spread"); }},
      {"batch_size",
       OptionType::kInt,
       "256",
       "samples per batch",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.batch_size = static_cast<uint32_t>(AQ_TRY(AsInt(v, 1, 1 << 20)));
         return Status::Ok();
       },
       [](const O& o) -> V { return int64_t{o.batch_size}; }},
      {"image_size",
       OptionType::kInt,
       "224",
       "output side in pixels (299 for Inception)",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.image_size = static_cast<int>(AQ_TRY(AsInt(v, 1, 16384)));
         return Status::Ok();
       },
       [](const O& o) -> V { return int64_t{o.image_size}; }},
      {"training",
       OptionType::kBool,
       "True",
       "RandomResizedCrop and flip; False: resize and centre crop",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.training = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.training; }},
      {"eval_resize",
       OptionType::kInt,
       "256",
       "evaluation: the shorter side before the centre crop",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.eval_resize = static_cast<int>(AQ_TRY(AsInt(v, 1, 16384)));
         return Status::Ok();
       },
       [](const O& o) -> V { return int64_t{o.eval_resize}; }},
      {"crop_scale",
       OptionType::kFloats,
       "(0.08, 1.0)",
       "RandomResizedCrop's area range",
       {},
       2,
       [](O& o, const V& v) -> Status {
         auto f = AQ_TRY(AsFloats(v, 2));
         if (!(f[0] > 0 && f[0] <= f[1] && f[1] <= 1)) return Wrong("0 < min <= max <= 1");
         o.crop.scale_min = f[0];
         o.crop.scale_max = f[1];
         return Status::Ok();
       },
       [](const O& o) -> V {
         return Floats({o.crop.scale_min, o.crop.scale_max});
       }},
      {"crop_ratio",
       OptionType::kFloats,
       "(3/4, 4/3)",
       "RandomResizedCrop's aspect range",
       {},
       2,
       [](O& o, const V& v) -> Status {
         auto f = AQ_TRY(AsFloats(v, 2));
         if (!(f[0] > 0 && f[0] <= f[1])) return Wrong("0 < min <= max");
         o.crop.ratio_min = f[0];
         o.crop.ratio_max = f[1];
         return Status::Ok();
       },
       [](const O& o) -> V {
         return Floats({o.crop.ratio_min, o.crop.ratio_max});
       }},
      {"jitter",
       OptionType::kFloats,
       "None",
       "colour jitter (brightness, contrast, saturation); None: off",
       {},
       3,
       [](O& o, const V& v) -> Status {
         auto f = AQ_TRY(AsFloats(v, 3));
         if (f[0] < 0 || f[1] < 0 || f[2] < 0) return Wrong("three numbers >= 0");
         o.jitter = {static_cast<float>(f[0]), static_cast<float>(f[1]), static_cast<float>(f[2])};
         return Status::Ok();
       },
       [](const O& o) -> V {
         return Floats({o.jitter.brightness, o.jitter.contrast, o.jitter.saturation});
       }},
      {"bbox_crop",
       OptionType::kBool,
       "False",
       "training crops from the records' bounding boxes (TensorFlow's method)",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.bbox_crop = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.bbox_crop; }},
      {"dtype",
       OptionType::kText,
       "float32",
       "uint8 (raw pixels, not normalised), float16 or float32",
       {"uint8", "u8", "float16", "fp16", "float32", "fp32"},
       0,
       [](O& o, const V& v) -> Status {
         o.store.dtype = AQ_TRY(Spelled(ParseDType(AQ_TRY(AsText(v)))));
         return Status::Ok();
       },
       [](const O& o) -> V { return std::string(DTypeName(o.store.dtype)); }},
      {"layout",
       OptionType::kText,
       "NCHW",
       "NCHW or NHWC",
       {"NCHW", "NHWC"},
       0,
       [](O& o, const V& v) -> Status {
         o.store.layout = AQ_TRY(Spelled(ParseLayout(AQ_TRY(AsText(v)))));
         return Status::Ok();
       },
       [](const O& o) -> V { return std::string(o.store.layout == image::Layout::kNHWC ? "NHWC" : "NCHW"); }},
      {"mean",
       OptionType::kFloats,
       "(0.485, 0.456, 0.406)",
       "per-channel mean on the 0..1 scale",
       {},
       3,
       [](O& o, const V& v) -> Status {
         auto f = AQ_TRY(AsFloats(v, 3));
         for (int c = 0; c < 3; ++c) o.store.mean[c] = static_cast<float>(f[c] * 255);
         return Status::Ok();
       },
       [](const O& o) -> V {
         return Floats({o.store.mean[0] / 255.0, o.store.mean[1] / 255.0, o.store.mean[2] / 255.0});
       }},
      {"std",
       OptionType::kFloats,
       "(0.229, 0.224, 0.225)",
       "per-channel standard deviation on the 0..1 scale",
       {},
       3,
       [](O& o, const V& v) -> Status {
         auto f = AQ_TRY(AsFloats(v, 3));
         if (f[0] <= 0 || f[1] <= 0 || f[2] <= 0) return Wrong("three numbers > 0");
         for (int c = 0; c < 3; ++c) o.store.std[c] = static_cast<float>(f[c] * 255);
         return Status::Ok();
       },
       [](const O& o) -> V {
         return Floats({o.store.std[0] / 255.0, o.store.std[1] / 255.0, o.store.std[2] / 255.0});
       }},
      {"normalize",
       OptionType::kBool,
       "True",
       "(x - mean) / std for float outputs",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.store.normalize = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.store.normalize; }},
      {"seed",
       OptionType::kInt,
       "1",
       "the seed of the file order, the shuffle and the augmentation",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.seed = static_cast<uint64_t>(AQ_TRY(AsInt(v)));
         return Status::Ok();
       },
       [](const O& o) -> V { return static_cast<int64_t>(o.seed); }},
      {"shuffle",
       OptionType::kBool,
       "True",
       "False: files in name order and no sample shuffle",
       {},
       0,
       [](O& o, const V& v) -> Status {
         if (!AQ_TRY(AsBool(v))) {
           o.shuffle_files = false;
           o.shuffle_buffer = 1;
         }
         return Status::Ok();
       },
       [](const O& o) -> V { return o.shuffle_files || o.shuffle_buffer > 1; }},
      {"shuffle_buffer",
       OptionType::kInt,
       "1024",
       "samples in the shuffle buffer (1: no sample shuffle)",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.shuffle_buffer = static_cast<uint64_t>(AQ_TRY(AsInt(v, 1, 1ll << 32)));
         return Status::Ok();
       },
       [](const O& o) -> V { return static_cast<int64_t>(o.shuffle_buffer); }},
      {"shuffle_files",
       OptionType::kBool,
       "True",
       "shuffle the order of files (shards) every epoch",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.shuffle_files = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.shuffle_files; }},
      {"first_epoch",
       OptionType::kInt,
       "0",
       "the number of the first epoch run (it picks that epoch's order)",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.first_epoch = static_cast<uint32_t>(AQ_TRY(AsInt(v, 0, UINT32_MAX)));
         return Status::Ok();
       },
       [](const O& o) -> V { return int64_t{o.first_epoch}; }},
      {"epochs",
       OptionType::kInt,
       "1",
       "epochs run by one pipeline",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.epochs = static_cast<uint32_t>(AQ_TRY(AsInt(v, 1, UINT32_MAX)));
         return Status::Ok();
       },
       [](const O& o) -> V { return int64_t{o.epochs}; }},
      {"start_step",
       OptionType::kInt,
       "0",
       "batches of the first epoch already delivered (resuming)",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.start_step = static_cast<uint64_t>(AQ_TRY(AsInt(v)));
         return Status::Ok();
       },
       [](const O& o) -> V { return static_cast<int64_t>(o.start_step); }},
      {"remainder",
       OptionType::kText,
       "drop",
       "equal steps per rank by: drop or pad",
       {"drop", "pad"},
       0,
       [](O& o, const V& v) -> Status {
         o.remainder = AQ_TRY(Spelled(ParseRemainder(AQ_TRY(AsText(v)))));
         return Status::Ok();
       },
       [](const O& o) -> V { return std::string(o.remainder == Remainder::kPad ? "pad" : "drop"); }},
      {"threads",
       OptionType::kInt,
       "0",
       "decode threads (0: one per core)",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.workers = static_cast<size_t>(AQ_TRY(AsInt(v, 0, 4096)));
         return Status::Ok();
       },
       [](const O& o) -> V { return static_cast<int64_t>(o.workers); }},
      {"readers",
       OptionType::kInt,
       "1",
       "reader threads",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.readers = static_cast<size_t>(AQ_TRY(AsInt(v, 1, 4096)));
         return Status::Ok();
       },
       [](const O& o) -> V { return static_cast<int64_t>(o.readers); }},
      {"plan_ahead",
       OptionType::kInt,
       "1024",
       "reads sent ahead to the store in the epoch's order, so it stages them from slow media (0 = off)",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.plan_ahead = static_cast<size_t>(AQ_TRY(AsInt(v, 0, 1 << 20)));
         return Status::Ok();
       },
       [](const O& o) -> V { return static_cast<int64_t>(o.plan_ahead); }},
      {"prefetch",
       OptionType::kInt,
       "2",
       "batches prepared beyond the one being consumed",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.prefetch_batches = static_cast<size_t>(AQ_TRY(AsInt(v, 0, 1024)));
         return Status::Ok();
       },
       [](const O& o) -> V { return static_cast<int64_t>(o.prefetch_batches); }},
      {"memory_limit",
       OptionType::kText,
       "2GiB",
       "the most the pipeline may hold (batches, payloads, scratch), checked before it starts",
       {},
       0,
       [](O& o, const V& v) -> Status {
         if (std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v)) {
           o.memory_limit = static_cast<uint64_t>(AQ_TRY(AsInt(v, 1)));
         } else {
           o.memory_limit = AQ_TRY(Spelled(units::ParseBytes(AQ_TRY(AsText(v)))));
         }
         return Status::Ok();
       },
       [](const O& o) -> V { return static_cast<int64_t>(o.memory_limit); }},
      {"on_error",
       OptionType::kText,
       "skip",
       "a bad sample: skip (replaced within its batch) or fail",
       {"skip", "fail"},
       0,
       [](O& o, const V& v) -> Status {
         o.policy = AQ_TRY(Spelled(format::ParseErrorPolicy(AQ_TRY(AsText(v)))));
         return Status::Ok();
       },
       [](const O& o) -> V { return std::string(o.policy == format::ErrorPolicy::kFail ? "fail" : "skip"); }},
      {"labels_zero_based",
       OptionType::kBool,
       "True",
       "TFRecord's 1-based ImageNet labels become 0-based",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.labels_zero_based = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.labels_zero_based; }},
      {"allow_empty_classes",
       OptionType::kBool,
       "False",
       "an image folder's class folder with no image keeps its label instead of stopping (torchvision's allow_empty)",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.allow_empty_classes = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.allow_empty_classes; }},
      {"wds_image",
       OptionType::kText,
       format::kWdsImageDefault,
       "WebDataset: the image member's extensions, in order of preference (whole extensions: jpg, v2.jpg)",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.wds_image = AQ_TRY(AsText(v));
         AQ_TRY(Spelled(format::ParseWdsSchema(o.wds_image, format::kWdsLabelDefault)));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.wds_image; }},
      {"wds_label",
       OptionType::kText,
       format::kWdsLabelDefault,
       "WebDataset: the label member (cls, v2.cls, json:PATH for a field of KEY.json, or none)",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.wds_label = AQ_TRY(AsText(v));
         AQ_TRY(Spelled(format::ParseWdsSchema(format::kWdsImageDefault, o.wds_label)));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.wds_label; }},
      {"dct_scaling",
       OptionType::kBool,
       "True",
       "decode at 1/2, 1/4, 1/8 scale when the crop allows",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.dct_scaling = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.dct_scaling; }},
      {"eval_dct_scaling",
       OptionType::kBool,
       "False",
       "evaluation decodes at 1/2, 1/4, 1/8 scale too (else at full size, as torchvision)",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.eval_dct_scaling = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.eval_dct_scaling; }},
      {"fast_idct",
       OptionType::kBool,
       "False",
       "libjpeg's fast integer IDCT (slightly less accurate)",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.fast_idct = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.fast_idct; }},
      {"damage_check",
       OptionType::kBool,
       "True",
       "read each JPEG to its end once per run, so damage below a crop is reported",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.damage_check = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.damage_check; }},
      {"encoded_images",
       OptionType::kBool,
       "False",
       "deliver each JPEG a GPU decoder takes undecoded, with its crop and flip (the Loader's decode=\"gpu\")",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.encoded_images = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.encoded_images; }},
      {"use_manifest",
       OptionType::kBool,
       "True",
       "samples the dataset's aquifer-manifest.json lists as verified clean skip the damage check while their bytes "
       "match",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.use_manifest = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.use_manifest; }},
      {"verify_crc",
       OptionType::kBool,
       "True",
       "check the records' checksums",
       {},
       0,
       [](O& o, const V& v) -> Status {
         o.verify_crc = AQ_TRY(AsBool(v));
         return Status::Ok();
       },
       [](const O& o) -> V { return o.verify_crc; }},
      {"fields",
       OptionType::kTexts,
       "None",
       "extra fields per sample: tf.Example keys, WebDataset extensions, RecordIO's labels and id",
       {},
       0,
       [](O& o, const V& v) -> Status {
         const auto* t = std::get_if<std::vector<std::string>>(&v);
         if (t == nullptr) return Wrong("a list of names");
         o.fields = *t;
         return Status::Ok();
       },
       [](const O& o) -> V { return o.fields; }},
  };
  return table;
}

}  // namespace

const std::vector<OptionSpec>& OptionSchema() { return Table(); }

const OptionSpec* FindOption(std::string_view name) {
  for (const auto& s : Table()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Status SetOption(PipelineOptions& options, std::string_view name, const OptionValue& value) {
  const OptionSpec* spec = FindOption(name);
  if (spec == nullptr) {
    std::string known;
    for (const auto& s : Table()) known += (known.empty() ? "" : ", ") + std::string(s.name);
    return InvalidArgument(fmt::format("unknown option '{}' (options: {})", name, known));
  }
  current = spec->name;
  Status s = spec->set(options, value);
  current = {};
  return s;
}

Result<image::DType> ParseDType(std::string_view text) {
  const std::string t = Lower(text);
  if (t == "uint8" || t == "u8") return image::DType::kUint8;
  if (t == "float16" || t == "fp16") return image::DType::kFloat16;
  if (t == "float32" || t == "fp32") return image::DType::kFloat32;
  return InvalidArgument(fmt::format("dtype '{}': expected uint8 (u8), float16 (fp16) or float32 (fp32)", text));
}

Result<image::Layout> ParseLayout(std::string_view text) {
  const std::string t = Lower(text);
  if (t == "nchw") return image::Layout::kNCHW;
  if (t == "nhwc") return image::Layout::kNHWC;
  return InvalidArgument(fmt::format("layout '{}': expected NCHW or NHWC", text));
}

Result<Remainder> ParseRemainder(std::string_view text) {
  const std::string t = Lower(text);
  if (t == "drop") return Remainder::kDrop;
  if (t == "pad") return Remainder::kPad;
  return InvalidArgument(fmt::format("remainder '{}': expected drop or pad", text));
}

std::string_view DTypeName(image::DType dtype) {
  switch (dtype) {
    case image::DType::kUint8: return "uint8";
    case image::DType::kFloat16: return "float16";
    case image::DType::kFloat32: return "float32";
  }
  return "float32";
}

}  // namespace aq::pipeline
