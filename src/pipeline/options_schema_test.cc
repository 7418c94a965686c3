#include "pipeline/options_schema.h"

#include <gtest/gtest.h>

#include <cctype>
#include <set>

#include "common/units.h"

namespace aq::pipeline {
namespace {

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The default each entry documents is the value a default PipelineOptions
// holds: a changed default in one place shows here.
TEST(OptionSchemaTest, DocumentedDefaultsAreTheRealOnes) {
  const PipelineOptions defaults;
  std::set<std::string_view> names;
  for (const auto& spec : OptionSchema()) {
    SCOPED_TRACE(std::string(spec.name));
    EXPECT_TRUE(names.insert(spec.name).second) << "declared twice";
    EXPECT_FALSE(spec.doc.empty());
    ASSERT_NE(spec.set, nullptr);
    ASSERT_NE(spec.get, nullptr);
    const OptionValue v = spec.get(defaults);
    switch (spec.type) {
      case OptionType::kBool: EXPECT_EQ(std::get<bool>(v) ? "True" : "False", spec.default_text); break;
      case OptionType::kInt: EXPECT_EQ(std::to_string(std::get<int64_t>(v)), spec.default_text); break;
      case OptionType::kText:
        if (spec.name == "memory_limit") {
          EXPECT_EQ(std::get<int64_t>(v), static_cast<int64_t>(*units::ParseBytes(spec.default_text)));
        } else {
          EXPECT_EQ(Lower(std::get<std::string>(v)), Lower(std::string(spec.default_text)));
        }
        break;
      case OptionType::kFloats: {
        const auto& f = std::get<std::vector<double>>(v);
        EXPECT_EQ(f.size(), spec.count);
        if (spec.default_text == "None") {
          for (double x : f) EXPECT_EQ(x, 0);  // off
        }
        break;
      }
      case OptionType::kTexts: EXPECT_TRUE(std::get<std::vector<std::string>>(v).empty()); break;
      case OptionType::kFloat: break;
    }
    // Setting the default back changes nothing.
    if (spec.type != OptionType::kText || spec.name != "data") {
      PipelineOptions o;
      ASSERT_TRUE(SetOption(o, spec.name, v).ok());
      EXPECT_EQ(spec.get(o), v);
    }
  }
  EXPECT_GE(names.size(), 35u);
}

TEST(OptionSchemaTest, ValuesSetTheirFields) {
  PipelineOptions o;
  ASSERT_TRUE(SetOption(o, "dtype", std::string("fp16")).ok());
  EXPECT_EQ(o.store.dtype, image::DType::kFloat16);
  ASSERT_TRUE(SetOption(o, "layout", std::string("nhwc")).ok());
  EXPECT_EQ(o.store.layout, image::Layout::kNHWC);
  ASSERT_TRUE(SetOption(o, "memory_limit", std::string("2GiB")).ok());
  EXPECT_EQ(o.memory_limit, 2ull << 30);
  ASSERT_TRUE(SetOption(o, "memory_limit", int64_t{12345}).ok());
  EXPECT_EQ(o.memory_limit, 12345u);
  ASSERT_TRUE(SetOption(o, "batch_size", 64.0).ok());  // a whole float is a whole number
  EXPECT_EQ(o.batch_size, 64u);
  ASSERT_TRUE(SetOption(o, "mean", std::vector<double>{0.5, 0.5, 0.5}).ok());
  EXPECT_FLOAT_EQ(o.store.mean[1], 127.5f);
  ASSERT_TRUE(SetOption(o, "threads", int64_t{3}).ok());
  EXPECT_EQ(o.workers, 3u);
  ASSERT_TRUE(SetOption(o, "shuffle", false).ok());
  EXPECT_FALSE(o.shuffle_files);
  EXPECT_EQ(o.shuffle_buffer, 1u);
  ASSERT_TRUE(SetOption(o, "fields", std::vector<std::string>{"bbox", "id"}).ok());
  EXPECT_EQ(o.fields.size(), 2u);
}

TEST(OptionSchemaTest, BadValuesNameTheOption) {
  PipelineOptions o;
  struct Case {
    const char* name;
    OptionValue value;
    const char* says;
  };
  for (const auto& c : std::vector<Case>{
           {"batch_size", int64_t{0}, "option batch_size: expected a whole number from 1"},
           {"batch_size", 2.5, "option batch_size: expected a whole number"},
           {"batch_size", std::string("8"), "option batch_size: expected a whole number"},
           {"training", int64_t{1}, "option training: expected True or False"},
           {"dtype", std::string("int7"), "option dtype: dtype 'int7'"},
           {"layout", std::string("CHWN"), "option layout: layout 'CHWN'"},
           {"remainder", std::string("keep"), "option remainder: remainder 'keep'"},
           {"crop_scale", std::vector<double>{0.5}, "option crop_scale: expected 2 numbers"},
           {"crop_scale", std::vector<double>{0.9, 0.1}, "0 < min <= max <= 1"},
           {"std", std::vector<double>{1, 0, 1}, "three numbers > 0"},
           {"memory_limit", std::string("lots"), "option memory_limit"},
           {"on_error", std::string("ignore"), "option on_error"},
           {"shuffle_buffer", int64_t{-1}, "option shuffle_buffer"},
           {"no_such", int64_t{1}, "unknown option 'no_such' (options: data, format"},
       }) {
    Status s = SetOption(o, c.name, c.value);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
  }
}

TEST(OptionSchemaTest, SpelledValuesAnyCase) {
  EXPECT_EQ(*ParseDType("UINT8"), image::DType::kUint8);
  EXPECT_EQ(*ParseDType("u8"), image::DType::kUint8);
  EXPECT_EQ(*ParseDType("Float32"), image::DType::kFloat32);
  EXPECT_EQ(*ParseLayout("nchw"), image::Layout::kNCHW);
  EXPECT_EQ(*ParseRemainder("PAD"), Remainder::kPad);
  EXPECT_EQ(DTypeName(image::DType::kFloat16), "float16");
  EXPECT_FALSE(ParseDType("").ok());
}

}  // namespace
}  // namespace aq::pipeline
