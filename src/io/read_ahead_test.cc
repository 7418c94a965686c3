#include "io/read_ahead.h"

#include <gtest/gtest.h>

namespace aq::io {
namespace {

TEST(SequentialDetectorTest, ExactFollowingAsTheClientReads) {
  SequentialDetector d(0, 1);
  EXPECT_TRUE(d.Observe(0, 100));  // a fresh reader from the start
  EXPECT_TRUE(d.Observe(100, 100));
  EXPECT_FALSE(d.Observe(500, 100));  // a jump
  EXPECT_TRUE(d.Observe(600, 100));   // follows the jump's read exactly
  EXPECT_FALSE(d.Observe(650, 100));  // overlaps: not where the last one ended
  EXPECT_EQ(d.end(), 750u);
  SequentialDetector late(0, 1);
  EXPECT_FALSE(late.Observe(4096, 100));  // a fresh reader that starts elsewhere
}

TEST(SequentialDetectorTest, NearFollowingTwiceAsTheMountReads) {
  const uint64_t chunk = 4 << 20;
  SequentialDetector d(2 * chunk, 2);
  EXPECT_TRUE(d.Observe(0, 1 << 20));
  // The kernel's asynchronous reads arrive slightly out of order: still sequential.
  EXPECT_TRUE(d.Observe(2 << 20, 1 << 20));
  EXPECT_TRUE(d.Observe(1 << 20, 1 << 20));
  EXPECT_EQ(d.end(), 3u << 20);  // the furthest end, not the last read's
  // A random reader: jumps far apart never become sequential...
  EXPECT_FALSE(d.Observe(100 * chunk, 4096));
  EXPECT_FALSE(d.Observe(7 * chunk, 4096));
  // ...and after a jump, two near reads in a row are needed again.
  EXPECT_FALSE(d.Observe(7 * chunk + 4096, 4096));
  EXPECT_TRUE(d.Observe(7 * chunk + 8192, 4096));
}

}  // namespace
}  // namespace aq::io
