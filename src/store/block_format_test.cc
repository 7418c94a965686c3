// Block files with inline compression: the format's parsers against damage,
// the policy's choices (compress what shrinks, store the rest plain), and a
// block store whose pools compress, read back, count and verify.
#include "store/block_format.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "common/crc32c.h"
#include "store/block_store.h"

namespace aq::store {
namespace {

namespace fs = std::filesystem;

// Text that compresses well and is not ours: the GPL as Debian ships it
// (present on every Debian system); a repeated phrase where it is missing.
std::string RealText() {
  std::ifstream f("/usr/share/common-licenses/GPL-3", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  if (s.size() < 4096) {
    s.clear();
    for (int i = 0; s.size() < 40000; ++i) s += "block " + std::to_string(i % 97) + " of a compressible file\n";
  }
  return s;
}

std::string Random(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(g());
  return s;
}

std::string FileOf(const EncodedBlock& e, std::string_view data) {
  return e.header + (e.is_compressed() ? e.compressed : std::string(data));
}

Result<std::string> Decode(std::string_view file) {
  auto h = AQ_TRY(ParseBlockHeader(file.substr(0, kMaxBlockHeaderBytes)));
  return DecodeBlock(h, file.substr(std::min(file.size(), h.header_bytes)));
}

TEST(BlockFormatTest, ParsesPolicies) {
  EXPECT_EQ(ParseCompression("lz4")->codec, Codec::kLz4);
  EXPECT_EQ(ParseCompression("zstd")->codec, Codec::kZstd);
  EXPECT_EQ(ParseCompression("zstd:9")->level, 9);
  EXPECT_EQ(ParseCompression("zstd:9")->ToString(), "zstd:9");
  EXPECT_FALSE(ParseCompression("none")->enabled());
  for (const char* bad : {"gzip", "lz4:3", "zstd:", "zstd:0", "zstd:99", "zstd:x", "", "none:1"}) {
    EXPECT_FALSE(ParseCompression(bad).ok()) << bad;
  }
  auto p = ParsePool("z=/x,compress=zstd:5,min-saving=25%").value();
  EXPECT_EQ(p.compression.codec, Codec::kZstd);
  EXPECT_EQ(p.compression.level, 5);
  EXPECT_DOUBLE_EQ(p.compression.min_saving, 0.25);
  EXPECT_DOUBLE_EQ(ParsePool("z=/x,min-saving=5,compress=lz4")->compression.min_saving, 0.05);
  EXPECT_FALSE(ParsePool("z=/x").value().compression.enabled());
  for (const char* bad : {"z=/x,compress=brotli", "z=/x,min-saving=100", "z=/x,min-saving=-1", "z=/x,min-saving=ten"}) {
    EXPECT_FALSE(ParsePool(bad).ok()) << bad;
  }
}

TEST(BlockFormatTest, CompressesWhatShrinksAndStoresTheRestPlain) {
  const std::string text = RealText();
  const std::string noise = Random(1 << 20, 7);
  for (const char* spec : {"lz4", "zstd", "zstd:12"}) {
    SCOPED_TRACE(spec);
    const Compression policy = ParseCompression(spec).value();
    const auto e = EncodeBlock(text, crc32c::Value(text), policy);
    ASSERT_TRUE(e.is_compressed());
    EXPECT_LT(e.compressed.size(), text.size() * 7 / 10);
    EXPECT_EQ(e.header.size(), kCompressedHeaderBytes);
    EXPECT_EQ(Decode(FileOf(e, text)).value(), text);
    // Random bytes do not shrink: stored plain, in the format every
    // reader knew before compression.
    const auto n = EncodeBlock(noise, crc32c::Value(noise), policy);
    EXPECT_FALSE(n.is_compressed());
    EXPECT_EQ(n.header.size(), kPlainHeaderBytes);
    EXPECT_EQ(n.header.substr(0, 8), "AQBLK001");
    EXPECT_EQ(Decode(FileOf(n, noise)).value(), noise);
  }
  // A block that would save less than the policy asks for is stored plain:
  // half text, half noise saves under 60%.
  Compression strict = ParseCompression("lz4").value();
  strict.min_saving = 0.6;
  const std::string half = text.substr(0, 16384) + Random(16384, 3);
  EXPECT_FALSE(EncodeBlock(half, crc32c::Value(half), strict).is_compressed());
  strict.min_saving = 0.2;
  EXPECT_TRUE(EncodeBlock(half, crc32c::Value(half), strict).is_compressed());
  // Small blocks are not worth a codec.
  const std::string small = text.substr(0, 1000);
  EXPECT_FALSE(EncodeBlock(small, crc32c::Value(small), ParseCompression("zstd").value()).is_compressed());
  // Nor is anything under a policy of none.
  EXPECT_FALSE(EncodeBlock(text, crc32c::Value(text), Compression{}).is_compressed());
}

// Smooth 8-bit RGB (a gradient with a little noise), as raw pixels are.
std::string Pixels(size_t pixels, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::string s;
  for (size_t i = 0; i < pixels; ++i) {
    const int x = static_cast<int>(i % 640), y = static_cast<int>(i / 640);
    for (int c = 0; c < 3; ++c) {
      const int v = (x * (c + 1) / 5 + y * (3 - c) / 4 + static_cast<int>(g() % 3)) % 256;
      s.push_back(static_cast<char>(v));
    }
  }
  return s;
}

TEST(BlockFormatTest, TheDeltaFilterInvertsExactly) {
  // Sizes around the 16-byte steps of the vector code and its scalar tail.
  for (size_t n : {0, 1, 2, 3, 4, 5, 15, 16, 17, 31, 32, 33, 47, 48, 49, 1000, 65536 + 7}) {
    for (uint64_t seed = 0; seed < 4; ++seed) {
      const std::string x = Random(n, seed);
      std::string y = x;
      DeltaEncode(y.data(), y.size());
      DeltaDecode(y.data(), y.size());
      ASSERT_EQ(y, x) << n;
    }
  }
}

TEST(BlockFormatTest, PixelsAreFilteredAndTextIsNot) {
  const Compression zstd = ParseCompression("zstd").value();
  // Pixels, offset by a header as a record's are: filtered whatever the
  // alignment, and smaller than without the filter.
  for (size_t shift : {0, 1, 2}) {
    const std::string pixels = std::string(shift + 15, 'h') + Pixels(200000, shift);
    const auto e = EncodeBlock(pixels, crc32c::Value(pixels), zstd);
    ASSERT_TRUE(e.is_compressed());
    EXPECT_EQ(e.filter, Filter::kDelta) << shift;
    EXPECT_EQ(Decode(FileOf(e, pixels)).value(), pixels);
    const auto l = EncodeBlock(pixels, crc32c::Value(pixels), ParseCompression("lz4").value());
    ASSERT_TRUE(l.is_compressed());
    EXPECT_EQ(l.filter, Filter::kDelta) << shift;
    EXPECT_EQ(Decode(FileOf(l, pixels)).value(), pixels);
    EXPECT_LT(e.compressed.size(), l.compressed.size());  // zstd's entropy coder packs the residuals
  }
  const std::string text = RealText();
  for (const char* spec : {"lz4", "zstd"}) {
    const auto t = EncodeBlock(text, crc32c::Value(text), ParseCompression(spec).value());
    ASSERT_TRUE(t.is_compressed());
    EXPECT_EQ(t.filter, Filter::kNone) << spec;
  }
  // A small block of pixels (no sample) is decided on the whole.
  const std::string small = Pixels(3000, 9);
  const auto s = EncodeBlock(small, crc32c::Value(small), zstd);
  EXPECT_EQ(Decode(FileOf(s, small)).value(), small);
}

// Every byte of a compressed block file flipped in turn, and every
// truncation: each is an error, never other bytes.
TEST(BlockFormatTest, EveryFlippedOrMissingByteIsAnError) {
  const std::string text = RealText().substr(0, 8192);
  const std::string pixels = Pixels(3000, 1);
  for (const char* spec : {"lz4", "zstd", "zstd+pixels"}) {
    SCOPED_TRACE(spec);
    const bool px = std::string_view(spec) == "zstd+pixels";
    const std::string& data = px ? pixels : text;
    const auto e = EncodeBlock(data, crc32c::Value(data), ParseCompression(px ? "zstd" : spec).value());
    if (px) EXPECT_EQ(e.filter, Filter::kDelta);
    ASSERT_TRUE(e.is_compressed());
    const std::string file = FileOf(e, data);
    for (size_t i = 0; i < file.size(); ++i) {
      std::string bad = file;
      bad[i] = static_cast<char>(bad[i] ^ (1 << (i % 8)));
      auto r = Decode(bad);
      ASSERT_FALSE(r.ok()) << "byte " << i;
      ASSERT_EQ(r.status().code(), StatusCode::kCorruption) << "byte " << i;
    }
    for (size_t n = 0; n < file.size(); n += 97) {
      ASSERT_EQ(Decode(file.substr(0, n)).status().code(), StatusCode::kCorruption) << n;
    }
  }
}

// A header whose checksums agree but whose stored bytes are not what the
// codec made (a bug or a crafted file) fails on decompression or on the
// logical checksum, never with other bytes.
TEST(BlockFormatTest, ConsistentHeadersOverBadDataAreCaught) {
  const std::string text = RealText().substr(0, 20000);
  const auto e = EncodeBlock(text, crc32c::Value(text), ParseCompression("lz4").value());
  ASSERT_TRUE(e.is_compressed());
  auto h = ParseBlockHeader(e.header).value();
  std::string wrong = e.compressed;
  wrong[wrong.size() / 2] ^= 0x55;
  h.stored_crc = crc32c::Value(wrong);  // as if the file had been written so
  EXPECT_EQ(DecodeBlock(h, wrong).status().code(), StatusCode::kCorruption);
  auto big = ParseBlockHeader(e.header).value();
  big.logical_size += 1;  // decompresses to fewer bytes than claimed
  EXPECT_EQ(DecodeBlock(big, std::string_view(e.compressed)).status().code(), StatusCode::kCorruption);
  auto zstd_as_lz4 = ParseBlockHeader(e.header).value();
  zstd_as_lz4.codec = Codec::kZstd;  // another codec's bytes
  EXPECT_EQ(DecodeBlock(zstd_as_lz4, std::string_view(e.compressed)).status().code(), StatusCode::kCorruption);
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/aq_block_format_XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& s) const { return path_ + "/" + s; }

 private:
  std::string path_;
};

TEST(BlockStoreCompressionTest, PoolsCompressReadBackAndCountLogicalAndPhysicalBytes) {
  TempDir dir;
  auto posix = io::NewPosixFileSystem();
  auto lz4 = ParsePool("fast=" + (dir / "fast") + ",compress=lz4").value();
  auto zstd = ParsePool("cold=" + (dir / "cold") + ",media=hdd,compress=zstd").value();
  auto plain = ParsePool("plain=" + (dir / "plain")).value();
  auto bs = BlockStore::Open(*posix, {lz4, zstd, plain}).value();
  const std::string text = RealText();
  const std::string noise = Random(300000, 11);
  std::vector<BlockRef> refs;
  for (const char* pool : {"fast", "cold", "plain"}) {
    refs.push_back(bs->Write(pool, text).value());
    refs.push_back(bs->Write(pool, noise).value());
  }
  // The reference is the block's own, whatever its file holds.
  EXPECT_EQ(refs[0].size, text.size());
  EXPECT_EQ(refs[0].crc32c, refs[2].crc32c);
  EXPECT_EQ(refs[0].crc32c, refs[4].crc32c);
  for (size_t i = 0; i < refs.size(); ++i) {
    const std::string& want = i % 2 == 0 ? text : noise;
    EXPECT_EQ(bs->Read(refs[i]).value(), want) << i;
    EXPECT_EQ(bs->Read(refs[i], 1000, 500).value(), want.substr(1000, 500)) << i;
    EXPECT_EQ(bs->Read(refs[i], want.size() - 3).value(), want.substr(want.size() - 3)) << i;
  }
  EXPECT_LT(fs::file_size(bs->PathOf(refs[0])), text.size() * 7 / 10);
  EXPECT_EQ(fs::file_size(bs->PathOf(refs[1])), noise.size() + kPlainHeaderBytes);
  auto usage = bs->Usage().value();
  ASSERT_EQ(usage.size(), 3u);
  for (const auto& u : usage) {
    SCOPED_TRACE(u.name);
    EXPECT_EQ(u.blocks, 2u);
    EXPECT_EQ(u.logical_bytes, text.size() + noise.size());
    EXPECT_EQ(u.compressed_blocks, u.name == "plain" ? 0u : 1u);
    if (u.name == "plain") {
      EXPECT_EQ(u.bytes, u.logical_bytes + 2 * kPlainHeaderBytes);
    } else {
      EXPECT_LT(u.bytes, noise.size() + text.size() * 7 / 10);
    }
  }
  // The same files seen by a store opened afresh (headers read, not
  // remembered), and without the policy: blocks keep their form.
  auto reopened = BlockStore::Open(*posix, {ParsePool("fast=" + (dir / "fast")).value(), zstd, plain}).value();
  auto again = reopened->Usage().value();
  for (size_t i = 0; i < usage.size(); ++i) {
    EXPECT_EQ(again[i].bytes, usage[i].bytes);
    EXPECT_EQ(again[i].logical_bytes, usage[i].logical_bytes);
    EXPECT_EQ(again[i].compressed_blocks, usage[i].compressed_blocks);
  }
  EXPECT_EQ(reopened->Read(refs[0]).value(), text);
  auto more = reopened->Write("fast", text).value();  // the pool no longer compresses
  EXPECT_EQ(fs::file_size(reopened->PathOf(more)), text.size() + kPlainHeaderBytes);
  // Removed blocks leave the count.
  ASSERT_TRUE(reopened->Remove(refs[0]).ok());
  ASSERT_TRUE(reopened->Remove(more).ok());
  EXPECT_EQ(reopened->Usage().value()[0].logical_bytes, noise.size());
  EXPECT_EQ(reopened->Usage().value()[0].compressed_blocks, 0u);
  // What the codec did, per pool.
  const auto counters = bs->CompressionCounters();
  EXPECT_EQ(counters[0].compressed, 1u);
  EXPECT_EQ(counters[0].plain, 1u);
  EXPECT_EQ(counters[0].logical_in, text.size());
  EXPECT_GE(counters[0].decompressed, 3u);
  EXPECT_EQ(counters[2].compressed + counters[2].plain, 0u);
}

// O_DIRECT pools read a block into an aligned buffer: a compressed block is
// decoded from it, a plain one checked there and only the range copied.
TEST(BlockStoreCompressionTest, DirectReadsOfBothForms) {
  TempDir dir;
  auto posix = io::NewPosixFileSystem();
  auto bs = BlockStore::Open(*posix, {ParsePool("d=" + (dir / "d") + ",direct,compress=zstd").value()}).value();
  const std::string text = RealText(), noise = Random(100001, 3);
  const BlockRef t = bs->Write("d", text).value(), r = bs->Write("d", noise).value();
  auto back = bs->Read(t);
  if (!back.ok() && back.status().message().find("O_DIRECT") != std::string_view::npos) {
    GTEST_SKIP() << "the temporary directory's file system has no O_DIRECT: " << back.status().ToString();
  }
  EXPECT_EQ(back.value(), text);
  EXPECT_EQ(bs->Read(t, 100, 50).value(), text.substr(100, 50));
  EXPECT_EQ(bs->Read(r).value(), noise);
  EXPECT_EQ(bs->Read(r, 99990, 100).value(), noise.substr(99990));
  EXPECT_FALSE(bs->Read(r, 100002, 1).ok());
  BlockRef wrong = r;
  wrong.crc32c ^= 1;
  EXPECT_EQ(bs->Read(wrong).status().code(), StatusCode::kCorruption);
}

TEST(BlockStoreCompressionTest, DamagedCompressedFilesAreErrorsNamingTheBlock) {
  TempDir dir;
  auto posix = io::NewPosixFileSystem();
  auto bs = BlockStore::Open(*posix, {ParsePool("z=" + (dir / "z") + ",compress=zstd").value()}).value();
  const std::string text = RealText();
  const BlockRef ref = bs->Write("z", text).value();
  const std::string path = bs->PathOf(ref);
  const std::string good = [&] {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }();
  auto write = [&](const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << bytes;
  };
  for (size_t at : {size_t{3}, size_t{12}, size_t{20}, size_t{30}, size_t{41}, good.size() / 2, good.size() - 1}) {
    std::string bad = good;
    bad[at] ^= 0x10;
    write(bad);
    auto r = bs->Read(ref);
    ASSERT_FALSE(r.ok()) << at;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << at;
    EXPECT_NE(r.status().message().find(ref.id), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find("pool 'z'"), std::string::npos) << r.status().ToString();
  }
  write(good.substr(0, 30));  // cut inside the compressed header
  EXPECT_EQ(bs->Read(ref).status().code(), StatusCode::kCorruption);
  write(good.substr(0, good.size() - 1));
  EXPECT_EQ(bs->Read(ref).status().code(), StatusCode::kCorruption);
  write(good);
  EXPECT_EQ(bs->Read(ref).value(), text);
  BlockRef wrong = ref;
  wrong.crc32c ^= 1;  // the layout and the file disagree
  EXPECT_EQ(bs->Read(wrong).status().code(), StatusCode::kCorruption);
}

// Many writers and readers on one compressing pool, blocks of every kind:
// each read returns its own block's bytes (the codecs' contexts are per
// thread).
TEST(BlockStoreCompressionTest, ConcurrentWritersAndReaders) {
  TempDir dir;
  auto posix = io::NewPosixFileSystem();
  auto bs = BlockStore::Open(*posix, {ParsePool("z=" + (dir / "z") + ",compress=zstd:3").value(),
                                      ParsePool("l=" + (dir / "l") + ",compress=lz4").value()})
                .value();
  const std::string text = RealText();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        std::string data = (i % 3 == 0) ? Random(70000 + i, t * 100 + i) : text.substr(i * 100) + std::to_string(t);
        const char* pool = (i + t) % 2 ? "z" : "l";
        auto ref = bs->Write(pool, data);
        if (!ref.ok()) {
          ++failures;
          continue;
        }
        auto back = bs->Read(*ref);
        if (!back.ok() || *back != data) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto usage = bs->Usage().value();
  EXPECT_EQ(usage[0].blocks + usage[1].blocks, 80u);
}

}  // namespace
}  // namespace aq::store
