// tf.Example: the protobuf message TensorFlow's ImageNet converters put in
// each TFRecord. Encoded and decoded here directly in the protobuf wire
// format (no generated code, no libprotobuf), from the schema
//
//   message Example  { Features features = 1; }
//   message Features { map<string, Feature> feature = 1; }
//   message Feature  { oneof kind { BytesList bytes_list = 1;
//                                   FloatList float_list = 2;
//                                   Int64List int64_list = 3; } }
//   message BytesList { repeated bytes value = 1; }
//   message FloatList { repeated float value = 1 [packed = true]; }
//   message Int64List { repeated int64 value = 1 [packed = true]; }
//
// Decoding accepts packed and unpacked lists and skips unknown fields, as any
// protobuf parser does. Encoding is deterministic (features sorted by key,
// lists packed): byte-identical to protobuf's deterministic serialization.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace aq::format {

enum class FeatureKind : uint8_t { kNone, kBytes, kFloat, kInt64 };

struct Feature {
  FeatureKind kind = FeatureKind::kNone;
  std::vector<std::string> bytes;
  std::vector<float> floats;
  std::vector<int64_t> ints;

  static Feature Bytes(std::vector<std::string> v) { return {FeatureKind::kBytes, std::move(v), {}, {}}; }
  static Feature Floats(std::vector<float> v) { return {FeatureKind::kFloat, {}, std::move(v), {}}; }
  static Feature Ints(std::vector<int64_t> v) { return {FeatureKind::kInt64, {}, {}, std::move(v)}; }
  bool operator==(const Feature&) const = default;
};

// A tf.Example: features by key, kept sorted.
struct Example {
  std::map<std::string, Feature> features;
  bool operator==(const Example&) const = default;
};

// A feature seen while walking a serialized Example without copying: `raw` is
// the serialized Feature message inside the record.
struct FeatureView {
  std::string_view key;
  std::string_view raw;
};

// Calls fn for every feature of the serialized Example (duplicated keys are
// reported each time; the last one wins in ParseExample). Errors on
// malformed wire data.
Status ForEachFeature(std::string_view serialized, const std::function<Status(const FeatureView&)>& fn);

// Decodes one serialized Feature.
Result<Feature> ParseFeature(std::string_view raw);
// Decodes a BytesList feature into views of `raw` (no copy). Empty if the
// feature holds another kind.
Result<std::vector<std::string_view>> ParseBytesFeatureView(std::string_view raw);

Result<Example> ParseExample(std::string_view serialized);
std::string SerializeExample(const Example& example);

// ---- The ImageNet schema of TensorFlow's build_imagenet_data.py ----
namespace keys {
inline constexpr std::string_view kEncoded = "image/encoded";
inline constexpr std::string_view kLabel = "image/class/label";
inline constexpr std::string_view kHeight = "image/height";
inline constexpr std::string_view kWidth = "image/width";
inline constexpr std::string_view kChannels = "image/channels";
inline constexpr std::string_view kColorspace = "image/colorspace";
inline constexpr std::string_view kFormat = "image/format";
inline constexpr std::string_view kFilename = "image/filename";
inline constexpr std::string_view kSynset = "image/class/synset";
inline constexpr std::string_view kText = "image/class/text";
inline constexpr std::string_view kXmin = "image/object/bbox/xmin";
inline constexpr std::string_view kYmin = "image/object/bbox/ymin";
inline constexpr std::string_view kXmax = "image/object/bbox/xmax";
inline constexpr std::string_view kYmax = "image/object/bbox/ymax";
inline constexpr std::string_view kBboxLabel = "image/object/bbox/label";
}  // namespace keys

struct BBox {
  float xmin = 0, ymin = 0, xmax = 0, ymax = 0;  // normalised to [0, 1]
  bool operator==(const BBox&) const = default;
};

struct ImageRecord {
  std::string encoded;  // JPEG bytes
  int64_t label = -1;   // 1..1000 for ImageNet (0 is TF's background class)
  int64_t height = 0, width = 0, channels = 3;
  std::string colorspace = "RGB";
  std::string format = "JPEG";
  std::string filename, synset, text;
  std::vector<BBox> boxes;
  bool operator==(const ImageRecord&) const = default;
};

// Builds the Example exactly as build_imagenet_data.py does (bbox lists
// present even when empty).
Example ToExample(const ImageRecord& record);
// Reads the ImageNet keys. Missing image/encoded or image/class/label is
// kCorruption; other keys default; unknown keys are ignored.
Result<ImageRecord> FromExample(const Example& example);

// Zero-copy view of the fields a training pipeline needs.
struct ImageFieldsView {
  std::string_view encoded;
  int64_t label = -1;
  bool has_label = false;
  int64_t height = 0, width = 0;
  std::string_view filename;
};
Result<ImageFieldsView> ParseImageFields(std::string_view serialized);

}  // namespace aq::format
