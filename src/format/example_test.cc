#include "format/example.h"

#include <gtest/gtest.h>

namespace aq::format {
namespace {

TEST(Example, EncodesExactlyAsProtobuf) {
  // Example{features{feature{key:"a" value{int64_list{value:[1]}}}}}, worked
  // out by hand from the wire format.
  Example ex;
  ex.features["a"] = Feature::Ints({1});
  EXPECT_EQ(SerializeExample(ex), std::string("\x0a\x0c\x0a\x0a\x0a\x01"
                                              "a\x12\x05\x1a\x03\x0a\x01\x01",
                                              14));
}

TEST(Example, RoundTripsAllKinds) {
  Example ex;
  ex.features["bytes"] = Feature::Bytes({"x", "", std::string(300, 'y')});
  ex.features["floats"] = Feature::Floats({0.5f, -1.25f, 3e10f});
  ex.features["ints"] = Feature::Ints({0, -1, 1ll << 40, INT64_MIN});
  ex.features["empty_floats"] = Feature::Floats({});
  ex.features["none"] = Feature{};
  auto back = ParseExample(SerializeExample(ex));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  // An empty Feature stays an empty Feature; an empty list keeps its kind.
  EXPECT_EQ(*back, ex);
}

TEST(Example, AcceptsUnpackedListsAndSkipsUnknownFields) {
  // Feature{float_list{value: 1.0 (unpacked)}, unknown field 9 varint}
  std::string float_list = std::string("\x0d\x00\x00\x80\x3f", 5);
  std::string feature = std::string("\x12") + static_cast<char>(float_list.size()) + float_list + "\x48\x07";
  auto f = ParseFeature(feature);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->kind, FeatureKind::kFloat);
  EXPECT_EQ(f->floats, std::vector<float>{1.0f});
  // Int64List unpacked: 08 05 08 06
  auto g = ParseFeature(std::string("\x1a\x04\x08\x05\x08\x06", 6));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->ints, (std::vector<int64_t>{5, 6}));
}

TEST(Example, MalformedWireDataIsCorruption) {
  Example ex;
  ex.features["k"] = Feature::Bytes({"value"});
  std::string good = SerializeExample(ex);
  for (size_t cut = 1; cut < good.size(); ++cut) {
    auto r = ParseExample(good.substr(0, cut));
    EXPECT_FALSE(r.ok()) << "cut " << cut;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    }
  }
  EXPECT_FALSE(ParseExample("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01").ok());  // varint > 10 bytes
  EXPECT_FALSE(ParseExample("\x0b").ok());                                              // group wire type
  EXPECT_TRUE(ParseExample("")->features.empty());
}

TEST(Example, UnknownFeaturesArePreserved) {
  Example ex = ToExample(ImageRecord{"\xff\xd8\xff", 7});
  ex.features["my/extra"] = Feature::Bytes({"kept"});
  auto back = ParseExample(SerializeExample(ex));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->features.at("my/extra").bytes.front(), "kept");
  auto rec = FromExample(*back);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->label, 7);
}

TEST(ImageRecord, RoundTripsTheImageNetSchema) {
  ImageRecord r;
  r.encoded = std::string("\xff\xd8\xff\xe0 jpeg bytes", 15);
  r.label = 417;
  r.height = 375;
  r.width = 500;
  r.filename = "n01440764_10026.JPEG";
  r.synset = "n01440764";
  r.text = "tench, Tinca tinca";
  r.boxes = {{0.1f, 0.2f, 0.9f, 0.8f}, {0.f, 0.f, 1.f, 1.f}};
  Example ex = ToExample(r);
  EXPECT_EQ(ex.features.size(), 15u);
  EXPECT_EQ(ex.features.at("image/object/bbox/label").ints, (std::vector<int64_t>{417, 417}));
  auto back = FromExample(*ParseExample(SerializeExample(ex)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, r);
  const std::string serialized = SerializeExample(ex);  // the view below points into it
  auto view = ParseImageFields(serialized);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->encoded, r.encoded);
  EXPECT_EQ(view->label, 417);
  EXPECT_EQ(view->width, 500);
  EXPECT_EQ(view->filename, r.filename);
}

TEST(ImageRecord, MissingImageOrLabelIsCorruption) {
  Example ex;
  ex.features["image/encoded"] = Feature::Bytes({"x"});
  auto r = FromExample(ex);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("label"), std::string::npos);
  const std::string serialized = SerializeExample(ex);
  auto v = ParseImageFields(serialized);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->has_label);
  Example no_image;
  no_image.features["image/class/label"] = Feature::Ints({1});
  EXPECT_FALSE(FromExample(no_image).ok());
  EXPECT_FALSE(ParseImageFields(SerializeExample(no_image)).ok());
  Example wrong_type;
  wrong_type.features["image/encoded"] = Feature::Ints({1});
  wrong_type.features["image/class/label"] = Feature::Ints({1});
  EXPECT_FALSE(FromExample(wrong_type).ok());
}

}  // namespace
}  // namespace aq::format
