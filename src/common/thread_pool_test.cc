#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace aq {
namespace {

TEST(ParallelFor, VisitsEveryIndexOnce) {
  for (size_t threads : {1, 2, 4, 16}) {
    std::vector<std::atomic<int>> seen(1000);
    ASSERT_TRUE(ParallelFor(seen.size(), threads, [&](size_t i) {
                  seen[i]++;
                  return Status::Ok();
                }).ok());
    for (auto& s : seen) EXPECT_EQ(s.load(), 1);
  }
}

TEST(ParallelFor, ReturnsFirstErrorAndStopsHandingOutWork) {
  std::atomic<size_t> ran{0};
  Status s = ParallelFor(100000, 2, [&](size_t i) -> Status {
    ran++;
    if (i == 10) return Corruption("index 10 is bad");
    return Status::Ok();
  });
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_LT(ran.load(), 100000u);
}

TEST(ParallelFor, EmptyRangeIsOk) {
  EXPECT_TRUE(ParallelFor(0, 4, [](size_t) { return Internal("never"); }).ok());
}

TEST(ThreadPoolTest, RunsEveryTaskIncludingThoseQueuedAtDestruction) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(3);
    for (int i = 0; i < 1000; ++i) {
      pool.Submit([&] { ran++; });
    }
    pool.Submit([&] {
      pool.Submit([&] { ran += 1000; });  // a task may submit another
    });
  }  // the destructor runs what is queued, then joins
  EXPECT_EQ(ran.load(), 2000);
}

}  // namespace
}  // namespace aq
