#include "format/tfrecord.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/crc32c.h"

namespace aq::format {
namespace {

std::string Frame(const std::vector<std::string>& records) {
  std::string s;
  for (const auto& r : records) AppendTFRecord(r, &s);
  return s;
}

struct ReadAll {
  std::vector<std::string> records;
  std::vector<uint64_t> offsets;
  Status status;
  std::vector<SkippedRecord> skipped;
};

ReadAll Read(std::string_view bytes, ErrorPolicy policy = ErrorPolicy::kFail) {
  auto file = io::NewSpanFile(bytes, "shard-7");
  TFRecordReaderOptions opt;
  opt.policy = policy;
  opt.buffer_size = 64;  // exercise buffer refills
  TFRecordReader r(*file, opt);
  ReadAll out;
  std::string rec;
  while (true) {
    auto more = r.Next(&rec);
    if (!more.ok()) {
      out.status = more.status();
      break;
    }
    if (!*more) break;
    out.records.push_back(rec);
    out.offsets.push_back(r.offset());
  }
  out.skipped = r.skipped();
  return out;
}

const std::vector<std::string> kRecords = {"first", "", std::string(1000, 'x'), "last record"};

TEST(TFRecord, FramingMatchesTheSpec) {
  std::string s = Frame({"hello"});
  ASSERT_EQ(s.size(), 5u + 16u);
  uint64_t len;
  std::memcpy(&len, s.data(), 8);
  EXPECT_EQ(len, 5u);
  uint32_t lcrc, dcrc;
  std::memcpy(&lcrc, s.data() + 8, 4);
  std::memcpy(&dcrc, s.data() + 17, 4);
  EXPECT_EQ(lcrc, crc32c::Mask(crc32c::Value(s.data(), 8)));
  EXPECT_EQ(s.substr(12, 5), "hello");
  EXPECT_EQ(dcrc, crc32c::Mask(crc32c::Value("hello")));
}

TEST(TFRecord, WriterAndReaderRoundTrip) {
  auto fs = io::NewMemFileSystem();
  {
    auto f = fs->OpenWrite("/s");
    ASSERT_TRUE(f.ok());
    TFRecordWriter w(**f);
    for (const auto& r : kRecords) ASSERT_TRUE(w.Write(r).ok());
    EXPECT_EQ(w.records(), kRecords.size());
    ASSERT_TRUE((*f)->Close().ok());
  }
  std::string bytes = *io::ReadFileToString(*fs, "/s");
  EXPECT_EQ(bytes, Frame(kRecords));
  ReadAll got = Read(bytes);
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  EXPECT_EQ(got.records, kRecords);
  EXPECT_EQ(got.offsets[1], 5u + 16u);
}

TEST(TFRecord, EmptyFileHasNoRecords) {
  ReadAll got = Read("");
  EXPECT_TRUE(got.status.ok());
  EXPECT_TRUE(got.records.empty());
}

TEST(TFRecord, DataCrcMismatchNamesFileOffsetAndRecord) {
  std::string s = Frame(kRecords);
  s[12 + 5 + 16 + 16 + 3] ^= 1;  // inside record 2's data
  ReadAll got = Read(s);
  ASSERT_FALSE(got.status.ok());
  EXPECT_EQ(got.status.code(), StatusCode::kCorruption);
  const std::string& m = got.status.message();
  EXPECT_NE(m.find("shard-7"), std::string::npos) << m;
  EXPECT_NE(m.find("record 2"), std::string::npos) << m;
  EXPECT_NE(m.find("offset 37"), std::string::npos) << m;
  EXPECT_NE(m.find("data CRC"), std::string::npos) << m;
  EXPECT_EQ(got.records.size(), 2u);  // what came before is still delivered
}

TEST(TFRecord, SkipPolicyPassesOverABadRecordAndReportsIt) {
  std::string s = Frame(kRecords);
  s[12 + 5 + 16 + 16 + 3] ^= 1;
  ReadAll got = Read(s, ErrorPolicy::kSkip);
  ASSERT_TRUE(got.status.ok());
  EXPECT_EQ(got.records, (std::vector<std::string>{"first", "", "last record"}));
  ASSERT_EQ(got.skipped.size(), 1u);
  EXPECT_EQ(got.skipped[0].record, 2u);
  EXPECT_EQ(got.skipped[0].offset, 37u);
}

TEST(TFRecord, DamagedLengthFailsOrResynchronises) {
  std::string s = Frame(kRecords);
  s[21 + 2] ^= 0x40;  // record 1's length field
  ReadAll fail = Read(s);
  ASSERT_FALSE(fail.status.ok());
  EXPECT_NE(fail.status.message().find("length CRC"), std::string::npos);
  ReadAll skip = Read(s, ErrorPolicy::kSkip);
  ASSERT_TRUE(skip.status.ok());
  EXPECT_EQ(skip.records, (std::vector<std::string>{"first", std::string(1000, 'x'), "last record"}));
  ASSERT_EQ(skip.skipped.size(), 1u);
  EXPECT_EQ(skip.skipped[0].offset, 21u);
  EXPECT_EQ(skip.skipped[0].bytes, 16u);
}

TEST(TFRecord, TruncatedFilesAreReportedNotShortRead) {
  std::string s = Frame(kRecords);
  for (size_t cut : {s.size() - 1, s.size() - 4, s.size() - 15, size_t{5}}) {
    ReadAll got = Read(std::string_view(s).substr(0, cut));
    ASSERT_FALSE(got.status.ok()) << "cut " << cut;
    EXPECT_EQ(got.status.code(), StatusCode::kTruncated) << got.status.ToString();
    EXPECT_NE(got.status.message().find("truncated"), std::string::npos);
  }
}

TEST(TFRecord, AbsurdLengthIsRejectedBeforeAllocating) {
  std::string s(16, '\0');
  uint64_t len = 1ull << 60;
  std::memcpy(s.data(), &len, 8);
  uint32_t m = crc32c::Mask(crc32c::Value(s.data(), 8));
  std::memcpy(s.data() + 8, &m, 4);
  ReadAll got = Read(s);
  ASSERT_FALSE(got.status.ok());
  EXPECT_NE(got.status.message().find("1152921504606846976"), std::string::npos) << got.status.message();
  ReadAll skip = Read(s, ErrorPolicy::kSkip);
  EXPECT_TRUE(skip.status.ok());
  EXPECT_EQ(skip.skipped.size(), 1u);
}

TEST(TFRecord, GarbageIsCorruptionNotACrash) {
  std::string junk = "this is not a tfrecord file at all, just text\n";
  ReadAll got = Read(junk);
  EXPECT_FALSE(got.status.ok());
}

TEST(TFRecordIndex, BuildFormatParseAndRandomAccess) {
  std::string s = Frame(kRecords);
  auto file = io::NewSpanFile(s, "shard");
  auto idx = BuildTFRecordIndex(*file);
  ASSERT_TRUE(idx.ok());
  ASSERT_EQ(idx->size(), kRecords.size());
  EXPECT_EQ((*idx)[0], (IndexEntry{0, 21}));
  EXPECT_EQ((*idx)[1], (IndexEntry{21, 16}));
  std::string text = FormatTFRecordIndex(*idx);
  EXPECT_EQ(text.substr(0, 10), "0 21\n21 16");
  auto parsed = ParseTFRecordIndex(text, "x.idx");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, *idx);
  for (size_t i = 0; i < idx->size(); ++i) {
    auto r = ReadTFRecordAt(*file, (*idx)[i].offset);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, kRecords[i]);
  }
  EXPECT_FALSE(ReadTFRecordAt(*file, 3).ok());  // not a record boundary
  EXPECT_FALSE(ReadTFRecordAt(*file, s.size() + 10).ok());
}

TEST(TFRecordIndex, MalformedIndexNamesLine) {
  auto bad = ParseTFRecordIndex("0 21\n21 x\n", "train.idx");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("train.idx: line 2"), std::string::npos);
  EXPECT_FALSE(ParseTFRecordIndex("0 100\n50 100\n", "i").ok());  // overlap
  EXPECT_FALSE(ParseTFRecordIndex("0 3\n", "i").ok());            // smaller than framing
  EXPECT_TRUE(ParseTFRecordIndex("", "i")->empty());
}

}  // namespace
}  // namespace aq::format
