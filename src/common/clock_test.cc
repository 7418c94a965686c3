#include "common/clock.h"

#include <gtest/gtest.h>

namespace aq {
namespace {

TEST(ManualClock, MovesOnlyWhenAdvancedOrSlept) {
  ManualClock c(10, 5'000'000'000);
  EXPECT_EQ(c.Now(), 10);
  c.Advance(1.5);
  EXPECT_EQ(c.Now(), 11.5);
  EXPECT_EQ(c.WallNanos(), 6'500'000'000);
  c.SleepFor(0.5);
  c.SleepFor(-1);  // nothing
  EXPECT_EQ(c.Now(), 12);
  EXPECT_EQ(c.slept(), 0.5);
}

TEST(RateLimiter, PacesToTheRateOverAnyPattern) {
  // 1 MB/s: 10 MB sent in pieces of every size takes 10 s of clock, less
  // at most the burst (the bucket starts empty, so exactly 10 s here).
  for (uint64_t piece : {1000ull, 65536ull, 1000000ull, 4000000ull}) {
    ManualClock c;
    RateLimiter r(1e6, 0.05, c);
    const double t0 = c.Now();
    for (uint64_t sent = 0; sent < 10'000'000; sent += piece) r.Acquire(std::min<uint64_t>(piece, 10'000'000 - sent));
    EXPECT_NEAR(c.Now() - t0, 10.0, 1e-6) << piece;
  }
}

TEST(RateLimiter, IdleTimeBuysAtMostTheBurst) {
  ManualClock c;
  RateLimiter r(1e6, 0.5, c);
  c.Advance(60);  // a minute idle: only 0.5 s of bytes may go at once
  EXPECT_EQ(r.Reserve(500'000), 0);
  EXPECT_NEAR(r.Reserve(500'000), 0.5, 1e-9);
}

TEST(RateLimiter, UnlimitedNeverWaits) {
  ManualClock c;
  RateLimiter r(0, 0.05, c);
  r.Acquire(1ull << 40);
  EXPECT_EQ(c.slept(), 0);
}

TEST(RateLimiter, ReserveSpendsEvenWhenTheCallerWaitsElsewhere) {
  ManualClock c;
  RateLimiter r(1000, 0.05, c);  // burst floor 64 KiB
  EXPECT_EQ(r.Reserve(1000), 1.0);
  EXPECT_EQ(r.Reserve(1000), 2.0);  // the first debt is still owed
  c.Advance(2);
  EXPECT_EQ(r.Reserve(0), 0);
}

}  // namespace
}  // namespace aq
