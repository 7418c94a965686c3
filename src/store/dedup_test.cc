// Deduplication on one node: content-addressed blocks shared by layouts,
// removed only when no layout names them and no writer holds them — under
// overwrites, deletes, multipart uploads, aborted writers, tiering moves,
// damage, and many threads racing on the same contents.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "store/block_store.h"
#include "store/meta_store.h"
#include "store/object_store.h"
#include "store/scrubber.h"
#include "store/tiering.h"

namespace aq::store {
namespace {

namespace fs = std::filesystem;

// Block-sized pieces: a value made of them shares blocks with every other
// value holding the same piece at a block boundary.
std::string Piece(uint32_t seed, size_t n = 1000) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

class DedupTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("aq_dedup_test_" + std::to_string(getpid()) + "_" + NewBlockId());
    fs::create_directories(dir_);
    posix_ = io::NewPosixFileSystem();
    PoolConfig hot{"default", (dir_ / "hot").string(), Media::kSsd},
        cold{"cold", (dir_ / "cold").string(), Media::kHdd};
    hot.dedup = cold.dedup = true;
    cold.compression = ParseCompression("zstd").value();
    blocks_ = BlockStore::Open(*posix_, {hot, cold}).value();
    meta_ = OpenSqliteMetaStore((dir_ / "meta.db").string()).value();
    ASSERT_TRUE(meta_->CreateBucket("bkt").ok());
    objects_ = std::make_unique<ObjectStore>(*meta_, *blocks_, ObjectStoreOptions{1000, ""});
  }
  void TearDown() override {
    objects_.reset();
    fs::remove_all(dir_);
  }
  Status Put(const std::string& key, const std::string& data) {
    auto w = AQ_TRY(objects_->Put("bkt", key));
    for (size_t i = 0; i < data.size(); i += 333) AQ_TRY(w->Write(std::string_view(data).substr(i, 333)));
    return w->Commit().status();
  }
  // The object's bytes (read under a reader's pin), "<absent>" or the error.
  std::string Get(const std::string& key) {
    auto held = objects_->HeadHeld("bkt", key);
    if (!held.ok()) return held.status().code() == StatusCode::kNotFound ? "<absent>" : held.status().ToString();
    const ObjectMeta* m = &held->meta;
    std::string out;
    Status s = objects_->Read(*m, 0, m->size, [&](std::string_view b) {
      out.append(b);
      return Status::Ok();
    });
    return s.ok() ? out : "<unreadable: " + s.ToString() + ">";
  }
  uint64_t Files(const std::string& pool = "") { return blocks_->List(pool).value().size(); }
  PoolUsage Usage(size_t pool = 0) { return objects_->Usage().value().at(pool); }

  fs::path dir_;
  std::unique_ptr<io::FileSystem> posix_;
  std::unique_ptr<BlockStore> blocks_;
  std::unique_ptr<MetaStore> meta_;
  std::unique_ptr<ObjectStore> objects_;
};

