#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "common/clock.h"
#include "store/access_clock.h"
#include "store/block_cache.h"
#include "store/block_store.h"
#include "store/meta_store.h"
#include "store/object_store.h"
#include "store/reclaimer.h"
#include "store/scrubber.h"
#include "store/tiering.h"
#include "store/uploads.h"

namespace aq::store {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("aq_store_test_" + std::to_string(getpid()) + "_" + NewBlockId())) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

ObjectMeta Object(const std::string& bucket, const std::string& key, std::vector<BlockRef> blocks) {
  ObjectMeta o;
  o.bucket = bucket;
  o.key = key;
  for (const auto& b : blocks) o.size += b.size;
  o.block_size = blocks.empty() ? 0 : blocks[0].size;
  o.etag = "\"etag\"";
  o.blocks = std::move(blocks);
  return o;
}

BlockRef Ref(const std::string& id, uint64_t size) { return {id, size, 7, "default"}; }

TEST(MetaStoreTest, BucketsAndNames) {
  TempDir dir;
  auto m = OpenSqliteMetaStore(dir / "meta.db");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE((*m)->CreateBucket("train-data").ok());
  EXPECT_EQ((*m)->CreateBucket("train-data").code(), StatusCode::kAlreadyExists);
  for (const char* bad : {"ab", "Upper", "-start", "end-", "a..b", "under_score"}) {
    EXPECT_EQ((*m)->CreateBucket(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
  auto list = (*m)->ListBuckets();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "train-data");
  EXPECT_EQ((*m)->DeleteBucket("nope").code(), StatusCode::kNotFound);
}

TEST(MetaStoreTest, PutReplacesLayoutAtomicallyAndReturnsOldBlocks) {
  TempDir dir;
  auto m = OpenSqliteMetaStore(dir / "meta.db").value();
  ASSERT_TRUE(m->CreateBucket("b01").ok());
  auto o1 = Object("b01", "train/shard-0", {Ref(std::string(32, 'a'), 10), Ref(std::string(32, 'b'), 5)});
  auto old = m->PutObject(o1);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_TRUE(old->empty());
  auto got = m->GetObject("b01", "train/shard-0");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size, 15u);
  EXPECT_EQ(got->version, 1u);
  EXPECT_EQ(got->blocks, o1.blocks);
  EXPECT_EQ(got->etag, "\"etag\"");

  auto o2 = Object("b01", "train/shard-0", {Ref(std::string(32, 'c'), 3)});
  old = m->PutObject(o2);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(*old, o1.blocks);  // the replaced layout, for the caller to delete
  got = m->GetObject("b01", "train/shard-0");
  EXPECT_EQ(got->version, 2u);
  EXPECT_EQ(got->blocks, o2.blocks);

  auto refs = m->ReferencedBlocks();
  ASSERT_TRUE(refs.ok());
  EXPECT_EQ(*refs, std::vector<std::string>{std::string(32, 'c')});

  old = m->DeleteObject("b01", "train/shard-0");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(*old, o2.blocks);
  auto gone = m->GetObject("b01", "train/shard-0");
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_NE(gone.status().ToString().find("train/shard-0"), std::string::npos);
  EXPECT_EQ(m->DeleteObject("b01", "train/shard-0").status().code(), StatusCode::kNotFound);
  // A new write after a delete still gets a higher version.
  ASSERT_TRUE(m->PutObject(o1).ok());
  EXPECT_EQ(m->GetObject("b01", "train/shard-0")->version, 3u);
}

TEST(MetaStoreTest, BadPutsAreRefusedWholly) {
  TempDir dir;
  auto m = OpenSqliteMetaStore(dir / "meta.db").value();
  ASSERT_TRUE(m->CreateBucket("b01").ok());
  EXPECT_EQ(m->PutObject(Object("nobucket", "k", {})).status().code(), StatusCode::kNotFound);
  auto o = Object("b01", "k", {Ref(std::string(32, 'a'), 10)});
  o.size = 11;  // blocks and size disagree
  EXPECT_EQ(m->PutObject(o).status().code(), StatusCode::kInvalidArgument);
  for (const char* key : {"../etc/passwd", "a/../../b", "a/./b", "..", ""}) {
    EXPECT_EQ(m->PutObject(Object("b01", key, {})).status().code(), StatusCode::kInvalidArgument) << key;
  }
  EXPECT_EQ(m->PutObject(Object("b01", std::string(1025, 'k'), {})).status().code(), StatusCode::kUnsupported);
  // Keys every listing can carry as XML 1.0: valid UTF-8, no control characters but TAB, LF, CR.
  for (const std::string& key : {std::string("a\x01b"), std::string("bad\xffutf8"), std::string("\xc0\xafoverlong"),
                                 std::string("sur\xed\xa0\x80rogate"),
                                 std::string("non\xef\xbf\xbe"
                                             "char")}) {
    Status st = m->PutObject(Object("b01", key, {})).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << key;
    EXPECT_EQ(st.subject(), Subject::kObject);
  }
  EXPECT_TRUE(CheckObjectKey("caf\xc3\xa9 \xf0\x9f\x98\x80\ttab").ok());
  EXPECT_TRUE(m->PutObject(Object("b01", "a..b/c.d", {})).ok());  // dots inside a segment are fine
  auto page = m->ListObjects({"b01", "", "", 100});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->objects.size(), 1u);  // nothing half-written by the refused puts
}

// An erasure-coded block's record: K, M, a checksum and a holder per
// fragment; each fragment stored under an id of its own.
TEST(MetaStoreTest, ErasureCodedBlockRecords) {
  BlockRef b = Ref(NewBlockId(), 1000);
  b.ec_k = 4;
  b.ec_m = 2;
  b.fragment_crcs = {1, 2, 3, 4, 5, 6};
  b.nodes = {"n1", "n2", "n3", "n4", "n5", "n6"};
  BlockRef plain = Ref(NewBlockId(), 10);
  plain.nodes = {"n1", "n2"};
  auto back = BlocksFromJson(BlocksToJson({b, plain}));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, (std::vector<BlockRef>{b, plain}));
  EXPECT_EQ(b.FragmentSize(), 250u);
  // Fragment ids: block ids, distinct from the block's, from each other and
  // from the same index under another scheme.
  std::set<std::string> ids = {b.id};
  for (int i = 0; i < 6; ++i) ids.insert(FragmentId(b.id, i, 4, 2));
  ids.insert(FragmentId(b.id, 0, 8, 2));
  ids.insert(FragmentId(b.id, 0, 4, 3));
  EXPECT_EQ(ids.size(), 9u);
  EXPECT_EQ(FragmentId(b.id, 3, 4, 2), FragmentId(b.id, 3, 4, 2));
  auto pieces = StoredPieces(b);
  ASSERT_EQ(pieces.size(), 6u);
  EXPECT_EQ(pieces[5].first, "n6");
  EXPECT_EQ(pieces[5].second.id, FragmentId(b.id, 5, 4, 2));
  EXPECT_EQ(pieces[5].second.crc32c, 6u);
  EXPECT_EQ(pieces[5].second.size, 250u);
  auto two = StoredPieces(plain);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].second.id, plain.id);
  EXPECT_EQ(two[1].second.nodes, std::vector<std::string>{"n2"});
  // A record whose fragment list does not match K+M is corrupt, not guessed at.
  for (const char* bad : {R"([{"id":"a","size":1,"crc32c":0,"pool":"p","nodes":["x"],"ec":[4,2],"fcrc":[1]}])",
                          R"([{"id":"a","size":1,"crc32c":0,"pool":"p","nodes":[],"ec":[0,2],"fcrc":[]}])",
                          R"([{"id":"a","size":1,"crc32c":0,"pool":"p","ec":[1,1]}])"}) {
    EXPECT_EQ(BlocksFromJson(bad).status().code(), StatusCode::kCorruption) << bad;
  }
  // The single node's SQLite metadata has no place for fragments: refused.
  TempDir dir;
  auto m = OpenSqliteMetaStore(dir / "meta.db").value();
  ASSERT_TRUE(m->CreateBucket("b01").ok());
  EXPECT_EQ(m->PutObject(Object("b01", "k", {b})).status().code(), StatusCode::kUnsupported);
}

TEST(MetaStoreTest, ListingByPrefixWithPagination) {
  TempDir dir;
  auto m = OpenSqliteMetaStore(dir / "meta.db").value();
  ASSERT_TRUE(m->CreateBucket("b01").ok());
  for (const char* k : {"a/1", "a/2", "a/3", "a%/x", "a_/y", "b/1", "a"})
    ASSERT_TRUE(m->PutObject(Object("b01", k, {})).ok());
  auto p = m->ListObjects({"b01", "a/", "", 2});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->objects.size(), 2u);
  EXPECT_EQ(p->objects[0].key, "a/1");
  EXPECT_EQ(p->objects[1].key, "a/2");
  EXPECT_TRUE(p->truncated);
  p = m->ListObjects({"b01", "a/", "a/2", 2});
  ASSERT_EQ(p->objects.size(), 1u);
  EXPECT_EQ(p->objects[0].key, "a/3");
  EXPECT_FALSE(p->truncated);
  p = m->ListObjects({"b01", "a%", "", 10});  // '%' is a character, not a wildcard
  ASSERT_EQ(p->objects.size(), 1u);
  EXPECT_EQ(p->objects[0].key, "a%/x");
  p = m->ListObjects({"b01", "", "", 1000});
  EXPECT_EQ(p->objects.size(), 7u);
  EXPECT_EQ(m->ListObjects({"nobucket", "", "", 10}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m->DeleteBucket("b01").code(), StatusCode::kNotEmpty);
}

TEST(MetaStoreTest, SurvivesReopenAndRefusesForeignFiles) {
  TempDir dir;
  {
    auto m = OpenSqliteMetaStore(dir / "meta.db").value();
    ASSERT_TRUE(m->CreateBucket("keep").ok());
    ASSERT_TRUE(m->PutObject(Object("keep", "k", {Ref(std::string(32, 'd'), 4)})).ok());
  }
  auto m = OpenSqliteMetaStore(dir / "meta.db");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->GetObject("keep", "k")->blocks[0].id, std::string(32, 'd'));
  std::ofstream(dir / "junk.db") << "this is not a database, just some bytes that go on for a while........";
  auto bad = OpenSqliteMetaStore(dir / "junk.db");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("junk.db"), std::string::npos);
  EXPECT_FALSE(OpenSqliteMetaStore(dir / "no/such/dir/meta.db").ok());
}

TEST(BlockStoreTest, ParsePool) {
  auto p = ParsePool("fast=/mnt/nvme,media=ssd");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->name, "fast");
  EXPECT_EQ(p->path, "/mnt/nvme");
  EXPECT_EQ(ParsePool("slow=/mnt/hdd,media=hdd")->media, Media::kHdd);
  EXPECT_EQ(ParsePool("plain=/x")->media, Media::kSsd);
  for (const char* bad : {"noequals", "=/x", "n=", "n=/x,media=tape", "n=/x,color=red"}) {
    EXPECT_FALSE(ParsePool(bad).ok()) << bad;
  }
}

TEST(BlockStoreTest, WriteReadRangesRemove) {
  auto mem = io::NewMemFileSystem();
  auto bs = BlockStore::Open(*mem, {{"default", "/pool0", Media::kSsd}, {"cold", "/pool1", Media::kHdd}});
  ASSERT_TRUE(bs.ok()) << bs.status().ToString();
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31);
  auto ref = (*bs)->Write("", data);
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->pool, "default");
  EXPECT_EQ(ref->size, data.size());
  EXPECT_EQ(ref->id.size(), 32u);
  EXPECT_EQ(*(*bs)->Read(*ref), data);
  EXPECT_EQ(*(*bs)->Read(*ref, 99990, 100), data.substr(99990));
  EXPECT_EQ(*(*bs)->Read(*ref, 5, 3), data.substr(5, 3));
  EXPECT_FALSE((*bs)->Read(*ref, 100001, 1).ok());
  auto cold = (*bs)->Write("cold", "x");
  ASSERT_TRUE(cold.ok());
  EXPECT_EQ(cold->pool, "cold");
  EXPECT_EQ((*bs)->Write("nopool", "x").status().code(), StatusCode::kNotFound);
  auto usage = (*bs)->Usage();
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ((*usage)[0].blocks, 1u);
  EXPECT_EQ((*usage)[1].blocks, 1u);
  EXPECT_TRUE((*bs)->Remove(*ref).ok());
  EXPECT_TRUE((*bs)->Remove(*ref).ok());  // idempotent
  EXPECT_EQ((*bs)->Read(*ref).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE((*bs)->Read({"../../etc/passwd", 1, 0, "default"}).ok());  // ids are ids, not paths
  EXPECT_FALSE(BlockStore::Open(*mem, {}).ok());
  EXPECT_FALSE(BlockStore::Open(*mem, {{"a", "/p"}, {"a", "/q"}}).ok());
}

