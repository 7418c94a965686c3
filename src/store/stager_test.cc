// The plan stager over a real block store, through a service that records
// every read that reaches the pool and can hold reads back (a gate) or fail
// one: so each test sees exactly which blocks were read from media, when,
// and in what order.
#include "store/stager.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>

#include "io/file_system.h"
#include "store/block_store.h"

namespace aq::store {
namespace {

using std::chrono::seconds;

// The node's pool service, recording reads; `Hold()` makes reads wait
// until `Release()`; `FailOnce(id)` fails the next read of a block.
class RecordingService final : public BlockService {
 public:
  explicit RecordingService(BlockStore& blocks) : local_(blocks, nullptr) {}
  Result<BlockRef> Write(const std::string& pool, std::string_view data, const std::string& bucket) override {
    return local_.Write(pool, data, bucket);
  }
  Result<std::shared_ptr<const std::string>> Read(const BlockRef& ref) override {
    std::unique_lock<std::mutex> lock(mu_);
    order_.push_back(ref.id);
    ++in_flight_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !held_; });
    --in_flight_;
    if (fail_.erase(ref.id) > 0) return IoError("emulated media error on " + ref.id);
    lock.unlock();
    return local_.Read(ref);
  }
  Status Remove(const BlockRef& ref) override { return local_.Remove(ref); }
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    cv_.notify_all();
  }
  // Waits until `n` reads are waiting at the gate.
  bool WaitHeld(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, seconds(10), [&] { return in_flight_ >= n; });
  }
  void FailOnce(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_.insert(id);
  }
  std::vector<std::string> order() {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }
  size_t reads_of(const std::string& id) {
    auto o = order();
    return static_cast<size_t>(std::count(o.begin(), o.end(), id));
  }

 private:
  LocalBlockService local_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  size_t in_flight_ = 0;
  std::set<std::string> fail_;
  std::vector<std::string> order_;
};

class StagerTest : public testing::Test {
 protected:
  void SetUp() override {
    mem_ = io::NewMemFileSystem();
    blocks_ = BlockStore::Open(*mem_, {{"hdd", "/pool", Media::kHdd}}).value();
    service_ = std::make_unique<RecordingService>(*blocks_);
    for (int i = 0; i < 10; ++i) {
      data_.push_back(std::string(1000, static_cast<char>('a' + i)));
      refs_.push_back(service_->Write("hdd", data_.back(), "b").value());
    }
  }
  std::unique_ptr<Stager> Make(size_t threads = 1, uint64_t memory_blocks = 100, double ttl_s = 30) {
    StagerOptions o;
    o.threads = threads;
    o.memory_bytes = memory_blocks * 1000;
    o.ttl_s = ttl_s;
    return std::make_unique<Stager>(*service_, o);
  }
  std::vector<BlockRef> Refs(std::initializer_list<int> which) {
    std::vector<BlockRef> out;
    for (int i : which) out.push_back(refs_[i]);
    return out;
  }
  static bool Idle(const StagerStats& s) {
    return s.queued == 0 && s.reading == 0 && s.staged + s.shared + s.resident + s.skipped >= s.planned;
  }
  std::string Read(Stager& st, int i) {
    auto r = st.Read(refs_[i]);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? **r : "";
  }
  std::unique_ptr<io::FileSystem> mem_;
  std::unique_ptr<BlockStore> blocks_;
  std::unique_ptr<RecordingService> service_;
  std::vector<std::string> data_;
  std::vector<BlockRef> refs_;
};

TEST_F(StagerTest, PlannedBlocksAreReadAheadInPlanOrderAndEachServedOnce) {
  auto st = Make();
  const std::vector<int> plan = {7, 2, 9, 0, 4, 1};
  EXPECT_EQ(st->Plan("rank0", Refs({7, 2, 9, 0, 4, 1})), 6u);
  ASSERT_TRUE(st->WaitUntil(Idle, seconds(10)));
  std::vector<std::string> expect;
  for (int i : plan) expect.push_back(refs_[i].id);
  EXPECT_EQ(service_->order(), expect);  // from media in the plan's order, once each
  EXPECT_EQ(st->Stats().bytes_held, 6000u);
  for (int i : plan) EXPECT_EQ(Read(*st, i), data_[i]);
  auto s = st->Stats();
  EXPECT_EQ(s.hits, 6u);
  EXPECT_EQ(s.bytes_held, 0u);              // dropped once read
  EXPECT_EQ(service_->order().size(), 6u);  // no read reached media again
  // A block no plan names is read through, as without staging.
  EXPECT_EQ(Read(*st, 3), data_[3]);
  EXPECT_EQ(service_->reads_of(refs_[3].id), 1u);
  EXPECT_EQ(st->Stats().hits, 6u);
}

