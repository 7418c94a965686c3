#include "common/units.h"

#include <gtest/gtest.h>

namespace aq::units {
namespace {

TEST(Units, ParseDuration) {
  EXPECT_EQ(*ParseDuration("90"), 90.0);
  EXPECT_EQ(*ParseDuration("1.5m"), 90.0);
  EXPECT_EQ(*ParseDuration("12h"), 43200.0);
  EXPECT_EQ(*ParseDuration("7d"), 604800.0);
  EXPECT_EQ(*ParseDuration("0"), 0.0);
  EXPECT_EQ(*ParseDuration("2w"), 1209600.0);
  EXPECT_EQ(*ParseDuration("8ms"), 0.008);
  EXPECT_EQ(*ParseDuration("500us"), 0.0005);
  EXPECT_EQ(*ParseDuration("0.01s"), 0.01);
  for (const char* bad : {"", "d", "1y", "-3s", "1.2.3s", "3 s", "1e3", "5 ms", "ms", "1mss"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
}

TEST(Units, ParseBytes) {
  EXPECT_EQ(*ParseBytes("1234"), 1234u);
  EXPECT_EQ(*ParseBytes("4k"), 4096u);
  EXPECT_EQ(*ParseBytes("4MiB"), 4u << 20);
  EXPECT_EQ(*ParseBytes("4M"), 4u << 20);
  EXPECT_EQ(*ParseBytes("4MB"), 4000000u);
  EXPECT_EQ(*ParseBytes("1.5G"), 1610612736u);
  EXPECT_FALSE(ParseBytes("").ok());
  EXPECT_FALSE(ParseBytes("12 parsecs").ok());
  EXPECT_FALSE(ParseBytes("MB").ok());
}

TEST(Units, FormatsInSiUnits) {
  EXPECT_EQ(Bytes(999), "999 B");
  EXPECT_EQ(Bytes(110000), "110 kB");
  EXPECT_EQ(Bytes(1.3e6), "1.30 MB");
  EXPECT_EQ(Rate(5.907e9), "5.91 GB/s");
  EXPECT_EQ(Duration(12.34), "12.3s");
  EXPECT_EQ(Duration(185), "3m05s");
  EXPECT_EQ(Duration(3720), "1h02m");
}

TEST(Units, IecBytes) {
  EXPECT_EQ(IecBytes(1 << 20), "1 MiB");
  EXPECT_EQ(IecBytes(256 << 10), "256 KiB");
  EXPECT_EQ(IecBytes(1000), "1000 B");
  EXPECT_EQ(IecBytes(3 << 19), "1.5 MiB");
}

}  // namespace
}  // namespace aq::units