TEST(BlockStoreTest, CorruptBlocksAreReportedNeverReturned) {
  TempDir dir;
  auto posix = io::NewPosixFileSystem();
  auto bs = BlockStore::Open(*posix, {{"default", dir / "pool", Media::kSsd}}).value();
  std::string data(4096, 'q');
  auto ref = *bs->Write("", data);
  const std::string path = bs->PathOf(ref);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(24 + 1000);
    f.put('Q');  // one flipped byte in the data
  }
  auto r = bs->Read(ref);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().ToString().find(ref.id), std::string::npos);
  EXPECT_NE(r.status().ToString().find("default"), std::string::npos);
  fs::resize_file(path, 10);  // truncated below the header
  EXPECT_EQ(bs->Read(ref).status().code(), StatusCode::kCorruption);
  auto other = *bs->Write("", "abc");
  BlockRef wrong = other;
  wrong.crc32c ^= 1;  // the layout and the file disagree
  EXPECT_EQ(bs->Read(wrong).status().code(), StatusCode::kCorruption);
}

// The scrubber: one pass finds a flipped, a truncated and a deleted block,
// hands each to the repair (here: rewritten from a kept copy) and reports
// the object; without a repair they stay reported; an object deleted during
// the pass is no finding.
TEST(ScrubberTest, OnePassFindsFlippedTruncatedAndDeletedPieces) {
  TempDir dir;
  auto posix = io::NewPosixFileSystem();
  auto bs = BlockStore::Open(*posix, {{"default", dir / "pool", Media::kSsd}}).value();
  std::vector<std::string> data;
  std::vector<ExpectedPiece> expected;
  for (int i = 0; i < 6; ++i) {
    data.push_back(std::string(5000 + i, static_cast<char>('a' + i)));
    auto ref = *bs->Write("", data.back());
    expected.push_back({ref, ref, -1, "b01/k" + std::to_string(i)});
  }
  {
    std::fstream f(bs->PathOf(expected[0].piece), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(24 + 100);
    f.put('Z');
  }
  fs::resize_file(bs->PathOf(expected[1].piece), 2000);
  fs::remove(bs->PathOf(expected[2].piece));
  bool gone = false;  // k5 is deleted while the pass runs: its piece is no longer expected
  auto list = [&]() -> Result<std::vector<ExpectedPiece>> {
    auto out = expected;
    if (gone) out.pop_back();
    return out;
  };
  Scrubber report_only(*bs, list, nullptr, {1e9, 3600});
  fs::remove(bs->PathOf(expected[5].piece));
  std::atomic<bool> stop{false};
  auto findings = report_only.RunPass(&stop);
  ASSERT_TRUE(findings.ok()) << findings.status().ToString();
  EXPECT_EQ(findings->size(), 4u);  // k5 is still expected: missing
  gone = true;
  findings = report_only.RunPass(&stop);
  ASSERT_TRUE(findings.ok());
  ASSERT_EQ(findings->size(), 3u);
  EXPECT_EQ((*findings)[0].object, "b01/k0");
  EXPECT_EQ((*findings)[0].problem.rfind("corrupt", 0), 0u);
  EXPECT_EQ((*findings)[2].problem, "missing");
  for (const auto& f : *findings) EXPECT_FALSE(f.repaired);
  auto st = report_only.Stats();
  EXPECT_EQ(st.unrepaired, 3u);
  EXPECT_EQ(st.objects_at_risk, (std::vector<std::string>{"b01/k0", "b01/k1", "b01/k2"}));

  int repairs = 0;
  Scrubber repairing(*bs, list,
                     [&](const ExpectedPiece& e) -> Status {
                       ++repairs;
                       const size_t i = static_cast<size_t>(e.object.back() - '0');
                       return bs->WriteWithId(e.piece.id, e.piece.pool, data[i]).status();
                     },
                     {1e9, 3600});
  findings = repairing.RunPass(&stop);
  ASSERT_TRUE(findings.ok());
  EXPECT_EQ(repairs, 3);
  for (const auto& f : *findings) EXPECT_TRUE(f.repaired) << f.object << ": " << f.repair_error;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*bs->Read(expected[i].piece), data[i]);
  EXPECT_EQ(repairing.RunPass(&stop)->size(), 0u);  // whole again
  EXPECT_EQ(repairing.Stats().unrepaired, 0u);
  EXPECT_EQ(repairing.Stats().repaired, 3u);
}

// A corrupt piece that re-protection moves away during the pass: its file
// goes and the metadata stops naming it, in either order, at any point
// after the pass read it. It is no finding (no object at risk), nothing is
// "repaired" onto a piece no layout names, and a piece whose file went but
// which the metadata still names is reported missing and rebuilt.
TEST(ScrubberTest, PiecesMovedAwayDuringThePassAreNoDamage) {
  TempDir dir;
  auto posix = io::NewPosixFileSystem();
  auto bs = BlockStore::Open(*posix, {{"default", dir / "pool", Media::kSsd}}).value();
  const std::string data(6000, 'r');
  auto ref = *bs->Write("", data);
  const std::vector<ExpectedPiece> expected = {{ref, ref, -1, "b01/moved"}};
  auto flip = [&] {
    std::fstream f(bs->PathOf(ref), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(24 + 10);
    f.put('Z');
  };
  // The listing's n-th call (1: the pass's own; 2: the check after the
  // re-read; 3: the check after the file vanished) and what each does.
  int calls = 0;
  int remove_at = 0, unnamed_from = 0;
  auto list = [&]() -> Result<std::vector<ExpectedPiece>> {
    ++calls;
    if (calls == remove_at) fs::remove(bs->PathOf(ref));
    if (unnamed_from != 0 && calls >= unnamed_from) return std::vector<ExpectedPiece>{};
    return expected;
  };
  int repairs = 0;
  Scrubber scrubber(*bs, list,
                    [&](const ExpectedPiece& e) -> Status {
                      ++repairs;
                      return bs->WriteWithId(e.piece.id, e.piece.pool, data).status();
                    },
                    {1e9, 3600});
  std::atomic<bool> stop{false};
  struct Case {
    int remove_at, unnamed_from;
    size_t findings;
    int repairs;
  };
  // Removed after the re-read, before quarantine, then unnamed: nothing.
  // Removed and unnamed at the check: nothing. Removed at the check but
  // still named: missing, and rebuilt.
  for (const Case& c : {Case{2, 3, 0, 0}, Case{2, 2, 0, 0}, Case{2, 0, 1, 1}}) {
    SCOPED_TRACE(testing::Message() << "removed at call " << c.remove_at << ", unnamed from " << c.unnamed_from);
    ASSERT_TRUE(bs->WriteWithId(ref.id, ref.pool, data).ok());
    flip();
    calls = 0;
    repairs = 0;
    remove_at = c.remove_at;
    unnamed_from = c.unnamed_from;
    auto findings = scrubber.RunPass(&stop);
    ASSERT_TRUE(findings.ok()) << findings.status().ToString();
    ASSERT_EQ(findings->size(), c.findings);
    EXPECT_EQ(repairs, c.repairs);
    EXPECT_EQ(scrubber.Stats().objects_at_risk.size(), 0u);
    if (c.findings == 1) {
      EXPECT_EQ((*findings)[0].problem, "missing");
      EXPECT_TRUE((*findings)[0].repaired) << (*findings)[0].repair_error;
    } else {
      EXPECT_FALSE(fs::exists(bs->PathOf(ref)));  // nothing written back for a piece no layout names
    }
  }
  EXPECT_EQ(scrubber.Stats().quarantined, 0u);
}

// Every copy damaged: the repair has nothing good to rebuild from. The
// scrubber never deletes the last bytes of a block: the damaged file is
// moved into the pool's quarantine/ folder, byte for byte, named in the
// finding and the stats, and survives garbage collection; once a later
// rebuild succeeds, the quarantined file goes.
TEST(ScrubberTest, DamagedLastCopiesAreQuarantinedNeverDeleted) {
  TempDir dir;
  auto posix = io::NewPosixFileSystem();
  auto bs = BlockStore::Open(*posix, {{"default", dir / "pool", Media::kSsd}}).value();
  const std::string data(8000, 'q');
  auto ref = *bs->Write("", data);
  std::vector<ExpectedPiece> expected = {{ref, ref, -1, "b01/only"}};
  auto list = [&]() -> Result<std::vector<ExpectedPiece>> { return expected; };
  {
    std::fstream f(bs->PathOf(ref), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(24 + 10);
    f.put('Z');
  }
  std::string damaged;
  {
    std::ifstream f(bs->PathOf(ref), std::ios::binary);
    damaged.assign(std::istreambuf_iterator<char>(f), {});
  }
  bool good_copy = false;  // the other copies: damaged too, at first
  Scrubber scrubber(*bs, list,
                    [&](const ExpectedPiece& e) -> Status {
                      if (!good_copy) return Corruption("every other copy of the block is damaged too");
                      return bs->WriteWithId(e.piece.id, e.piece.pool, data).status();
                    },
                    {1e9, 3600});
  std::atomic<bool> stop{false};
  auto findings = scrubber.RunPass(&stop);
  ASSERT_TRUE(findings.ok());
  ASSERT_EQ(findings->size(), 1u);
  const ScrubFinding f = (*findings)[0];  // (a copy: findings is reused below)
  EXPECT_FALSE(f.repaired);
  ASSERT_FALSE(f.quarantined.empty());
  EXPECT_EQ(f.quarantined.rfind((dir / "pool") + "/quarantine/", 0), 0u) << f.quarantined;
  {
    std::ifstream q(f.quarantined, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(q), {}), damaged);  // every byte kept
  }
  auto st = scrubber.Stats();
  EXPECT_EQ(st.quarantined, 1u);
  EXPECT_EQ(st.quarantined_bytes, damaged.size());
  ASSERT_EQ(st.quarantine.size(), 1u);
  EXPECT_EQ(st.quarantine[0].first, f.quarantined);
  // Garbage collection leaves the quarantine alone; so does a second pass.
  ASSERT_TRUE(bs->CollectGarbage({ref.id}).ok());
  EXPECT_TRUE(fs::exists(f.quarantined));
  ASSERT_TRUE(scrubber.RunPass(&stop).ok());
  EXPECT_TRUE(fs::exists(f.quarantined));
  // A good copy turns up (a node back from the dead): rebuilt, and the
  // quarantined file goes.
  good_copy = true;
  findings = scrubber.RunPass(&stop);
  ASSERT_TRUE(findings.ok());
  ASSERT_EQ(findings->size(), 1u);
  EXPECT_TRUE((*findings)[0].repaired);
  EXPECT_EQ(*bs->Read(ref), data);
  EXPECT_EQ(scrubber.Stats().quarantined, 1u);  // the first one stays: it was never rebuilt then
  Status dropped = bs->DropQuarantined(f.quarantined);
  EXPECT_TRUE(dropped.ok()) << dropped.ToString();
  EXPECT_EQ(bs->DropQuarantined(bs->PathOf(ref)).code(), StatusCode::kInvalidArgument);  // not a quarantined file
  EXPECT_EQ(*bs->Read(ref), data);
}

// A crash between writing blocks and committing the layout leaves orphan
// blocks and temporaries; the object keeps its old layout, and garbage
// collection at the next start removes the rest.
TEST(BlockStoreTest, OrphansFromAnInterruptedWriteAreCollected) {
  TempDir dir;
  auto posix = io::NewPosixFileSystem();
  auto bs = BlockStore::Open(*posix, {{"default", dir / "pool", Media::kSsd}}).value();
  auto meta = OpenSqliteMetaStore(dir / "meta.db").value();
  ASSERT_TRUE(meta->CreateBucket("b01").ok());
  auto kept = *bs->Write("", "old contents");
  ASSERT_TRUE(meta->PutObject(Object("b01", "k", {kept})).ok());
  // The interrupted rewrite: two new blocks written, no commit, and a
  // temporary file that never got renamed.
  auto orphan1 = *bs->Write("", "new contents, part 1");
  auto orphan2 = *bs->Write("", "new contents, part 2");
  std::ofstream(bs->PathOf(orphan1) + "x.tmp") << "half";
  auto gc = bs->CollectGarbage(*meta->ReferencedBlocks());
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->orphans_removed, 2u);
  EXPECT_EQ(gc->temporaries_removed, 1u);
  EXPECT_EQ(gc->blocks_seen, 3u);
  EXPECT_EQ(*bs->Read(meta->GetObject("b01", "k")->blocks[0]), "old contents");
  EXPECT_EQ(bs->Read(orphan2).status().code(), StatusCode::kNotFound);
}

