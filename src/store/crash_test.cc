// Crash windows of the object store: a put, an overwrite, a delete and a
// multipart completion, each crashed at every file system operation it makes
// (io::FaultInjectionFileSystem), followed by the power loss (unsynced data
// dropped, removals undone) and a restart (garbage collection against the
// metadata). Afterwards the object is the old one or the new one, whole —
// never partial, never unreadable — and no block file is left that no
// layout refers to. Also a full disk and a failing device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>

#include "io/fault_injection.h"
#include "store/block_store.h"
#include "store/meta_store.h"
#include "store/object_store.h"
#include "store/tiering.h"

namespace aq::store {
namespace {

namespace fs = std::filesystem;

std::string Bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// One node's store over a fault-injecting file system; Restart() is a new
// process on what survived.
// compress: both pools compress (lz4, zstd) and blocks are large enough
// to be compressed. dedup: both pools share equal blocks.
class Node {
 public:
  explicit Node(bool compress = false, bool dedup = false)
      : compress_(compress),
        dedup_(dedup),
        dir_(fs::temp_directory_path() / ("aq_crash_test_" + std::to_string(getpid()) + "_" + NewBlockId())) {
    fs::create_directories(dir_);
    mem_ = io::NewMemFileSystem();
    faulty_ = std::make_unique<io::FaultInjectionFileSystem>(*mem_);
    meta_ = OpenSqliteMetaStore((dir_ / "meta.db").string()).value();
    EXPECT_TRUE(meta_->CreateBucket("bkt").ok());
    Open();
  }
  ~Node() {
    objects_.reset();
    fs::remove_all(dir_);
  }
  void Open() {
    objects_.reset();
    // A second pool, for the tiering mover's moves.
    PoolConfig hot{"default", "/pool", Media::kSsd}, cold{"cold", "/cold", Media::kHdd};
    if (compress_) {
      hot.compression = ParseCompression("lz4").value();
      cold.compression = ParseCompression("zstd").value();
    }
    hot.dedup = cold.dedup = dedup_;
    blocks_ = BlockStore::Open(*faulty_, {hot, cold}).value();
    ObjectStoreOptions o;
    o.block_size = compress_ ? 8192 : 1000;  // several blocks per object: several crash points
    objects_ = std::make_unique<ObjectStore>(*meta_, *blocks_, o);
  }
  // After a crash: the power loss, then a restart with garbage collection.
  void Restart() {
    objects_.reset();
    ASSERT_TRUE(faulty_->DropUnsyncedData().ok());
    Open();
    auto referenced = meta_->ReferencedBlocks();
    ASSERT_TRUE(referenced.ok());
    ASSERT_TRUE(blocks_->CollectGarbage(*referenced).ok());
    ASSERT_TRUE(RemoveStrayCopies(*meta_, *blocks_).ok());
  }
  Status Put(const std::string& key, const std::string& data) {
    auto w = AQ_TRY(objects_->Put("bkt", key));
    for (size_t i = 0; i < data.size(); i += 700) AQ_TRY(w->Write(std::string_view(data).substr(i, 700)));
    return w->Commit().status();
  }
  // The object's bytes, or "<absent>".
  std::string Get(const std::string& key) {
    auto m = objects_->Head("bkt", key);
    if (!m.ok()) return m.status().code() == StatusCode::kNotFound ? "<absent>" : "<error>";
    std::string out;
    Status s = objects_->Read(*m, 0, m->size, [&](std::string_view b) {
      out.append(b);
      return Status::Ok();
    });
    return s.ok() ? out : "<unreadable: " + s.ToString() + ">";
  }
  // Every block file is one a layout refers to, and no temporary is left.
  void ExpectNoLeftovers() {
    auto files = blocks_->List();
    ASSERT_TRUE(files.ok());
    auto referenced = meta_->ReferencedBlocks().value();
    for (const auto& id : *files) {
      EXPECT_TRUE(std::find(referenced.begin(), referenced.end(), id) != referenced.end()) << "orphan block " << id;
    }
    for (const std::string root : {"/pool/blocks", "/cold/blocks"}) {
      const auto dirs = mem_->List(root);
      if (!dirs.ok()) continue;
      for (const auto& dir : *dirs) {
        const auto entries = mem_->List(root + "/" + dir.name).value();
        for (const auto& e : entries) EXPECT_EQ(e.name.find(".tmp"), std::string::npos) << "temporary: " << e.name;
      }
    }
    // Each block is in the pool its layout names, and only there.
    std::map<std::string, std::string> home;
    const auto buckets = meta_->ListBuckets().value();
    for (const auto& b : buckets) {
      const auto page = meta_->ListObjects({b.name, "", "", 1000}).value();
      for (const auto& o : page.objects) {
        const auto object = meta_->GetObject(b.name, o.key).value();
        for (const auto& blk : object.blocks) home[blk.id] = blk.pool;
      }
    }
    for (const std::string pool : {"default", "cold"}) {
      const auto ids = blocks_->List(pool).value();
      for (const auto& id : ids) {
        if (home.count(id)) EXPECT_EQ(home[id], pool) << "a stray copy of block " << id;
      }
    }
  }

