#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <string>

#include "common/random.h"

namespace aq::crc32c {
namespace {

// Test vectors from RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32c, StandardVectors) {
  EXPECT_EQ(Value("123456789"), 0xe3069283u);
  std::string zeros(32, '\0');
  EXPECT_EQ(Value(zeros), 0x8a9136aau);
  std::string ones(32, '\xff');
  EXPECT_EQ(Value(ones), 0x62a8ab43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(Value(ascending), 0x46dd794eu);
  std::string descending(32, '\0');
  for (int i = 0; i < 32; ++i) descending[i] = static_cast<char>(31 - i);
  EXPECT_EQ(Value(descending), 0x113fdb5cu);
  EXPECT_EQ(Value(""), 0u);
}

TEST(Crc32c, HardwareMatchesPortableAtEveryLengthAndAlignment) {
  if (!HaveHardware()) GTEST_SKIP() << "no SSE4.2";
  const uint64_t seed = 42;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  Rng rng(seed);
  std::string buf(4096 + 16, '\0');
  for (auto& c : buf) c = static_cast<char>(rng.Next());
  for (size_t align = 0; align < 8; ++align) {
    for (size_t len : {0, 1, 7, 8, 9, 31, 32, 33, 63, 100, 1000, 4096}) {
      EXPECT_EQ(ExtendHardware(0, buf.data() + align, len), ExtendPortable(0, buf.data() + align, len))
          << "align " << align << " len " << len;
    }
  }
}

TEST(Crc32c, ExtendComposes) {
  std::string s = "hello, tfrecord world";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    EXPECT_EQ(Extend(Value(s.data(), cut), s.data() + cut, s.size() - cut), Value(s));
  }
}

TEST(Crc32c, MaskRoundTripsAndChangesValue) {
  for (uint32_t v : {0u, 1u, 0xe3069283u, 0xffffffffu}) {
    EXPECT_EQ(Unmask(Mask(v)), v);
    EXPECT_NE(Mask(v), v);
  }
  // TFRecord masks as ((crc >> 15) | (crc << 17)) + 0xa282ead8.
  EXPECT_EQ(Mask(0u), 0xa282ead8u);
  EXPECT_EQ(Mask(1u), 0xa282ead8u + (1u << 17));
}

}  // namespace
}  // namespace aq::crc32c