TEST_F(StagerTest, StagingWaitsForRoomAndNeverStagesPastAnEarlierBlock) {
  auto st = Make(/*threads=*/4, /*memory_blocks=*/3);
  st->Plan("rank0", Refs({0, 1, 2, 3, 4, 5}));
  ASSERT_TRUE(st->WaitUntil([](const StagerStats& s) { return s.staged == 3 && s.reading == 0; }, seconds(10)));
  // The budget holds three: blocks 3.. wait for room, whatever the threads.
  EXPECT_EQ(st->Stats().bytes_held, 3000u);
  EXPECT_FALSE(st->WaitUntil([](const StagerStats& s) { return s.staged > 3; }, std::chrono::milliseconds(200)));
  EXPECT_EQ(service_->order().size(), 3u);
  EXPECT_EQ(Read(*st, 0), data_[0]);  // frees one block: the next in plan order is staged
  ASSERT_TRUE(st->WaitUntil([](const StagerStats& s) { return s.staged == 4 && s.reading == 0; }, seconds(10)));
  EXPECT_EQ(service_->order().back(), refs_[3].id);
  for (uint64_t i = 1; i < 6; ++i) {  // each read makes room for the next block but one
    ASSERT_TRUE(st->WaitUntil(
        [i](const StagerStats& s) { return s.staged == std::min<uint64_t>(i + 3, 6) && s.reading == 0; }, seconds(10)));
    EXPECT_LE(st->Stats().bytes_held, 3000u);
    EXPECT_EQ(Read(*st, static_cast<int>(i)), data_[i]);
  }
  EXPECT_EQ(st->Stats().hits, 6u);
  EXPECT_EQ(service_->order().size(), 6u);
}

TEST_F(StagerTest, ReadersPlanningTheSameBlocksShareOneStagedCopy) {
  auto st = Make(2);
  st->Plan("rank0", Refs({0, 1, 2, 3}));
  st->Plan("rank1", Refs({3, 2, 1, 0}));
  ASSERT_TRUE(st->WaitUntil(Idle, seconds(10)));
  EXPECT_EQ(service_->order().size(), 4u);  // each block from media once
  EXPECT_EQ(st->Stats().bytes_held, 4000u);
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 4; ++i) EXPECT_EQ(Read(*st, i), data_[i]);
  }
  auto s = st->Stats();
  EXPECT_EQ(s.shared, 4u);
  EXPECT_EQ(s.hits, 8u);
  EXPECT_EQ(s.bytes_held, 0u);  // gone after its second planned read
  EXPECT_EQ(service_->order().size(), 4u);
}

TEST_F(StagerTest, ABlockReadBeforeItsTurnIsNotStagedAfterwards) {
  auto st = Make(1);
  service_->Hold();
  st->Plan("rank0", Refs({0, 1, 2}));
  ASSERT_TRUE(service_->WaitHeld(1));  // staging of block 0 waits at the gate
  // The reader gets to block 2 first (it reads it itself).
  std::thread reader([&] { EXPECT_EQ(Read(*st, 2), data_[2]); });
  ASSERT_TRUE(service_->WaitHeld(2));
  service_->Release();
  reader.join();
  ASSERT_TRUE(st->WaitUntil(Idle, seconds(10)));
  EXPECT_EQ(service_->reads_of(refs_[2].id), 1u);  // never staged after its read
  EXPECT_EQ(st->Stats().skipped, 1u);
  EXPECT_EQ(Read(*st, 0), data_[0]);
  EXPECT_EQ(Read(*st, 1), data_[1]);
  EXPECT_EQ(st->Stats().bytes_held, 0u);
}

TEST_F(StagerTest, AReaderWaitsForABlockBeingStagedInsteadOfReadingItAgain) {
  auto st = Make(1);
  service_->Hold();
  st->Plan("rank0", Refs({5}));
  ASSERT_TRUE(service_->WaitHeld(1));
  std::string got;
  std::thread reader([&] { got = Read(*st, 5); });
  // The reader finds the slot in flight and waits on it: no second media read.
  service_->Release();
  reader.join();
  EXPECT_EQ(got, data_[5]);
  EXPECT_EQ(service_->reads_of(refs_[5].id), 1u);
  auto s = st->Stats();
  EXPECT_EQ(s.hits + s.late_hits, 1u);
}

