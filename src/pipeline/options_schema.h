// Every pipeline option declared once: its name, type, default, help and
// how a value sets it (DALI declares each operator argument once and
// generates its Python API from that). The Python binding takes its
// keyword arguments from this table, the Loader its defaults, and the CLI
// its spelled values (dtype, layout, remainder, sizes); a test walks the
// table against a default PipelineOptions so the documented defaults are
// the real ones.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "image/augment.h"
#include "pipeline/pipeline.h"

namespace aq::pipeline {

enum class OptionType {
  kBool,
  kInt,  // a whole number >= 0
  kFloat,
  kText,    // a spelled value (choices), or a size such as "1GiB"
  kFloats,  // a fixed count of numbers (crop_scale: 2, mean: 3)
  kTexts,   // a list of names (fields)
};

using OptionValue = std::variant<bool, int64_t, double, std::string, std::vector<double>, std::vector<std::string>>;

struct OptionSpec {
  std::string_view name;  // the Python keyword (snake_case)
  OptionType type;
  std::string_view default_text;  // as a user writes it
  std::string_view doc;
  std::vector<std::string_view> choices;  // kText values accepted (empty: free text)
  size_t count = 0;                       // kFloats: how many numbers
  // Sets the option. A kInt option also takes a kFloat holding a whole
  // number and a kText size takes a kInt (bytes).
  Status (*set)(PipelineOptions& options, const OptionValue& value) = nullptr;
  // The option's value in `options`, as the binding returns it (a default's
  // value: what OptionDefaults gives).
  OptionValue (*get)(const PipelineOptions& options) = nullptr;
};

// In a stable order (the Loader's signature's).
const std::vector<OptionSpec>& OptionSchema();
// Null for an unknown name.
const OptionSpec* FindOption(std::string_view name);
// InvalidArgument naming the option: an unknown name (with the names
// known), a value of the wrong type, out of range or not a choice.
Status SetOption(PipelineOptions& options, std::string_view name, const OptionValue& value);

// Spelled values, shared by every edge. Case-insensitive.
Result<image::DType> ParseDType(std::string_view text);    // uint8|u8, float16|fp16, float32|fp32
Result<image::Layout> ParseLayout(std::string_view text);  // NCHW, NHWC
Result<Remainder> ParseRemainder(std::string_view text);   // drop, pad
std::string_view DTypeName(image::DType dtype);            // "uint8", "float16", "float32"

}  // namespace aq::pipeline