TEST_F(DedupTest, ContentIdsAreSha256) {
  // FIPS 180-2's test vector.
  EXPECT_EQ(ContentId("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_TRUE(IsContentId(ContentId("")));
  EXPECT_FALSE(IsContentId(NewBlockId()));
  EXPECT_FALSE(IsContentId(std::string(64, 'G')));
  auto pool = ParsePool("p=/x,dedup,compress=lz4").value();
  EXPECT_TRUE(pool.dedup);
  EXPECT_FALSE(ParsePool("p=/x").value().dedup);
}

TEST_F(DedupTest, EqualBlocksAreStoredOnceAndFreedWithTheLastLayout) {
  const std::string a = Piece(1), b = Piece(2), c = Piece(3), tail = Piece(4, 500);
  const std::string v = a + b + c + tail;
  ASSERT_TRUE(Put("one", v).ok());
  ASSERT_TRUE(Put("two", v).ok());
  ASSERT_TRUE(Put("three", b + a + a).ok());  // the same blocks in another order, one twice
  EXPECT_EQ(Files(), 4u);
  PoolUsage u = Usage();
  EXPECT_EQ(u.shared_blocks, 4u);
  EXPECT_EQ(u.logical_bytes, 3500u);
  EXPECT_EQ(u.dedup_saved_bytes, 3500u + 3000u);
  EXPECT_EQ(u.referenced_bytes(), 3 * 3500u - 500u);
  EXPECT_LT(u.ratio(), 0.6);
  const auto counters = blocks_->DedupCounters().at(0);
  EXPECT_EQ(counters.written, 4u);
  EXPECT_EQ(counters.found, 7u);

  // Deleting and overwriting leave what other layouts name.
  ASSERT_TRUE(objects_->Delete("bkt", "one").ok());
  ASSERT_TRUE(Put("two", c + tail).ok());
  objects_->reclaimer().Drain();
  EXPECT_EQ(Get("two"), c + tail);
  EXPECT_EQ(Get("three"), b + a + a);
  EXPECT_EQ(Files(), 4u);
  ASSERT_TRUE(objects_->Delete("bkt", "two").ok());
  objects_->reclaimer().Drain();
  EXPECT_EQ(Files(), 2u);  // a and b
  EXPECT_EQ(Get("three"), b + a + a);
  ASSERT_TRUE(objects_->Delete("bkt", "three").ok());
  objects_->reclaimer().Drain();
  EXPECT_EQ(Files(), 0u);
  EXPECT_EQ(Usage().dedup_saved_bytes, 0u);
}

// A writer that gives up removes only what no layout names; one that holds
// a block keeps it from a concurrent delete of the last object naming it.
TEST_F(DedupTest, AbortedWritersAndHeldBlocks) {
  const std::string v = Piece(5) + Piece(6);
  ASSERT_TRUE(Put("kept", v).ok());
  {
    auto w = objects_->Put("bkt", "gone").value();
    ASSERT_TRUE(w->Write(v + Piece(7)).ok());  // three blocks, two of them kept's
    EXPECT_EQ(Files(), 3u);
  }  // aborted
  EXPECT_EQ(Files(), 2u);
  EXPECT_EQ(Get("kept"), v);

  // A writer found kept's blocks; kept is deleted before the writer commits.
  auto w = objects_->Put("bkt", "late").value();
  ASSERT_TRUE(w->Write(v).ok());
  ASSERT_TRUE(objects_->Delete("bkt", "kept").ok());
  objects_->reclaimer().Drain();
  EXPECT_EQ(Files(), 2u);  // held by the writer
  ASSERT_TRUE(w->Commit().ok());
  EXPECT_EQ(Get("late"), v);
  EXPECT_GT(blocks_->DedupCounters().at(0).kept, 0u);
}

TEST_F(DedupTest, MultipartPartsShareWithObjects) {
  const std::string p1 = Piece(8) + Piece(9), p2 = Piece(10, 700);
  ASSERT_TRUE(Put("whole", p1 + p2).ok());
  auto upload = [&](const std::string& key) {
    auto u = objects_->CreateUpload("bkt", key).value();
    for (auto [n, data] : {std::pair{1u, &p1}, {2u, &p2}}) {
      auto w = objects_->PutPart(u.id, "bkt", key, n).value();
      EXPECT_TRUE(w->Write(*data).ok());
      EXPECT_TRUE(w->Commit().ok());
    }
    return u.id;
  };
  const std::string aborted = upload("parts");
  ASSERT_TRUE(objects_->AbortUpload(aborted, "bkt", "parts").ok());
  objects_->reclaimer().Drain();
  EXPECT_EQ(Get("whole"), p1 + p2);
  EXPECT_EQ(Files(), 3u);
  const std::string id = upload("parts");
  auto u = objects_->GetUpload(id, "bkt", "parts").value();
  ASSERT_TRUE(objects_->CompleteUpload(id, "bkt", "parts", {{1, u.parts[0].etag}, {2, u.parts[1].etag}}).status().ok());
  ASSERT_TRUE(objects_->Delete("bkt", "whole").ok());
  objects_->reclaimer().Drain();
  EXPECT_EQ(Get("parts"), p1 + p2);
  EXPECT_EQ(Files(), 3u);
}

// A damaged shared block is found by the next writer of its content, which
// writes it again: every object naming it reads the good bytes.
TEST_F(DedupTest, ADamagedSharedBlockIsRewrittenByItsNextWriter) {
  const std::string v = Piece(11) + Piece(12);
  ASSERT_TRUE(Put("old", v).ok());
  const auto m = objects_->Head("bkt", "old").value();
  {
    std::fstream f(blocks_->PathOf(m.blocks[1]), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('!');
  }
  EXPECT_NE(Get("old"), v);
  ASSERT_TRUE(Put("new", v).ok());
  EXPECT_EQ(Get("old"), v);
  EXPECT_EQ(Get("new"), v);
  EXPECT_EQ(blocks_->DedupCounters().at(0).repaired, 1u);
}

// The scrubber reads a shared block once per pass and names every object
// it belongs to when it is damaged.
TEST_F(DedupTest, TheScrubberChecksASharedBlockOnceForAllItsObjects) {
  const std::string v = Piece(13) + Piece(14);
  for (const char* key : {"s1", "s2", "s3"}) ASSERT_TRUE(Put(key, v).ok());
  auto expected = [&]() -> Result<std::vector<ExpectedPiece>> {
    std::vector<ExpectedPiece> out;
    AQ_TRY(ForEachObject(*meta_, [&](ObjectMeta o) {
      PiecesHeldBy(o, "", &out);
      return Status::Ok();
    }));
    return out;
  };
  Scrubber scrubber(*blocks_, expected, nullptr, ScrubOptions{1e12});
  EXPECT_TRUE(scrubber.RunPass().value().empty());
  EXPECT_EQ(scrubber.Stats().pieces_verified, 2u);  // two files, six references
  const auto m = objects_->Head("bkt", "s2").value();
  {
    std::fstream f(blocks_->PathOf(m.blocks[0]), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('!');
  }
  const auto findings = scrubber.RunPass().value();
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].also.size(), 2u);
  EXPECT_EQ(scrubber.Stats().objects_at_risk.size(), 3u);
}

// Moves between two dedup pools (the second compresses): each layout names
// its pool's copy; a block named in both pools is one file in each.
TEST_F(DedupTest, TieringMovesBetweenDedupPools) {
  std::string text;
  for (int i = 0; text.size() < 3000; ++i) text += "row " + std::to_string(i % 20) + " of a table\n";
  text.resize(3000);
  ASSERT_TRUE(Put("hot", text).ok());
  ASSERT_TRUE(Put("cold", text).ok());
  Mover mover(*meta_, *blocks_, objects_->reclaimer());
  const std::vector<TierPolicy> policy = {{"cold", "bkt", "cold", 0, UINT64_MAX, 0, "cold"}};
  auto r = mover.Run(policy, {}).value();
  EXPECT_EQ(r.objects_moved, 1u);
  objects_->reclaimer().Drain();
  EXPECT_EQ(Files("default"), 3u);
  EXPECT_EQ(Files("cold"), 3u);
  EXPECT_EQ(Get("hot"), text);
  EXPECT_EQ(Get("cold"), text);
  ASSERT_TRUE(RemoveStrayCopies(*meta_, *blocks_).ok());
  EXPECT_EQ(Files("default") + Files("cold"), 6u);  // both are named: neither is a stray
  ASSERT_TRUE(objects_->Delete("bkt", "hot").ok());
  objects_->reclaimer().Drain();
  EXPECT_EQ(Files("default"), 0u);
  EXPECT_EQ(Get("cold"), text);
}

// Many threads put, overwrite and delete a few keys with values built from
// a handful of blocks (so nearly every write finds its blocks stored, often
// as another thread deletes the last object naming them); readers check
// every read against the values that exist. Removals are immediate (no
// reclaim delay): the widest window for a lost block.
TEST_F(DedupTest, RacingWritersDeletersAndReadersNeverLoseABlock) {
  std::vector<std::string> pieces;
  for (uint32_t i = 0; i < 4; ++i) pieces.push_back(Piece(100 + i));
  std::vector<std::string> values;
  std::mt19937 pick(7);
  for (int i = 0; i < 12; ++i) {
    std::string v;
    const int n = 1 + static_cast<int>(pick() % 4);
    for (int k = 0; k < n; ++k) v += pieces[pick() % pieces.size()];
    if (i % 3 == 0) v += Piece(200 + static_cast<uint32_t>(i), 300);  // a short last block of its own
    values.push_back(v);
  }
  const std::set<std::string> allowed(values.begin(), values.end());
  const std::vector<std::string> keys = {"k0", "k1", "k2", "k3", "k4"};
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, reads{0}, writes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      for (int i = 0; i < 300; ++i) {
        const std::string& key = keys[rng() % keys.size()];
        if (rng() % 4 == 0) {
          Status s = objects_->Delete("bkt", key);
          if (!s.ok() && s.code() != StatusCode::kNotFound) ++bad;
        } else if (Status s = Put(key, values[rng() % values.size()]); !s.ok()) {
          ADD_FAILURE() << s.ToString();
          ++bad;
        }
        ++writes;
      }
    });
  }
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(50 + t));
      while (!stop) {
        const std::string got = Get(keys[rng() % keys.size()]);
        if (got != "<absent>" && !allowed.count(got)) {
          ADD_FAILURE() << got.substr(0, 200);
          ++bad;
        }
        ++reads;
      }
    });
  }
  for (int t = 0; t < 4; ++t) threads[static_cast<size_t>(t)].join();
  stop = true;
  for (size_t t = 4; t < threads.size(); ++t) threads[t].join();
  EXPECT_EQ(bad, 0);
  EXPECT_GT(reads, 100);
  // What is left reads whole; deleting it leaves no file.
  for (const auto& key : keys) {
    const std::string got = Get(key);
    EXPECT_TRUE(got == "<absent>" || allowed.count(got)) << key << ": " << got.substr(0, 200);
    (void)objects_->Delete("bkt", key);
  }
  objects_->reclaimer().Drain();
  EXPECT_EQ(Files(), 0u);
  EXPECT_GT(blocks_->DedupCounters().at(0).found, 500u);
}

}  // namespace
}  // namespace aq::store