  bool compress_, dedup_;
  fs::path dir_;
  std::unique_ptr<io::FileSystem> mem_;
  std::unique_ptr<io::FaultInjectionFileSystem> faulty_;
  std::unique_ptr<MetaStore> meta_;
  std::unique_ptr<BlockStore> blocks_;
  std::unique_ptr<ObjectStore> objects_;
};

// Runs `action` crashed at operation 1, 2, ... until it completes without
// reaching the crash; after each crash the state must satisfy `check`.
template <typename Prepare, typename Action, typename Check>
void AtEveryOperation(Prepare prepare, Action action, Check check, bool compress = false, bool dedup = false) {
  int crashes = 0;
  for (uint64_t k = 1; k < 500; ++k) {
    Node n(compress, dedup);
    prepare(n);
    n.faulty_->CrashAt(k);
    const Status s = action(n);
    const bool crashed = n.faulty_->crashed();
    SCOPED_TRACE("crash at operation " + std::to_string(k) + (crashed ? "" : " (not reached)") + ": " + s.ToString());
    n.Restart();
    check(n, s.ok() && !crashed);
    n.ExpectNoLeftovers();
    if (!crashed) {
      EXPECT_GT(crashes, 0) << "the action made no operation to crash";
      return;
    }
    ++crashes;
  }
  FAIL() << "the action never completed";
}

// One tiering pass under `policies`, the freed blocks released.
Status MoveAll(Node& n, const std::vector<TierPolicy>& policies) {
  Mover m(*n.meta_, *n.blocks_, n.objects_->reclaimer());
  auto r = AQ_TRY(m.Run(policies, {}));
  n.objects_->reclaimer().Drain();
  if (r.errors > 0) return IoError(r.last_error);
  return Status::Ok();
}

// A tiering pass moving an object's blocks to another pool, crashed at
// every operation: the object reads back whole, each block sits in the pool
// its layout names and nowhere else (after the restart's clean-up).
TEST(CrashTest, TieringMoveLeavesTheObjectWholeInOnePool) {
  const std::string v = Bytes(3500, 9);
  const std::vector<TierPolicy> cold = {{"cold", "*", "*", 0, UINT64_MAX, 0, "cold"}};
  AtEveryOperation([&](Node& n) { ASSERT_TRUE(n.Put("obj", v).ok()); }, [&](Node& n) { return MoveAll(n, cold); },
                   [&](Node& n, bool done) {
                     EXPECT_EQ(n.Get("obj"), v);
                     if (done) {
                       const auto o = n.meta_->GetObject("bkt", "obj").value();
                       for (const auto& b : o.blocks) EXPECT_EQ(b.pool, "cold");
                     }
                   });
}

// The same on compressing pools: an overwrite, then a move from the lz4
// pool to the zstd one, crashed at every operation; the blocks are text
// (compressed) and noise (stored plain) in one object.
TEST(CrashTest, CompressingPoolsOverwriteAndMove) {
  std::string text;
  for (int i = 0; text.size() < 20000; ++i) text += "line " + std::to_string(i % 50) + " of a compressible object\n";
  const std::string v1 = text.substr(0, 12000) + Bytes(9000, 4), v2 = Bytes(8192, 5) + text;
  const std::vector<TierPolicy> cold = {{"cold", "*", "*", 0, UINT64_MAX, 0, "cold"}};
  AtEveryOperation([&](Node& n) { ASSERT_TRUE(n.Put("obj", v1).ok()); },
                   [&](Node& n) -> Status {
                     AQ_TRY(n.Put("obj", v2));
                     return MoveAll(n, cold);
                   },
                   [&](Node& n, bool done) {
                     const std::string got = n.Get("obj");
                     EXPECT_TRUE(got == v1 || got == v2) << got.substr(0, 80);
                     if (done) {
                       EXPECT_EQ(got, v2);
                       auto usage = n.blocks_->Usage().value();
                       EXPECT_GT(usage[1].compressed_blocks, 0u);  // the zstd pool holds compressed blocks
                       EXPECT_LT(usage[1].bytes, usage[1].logical_bytes);
                     }
                   },
                   true);
}

// Deduplicated copies deleted one by one and one overwritten with a value
// sharing half its blocks, crashed at every operation: each copy reads
// whole or is gone, and once all are deleted no block file is left.
TEST(CrashTest, DedupCopiesDeletedOneByOne) {
  const std::string a = Bytes(1000, 20), b = Bytes(1000, 21), c = Bytes(1000, 22), d = Bytes(1000, 23);
  const std::string v = a + b + c + d.substr(0, 400), v2 = c + d + a;
  const std::vector<std::string> copies = {"c1", "c2", "c3"};
  AtEveryOperation(
      [&](Node& n) {
        for (const auto& k : copies) ASSERT_TRUE(n.Put(k, v).ok());
        ASSERT_EQ(n.blocks_->List().value().size(), 4u);  // stored once
      },
      [&](Node& n) -> Status {
        AQ_TRY(n.objects_->Delete("bkt", "c1"));
        AQ_TRY(n.Put("c3", v2));
        AQ_TRY(n.objects_->Delete("bkt", "c2"));
        AQ_TRY(n.objects_->Delete("bkt", "c3"));
        n.objects_->reclaimer().Drain();
        return Status::Ok();
      },
      [&](Node& n, bool done) {
        for (const auto& k : copies) {
          const std::string got = n.Get(k);
          EXPECT_TRUE(got == v || got == "<absent>" || (k == "c3" && got == v2)) << k << ": " << got.substr(0, 80);
          if (done) EXPECT_EQ(got, "<absent>");
        }
        if (done) EXPECT_EQ(n.blocks_->List().value().size(), 0u);
      },
      false, true);
}

TEST(CrashTest, NewObjectIsWholeOrAbsent) {
  const std::string v = Bytes(3500, 1);
  AtEveryOperation([](Node&) {}, [&](Node& n) { return n.Put("obj", v); },
                   [&](Node& n, bool done) {
                     const std::string got = n.Get("obj");
                     EXPECT_TRUE(got == v || got == "<absent>") << got.substr(0, 80);
                     if (done) EXPECT_EQ(got, v);
                   });
}

TEST(CrashTest, OverwriteLeavesOldOrNewWhole) {
  const std::string v1 = Bytes(2500, 2), v2 = Bytes(3700, 3);
  AtEveryOperation([&](Node& n) { ASSERT_TRUE(n.Put("obj", v1).ok()); }, [&](Node& n) { return n.Put("obj", v2); },
                   [&](Node& n, bool done) {
                     const std::string got = n.Get("obj");
                     EXPECT_TRUE(got == v1 || got == v2) << got.substr(0, 80);
                     if (done) EXPECT_EQ(got, v2);
                   });
}

TEST(CrashTest, DeleteLeavesObjectWholeOrGone) {
  const std::string v = Bytes(4200, 4);
  AtEveryOperation([&](Node& n) { ASSERT_TRUE(n.Put("obj", v).ok()); },
                   [&](Node& n) { return n.objects_->Delete("bkt", "obj"); },
                   [&](Node& n, bool done) {
                     const std::string got = n.Get("obj");
                     EXPECT_TRUE(got == v || got == "<absent>") << got.substr(0, 80);
                     if (done) EXPECT_EQ(got, "<absent>");
                   });
}

TEST(CrashTest, MultipartCompletionIsAllOrNothing) {
  const std::string old = Bytes(1500, 5), p1 = Bytes(2000, 6), p2 = Bytes(900, 7);
  std::string upload;
  AtEveryOperation(
      [&](Node& n) {
        ASSERT_TRUE(n.Put("obj", old).ok());
        auto u = n.objects_->CreateUpload("bkt", "obj").value();
        upload = u.id;
        for (auto [number, data] : {std::pair{1u, &p1}, {2u, &p2}}) {
          auto w = n.objects_->PutPart(upload, "bkt", "obj", number).value();
          ASSERT_TRUE(w->Write(*data).ok());
          ASSERT_TRUE(w->Commit().ok());
        }
      },
      [&](Node& n) -> Status {
        auto u = AQ_TRY(n.objects_->GetUpload(upload, "bkt", "obj"));
        std::vector<CompletedPart> parts = {{1, u.parts[0].etag}, {2, u.parts[1].etag}};
        return n.objects_->CompleteUpload(upload, "bkt", "obj", parts).status();
      },
      [&](Node& n, bool done) {
        const std::string got = n.Get("obj");
        EXPECT_TRUE(got == old || got == p1 + p2) << got.substr(0, 80);
        if (done) EXPECT_EQ(got, p1 + p2);
      });
}

TEST(CrashTest, FullDiskFailsThePutAndLeavesNothing) {
  Node n;
  const std::string v1 = Bytes(2000, 8);
  ASSERT_TRUE(n.Put("obj", v1).ok());
  n.faulty_->FailWritesAfter(2500);  // the third block of the new object does not fit
  Status s = n.Put("obj", Bytes(5000, 9));
  EXPECT_EQ(s.code(), StatusCode::kNoSpace) << s.ToString();
  n.faulty_->FailWritesAfter(0);
  EXPECT_EQ(n.Get("obj"), v1);
  n.ExpectNoLeftovers();
}

TEST(CrashTest, AFailingDeviceIsAnErrorNamingTheBlock) {
  Node n;
  ASSERT_TRUE(n.Put("obj", Bytes(3000, 10)).ok());
  auto m = n.objects_->Head("bkt", "obj").value();
  n.faulty_->FailReads(m.blocks[1].id);
  const std::string got = n.Get("obj");
  EXPECT_NE(got.find("unreadable"), std::string::npos);
  EXPECT_NE(got.find(m.blocks[1].id), std::string::npos) << got;
  EXPECT_NE(got.find("Input/output error"), std::string::npos) << got;
}

}  // namespace
}  // namespace aq::store
