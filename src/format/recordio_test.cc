#include "format/recordio.h"

#include <gtest/gtest.h>

#include <cstring>

namespace aq::format {
namespace {

std::string Magic() {
  uint32_t m = kRecordIOMagic;
  return std::string(reinterpret_cast<const char*>(&m), 4);
}

std::string WriteAll(const std::vector<std::string>& records) {
  auto fs = io::NewMemFileSystem();
  auto f = fs->OpenWrite("/r.rec");
  RecordIOWriter w(**f);
  for (const auto& r : records) EXPECT_TRUE(w.Write(r).ok());
  EXPECT_TRUE((*f)->Close().ok());
  return *io::ReadFileToString(*fs, "/r.rec");
}

struct ReadAll {
  std::vector<std::string> records;
  std::vector<uint64_t> offsets;
  Status status;
  std::vector<SkippedRecord> skipped;
};

ReadAll Read(std::string_view bytes, ErrorPolicy policy = ErrorPolicy::kFail) {
  auto file = io::NewSpanFile(bytes, "train.rec");
  RecordIOReaderOptions opt;
  opt.policy = policy;
  opt.buffer_size = 32;
  RecordIOReader r(*file, opt);
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

TEST(RecordIO, LayoutMatchesDmlcCore) {
  std::string s = WriteAll({"abcde"});
  // magic, lrecord (cflag 0, length 5), data, 3 bytes padding
  ASSERT_EQ(s.size(), 4u + 4u + 8u);
  EXPECT_EQ(s.substr(0, 4), Magic());
  uint32_t lrec;
  std::memcpy(&lrec, s.data() + 4, 4);
  EXPECT_EQ(lrec, 5u);
  EXPECT_EQ(s.substr(8, 5), "abcde");
  EXPECT_EQ(s.substr(13), std::string(3, '\0'));
}

TEST(RecordIO, PayloadsContainingTheMagicAreSplitAndReassembled) {
  const std::string m = Magic();
  std::vector<std::string> recs = {
      "abcd" + m + "efgh",         // aligned magic: split into 2 parts
      m,                           // the magic alone: empty first and last part
      "ab" + m + "cd",             // unaligned magic: not split
      "12345678" + m + m + "xyz",  // two magics in a row: first, middle, last
      "",
  };
  std::string s = WriteAll(recs);
  uint32_t lrec;
  std::memcpy(&lrec, s.data() + 4, 4);
  EXPECT_EQ(lrec >> 29, 1u);  // first part of a split record
  EXPECT_EQ(lrec & ((1u << 29) - 1), 4u);
  ReadAll got = Read(s);
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  EXPECT_EQ(got.records, recs);
}

TEST(RecordIO, BadMagicNamesFileOffsetAndRecord) {
  std::string s = WriteAll({"one", "two", "three"});
  s[8] = 'X';  // "one" -> still fine; break record 1's magic instead:
  s[12] ^= 0x55;
  ReadAll got = Read(s);
  ASSERT_FALSE(got.status.ok());
  EXPECT_EQ(got.status.code(), StatusCode::kCorruption);
  EXPECT_NE(got.status.message().find("train.rec: record 1 at offset 12"), std::string::npos) << got.status.message();
  EXPECT_NE(got.status.message().find("bad magic"), std::string::npos);
  ReadAll skip = Read(s, ErrorPolicy::kSkip);
  ASSERT_TRUE(skip.status.ok());
  EXPECT_EQ(skip.records, (std::vector<std::string>{"Xne", "three"}));
  ASSERT_EQ(skip.skipped.size(), 1u);
  EXPECT_EQ(skip.skipped[0].offset, 12u);
}

TEST(RecordIO, TruncatedFileIsReported) {
  std::string s = WriteAll({"hello world", "again"});
  for (size_t cut : {s.size() - 1, s.size() - 6, size_t{6}}) {
    ReadAll got = Read(std::string_view(s).substr(0, cut));
    ASSERT_FALSE(got.status.ok()) << cut;
    EXPECT_EQ(got.status.code(), StatusCode::kTruncated) << got.status.ToString();
  }
  // A split record whose last part is missing.
  std::string split = WriteAll({"abcd" + Magic() + "efgh"});
  ReadAll got = Read(std::string_view(split).substr(0, 12));
  EXPECT_EQ(got.status.code(), StatusCode::kTruncated);
}

TEST(RecordIO, AbsurdLengthAndBrokenContinuationAreCorruptOrTruncated) {
  std::string s = Magic();
  uint32_t lrec = (0u << 29) | ((1u << 29) - 1);
  s.append(reinterpret_cast<const char*>(&lrec), 4);
  s += "tiny";
  EXPECT_EQ(Read(s).status.code(), StatusCode::kTruncated);
  std::string cont = Magic();
  lrec = (2u << 29) | 4;  // a middle part with no first part
  cont.append(reinterpret_cast<const char*>(&lrec), 4);
  cont += "abcd";
  EXPECT_EQ(Read(cont).status.code(), StatusCode::kCorruption);
}

TEST(RecordIO, RandomAccessByOffset) {
  std::vector<std::string> recs = {"a", "bb", "ccc" + Magic() + "c", "dddd"};
  std::string s = WriteAll(recs);
  ReadAll all = Read(s);
  auto file = io::NewSpanFile(s, "r");
  for (size_t i = 0; i < recs.size(); ++i) {
    auto r = ReadRecordIOAt(*file, all.offsets[i]);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, recs[i]);
  }
  EXPECT_FALSE(ReadRecordIOAt(*file, 4).ok());
}

TEST(ImageRecordHeader, PackUnpackSingleAndMultiLabel) {
  ImageHeader h;
  h.label = 3;
  h.id = 42;
  h.id2 = 7;
  std::string p = PackImageRecord(h, "JPEG");
  ASSERT_EQ(p.size(), 24u + 4u);
  auto v = UnpackImageRecord(p);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->header, h);
  EXPECT_EQ(v->image, "JPEG");
  ImageHeader multi;
  multi.labels = {1.f, 2.f, 5.f};
  multi.flag = 3;
  multi.id = 9;
  const std::string packed = PackImageRecord(multi, "IMG");  // the view below points into it
  auto mv = UnpackImageRecord(packed);
  ASSERT_TRUE(mv.ok());
  EXPECT_EQ(mv->header.flag, 3u);
  EXPECT_EQ(mv->header.labels, multi.labels);
  EXPECT_EQ(mv->image, "IMG");
  EXPECT_FALSE(UnpackImageRecord("short").ok());
  std::string lying = PackImageRecord(h, "");
  lying[0] = 100;  // claims 100 labels
  EXPECT_FALSE(UnpackImageRecord(lying).ok());
}

TEST(RecordIOIndex, FormatAndParse) {
  std::vector<RecordIOIndexEntry> e = {{0, 0}, {5, 1024}, {2, 2048}};
  std::string text = FormatRecordIOIndex(e);
  EXPECT_EQ(text, "0\t0\n5\t1024\n2\t2048\n");
  EXPECT_EQ(*ParseRecordIOIndex(text, "x"), e);
  EXPECT_FALSE(ParseRecordIOIndex("1\tabc\n", "train.idx").ok());
  EXPECT_FALSE(ParseRecordIOIndex("1\t3\n", "train.idx").ok());  // unaligned
}

}  // namespace
}  // namespace aq::format
