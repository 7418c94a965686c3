#include "pipeline/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace aq::pipeline {
namespace {

// n samples spread over `files` files, in file order.
std::vector<uint32_t> Files(uint32_t n, uint32_t files) {
  std::vector<uint32_t> f(n);
  for (uint32_t i = 0; i < n; ++i) f[i] = i * files / n;
  return f;
}

std::vector<uint32_t> Emitted(const EpochPlan& p) {
  std::vector<uint32_t> out;
  for (uint32_t pos : p.emit) out.push_back(p.read_order[pos]);
  return out;
}

TEST(Plan, EveryOutputIsOneReadPosition) {
  PlanOptions o;
  o.batch_size = 10;
  o.shuffle_buffer = 37;
  auto p = MakeEpochPlan(Files(1000, 7), 7, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->steps, 100u);
  EXPECT_EQ(p->emit.size(), 1000u);
  EXPECT_EQ(p->read_order.size(), 1000u);
  std::vector<uint32_t> e = p->emit;
  std::sort(e.begin(), e.end());
  for (uint32_t i = 0; i < e.size(); ++i) ASSERT_EQ(e[i], i);
  // Shuffle-buffer bound: output j was read at most K positions earlier.
  for (size_t j = 0; j < p->emit.size(); ++j) ASSERT_LT(p->emit[j], j + 37);
}

TEST(Plan, EpochCoversEverySampleExactlyOnce) {
  PlanOptions o;
  o.batch_size = 8;
  o.shuffle_buffer = 100;
  auto p = MakeEpochPlan(Files(800, 9), 9, o);
  ASSERT_TRUE(p.ok());
  std::vector<uint32_t> got = Emitted(*p);
  std::sort(got.begin(), got.end());
  for (uint32_t i = 0; i < 800; ++i) ASSERT_EQ(got[i], i);
}

TEST(Plan, SameSeedSameOrderOtherSeedOrEpochOtherOrder) {
  const uint64_t seed = 12345;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  PlanOptions o;
  o.seed = seed;
  o.batch_size = 4;
  o.shuffle_buffer = 64;
  auto a = MakeEpochPlan(Files(400, 5), 5, o), b = MakeEpochPlan(Files(400, 5), 5, o);
  EXPECT_EQ(Emitted(*a), Emitted(*b));
  o.seed = seed + 1;
  EXPECT_NE(Emitted(*MakeEpochPlan(Files(400, 5), 5, o)), Emitted(*a));
  o.seed = seed;
  o.epoch = 1;
  EXPECT_NE(Emitted(*MakeEpochPlan(Files(400, 5), 5, o)), Emitted(*a));
}

TEST(Plan, RanksAreDisjointCompleteAndTakeEqualSteps) {
  for (uint32_t n : {999u, 1000u, 1001u, 1003u}) {
    for (auto rem : {Remainder::kDrop, Remainder::kPad}) {
      const uint32_t world = 4, batch = 16;
      std::multiset<uint32_t> seen;
      std::set<uint64_t> steps;
      for (uint32_t r = 0; r < world; ++r) {
        PlanOptions o;
        o.rank = r;
        o.world = world;
        o.batch_size = batch;
        o.remainder = rem;
        auto p = MakeEpochPlan(Files(n, 13), 13, o);
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        steps.insert(p->steps);
        EXPECT_EQ(p->emit.size(), p->steps * batch);
        for (uint32_t s : Emitted(*p)) seen.insert(s);
      }
      EXPECT_EQ(steps.size(), 1u) << "n " << n << ": ranks must take the same number of steps";
      if (rem == Remainder::kPad) {
        for (uint32_t i = 0; i < n; ++i) ASSERT_GE(seen.count(i), 1u) << "pad mode loses no sample";
      } else {
        for (uint32_t s : seen) ASSERT_EQ(seen.count(s), 1u) << "drop mode repeats no sample";
        EXPECT_GE(seen.size(), static_cast<size_t>(n - world * batch));
      }
    }
  }
}

// One RecordIO file of 87 records, batches of 8: 7 records sit out each
// epoch. Which ones must change from epoch to epoch so that every record is
// trained on; before, records 80..86 were never read.
TEST(Plan, DroppedSamplesDifferByEpochSoAllAreCovered) {
  for (uint32_t world : {1u, 2u}) {
    std::set<uint32_t> covered;
    std::set<std::set<uint32_t>> dropped_sets;
    for (uint32_t epoch = 0; epoch < 20; ++epoch) {
      std::set<uint32_t> this_epoch;
      for (uint32_t r = 0; r < world; ++r) {
        PlanOptions o;
        o.epoch = epoch;
        o.rank = r;
        o.world = world;
        o.batch_size = 8;
        o.remainder = Remainder::kDrop;
        auto p = MakeEpochPlan(Files(87, 1), 1, o);
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        for (uint32_t s : Emitted(*p)) {
          EXPECT_TRUE(this_epoch.insert(s).second) << "sample " << s << " twice in epoch " << epoch;
          covered.insert(s);
        }
      }
      std::set<uint32_t> dropped;
      for (uint32_t i = 0; i < 87; ++i) {
        if (!this_epoch.count(i)) dropped.insert(i);
      }
      EXPECT_EQ(this_epoch.size(), world == 1 ? 80u : 80u);
      dropped_sets.insert(dropped);
    }
    EXPECT_EQ(covered.size(), 87u) << "world " << world << ": every sample is read in 20 epochs";
    EXPECT_GT(dropped_sets.size(), 15u) << "the dropped samples change from epoch to epoch";
  }
}

TEST(Plan, NoShuffleDropsTheTail) {
  PlanOptions o;
  o.batch_size = 8;
  o.shuffle_buffer = 1;
  o.shuffle_files = false;
  auto p = MakeEpochPlan(Files(87, 1), 1, o);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(Emitted(*p).size(), 80u);
  for (uint32_t j = 0; j < 80; ++j) EXPECT_EQ(Emitted(*p)[j], j);
}

TEST(Plan, NoShuffleKeepsReadOrder) {
  PlanOptions o;
  o.batch_size = 5;
  o.shuffle_buffer = 1;
  o.shuffle_files = false;
  auto p = MakeEpochPlan(Files(50, 5), 5, o);
  ASSERT_TRUE(p.ok());
  for (uint32_t j = 0; j < 50; ++j) EXPECT_EQ(Emitted(*p)[j], j);
}

TEST(Plan, ClearErrors) {
  PlanOptions o;
  o.batch_size = 100;
  EXPECT_FALSE(MakeEpochPlan(Files(50, 2), 2, o).ok());  // no full batch
  o.remainder = Remainder::kPad;
  EXPECT_TRUE(MakeEpochPlan(Files(50, 2), 2, o).ok());
  o.rank = 3;
  o.world = 2;
  EXPECT_FALSE(MakeEpochPlan(Files(50, 2), 2, o).ok());
}

TEST(Rank, FromFlagsThenEnvironment) {
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("SLURM_PROCID");
  ::unsetenv("SLURM_NTASKS");
  EXPECT_EQ(ResolveRank(-1, -1)->world, 1u);
  ::setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
  auto r = ResolveRank(-1, -1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank, 3u);
  EXPECT_EQ(r->world, 8u);
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  EXPECT_EQ(ResolveRank(-1, -1)->rank, 1u);  // torchrun's variables win
  EXPECT_EQ(ResolveRank(5, 6)->rank, 5u);    // flags win over everything
  ::setenv("RANK", "4", 1);
  EXPECT_FALSE(ResolveRank(-1, -1).ok());  // rank 4 of 2
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
}

}  // namespace
}  // namespace aq::pipeline