TEST_F(StagerTest, AFailedStagingReadLeavesTheReaderToReadForItself) {
  auto st = Make(1);
  service_->FailOnce(refs_[1].id);
  st->Plan("rank0", Refs({0, 1, 2}));
  ASSERT_TRUE(st->WaitUntil(Idle, seconds(10)));
  EXPECT_EQ(st->Stats().failed, 1u);
  EXPECT_EQ(st->Stats().bytes_held, 2000u);  // the failed one holds nothing
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Read(*st, i), data_[i]);
  EXPECT_EQ(service_->reads_of(refs_[1].id), 2u);  // the failed staging read, then the reader's
  EXPECT_EQ(st->Stats().hits, 2u);
}

TEST_F(StagerTest, UnreadBlocksExpireAndRemovedOnesAreDropped) {
  auto st = Make(1, 100, /*ttl_s=*/0.2);
  st->Plan("gone", Refs({0, 1}));
  ASSERT_TRUE(st->WaitUntil([](const StagerStats& s) { return s.expired == 2; }, seconds(10)));
  EXPECT_EQ(st->Stats().bytes_held, 0u);
  auto keep = Make(1);
  keep->Plan("rank0", Refs({3, 4}));
  ASSERT_TRUE(keep->WaitUntil(Idle, seconds(10)));
  ASSERT_TRUE(keep->Remove(refs_[3]).ok());  // a deleted block's staged copy goes with it
  EXPECT_EQ(keep->Stats().bytes_held, 1000u);
  EXPECT_FALSE(keep->Read(refs_[3]).ok());
  EXPECT_EQ(Read(*keep, 4), data_[4]);
}

TEST_F(StagerTest, ACancelledPlanStagesNothingMore) {
  auto st = Make(1);
  service_->Hold();
  st->Plan("rank0", Refs({0, 1, 2, 3}));
  ASSERT_TRUE(service_->WaitHeld(1));
  st->Cancel("rank0");
  service_->Release();
  ASSERT_TRUE(st->WaitUntil(Idle, seconds(10)));
  EXPECT_EQ(service_->order().size(), 1u);  // only the read already under way
  EXPECT_EQ(st->Stats().skipped, 3u);
  EXPECT_EQ(st->Stats().queued, 0u);
}

// A plan cancelled after it was staged (the job ended, or was cancelled)
// frees what was staged for it and not read, now rather than at the ttl;
// blocks another stream also planned stay for it.
TEST_F(StagerTest, ACancelledPlanFreesWhatWasStagedForItButNotWhatOthersWant) {
  auto st = Make(2);
  st->Plan("rank0", Refs({0, 1, 2, 3}));
  st->Plan("rank1", Refs({2, 3, 4}));
  ASSERT_TRUE(st->WaitUntil(Idle, seconds(10)));
  EXPECT_EQ(st->Stats().bytes_held, 5000u);
  EXPECT_EQ(Read(*st, 0), data_[0]);  // rank0 read its first block
  EXPECT_EQ(st->Stats().bytes_held, 4000u);
  st->Cancel("rank0");
  EXPECT_EQ(st->Stats().bytes_held, 3000u) << "block 1 freed; 2 and 3 kept for rank1, and 4";
  st->Cancel("rank0");   // twice: nothing more
  st->Cancel("nobody");  // never planned: nothing
  EXPECT_EQ(st->Stats().bytes_held, 3000u);
  for (int i : {2, 3, 4}) EXPECT_EQ(Read(*st, i), data_[i]);
  EXPECT_EQ(st->Stats().bytes_held, 0u);
  EXPECT_EQ(st->Stats().hits, 4u);
  EXPECT_EQ(service_->order().size(), 5u) << "every block from media once";
  st->Cancel("rank1");  // all read already: nothing to free, nothing breaks
  EXPECT_EQ(st->Stats().bytes_held, 0u);
}

TEST_F(StagerTest, TheQueueIsBounded) {
  StagerOptions o;
  o.threads = 1;
  o.max_queued = 3;
  Stager st(*service_, o);
  service_->Hold();
  EXPECT_EQ(st.Plan("rank0", Refs({0, 1, 2, 3, 4, 5})), 3u);
  service_->Release();
  ASSERT_TRUE(st.WaitUntil(Idle, seconds(10)));
  EXPECT_EQ(st.Stats().planned, 6u);
  EXPECT_EQ(service_->order().size(), 3u);
}

}  // namespace
}  // namespace aq::store