// A file system whose appends fail as a full disk does.
class FullFileSystem final : public io::FileSystem {
 public:
  explicit FullFileSystem(io::FileSystem& base) : base_(base) {}
  Result<std::unique_ptr<io::RandomAccessFile>> OpenRead(const std::string& p, io::AccessHint h) override {
    return base_.OpenRead(p, h);
  }
  Result<std::unique_ptr<io::WritableFile>> OpenWrite(const std::string& p) override {
    return std::unique_ptr<io::WritableFile>(std::make_unique<Full>(AQ_TRY(base_.OpenWrite(p))));
  }
  Result<io::FileInfo> Stat(const std::string& p) override { return base_.Stat(p); }
  Result<std::vector<io::FileInfo>> List(const std::string& d) override { return base_.List(d); }
  Status MakeDirs(const std::string& p) override { return base_.MakeDirs(p); }
  Status Remove(const std::string& p) override { return base_.Remove(p); }
  Status Rename(const std::string& a, const std::string& b) override { return base_.Rename(a, b); }

 private:
  struct Full final : io::WritableFile {
    explicit Full(std::unique_ptr<io::WritableFile> f) : f_(std::move(f)) {}
    Status Append(std::string_view d) override {
      if (f_->size() + d.size() > 64) return Status(StatusCode::kNoSpace, "write: no space left on device");
      return f_->Append(d);
    }
    Status Sync() override { return f_->Sync(); }
    Status Close() override { return f_->Close(); }
    uint64_t size() const override { return f_->size(); }
    const std::string& path() const override { return f_->path(); }
    std::unique_ptr<io::WritableFile> f_;
  };
  io::FileSystem& base_;
};

TEST(BlockStoreTest, FullDiskLeavesNothingBehind) {
  auto mem = io::NewMemFileSystem();
  FullFileSystem full(*mem);
  auto bs = BlockStore::Open(full, {{"default", "/pool", Media::kSsd}}).value();
  EXPECT_TRUE(bs->Write("", "small").ok());
  auto r = bs->Write("", std::string(1000, 'x'));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNoSpace);
  auto gc = bs->CollectGarbage({});
  ASSERT_TRUE(gc.ok());
  EXPECT_EQ(gc->temporaries_removed, 0u);  // the failed write removed its temporary
  EXPECT_EQ(gc->blocks_seen, 1u);
}

class ObjectStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    mem_ = io::NewMemFileSystem();
    blocks_ = BlockStore::Open(*mem_, {{"default", "/pool", Media::kSsd}}).value();
    meta_ = OpenSqliteMetaStore(dir_ / "meta.db").value();
    ASSERT_TRUE(meta_->CreateBucket("b01").ok());
    objects_ = std::make_unique<ObjectStore>(*meta_, *blocks_, ObjectStoreOptions{1000, ""});
  }
  std::string ReadAll(const ObjectMeta& m, uint64_t off, uint64_t n) {
    std::string out;
    Status s = objects_->Read(m, off, n, [&](std::string_view b) {
      EXPECT_LE(b.size(), 1000u);  // one block at a time
      out.append(b);
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }
  ObjectMeta PutString(const std::string& key, const std::string& data) {
    auto w = objects_->Put("b01", key).value();
    for (size_t i = 0; i < data.size(); i += 333) EXPECT_TRUE(w->Write(std::string_view(data).substr(i, 333)).ok());
    return w->Commit().value();
  }
  TempDir dir_;
  std::unique_ptr<io::FileSystem> mem_;
  std::unique_ptr<BlockStore> blocks_;
  std::unique_ptr<MetaStore> meta_;
  std::unique_ptr<ObjectStore> objects_;
};

TEST_F(ObjectStoreTest, StreamsIntoBlocksAndReadsRanges) {
  std::string data(3500, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 26);
  ObjectMeta m = PutString("shard-0", data);
  EXPECT_EQ(m.size, 3500u);
  ASSERT_EQ(m.blocks.size(), 4u);  // 1000 + 1000 + 1000 + 500
  EXPECT_EQ(m.blocks[3].size, 500u);
  EXPECT_EQ(m.etag.size(), 34u);  // quoted MD5 hex
  EXPECT_EQ(ReadAll(m, 0, 3500), data);
  EXPECT_EQ(ReadAll(m, 999, 2), data.substr(999, 2));  // across a block boundary
  EXPECT_EQ(ReadAll(m, 3499, 1), data.substr(3499));
  EXPECT_EQ(ReadAll(m, 10, 0), "");
  EXPECT_FALSE(objects_->Read(m, 3000, 501, [](std::string_view) { return Status::Ok(); }).ok());
  // The well-known MD5 of an empty object.
  ObjectMeta empty = PutString("empty", "");
  EXPECT_EQ(empty.etag, "\"d41d8cd98f00b204e9800998ecf8427e\"");
  EXPECT_TRUE(empty.blocks.empty());
}

TEST_F(ObjectStoreTest, OverwriteFreesOldBlocksAndAbortFreesNew) {
  PutString("k", std::string(2500, 'x'));
  PutString("k", std::string(10, 'y'));
  EXPECT_EQ(blocks_->Usage()->at(0).blocks, 1u);  // the three old blocks are gone
  {
    auto w = objects_->Put("b01", "k").value();
    ASSERT_TRUE(w->Write(std::string(2500, 'z')).ok());
    EXPECT_EQ(blocks_->Usage()->at(0).blocks, 3u);  // two full blocks written so far
  }                                                 // the client went away: the writer aborts
  EXPECT_EQ(blocks_->Usage()->at(0).blocks, 1u);
  EXPECT_EQ(ReadAll(objects_->Head("b01", "k").value(), 0, 10), std::string(10, 'y'));  // old object intact
  EXPECT_TRUE(objects_->Delete("b01", "k").ok());
  EXPECT_EQ(blocks_->Usage()->at(0).blocks, 0u);
  EXPECT_EQ(objects_->Delete("b01", "k").code(), StatusCode::kNotFound);
  EXPECT_EQ(objects_->Put("nobucket", "k").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(objects_->Put("b01", "../k").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ObjectStoreTest, MultipartUploadCommitsThePartsInOneSwitch) {
  PutString("big", "old bytes");
  auto up = objects_->CreateUpload("b01", "big").value();
  auto put_part = [&](uint32_t n, const std::string& data) {
    auto w = objects_->PutPart(up.id, "b01", "big", n).value();
    EXPECT_TRUE(w->Write(data).ok());
    return w->Commit().value();
  };
  const std::string p1(2500, 'a'), p2(1200, 'b'), p3(700, 'c');
  put_part(2, std::string(50, 'x'));  // replaced below
  ObjectMeta m2 = put_part(2, p2);    // 1000 + 200
  ObjectMeta m1 = put_part(1, p1);    // 1000 + 1000 + 500
  ObjectMeta m3 = put_part(3, p3);    // left out of the completion
  EXPECT_EQ(m1.size, 2500u);
  EXPECT_EQ(blocks_->Usage()->at(0).blocks, 1u + 3 + 2 + 1);  // the old object + parts (replaced part freed)
  // Until completion the old object is what readers see.
  EXPECT_EQ(ReadAll(objects_->Head("b01", "big").value(), 0, 9), "old bytes");
  // Parts' blocks are referenced: garbage collection keeps them.
  auto refs = meta_->ReferencedBlocks().value();
  EXPECT_EQ(refs.size(), 7u);

  auto upload = objects_->GetUpload(up.id, "b01", "big").value();
  ASSERT_EQ(upload.parts.size(), 3u);
  std::string code, message;
  std::vector<CompletedPart> list = {{1, m1.etag}, {2, m2.etag}};
  EXPECT_TRUE(CheckCompletion(upload, list, 1000, &code, &message)) << message;
  EXPECT_FALSE(CheckCompletion(upload, {{2, m2.etag}, {1, m1.etag}}, 1000, &code, &message));
  EXPECT_EQ(code, "InvalidPartOrder");
  EXPECT_FALSE(CheckCompletion(upload, {{1, m1.etag}, {4, m1.etag}}, 1000, &code, &message));
  EXPECT_EQ(code, "InvalidPart");
  EXPECT_FALSE(CheckCompletion(upload, {{1, m2.etag}}, 1000, &code, &message));
  EXPECT_EQ(code, "InvalidPart");
  EXPECT_FALSE(CheckCompletion(upload, {{1, m1.etag}, {2, m2.etag}}, 2501, &code, &message));
  EXPECT_EQ(code, "EntityTooSmall");
  EXPECT_NE(message.find("part 1"), std::string::npos);

  ObjectMeta done = objects_->CompleteUpload(up.id, "b01", "big", list).value();
  EXPECT_EQ(done.size, 3700u);
  EXPECT_EQ(ReadAll(done, 0, 3700), p1 + p2);
  EXPECT_EQ(ReadAll(done, 2499, 2), "ab");  // across the parts' boundary
  // S3's ETag: MD5 of the parts' binary MD5s, "-2".
  EXPECT_EQ(done.etag.size(), 36u);
  EXPECT_EQ(done.etag.substr(done.etag.size() - 3), "-2\"");
  // Old object's block and part 3's block are freed; the upload is gone.
  EXPECT_EQ(blocks_->Usage()->at(0).blocks, 5u);
  EXPECT_EQ(objects_->GetUpload(up.id, "b01", "big").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(objects_->PutPart(up.id, "b01", "big", 4).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(meta_->ReferencedBlocks()->size(), 5u);
  (void)m3;
}

// A writer that asked for unique ETags: no MD5 of the bytes, an ETag of
// its own per write (an object's with "-1", a part's that completes as an
// MD5's would), and the bytes as ever.
TEST_F(ObjectStoreTest, UniqueEtagsAreOnePerWriteAndCompleteLikeMd5s) {
  auto put = [&](const std::string& data) {
    auto w = objects_->Put("b01", "k").value();
    w->set_unique_etag();
    EXPECT_TRUE(w->Write(data).ok());
    return w->Commit().value();
  };
  const ObjectMeta a = put("same bytes"), b = put("same bytes");
  EXPECT_NE(a.etag, b.etag);
  ASSERT_EQ(a.etag.size(), 36u);  // quoted, 32 hex digits and "-1"
  EXPECT_EQ(a.etag.substr(a.etag.size() - 3), "-1\"");
  EXPECT_EQ(ReadAll(objects_->Head("b01", "k").value(), 0, 10), "same bytes");
  auto up = objects_->CreateUpload("b01", "big").value();
  std::vector<CompletedPart> parts;
  for (uint32_t n = 1; n <= 2; ++n) {
    auto w = objects_->PutPart(up.id, "b01", "big", n).value();
    w->set_unique_etag();
    EXPECT_TRUE(w->Write(std::string(1500, static_cast<char>('a' + n))).ok());
    const ObjectMeta m = w->Commit().value();
    EXPECT_EQ(m.etag.size(), 34u) << m.etag;  // looks like an MD5 to the completion
    parts.push_back({n, m.etag});
  }
  const ObjectMeta done = objects_->CompleteUpload(up.id, "b01", "big", parts).value();
  EXPECT_EQ(done.etag.substr(done.etag.size() - 3), "-2\"");
  EXPECT_EQ(ReadAll(done, 0, 3000), std::string(1500, 'b') + std::string(1500, 'c'));
}

TEST_F(ObjectStoreTest, MultipartAbortAndRacesLeaveNothingBehind) {
  auto up = objects_->CreateUpload("b01", "k").value();
  EXPECT_EQ(objects_->PutPart(up.id, "b01", "other", 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(objects_->PutPart(up.id, "b01", "k", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(objects_->PutPart(up.id, "b01", "k", 10001).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(objects_->CreateUpload("nobucket", "k").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(objects_->CreateUpload("b01", "a/../b").status().code(), StatusCode::kInvalidArgument);
  // A bucket with an upload in progress is not empty.
  EXPECT_EQ(meta_->DeleteBucket("b01").code(), StatusCode::kNotEmpty);
  EXPECT_EQ(meta_->ListUploads("b01")->size(), 1u);
  {
    auto w = objects_->PutPart(up.id, "b01", "k", 1).value();
    ASSERT_TRUE(w->Write(std::string(1500, 'p')).ok());
    ASSERT_TRUE(w->Commit().ok());
  }
  // A part whose upload is aborted while it streams: its blocks go too.
  auto late = objects_->PutPart(up.id, "b01", "k", 2).value();
  ASSERT_TRUE(late->Write(std::string(1500, 'q')).ok());
  ASSERT_TRUE(objects_->AbortUpload(up.id, "b01", "k").ok());
  EXPECT_EQ(late->Commit().status().code(), StatusCode::kNotFound);
  EXPECT_EQ(blocks_->Usage()->at(0).blocks, 0u);
  EXPECT_EQ(objects_->AbortUpload(up.id, "b01", "k").code(), StatusCode::kNotFound);
  EXPECT_EQ(objects_->Head("b01", "k").status().code(), StatusCode::kNotFound);  // never visible
  EXPECT_TRUE(meta_->DeleteBucket("b01").ok());

  // A part replaced between the completion's check and its commit fails the
  // commit: the object never points at freed blocks.
  ASSERT_TRUE(meta_->CreateBucket("b02").ok());
  auto up2 = objects_->CreateUpload("b02", "k").value();
  auto w = objects_->PutPart(up2.id, "b02", "k", 1).value();
  ASSERT_TRUE(w->Write("first").ok());
  ObjectMeta first = w->Commit().value();
  auto w2 = objects_->PutPart(up2.id, "b02", "k", 1).value();
  ASSERT_TRUE(w2->Write("second").ok());
  ASSERT_TRUE(w2->Commit().ok());
  EXPECT_EQ(objects_->CompleteUpload(up2.id, "b02", "k", {{1, first.etag}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(objects_->Head("b02", "k").status().code(), StatusCode::kNotFound);
}

TEST(MetaStoreTest, UploadsSurviveReopen) {
  TempDir dir;
  {
    auto meta = OpenSqliteMetaStore(dir / "m.db").value();
    ASSERT_TRUE(meta->CreateBucket("bkt").ok());
    ASSERT_TRUE(meta->CreateUpload({"u1", "bkt", "key", 5, {}}).ok());
    EXPECT_EQ(meta->CreateUpload({"u1", "bkt", "key", 5, {}}).code(), StatusCode::kAlreadyExists);
    ASSERT_TRUE(meta->PutPart("u1", {3, 10, "\"e\"", 0, {Ref("b1", 4), Ref("b2", 6)}}).ok());
    EXPECT_EQ(meta->PutPart("u1", {4, 10, "\"e\"", 0, {Ref("b3", 4)}}).status().code(),
              StatusCode::kInvalidArgument);  // blocks do not add up
    EXPECT_EQ(meta->PutPart("nope", {1, 4, "\"e\"", 0, {Ref("b4", 4)}}).status().code(), StatusCode::kNotFound);
  }
  auto meta = OpenSqliteMetaStore(dir / "m.db").value();
  auto u = meta->GetUpload("u1").value();
  EXPECT_EQ(u.key, "key");
  ASSERT_EQ(u.parts.size(), 1u);
  EXPECT_EQ(u.parts[0].number, 3u);
  EXPECT_EQ(u.parts[0].blocks.size(), 2u);
  EXPECT_EQ(meta->ReferencedBlocks()->size(), 2u);
  ObjectMeta o = Object("bkt", "key", {});
  EXPECT_EQ(meta->CompleteUpload("u1", {{3, "\"e\""}}, Object("bkt", "other", {})).status().code(),
            StatusCode::kInvalidArgument);  // another key's upload
  auto freed = meta->CompleteUpload("u1", {{3, "\"e\""}}, o).value();
  EXPECT_TRUE(freed.empty());
  EXPECT_EQ(meta->GetObject("bkt", "key")->size, 10u);
  EXPECT_EQ(meta->GetObject("bkt", "key")->blocks.size(), 2u);
}

TEST_F(ObjectStoreTest, CorruptBlockFailsTheReadNamingTheObject) {
  ObjectMeta m = PutString("k", std::string(1500, 'c'));
  BlockRef bad = m.blocks[1];
  bad.crc32c ^= 0xffff;
  m.blocks[1] = bad;
  std::string got;
  Status s = objects_->Read(m, 0, 1500, [&](std::string_view b) {
    got.append(b);
    return Status::Ok();
  });
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.ToString().find("b01/k"), std::string::npos);
  EXPECT_EQ(got.size(), 1000u);  // the good first block, nothing from the bad one
}

TEST_F(ObjectStoreTest, ReadsThroughTheBlockCache) {
  BlockCache cache(1 << 20, CachePolicy::kTinyLfu, 1000);
  ObjectStore cached(*meta_, *blocks_, ObjectStoreOptions{1000, ""}, &cache);
  ObjectMeta m = PutString("k", std::string(2500, 'q'));
  for (int pass = 0; pass < 3; ++pass) {
    std::string got;
    ASSERT_TRUE(cached
                    .Read(m, 100, 2000,
                          [&](std::string_view b) {
                            got.append(b);
                            return Status::Ok();
                          })
                    .ok());
    EXPECT_EQ(got, std::string(2000, 'q'));
  }
  auto s = cache.Stats();
  EXPECT_EQ(s.misses, 3u);  // each of the three blocks read from its pool once
  EXPECT_EQ(s.hits, 6u);
  ASSERT_TRUE(cached.Delete("b01", "k").ok());
  EXPECT_EQ(cache.Stats().entries, 0u);  // deleted blocks leave the cache too
}

TEST_F(ObjectStoreTest, ListV2WithDelimiterAndPagination) {
  for (const char* k : {"a.txt", "dir/1", "dir/2", "dir/sub/3", "other/x", "z"}) PutString(k, "v");
  auto p = objects_->List({"b01", "", "/", "", 1000});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->objects.size(), 2u);
  EXPECT_EQ(p->objects[0].key, "a.txt");
  EXPECT_EQ(p->objects[1].key, "z");
  EXPECT_EQ(p->common_prefixes, (std::vector<std::string>{"dir/", "other/"}));
  EXPECT_FALSE(p->truncated);
  p = objects_->List({"b01", "dir/", "/", "", 1000});
  ASSERT_EQ(p->objects.size(), 2u);
  EXPECT_EQ(p->common_prefixes, std::vector<std::string>{"dir/sub/"});
  // Pages of two: keys and prefixes both count; resuming continues exactly.
  std::vector<std::string> seen;
  std::string after;
  for (int pages = 0; pages < 10; ++pages) {
    auto q = objects_->List({"b01", "", "/", after, 2});
    ASSERT_TRUE(q.ok());
    for (const auto& o : q->objects) seen.push_back(o.key);
    for (const auto& c : q->common_prefixes) seen.push_back(c);
    if (!q->truncated) break;
    after = q->next_start_after;
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"a.txt", "dir/", "other/", "z"}));
  EXPECT_EQ(objects_->List({"nobucket", "", "", "", 10}).status().code(), StatusCode::kNotFound);
}

TEST(BlockStoreTest, PoolOptions) {
  auto p = ParsePool("slow=/d/slow,media=hdd,direct,latency=8ms").value();
  EXPECT_EQ(p.media, Media::kHdd);
  EXPECT_TRUE(p.direct);
  EXPECT_DOUBLE_EQ(p.read_latency_s, 0.008);
  EXPECT_DOUBLE_EQ(ParsePool("a=/x,latency=500us")->read_latency_s, 0.0005);
  EXPECT_DOUBLE_EQ(ParsePool("a=/x,latency=0.25s")->read_latency_s, 0.25);
  EXPECT_FALSE(ParsePool("a=/x,latency=fast").ok());
  EXPECT_FALSE(ParsePool("a=/x,latency=-1ms").ok());
  EXPECT_FALSE(ParsePool("a=/x,latency=60s").ok());
  EXPECT_FALSE(ParsePool("a=/x,turbo").ok());
  EXPECT_EQ(ParsePool("a=/x,latency=8ms,spindles=4")->spindles, 4);
  EXPECT_EQ(ParsePool("a=/x,latency=8ms")->spindles, 0);
  EXPECT_FALSE(ParsePool("a=/x,spindles=4").ok());  // limits emulated reads: needs a latency
  EXPECT_FALSE(ParsePool("a=/x,latency=8ms,spindles=0").ok());
  EXPECT_FALSE(ParsePool("a=/x,latency=8ms,spindles=two").ok());
}

TEST(BlockStoreTest, OneSpindleServesOneEmulatedReadAtATime) {
  TempDir dir;
  auto fs = io::NewPosixFileSystem();
  auto pool = ParsePool("hdd=" + (dir / "hdd") + ",media=hdd,latency=20ms,spindles=1").value();
  auto blocks = BlockStore::Open(*fs, {pool}).value();
  BlockRef ref = blocks->Write("hdd", "block").value();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) readers.emplace_back([&] { EXPECT_EQ(blocks->Read(ref).value(), "block"); });
  for (auto& t : readers) t.join();
  // Four reads queued on one head: at least 4 x 20 ms, not 20 ms.
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.079);
}

TEST(BlockStoreTest, DirectReadsOnARealFileSystem) {
  TempDir dir;
  auto fs = io::NewPosixFileSystem();
  PoolConfig pool{"d", dir / "pool", Media::kSsd, true, 0};
  auto blocks = BlockStore::Open(*fs, {pool}).value();
  std::string data(10000, 'd');  // not a multiple of 4 KiB, nor is the header
  BlockRef ref = blocks->Write("d", data).value();
  auto back = blocks->Read(ref);
  if (!back.ok() && back.status().message().find("O_DIRECT") != std::string_view::npos) {
    GTEST_SKIP() << "the temporary directory's file system has no O_DIRECT: " << back.status().ToString();
  }
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, data);
  EXPECT_EQ(blocks->Read(ref, 9990, 100).value(), std::string(10, 'd'));
}

class PrefetchTest : public ObjectStoreTest {
 protected:
  void SetUp() override {
    ObjectStoreTest::SetUp();
    data_.resize(10 * 1000);
    for (size_t i = 0; i < data_.size(); ++i) data_[i] = static_cast<char>(i * 7 + i / 1000);
    object_ = std::make_shared<const ObjectMeta>(PutString("stream", data_));
    service_ = std::make_unique<LocalBlockService>(*blocks_, nullptr);
  }
  std::unique_ptr<Prefetcher> Make(PrefetchOptions o = {}) { return std::make_unique<Prefetcher>(*service_, o); }
  std::unique_ptr<LocalBlockService> service_;
  // One request of [off, off + n) of `obj` through a stream, as the S3 GET
  // does; the reader spends `per_block` on each piece it gets (its network).
  static Status ReadThrough(Prefetcher& p, ObjectStore& objects, std::shared_ptr<const ObjectMeta> obj, uint64_t off,
                            uint64_t n, std::string* out,
                            std::chrono::milliseconds per_block = std::chrono::milliseconds(0)) {
    auto stream = p.Begin(obj, off, n);
    Status s = objects.Read(
        *obj, off, n,
        [&](std::string_view b) {
          out->append(b);
          // Emulated transfer time of the piece, not a wait for another thread.
          if (per_block.count() > 0) std::this_thread::sleep_for(per_block);
          return Status::Ok();
        },
        stream.get());
    p.End(std::move(stream), off + out->size());
    return s;
  }
  std::string Request(Prefetcher& p, uint64_t off, uint64_t n) {
    std::string out;
    Status s = ReadThrough(p, *objects_, object_, off, n, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }
  std::string data_;
  std::shared_ptr<const ObjectMeta> object_;
};

TEST_F(PrefetchTest, AWholeReadIsReadAheadWithinItsRange) {
  auto p = Make();
  EXPECT_EQ(Request(*p, 0, data_.size()), data_);
  auto s = p->Stats();
  EXPECT_EQ(s.issued, 9u);  // every block after the first
  EXPECT_EQ(s.hits + s.late_hits, 9u);
  EXPECT_EQ(s.wasted, 0u);
  EXPECT_EQ(s.new_streams, 1u);
  // A request for part of the object reads ahead only inside it.
  auto q = Make();
  EXPECT_EQ(Request(*q, 2500, 3000), data_.substr(2500, 3000));  // blocks 2..5
  EXPECT_EQ(q->Stats().issued, 3u);
}

TEST_F(PrefetchTest, SequentialRequestsContinueTheStreamAndReadPastTheirEnd) {
  auto p = Make({.max_window_blocks = 4});
  std::string got;
  for (uint64_t off = 0; off < data_.size(); off += 500) got += Request(*p, off, 500);  // half a block each
  EXPECT_EQ(got, data_);
  auto s = p->Stats();
  EXPECT_EQ(s.new_streams, 1u);
  EXPECT_EQ(s.continued, 19u);
  EXPECT_EQ(s.hits + s.late_hits, 9u);  // every block after the first was read ahead
  // The stream reached the end and let go. A read-ahead task drops its
  // block just after handing it over, on its own thread: wait for it.
  EXPECT_TRUE(p->WaitUntilHeldAtMost(0, std::chrono::seconds(5)));
  EXPECT_EQ(p->Stats().bytes_held, 0u);
  // A stream that starts mid-object reads ahead only once it continues.
  auto q = Make({.max_window_blocks = 4});
  EXPECT_EQ(Request(*q, 3000, 1000), data_.substr(3000, 1000));
  EXPECT_EQ(q->Stats().issued, 0u);
  EXPECT_EQ(Request(*q, 4000, 1000), data_.substr(4000, 1000));
  EXPECT_GT(q->Stats().issued, 0u);
}

TEST_F(PrefetchTest, ParallelRangesOfOnePassShareTheirReadAhead) {
  // A client that reads an object two ranges at a time: the second range
  // of each pair starts while the first's stream is busy, so it gets a
  // stream of its own, and the pair after starts where only one of them
  // ended. Every block after the first must still come from read-ahead,
  // and none be read twice.
  auto p = Make({.max_window_blocks = 4});
  // 1000 bytes from `off` through `stream`, appended to `out`.
  auto read = [&](ReadStream* stream, uint64_t off, std::string* out) {
    auto append = [out](std::string_view v) {
      out->append(v);
      return Status::Ok();
    };
    EXPECT_TRUE(objects_->Read(*object_, off, 1000, append, stream).ok());
  };
  std::string got;
  for (uint64_t off = 0; off < data_.size(); off += 2000) {
    std::string a, b;
    auto first = p->Begin(object_, off, 1000);
    read(first.get(), off, &a);
    auto second = p->Begin(object_, off + 1000, 1000);  // the first not ended yet
    read(second.get(), off + 1000, &b);
    p->End(std::move(first), off + 1000);
    p->End(std::move(second), off + 2000);
    got += a + b;
  }
  EXPECT_EQ(got, data_);
  auto s = p->Stats();
  EXPECT_EQ(s.hits + s.late_hits, 9u) << "issued " << s.issued << ", wasted " << s.wasted;
  EXPECT_EQ(s.issued, 9u);  // each block read ahead once, by one of the streams
  // A block one stream read ahead and another's reader took is no longer
  // held for the idle stream that read it.
  EXPECT_TRUE(p->WaitUntilHeldAtMost(0, std::chrono::seconds(5))) << p->Stats().bytes_held << " bytes held";
}

TEST_F(PrefetchTest, RandomRequestsAreNotReadAhead) {
  auto p = Make();
  for (uint64_t off : {7000u, 1000u, 4500u, 9000u, 3000u, 6000u}) {
    EXPECT_EQ(Request(*p, off, 400), data_.substr(off, 400));
  }
  auto s = p->Stats();
  EXPECT_EQ(s.issued, 0u);
  EXPECT_EQ(s.new_streams, 6u);
  EXPECT_EQ(s.continued, 0u);
}

TEST_F(PrefetchTest, MemoryStaysWithinItsBudget) {
  auto p = Make({.max_window_blocks = 8, .memory_bytes = 2000});  // two blocks
  // Readers that stop midway leave their streams idle, holding read-ahead.
  for (int reader = 0; reader < 5; ++reader) {
    EXPECT_EQ(Request(*p, 0, 1500), data_.substr(0, 1500));
    EXPECT_LE(p->Stats().bytes_held, 2000u);
  }
  EXPECT_EQ(Request(*p, 0, data_.size()), data_);
  EXPECT_LE(p->Stats().bytes_held, 2000u);
}

TEST_F(PrefetchTest, ACorruptBlockReadAheadFailsTheReadNeverServesIt) {
  ObjectMeta bad = *object_;
  bad.blocks[3].crc32c ^= 1;
  auto obj = std::make_shared<const ObjectMeta>(bad);
  auto p = Make();
  std::string out;
  Status s = ReadThrough(*p, *objects_, obj, 0, bad.size, &out);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(out, data_.substr(0, 3000));  // everything before the bad block, nothing after
}

TEST_F(PrefetchTest, ASlowPoolIsReadWhileTheReaderWorks) {
  // The pool answers each block read 20 ms late; the reader spends 20 ms on
  // each block (the network). Every block after the first is read ahead.
  auto slow = BlockStore::Open(*mem_, {{"default", "/pool", Media::kHdd, false, 0.02}}).value();
  LocalBlockService slow_service(*slow, nullptr);
  Prefetcher p(slow_service, {});
  ObjectStore objects(*meta_, *slow, ObjectStoreOptions{1000, ""});
  std::string out;
  ASSERT_TRUE(ReadThrough(p, objects, object_, 0, data_.size(), &out, std::chrono::milliseconds(20)).ok());
  EXPECT_EQ(out, data_);
  auto s = p.Stats();
  EXPECT_EQ(s.hits + s.late_hits, 9u);  // (how much time it saves: bench/node_vs_local)
}

TEST(BlockCacheTest, LruBasics) {
  BlockCache c(300, CachePolicy::kLru);
  auto blob = [](char ch) { return std::make_shared<const std::string>(100, ch); };
  c.Put("a", blob('a'));
  c.Put("b", blob('b'));
  c.Put("c", blob('c'));
  ASSERT_NE(c.Get("a"), nullptr);  // a is now the most recent
  c.Put("d", blob('d'));           // evicts b, the least recent
  EXPECT_EQ(c.Get("b"), nullptr);
  EXPECT_EQ(*c.Get("a"), std::string(100, 'a'));
  EXPECT_NE(c.Get("d"), nullptr);
  c.Put("huge", std::make_shared<const std::string>(301, 'h'));  // larger than the cache: not kept
  EXPECT_EQ(c.Get("huge"), nullptr);
  c.Erase("a");
  EXPECT_EQ(c.Get("a"), nullptr);
  auto s = c.Stats();
  EXPECT_EQ(s.bytes, 200u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_GT(s.hits, 0u);
  EXPECT_GT(s.misses, 0u);
}

// The training pattern: every block once per epoch, in a new shuffled order
// each epoch, dataset 4x the cache. The bound is cache / dataset = 25%.
double ShuffledEpochsHitRatio(CachePolicy policy, size_t blocks, size_t cached, int epochs, uint64_t seed) {
  BlockCache c(cached * 1000, policy, 1000);
  std::vector<std::string> ids;
  for (size_t i = 0; i < blocks; ++i) ids.push_back(NewBlockId());
  std::mt19937_64 rng(seed);
  uint64_t hits = 0, reads = 0;
  for (int e = 0; e < epochs; ++e) {
    std::shuffle(ids.begin(), ids.end(), rng);
    for (const auto& id : ids) {
      bool hit = c.Get(id) != nullptr;
      if (!hit) c.Put(id, std::make_shared<const std::string>(1000, 'x'));
      if (e > 0) {  // the first epoch fills the cache
        hits += hit;
        ++reads;
      }
    }
  }
  return static_cast<double>(hits) / static_cast<double>(reads);
}

TEST(BlockCacheTest, TinyLfuReachesTheBoundOnShuffledEpochsLruDoesNot) {
  const uint64_t seed = 20261122;
  SCOPED_TRACE(seed);
  double tiny = ShuffledEpochsHitRatio(CachePolicy::kTinyLfu, 2000, 500, 6, seed);
  double lru = ShuffledEpochsHitRatio(CachePolicy::kLru, 2000, 500, 6, seed);
  EXPECT_GE(tiny, 0.25 * 0.9) << "TinyLFU " << tiny;  // within 10% of the bound
  EXPECT_LE(tiny, 0.25 + 1e-9);
  EXPECT_LT(lru, 0.10) << "LRU " << lru;
}

TEST(BlockCacheTest, TinyLfuIsNotFlushedByAScan) {
  BlockCache c(100 * 1000, CachePolicy::kTinyLfu, 1000);
  std::vector<std::string> hot;
  for (int i = 0; i < 100; ++i) hot.push_back(NewBlockId());
  for (int round = 0; round < 3; ++round) {
    for (const auto& id : hot) {
      if (!c.Get(id)) c.Put(id, std::make_shared<const std::string>(1000, 'h'));
    }
  }
  for (int i = 0; i < 1000; ++i) {  // a one-off scan of other blocks
    std::string id = NewBlockId();
    if (!c.Get(id)) c.Put(id, std::make_shared<const std::string>(1000, 's'));
  }
  int still = 0;
  for (const auto& id : hot) still += c.Get(id) != nullptr;
  EXPECT_GE(still, 95);
}

// Records removals: the Reclaimer's effect, observed.
class RecordingBlocks final : public BlockService {
 public:
  Result<BlockRef> Write(const std::string&, std::string_view, const std::string&) override {
    return Internal("unused");
  }
  Result<std::shared_ptr<const std::string>> Read(const BlockRef&) override { return Internal("unused"); }
  Status Remove(const BlockRef& ref) override {
    std::lock_guard<std::mutex> lock(mu);
    removed.push_back(ref.id);
    return Status::Ok();
  }
  std::vector<std::string> Removed() {
    std::lock_guard<std::mutex> lock(mu);
    return removed;
  }
  std::mutex mu;
  std::vector<std::string> removed;
};

TEST(ReclaimerTest, ABlockOutlivesItsLayoutWhileAReaderHoldsIt) {
  RecordingBlocks blocks;
  ReclaimerOptions o;
  o.min_delay_s = 0;
  o.tick_s = 3600;  // only what the test does removes
  Reclaimer r(blocks, o);
  const std::vector<BlockRef> layout = {Ref("a", 1), Ref("b", 1)};
  r.Release({Ref("free", 1)});
  EXPECT_EQ(blocks.Removed(), std::vector<std::string>{"free"});  // no reader: at once
  {
    auto pin = r.Hold(layout);
    auto second = r.Hold({Ref("a", 1)});
    r.Release(layout);  // overwritten while read
    EXPECT_EQ(blocks.Removed().size(), 1u);
    EXPECT_EQ(r.Stats().pending, 2u);
    pin = Reclaimer::Pin();  // the first reader finishes: "b" goes, "a" is still held
    EXPECT_EQ(blocks.Removed(), (std::vector<std::string>{"free", "b"}));
  }
  EXPECT_EQ(blocks.Removed(), (std::vector<std::string>{"free", "b", "a"}));
  EXPECT_EQ(r.Stats().pending, 0u);
  EXPECT_EQ(r.Stats().deferred, 2u);
}

// A removal chosen while nobody held the block, still under way when a
// reader pins it: the pin waits for it, so the reader (which reads its
// layout again after pinning) never reads a block being removed. This was
// the lost shared block DedupTest's racing readers met.
TEST(ReclaimerTest, APinWaitsForARemovalUnderWay) {
  struct Gated final : public BlockService {
    Result<BlockRef> Write(const std::string&, std::string_view, const std::string&) override {
      return Internal("unused");
    }
    Result<std::shared_ptr<const std::string>> Read(const BlockRef&) override { return Internal("unused"); }
    Status Remove(const BlockRef&) override {
      entered.set_value();
      open.get_future().wait();
      return Status::Ok();
    }
    std::promise<void> entered, open;
  } blocks;
  ReclaimerOptions o;
  o.min_delay_s = 0;
  o.tick_s = 3600;
  Reclaimer r(blocks, o);
  auto entered = blocks.entered.get_future();
  std::thread remover([&] { r.Release({Ref("x", 1)}); });  // nobody holds it: removed at once
  entered.wait();                                          // ... and the removal is under way
  std::promise<void> pinned;
  auto taken = pinned.get_future();
  std::thread reader([&] {
    auto pin = r.Hold({Ref("x", 1)});
    pinned.set_value();
  });
  // The pin must not come while the removal is held open (a bounded wait
  // for the reader's signal: the failure is that it arrives).
  EXPECT_EQ(taken.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "the pin was taken while the block was being removed";
  { auto other = r.Hold({Ref("y", 1)}); }  // a pin of other blocks does not wait
  blocks.open.set_value();
  remover.join();
  EXPECT_EQ(taken.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  reader.join();
}

TEST(ReclaimerTest, DelayAndBound) {
  RecordingBlocks blocks;
  ReclaimerOptions o;
  o.min_delay_s = 3600;  // readers elsewhere: nothing goes before the delay
  o.max_hold_s = 7200;
  o.tick_s = 3600;
  Reclaimer r(blocks, o);
  r.Release({Ref("x", 1)});
  r.RemoveDueNow();
  EXPECT_TRUE(blocks.Removed().empty());
  r.Drain();
  EXPECT_EQ(blocks.Removed(), std::vector<std::string>{"x"});
  // A reader cannot hold garbage past the bound.
  ReclaimerOptions b;
  b.min_delay_s = 0;
  b.max_hold_s = 0;
  b.tick_s = 3600;
  RecordingBlocks more;
  Reclaimer bounded(more, b);
  auto pin = bounded.Hold({Ref("y", 1)});
  bounded.Release({Ref("y", 1)});
  bounded.RemoveDueNow();
  EXPECT_EQ(more.Removed(), std::vector<std::string>{"y"});
  EXPECT_EQ(bounded.Stats().forced, 1u);
}

// A full disk: blocks waiting only for their delay go at once where every
// reader pins (one node), never a pinned one; a cluster's delay holds.
// The delay and the bound are counted on the reclaimer's clock: a test
// moves through an hour's delay and a reader stalled past the bound at once.
TEST(ReclaimerTest, DelaysRunOnItsClock) {
  RecordingBlocks blocks;
  ManualClock clock;
  ReclaimerOptions o;
  o.min_delay_s = 3600;
  o.max_hold_s = 7200;
  o.tick_s = 3600;
  o.clock = &clock;
  Reclaimer r(blocks, o);
  r.Release({Ref("free", 1)});
  auto pin = r.Hold({Ref("held", 1)});
  r.Release({Ref("held", 1)});
  clock.Advance(3599);
  r.RemoveDueNow();
  EXPECT_TRUE(blocks.Removed().empty());
  clock.Advance(2);
  r.RemoveDueNow();
  EXPECT_EQ(blocks.Removed(), std::vector<std::string>{"free"});  // "held" is still read
  clock.Advance(3600);
  r.RemoveDueNow();
  EXPECT_EQ(blocks.Removed(), (std::vector<std::string>{"free", "held"}));  // past the bound
  EXPECT_EQ(r.Stats().forced, 1u);
}

TEST(ReclaimerTest, AFullDiskFreesUnpinnedBlocksBeforeTheirDelay) {
  RecordingBlocks blocks;
  ReclaimerOptions o;
  o.min_delay_s = 3600;
  o.tick_s = 3600;
  o.free_early_when_full = true;
  Reclaimer r(blocks, o);
  auto pin = r.Hold({Ref("read", 1)});
  r.Release({Ref("read", 1), Ref("free", 1)});
  EXPECT_EQ(r.FreeEarly(), 1u);
  EXPECT_EQ(blocks.Removed(), std::vector<std::string>{"free"});
  EXPECT_EQ(r.Stats().early, 1u);
  EXPECT_EQ(r.Stats().pending, 1u);  // the read one waits for its reader
  RecordingBlocks other;
  o.free_early_when_full = false;
  Reclaimer cluster(other, o);
  cluster.Release({Ref("x", 1)});
  EXPECT_EQ(cluster.FreeEarly(), 0u);
  EXPECT_TRUE(other.Removed().empty());
}

}  // namespace
}  // namespace aq::store

namespace aq::store {
namespace {

// The L3 cache: admission by the RAM cache's sketch, verified reads,
// restart with a warm index.
class L3Test : public ::testing::Test {
 protected:
  void SetUp() override {
    fs_ = io::NewMemFileSystem();
    hdd_ = BlockStore::Open(*fs_, {{"hdd", "/hdd", Media::kHdd}}).value();
    for (int i = 0; i < 10; ++i) {
      std::string data(1000, static_cast<char>('a' + i));
      refs_.push_back(hdd_->Write("hdd", data).value());
    }
  }
  std::shared_ptr<const std::string> Bytes(int i) {
    return std::make_shared<const std::string>(hdd_->Read(refs_[i]).value());
  }
  std::unique_ptr<io::FileSystem> fs_;
  std::unique_ptr<BlockStore> hdd_;
  std::vector<BlockRef> refs_;
};

TEST_F(L3Test, VictimsAreKeptAndAShuffledEpochDoesNotFlushThem) {
  BlockCache ram(2000, CachePolicy::kTinyLfu, 1000);           // two blocks
  auto l3 = L3Cache::Open(*fs_, {"/l3", 4000}, &ram).value();  // four blocks
  LocalBlockService service(*hdd_, &ram, l3.get());
  // Epoch 1 over ten blocks: RAM keeps 2, L3 the next 4, the rest are refused.
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(*service.Read(refs_[i]).value(), *Bytes(i));
    l3->Flush();
  }
  EXPECT_EQ(l3->Stats().entries, 4u);
  EXPECT_GT(l3->Stats().rejected, 0u);
  // Epochs 2 and 3, shuffled: RAM + L3 serve 6 of 10 reads every epoch.
  std::vector<int> order = {3, 9, 0, 5, 7, 1, 8, 2, 6, 4};
  for (int epoch = 0; epoch < 2; ++epoch) {
    const auto ram0 = ram.Stats().hits;
    const auto l30 = l3->Stats().hits;
    for (int i : order) EXPECT_EQ(*service.Read(refs_[i]).value(), *Bytes(i));
    l3->Flush();
    EXPECT_EQ(ram.Stats().hits - ram0 + l3->Stats().hits - l30, 6u) << "epoch " << epoch + 2;
    std::reverse(order.begin(), order.end());
  }
  EXPECT_EQ(l3->Stats().entries, 4u);
}

TEST_F(L3Test, DamagedCopiesAreNeverServedAndTheIndexSurvivesARestart) {
  {
    auto l3 = L3Cache::Open(*fs_, {"/l3", 10000}, nullptr).value();
    for (int i = 0; i < 3; ++i) l3->Offer(refs_[i].id, Bytes(i));
    l3->Flush();
    EXPECT_EQ(l3->Stats().entries, 3u);
    ASSERT_TRUE(l3->Get(refs_[1]));
    EXPECT_EQ(*l3->Get(refs_[1]), *Bytes(1));
  }
  // A restart: the same three blocks, found without reading them.
  auto l3 = L3Cache::Open(*fs_, {"/l3", 10000}, nullptr).value();
  EXPECT_EQ(l3->Stats().restored, 3u);
  EXPECT_EQ(*l3->Get(refs_[2]), *Bytes(2));
  // A copy whose bytes do not match the block's checksum is dropped.
  BlockRef wrong = refs_[0];
  wrong.crc32c ^= 1;
  EXPECT_EQ(l3->Get(wrong), nullptr);
  EXPECT_EQ(l3->Stats().damaged, 1u);
  EXPECT_FALSE(l3->Contains(refs_[0].id));
  // Removing a block removes its copy.
  l3->Erase(refs_[2].id);
  EXPECT_EQ(l3->Get(refs_[2]), nullptr);
  // Bad settings are refused.
  EXPECT_FALSE(L3Cache::Open(*fs_, {"/l3b", 0}, nullptr).ok());
  EXPECT_FALSE(L3Cache::Open(*fs_, {"", 100}, nullptr).ok());
}

TEST_F(L3Test, OnlyBlocksOfSlowPoolsGoToL3) {
  auto both = BlockStore::Open(*fs_, {{"ssd", "/ssd", Media::kSsd}, {"hdd", "/hdd", Media::kHdd}}).value();
  auto fast = both->Write("ssd", std::string(500, 'z')).value();
  auto l3 = L3Cache::Open(*fs_, {"/l3", 10000}, nullptr).value();
  LocalBlockService service(*both, nullptr, l3.get());
  ASSERT_TRUE(service.Read(fast).ok());
  ASSERT_TRUE(service.Read(refs_[4]).ok());
  l3->Flush();
  EXPECT_FALSE(l3->Contains(fast.id));
  EXPECT_TRUE(l3->Contains(refs_[4].id));
}

}  // namespace
}  // namespace aq::store

namespace aq::store {
namespace {

TEST(TieringTest, PoliciesMatchByGlobSizeAndAgeFirstMatchWins) {
  const int64_t now = 1'000'000'000'000'000'000;
  auto obj = [&](std::string bucket, std::string key, uint64_t size, double age_s) {
    ObjectMeta o;
    o.bucket = std::move(bucket);
    o.key = std::move(key);
    o.size = size;
    o.mtime_ns = now - static_cast<int64_t>(age_s * 1e9);
    return o;
  };
  std::vector<TierPolicy> p = {
      {"hot-train", "imagenet", "train/*", 0, UINT64_MAX, 0, "ssd"},
      {"big-old", "*", "*", 100 << 20, UINT64_MAX, 30 * 86400.0, "hdd"},
      {"logs", "*", "*.log", 0, 4096, 0, "hdd"},
  };
  auto name = [&](const ObjectMeta& o) {
    const TierPolicy* m = MatchTierPolicy(p, o, now);
    return m ? m->name : std::string("none");
  };
  EXPECT_EQ(name(obj("imagenet", "train/00001.tfrecord", 200 << 20, 90 * 86400.0)), "hot-train");  // first wins
  EXPECT_EQ(name(obj("imagenet", "val/00001.tfrecord", 200 << 20, 90 * 86400.0)), "big-old");
  EXPECT_EQ(name(obj("imagenet", "val/00001.tfrecord", 200 << 20, 29 * 86400.0)), "none");  // too young
  EXPECT_EQ(name(obj("other", "x", (100 << 20) - 1, 90 * 86400.0)), "none");                // too small
  EXPECT_EQ(name(obj("other", "x", 100 << 20, 30 * 86400.0)), "big-old");                   // edges included
  EXPECT_EQ(name(obj("other", "a/b.log", 4096, 0)), "logs");
  EXPECT_EQ(name(obj("other", "a/b.log", 4097, 0)), "none");
  EXPECT_EQ(name(obj("other", "a/b.logs", 10, 0)), "none");
  EXPECT_TRUE(GlobMatch("train/*", "train/a/b"));  // '*' crosses '/' (keys are not paths)
  EXPECT_TRUE(GlobMatch("shard-0000[0-4]", "shard-00003"));
  EXPECT_FALSE(GlobMatch("shard-0000[0-4]", "shard-00005"));
  // Kept as JSON with the metadata: the same policies back, bad records refused.
  auto back = TierPoliciesFromJson(TierPoliciesToJson(p));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, p);
  EXPECT_EQ(TierPoliciesFromJson("{}").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(TierPoliciesFromJson(R"([{"name":"x"}])").status().code(), StatusCode::kInvalidArgument);  // no target
  EXPECT_EQ(TierPoliciesFromJson(R"([{"name":"","pool":"p"}])").status().code(), StatusCode::kInvalidArgument);
}

TEST(TieringTest, PoliciesOnLastAccessCountReadsAndWrites) {
  const int64_t now = 1'000'000'000'000'000'000;
  const int64_t day = 86'400'000'000'000;
  std::vector<TierPolicy> p = {
      {"hot", "*", "*", 0, UINT64_MAX, 0, "ssd", 0, 7 * 86400.0},  // accessed within a week
      {"cold", "*", "*", 0, UINT64_MAX, 0, "hdd", 30 * 86400.0},   // not accessed for 30 days
  };
  ObjectMeta o;
  o.bucket = "b";
  o.key = "k";
  o.mtime_ns = now - 90 * day;
  auto name = [&](int64_t atime) {
    const TierPolicy* m = MatchTierPolicy(p, o, now, atime);
    return m ? m->name : std::string("none");
  };
  EXPECT_EQ(name(0), "cold");               // never read, written 90 days ago
  EXPECT_EQ(name(now - 3 * day), "hot");    // read 3 days ago
  EXPECT_EQ(name(now - 7 * day), "hot");    // edges included
  EXPECT_EQ(name(now - 10 * day), "none");  // neither: stays where it is
  EXPECT_EQ(name(now - 30 * day), "cold");
  o.mtime_ns = now - 1 * day;  // rewritten yesterday: a write is an access
  EXPECT_EQ(name(now - 60 * day), "hot");
  auto back = TierPoliciesFromJson(TierPoliciesToJson(p));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, p);
  // A media instead of a pool: resolved to a pool of that media.
  std::vector<TierPolicy> by_media = {{"cold", "*", "*", 0, UINT64_MAX, 0, "", 0, 0, Media::kHdd}};
  auto json = TierPoliciesToJson(by_media);
  EXPECT_EQ(TierPoliciesFromJson(json).value(), by_media);
  auto resolved = ResolveTierMedia(by_media, [](Media m) { return m == Media::kHdd ? "slow" : ""; });
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ((*resolved)[0].pool, "slow");
  EXPECT_EQ(ResolveTierMedia(by_media, [](Media) { return std::string(); }).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TierPoliciesFromJson(R"([{"name":"x","media":"tape"}])").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TierPoliciesFromJson(R"([{"name":"x","media":"hdd","pool":"p"}])").status().code(),
            StatusCode::kInvalidArgument);
  std::unordered_map<std::string, int64_t> times = {{AccessKey("b", "k"), 42}};
  EXPECT_EQ(LastRead(times, o), 42);
  o.key = "other";
  EXPECT_EQ(LastRead(times, o), 0);
}

// The tier half of placement as a table: which blocks move, and where.
// A single node's Mover carries these out; the cluster's planner weighs the
// same list (repair_plan_test.cc).
TEST(TieringTest, PlanTierMovesListsEveryBlockOutsideThePolicysPool) {
  auto object = [](std::vector<std::string> pools) {
    ObjectMeta o;
    for (size_t i = 0; i < pools.size(); ++i) {
      BlockRef b;
      b.id = "b" + std::to_string(i);
      b.pool = pools[i];
      b.size = 100 + i;
      o.blocks.push_back(b);
    }
    return o;
  };
  const TierPolicy cold{"cold", "*", "*", 0, UINT64_MAX, 0, "cold"};
  TierPolicy unresolved{"any-hdd", "*", "*", 0, UINT64_MAX, 0, ""};
  unresolved.media = Media::kHdd;
  struct Case {
    std::vector<std::string> pools;
    const TierPolicy* tier;
    std::vector<TierMove> want;
  };
  const std::vector<Case> cases = {
      {{"default", "default"}, nullptr, {}},                        // no policy: stays
      {{"default", "default"}, &cold, {{0, "cold"}, {1, "cold"}}},  // all move
      {{"cold", "default", "cold"}, &cold, {{1, "cold"}}},          // a pass cut short, resumed
      {{"cold", "cold"}, &cold, {}},                                // in place
      {{}, &cold, {}},                                              // an empty object
      {{"default", "fast"}, &cold, {{0, "cold"}, {1, "cold"}}},     // from any pool
      {{"default"}, &unresolved, {{0, ""}}},                        // a media no pool has: listed
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(PlanTierMoves(object(cases[i].pools), cases[i].tier), cases[i].want) << "case " << i;
  }
}

// A pass's matcher reads the recorded reads only when a policy asks.
TEST(TieringTest, TierMatcherLoadsAccessTimesOnlyWhenAPolicyNeedsThem) {
  TempDir dir;
  auto meta = OpenSqliteMetaStore(dir / "meta.db").value();
  const int64_t now = 1'000'000'000'000'000'000;
  const int64_t day = 86'400'000'000'000;
  ObjectMeta o;
  o.bucket = "b";
  o.key = "k";
  o.mtime_ns = now - 90 * day;
  const std::vector<TierPolicy> by_age = {{"old", "*", "*", 0, UINT64_MAX, 30 * 86400.0, "hdd"}};
  EXPECT_FALSE(NeedsAccessTimes(by_age));
  auto m = TierMatcher::Load(*meta, by_age, now);
  ASSERT_TRUE(m.ok());
  ASSERT_NE(m->For(o), nullptr);
  EXPECT_EQ(m->For(o)->name, "old");
  const std::vector<TierPolicy> by_access = {{"hot", "*", "*", 0, UINT64_MAX, 0, "ssd", 0, 7 * 86400.0}};
  EXPECT_TRUE(NeedsAccessTimes(by_access));
  // No read recorded: written 90 days ago, not hot.
  EXPECT_EQ(TierMatcher::Load(*meta, by_access, now)->For(o), nullptr);
  // A read 2 days ago, recorded: hot. A matcher by age alone does not look.
  ASSERT_TRUE(meta->RecordAccess({{"b", "k", now - 2 * day}}).ok());
  auto loaded = TierMatcher::Load(*meta, by_access, now);
  ASSERT_TRUE(loaded.ok());
  ASSERT_NE(loaded->For(o), nullptr);
  EXPECT_EQ(loaded->For(o)->name, "hot");
  TierMatcher given(by_access, {{AccessKey("b", "k"), now - 2 * day}}, now);
  ASSERT_NE(given.For(o), nullptr);
  EXPECT_EQ(given.For(o)->name, "hot");
  EXPECT_EQ(TierMatcher({}, {}, now).For(o), nullptr);
}

TEST(TieringTest, NewObjectsGoToTheirPolicysPoolAtWriteTime) {
  TempDir dir;
  auto meta = OpenSqliteMetaStore(dir / "meta.db").value();
  std::vector<TierPolicy> p = {
      {"old", "*", "logs/*", 0, UINT64_MAX, 86400.0, "hdd"},                   // never a new object
      {"idle", "*", "idle/*", 0, UINT64_MAX, 0, "hdd", 3600.0},                // nor this
      {"big", "*", "*", 100 << 20, UINT64_MAX, 0, "hdd"},                      // by size, when known
      {"hot", "*", "train/*", 0, UINT64_MAX, 0, "", 0, 86400.0, Media::kSsd},  // accessed within: yes
      {"gone", "*", "tmp/*", 0, UINT64_MAX, 0, "nvme"},                        // a pool nobody has
  };
  ASSERT_TRUE(SaveTierPolicies(*meta, p).ok());
  TierPlacer placer(
      *meta, [](Media media) { return media == Media::kSsd ? std::string("fast") : std::string(); },
      [](const std::string&, const std::string& pool) { return pool != "nvme"; }, 0);
  constexpr uint64_t kUnknown = UINT64_MAX;
  EXPECT_EQ(placer.PoolFor("b", "logs/x", 10), "");
  EXPECT_EQ(placer.PoolFor("b", "idle/x", 10), "");
  EXPECT_EQ(placer.PoolFor("b", "data/x", 200 << 20), "hdd");
  EXPECT_EQ(placer.PoolFor("b", "data/x", kUnknown), "");  // size unknown: the sized policy is passed over
  EXPECT_EQ(placer.PoolFor("b", "train/x", 10), "fast");   // the media resolved
  EXPECT_EQ(placer.PoolFor("b", "train/x", kUnknown), "fast");
  EXPECT_EQ(placer.PoolFor("b", "tmp/x", 10), "");  // not usable: the default pool
  ASSERT_TRUE(SaveTierPolicies(*meta, {}).ok());
  EXPECT_EQ(placer.PoolFor("b", "train/x", 10), "");  // re-read (refresh 0 here)
}

TEST(TieringTest, PlacerRereadsPoliciesOnlyWhenItsRefreshIsDue) {
  TempDir dir;
  auto meta = OpenSqliteMetaStore(dir / "meta.db").value();
  ASSERT_TRUE(SaveTierPolicies(*meta, {{"hot", "*", "train/*", 0, UINT64_MAX, 0, "fast"}}).ok());
  ManualClock clock;
  TierPlacer placer(
      *meta, [](Media) { return std::string(); }, [](const std::string&, const std::string&) { return true; }, 2,
      clock);
  EXPECT_EQ(placer.PoolFor("b", "train/x", 10), "fast");
  ASSERT_TRUE(SaveTierPolicies(*meta, {}).ok());
  clock.Advance(1.9);
  EXPECT_EQ(placer.PoolFor("b", "train/x", 10), "fast");  // read 1.9 s ago: still the old policies
  clock.Advance(0.1);
  EXPECT_EQ(placer.PoolFor("b", "train/x", 10), "");  // due: re-read
}

// A node with pools "fast" (ssd) and "cold" (hdd) in memory, and bucket "bkt".
struct TwoPools {
  TempDir dir;
  std::unique_ptr<io::FileSystem> mem = io::NewMemFileSystem();
  std::unique_ptr<MetaStore> meta = OpenSqliteMetaStore(dir / "meta.db").value();
  std::unique_ptr<BlockStore> blocks =
      BlockStore::Open(*mem, {{"fast", "/fast", Media::kSsd}, {"cold", "/cold", Media::kHdd}}).value();
  TwoPools() { EXPECT_TRUE(meta->CreateBucket("bkt").ok()); }
};

TEST(TieringTest, AMoverPassKeepsToItsCopyBudget) {
  TwoPools store;
  auto& meta = store.meta;
  auto& blocks = store.blocks;
  ObjectStoreOptions oo;
  oo.block_size = 1 << 20;
  ObjectStore objects(*meta, *blocks, oo);
  for (int i = 0; i < 4; ++i) {  // 4 objects of 3 MiB: 12 blocks, 12 MiB to move
    auto w = objects.Put("bkt", "o" + std::to_string(i), {}).value();
    ASSERT_TRUE(w->Write(std::string(3 << 20, static_cast<char>('a' + i))).ok());
    ASSERT_TRUE(w->Commit().ok());
  }
  ManualClock clock;
  Mover mover(*meta, *blocks, objects.reclaimer(), clock);
  TierOptions to;
  to.bytes_per_second = 4 << 20;  // 4 MiB/s: 12 MiB take 3 s of the mover's clock
  const double t0 = clock.Now();
  auto r = mover.Run({{"cold", "*", "*", 0, UINT64_MAX, 0, "cold"}}, to).value();
  EXPECT_EQ(r.blocks_moved, 12u);
  EXPECT_EQ(r.errors, 0u) << r.last_error;
  // Paced to the budget (a burst of at most one second's worth), measured on
  // the clock, not waited for.
  EXPECT_GE(clock.Now() - t0, 2.0);
  EXPECT_LE(clock.Now() - t0, 3.0 + 1e-6);
  EXPECT_NEAR(r.seconds, clock.Now() - t0, 1e-9);
  // While readers' plans are being staged the mover yields: a tenth of the
  // rate, so the same 12 MiB (moved back) take about ten times as long.
  to.busy = [] { return true; };
  const double t1 = clock.Now();
  r = mover.Run({{"fast", "*", "*", 0, UINT64_MAX, 0, "fast"}}, to).value();
  EXPECT_EQ(r.blocks_moved, 12u);
  EXPECT_GE(clock.Now() - t1, 10 * 2.0);
  EXPECT_LE(clock.Now() - t1, 10 * 3.0 + 1.0);
}

// The tier-run protocol on a manual clock: passes when due and when asked,
// each request answered once with its id, a request from before the start
// taken as answered, nothing on schedule without policies.
TEST(TieringTest, TierRunsPassWhenDueOrAskedAndAnswerEachRequestOnce) {
  TwoPools store;
  auto& meta = store.meta;
  ObjectStore objects(*meta, *store.blocks, {.block_size = 1 << 20});  // one object of two blocks
  auto w = objects.Put("bkt", "o", {}).value();
  ASSERT_TRUE(w->Write(std::string(2 << 20, 'x')).ok());
  ASSERT_TRUE(w->Commit().ok());
  ASSERT_TRUE(meta->PutSetting(kTierRequestSetting, TierRunRequest{"before-start", false}.ToString()).ok());
  ManualClock clock;
  Mover mover(*meta, *store.blocks, objects.reclaimer(), clock);
  TierOptions to;
  to.bytes_per_second = 1e12;
  TierRuns runs(*meta, mover, 60, to, 0);
  int flushed = 0;
  auto flush = [&] { ++flushed; };
  auto report = [&] { return nlohmann::json::parse(meta->GetSetting(kTierReportSetting).value()); };
  EXPECT_FALSE(runs.Tick(1, flush, nullptr));   // the old request is answered; not due
  EXPECT_FALSE(runs.Tick(61, flush, nullptr));  // due, but no policy: nothing to do
  EXPECT_EQ(flushed, 1);
  ASSERT_TRUE(SaveTierPolicies(*meta, {{"cold", "*", "*", 0, UINT64_MAX, 0, "cold"}}).ok());
  // Asked for a dry run: counted, nothing moved, answered with the id.
  ASSERT_TRUE(meta->PutSetting(kTierRequestSetting, TierRunRequest{"r1", true}.ToString()).ok());
  auto r = runs.Tick(62, flush, nullptr);
  ASSERT_TRUE(r && r->ok());
  EXPECT_EQ((*r)->blocks_to_move, 2u);
  EXPECT_EQ((*r)->blocks_moved, 0u);
  EXPECT_EQ(report()["request"], "r1");
  EXPECT_EQ(report()["dry_run"], true);
  EXPECT_FALSE(runs.Tick(63, flush, nullptr));  // answered once
  // Due on schedule: a real pass, not a request's.
  r = runs.Tick(122, flush, nullptr);
  ASSERT_TRUE(r && r->ok());
  EXPECT_EQ((*r)->blocks_moved, 2u);
  EXPECT_EQ(report()["request"], "");
  EXPECT_EQ(report()["dry_run"], false);
  EXPECT_EQ(flushed, 3);  // before every pass (and the one on schedule that found no policy)
  // Policies that cannot be applied: a request is answered with the error.
  ASSERT_TRUE(SaveTierPolicies(*meta, {{"x", "*", "*", 0, UINT64_MAX, 0, "nowhere"}}).ok());
  ASSERT_TRUE(meta->PutSetting(kTierRequestSetting, TierRunRequest{"r2", false}.ToString()).ok());
  r = runs.Tick(123, flush, nullptr);
  ASSERT_TRUE(r && !r->ok());
  EXPECT_EQ(report()["request"], "r2");
  EXPECT_NE(report()["error"].get<std::string>().find("nowhere"), std::string::npos);
}

TEST(UploadExpiryTest, TheShortestLimitForTheKeyWins) {
  UploadExpiryOptions o;
  o.max_age_s = 7 * 86400.0;
  const std::vector<UploadRule> rules = {{"tmp", "tmp/", true, 1}, {"off", "", false, 1}, {"logs", "logs/", true, 30}};
  EXPECT_EQ(UploadAgeLimit(rules, "tmp/x", o), 86400.0);
  EXPECT_EQ(UploadAgeLimit(rules, "data/x", o), 7 * 86400.0);  // the disabled rule does not count
  EXPECT_EQ(UploadAgeLimit(rules, "logs/x", o), 7 * 86400.0);  // the node's limit is shorter
  o.max_age_s = 0;                                             // only rules
  EXPECT_EQ(UploadAgeLimit(rules, "logs/x", o), 30 * 86400.0);
  EXPECT_LE(UploadAgeLimit(rules, "data/x", o), 0.0);
  o.day_s = 2;
  EXPECT_EQ(UploadAgeLimit(rules, "tmp/x", o), 2.0);
}

TEST(UploadExpiryTest, ASweepAbortsOnlyWhatIsPastItsLimitAndFreesTheParts) {
  TempDir dir;
  auto mem = io::NewMemFileSystem();
  auto meta = OpenSqliteMetaStore(dir / "meta.db").value();
  ASSERT_TRUE(meta->CreateBucket("bkt").ok());
  auto blocks = BlockStore::Open(*mem, {{"default", "/pool", Media::kSsd}}).value();
  ObjectStore objects(*meta, *blocks, {});
  auto part = [&](const std::string& key) {
    auto u = objects.CreateUpload("bkt", key).value();
    auto w = objects.PutPart(u.id, "bkt", key, 1).value();
    EXPECT_TRUE(w->Write(std::string(1000, 'p')).ok());
    EXPECT_TRUE(w->Commit().ok());
    return u;
  };
  const auto old = part("tmp/a");
  const auto young = part("data/b");
  ASSERT_TRUE(SaveUploadRules(*meta, "bkt", {{"", "tmp/", true, 1}}).ok());
  EXPECT_EQ(LoadUploadRules(*meta, "bkt").value().size(), 1u);
  UploadExpiryOptions o;
  o.max_age_s = 3600;
  o.day_s = 60;
  // 2 minutes after both began: the rule's day (60 s) is past, the node's hour is not.
  auto sweep = ExpireUploads(objects, o, old.created_ns + int64_t{120} * 1'000'000'000).value();
  EXPECT_EQ(sweep.expired, 1u);
  EXPECT_EQ(sweep.expired_bytes, 1000u);
  EXPECT_EQ(sweep.in_progress, 1u);
  EXPECT_EQ(sweep.part_bytes, 1000u);
  EXPECT_FALSE(meta->GetUpload(old.id).ok());
  EXPECT_TRUE(meta->GetUpload(young.id).ok());
  objects.reclaimer().Drain();
  EXPECT_EQ(blocks->List().value().size(), 1u);  // the aborted part's block is gone
  sweep = ExpireUploads(objects, o, young.created_ns + int64_t{7200} * 1'000'000'000).value();
  EXPECT_EQ(sweep.expired, 1u);
  EXPECT_EQ(sweep.in_progress, 0u);
  ASSERT_TRUE(SaveUploadRules(*meta, "bkt", {}).ok());
  EXPECT_TRUE(LoadUploadRules(*meta, "bkt").value().empty());
}

// A bucket "bkt" over two pools in memory, "fast" (ssd) and "cold" (hdd).
// A policy moves an object away, is replaced, and the object moves back
// while the first move's release is still pending: when the reclaimer then
// removes what it was handed, the object must still read whole (the copy
// the newest layout uses is never one a release names).
TEST(TieringTest, MovingThereAndBackWithinTheReclaimDelayLosesNothing) {
  TwoPools store;
  auto& meta = store.meta;
  auto& blocks = store.blocks;
  ObjectStoreOptions oo;
  oo.block_size = 1000;
  oo.reclaim.min_delay_s = 3600;  // every release stays pending until drained
  ObjectStore objects(*meta, *blocks, oo);
  std::string v(3500, '\0');
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<char>(i * 7 + 3);
  {
    auto w = objects.Put("bkt", "obj").value();
    ASSERT_TRUE(w->Write(v).ok());
    ASSERT_TRUE(w->Commit().ok());
  }
  auto read = [&] {
    auto m = objects.Head("bkt", "obj");
    if (!m.ok()) return m.status().ToString();
    std::string out;
    Status s = objects.Read(*m, 0, m->size, [&](std::string_view b) {
      out.append(b);
      return Status::Ok();
    });
    return s.ok() ? out : s.ToString();
  };
  Mover mover(*meta, *blocks, objects.reclaimer());
  const std::vector<TierPolicy> to_cold = {{"cold", "*", "*", 0, UINT64_MAX, 0, "cold"}};
  const std::vector<TierPolicy> to_fast = {{"fast", "*", "*", 0, UINT64_MAX, 0, "fast"}};
  for (int round = 0; round < 3; ++round) {
    auto there = mover.Run(to_cold, {}).value();
    EXPECT_EQ(there.objects_moved, 1u);
    EXPECT_EQ(there.errors, 0u) << there.last_error;
    auto back = mover.Run(to_fast, {}).value();
    EXPECT_EQ(back.objects_moved, 1u);
    EXPECT_EQ(back.errors, 0u) << back.last_error;
  }
  EXPECT_EQ(read(), v);
  objects.reclaimer().Drain();  // every pending release removed now
  EXPECT_EQ(read(), v);
  const auto o = meta->GetObject("bkt", "obj").value();
  for (const auto& b : o.blocks) {
    EXPECT_EQ(b.pool, "fast");
    EXPECT_TRUE(blocks->Has(b)) << b.id;
  }
  EXPECT_TRUE(blocks->List("cold").value().empty());  // nothing left behind
  EXPECT_EQ(blocks->List("fast").value().size(), o.blocks.size());
}

// Mover passes flipping every object between two pools beside heavy
// overwrites, deletes and reads: no read of an object that exists fails or
// returns other bytes than a version written, and no pass fails (an object
// changed during its move is a conflict, not an error).
TEST(TieringTest, PassesBesideWritesDeletesAndReadsNeverFailAReader) {
  TwoPools store;
  auto& meta = store.meta;
  auto& blocks = store.blocks;
  ObjectStoreOptions oo;
  oo.block_size = 1000;
  oo.reclaim.min_delay_s = 0.2;  // the single node's default is 2 s; short here to reclaim often
  oo.reclaim.tick_s = 0.05;
  ObjectStore objects(*meta, *blocks, oo);
  constexpr int kKeys = 16;
  auto value = [](int key, int gen) {
    return std::string(1000 + 700 * (gen % 4), static_cast<char>('A' + (key + gen) % 50));
  };
  auto put = [&](int key, int gen) -> Status {
    auto w = objects.Put("bkt", "k" + std::to_string(key));
    if (!w.ok()) return w.status();
    if (Status s = (*w)->Write(value(key, gen)); !s.ok()) return s;
    return (*w)->Commit().status();
  };
  for (int k = 0; k < kKeys; ++k) ASSERT_TRUE(put(k, 0).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> bad_reads{0}, reads{0}, writes{0};
  std::string first_bad;
  Mutex bad_mu;
  std::thread writer([&] {
    std::mt19937 rng(7);
    for (int gen = 1; !stop; ++gen) {
      const int k = static_cast<int>(rng() % kKeys);
      if (rng() % 4 == 0) {
        (void)objects.Delete("bkt", "k" + std::to_string(k));
      } else if (put(k, gen).ok()) {
        ++writes;
      }
    }
  });
  std::thread reader([&] {
    std::mt19937 rng(11);
    while (!stop) {
      const std::string key = "k" + std::to_string(rng() % kKeys);
      auto m = objects.Head("bkt", key);
      if (!m.ok()) continue;  // deleted: fine
      auto pin = objects.Hold(*m);
      std::string out;
      Status s = objects.Read(*m, 0, m->size, [&](std::string_view b) {
        out.append(b);
        return Status::Ok();
      });
      ++reads;
      const bool whole =
          s.ok() && out.size() == m->size && !out.empty() && out.find_first_not_of(out[0]) == std::string::npos;
      if (!whole) {
        ++bad_reads;
        MutexLock lock(bad_mu);
        if (first_bad.empty()) first_bad = key + ": " + (s.ok() ? "mixed bytes" : s.ToString());
      }
    }
  });
  Mover mover(*meta, *blocks, objects.reclaimer());
  const std::vector<TierPolicy> to_cold = {{"cold", "*", "*", 0, UINT64_MAX, 0, "cold"}};
  const std::vector<TierPolicy> to_fast = {{"fast", "*", "*", 0, UINT64_MAX, 0, "fast"}};
  TierReport total;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (int pass = 0; std::chrono::steady_clock::now() < until; ++pass) {
    auto r = mover.Run(pass % 2 ? to_fast : to_cold, {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    total.objects_moved += r->objects_moved;
    total.conflicts += r->conflicts;
    total.errors += r->errors;
    if (r->errors > 0) total.last_error = r->last_error;
  }
  stop = true;
  writer.join();
  reader.join();
  EXPECT_EQ(total.errors, 0u) << total.last_error;
  EXPECT_EQ(bad_reads.load(), 0) << first_bad;
  EXPECT_GT(total.objects_moved, 0u);
  EXPECT_GT(reads.load(), 0);
  EXPECT_GT(writes.load(), 0);
  objects.reclaimer().Drain();
  for (int k = 0; k < kKeys; ++k) {  // what remains reads whole after every release is done
    auto m = objects.Head("bkt", "k" + std::to_string(k));
    if (!m.ok()) continue;
    for (const auto& b : m->blocks) EXPECT_TRUE(blocks->Has(b)) << "k" << k << " block " << b.id;
  }
}

TEST(TieringTest, AccessClockRecordsEachObjectOncePerGranularity) {
  TempDir dir;
  auto meta = OpenSqliteMetaStore(dir / "meta.db").value();
  ASSERT_TRUE(meta->CreateBucket("bkt").ok());
  AccessClock hourly(3600);
  for (int i = 0; i < 100; ++i) hourly.Touch("bkt", "k");  // a hot object: one write an hour
  hourly.Touch("bkt", "k2");
  EXPECT_EQ(hourly.pending(), 2u);
  ASSERT_TRUE(hourly.Flush(*meta).ok());
  EXPECT_EQ(hourly.recorded(), 2u);
  EXPECT_EQ(hourly.pending(), 0u);
  hourly.Touch("bkt", "k");
  EXPECT_EQ(hourly.pending(), 0u);  // recorded within the hour
  auto times = meta->AccessTimes().value();
  ASSERT_EQ(times.size(), 2u);
  EXPECT_GT(times.at(AccessKey("bkt", "k")), 0);
  AccessClock every(0);
  every.Touch("bkt", "k");
  every.Touch("bkt", "k");
  EXPECT_EQ(every.pending(), 2u);
  ASSERT_TRUE(every.Flush(*meta).ok());
  EXPECT_GE(meta->AccessTimes()->at(AccessKey("bkt", "k")), times.at(AccessKey("bkt", "k")));
}

}  // namespace
}  // namespace aq::store
