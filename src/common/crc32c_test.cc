#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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
  // Past 3 x 256 and 3 x 8192 bytes the hardware path runs three streams
  // side by side and joins them: every length around those bounds, and long
  // ones that end in each of the paths.
  std::string buf((1 << 20) + 16, '\0');
  for (auto& c : buf) c = static_cast<char>(rng.Next());
  std::vector<size_t> lengths = {0, 1, 7, 8, 9, 31, 32, 33, 63, 100, 1000, 4096, 1 << 20};
  for (size_t bound : {size_t{3 * 256}, size_t{3 * 8192}, size_t{2 * 3 * 8192}}) {
    for (size_t d = 0; d <= 17; ++d) lengths.insert(lengths.end(), {bound - d, bound + d});
  }
  for (int i = 0; i < 50; ++i) lengths.push_back(rng.Next() % (buf.size() - 8));
  for (size_t align = 0; align < 8; ++align) {
    for (size_t len : lengths) {
      const uint32_t seed_crc = static_cast<uint32_t>(len * 2654435761u);
      EXPECT_EQ(ExtendHardware(seed_crc, buf.data() + align, len), ExtendPortable(seed_crc, buf.data() + align, len))
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
