#include "format/tar.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace aq::format {
namespace {

std::string Write(const std::vector<std::pair<std::string, std::string>>& members, bool finish = true) {
  auto fs = io::NewMemFileSystem();
  auto f = fs->OpenWrite("/a.tar");
  TarWriter w(**f);
  for (const auto& [name, data] : members) EXPECT_TRUE(w.Add(name, data).ok()) << name;
  if (finish) EXPECT_TRUE(w.Finish().ok());
  EXPECT_TRUE((*f)->Close().ok());
  return *io::ReadFileToString(*fs, "/a.tar");
}

struct Scan {
  std::vector<TarMember> members;
  Status status;
};

Scan ReadAll(const std::string& bytes) {
  Scan s;
  auto file = io::NewSpanFile(bytes, "a.tar");
  TarReader r(*file, "a.tar");
  TarMember m;
  while (true) {
    auto more = r.Next(&m);
    if (!more.ok()) {
      s.status = more.status();
      break;
    }
    if (!*more) break;
    s.members.push_back(m);
  }
  return s;
}

TEST(TarTest, RoundTripWithLongNamesEmptyFilesAndExactBlocks) {
  const std::string long_name = "train/" + std::string(150, 'n') + ".jpg";
  std::vector<std::pair<std::string, std::string>> in = {{"a.jpg", "JPEGDATA"}, {"a.cls", "3"},
                                                         {"empty.txt", ""},     {"block.bin", std::string(512, 'x')},
                                                         {long_name, "L"},      {"ünï/çødé.json", "{}"}};
  std::string bytes = Write(in);
  EXPECT_EQ(bytes.size() % 512, 0u);
  auto s = ReadAll(bytes);
  ASSERT_TRUE(s.status.ok()) << s.status.message();
  ASSERT_EQ(s.members.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(s.members[i].name, in[i].first);
    EXPECT_EQ(bytes.substr(s.members[i].data_offset, s.members[i].size), in[i].second);
  }
  // The long name's pax header belongs to its member's range.
  EXPECT_LT(s.members[4].header_offset + 512, s.members[4].data_offset);
  auto parsed = ParseTarMembers(bytes, "mem");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->size(), in.size());
}

TEST(TarTest, DamageIsNamedWithItsOffset) {
  std::string bytes = Write({{"a.jpg", std::string(1000, 'j')}, {"b.jpg", "b"}});
  std::string flipped = bytes;
  flipped[1536 + 10] ^= 0x20;  // b.jpg's header (a.jpg: 512 header + 1024 data)
  auto s = ReadAll(flipped);
  EXPECT_EQ(s.members.size(), 1u);
  EXPECT_EQ(s.status.code(), StatusCode::kCorruption);
  EXPECT_NE(s.status.message().find("offset 1536"), std::string::npos) << s.status.message();
  // Cut inside a member's data: the member's claim is past the end.
  auto cut = ReadAll(bytes.substr(0, 900));
  EXPECT_EQ(cut.status.code(), StatusCode::kTruncated) << cut.status.message();
  // Not a tar at all.
  auto junk = ReadAll(std::string(2048, 'z'));
  EXPECT_FALSE(junk.status.ok());
  // Without the end-of-archive blocks, the end of the file ends it.
  auto open_end = ReadAll(Write({{"a.jpg", "x"}}, false));
  EXPECT_TRUE(open_end.status.ok());
  EXPECT_EQ(open_end.members.size(), 1u);
}

TEST(TarTest, GnuLongNamesBase256SizesAndDirectories) {
  // Headers made by hand as GNU tar writes them.
  auto header = [](std::string name, uint64_t size, char type, bool base256) {
    std::string b(512, '\0');
    std::copy_n(name.data(), std::min<size_t>(100, name.size()), &b[0]);
    std::string mode = "0000644";
    std::copy(mode.begin(), mode.end(), &b[100]);
    if (base256) {
      b[124] = static_cast<char>(0x80);
      for (int i = 0; i < 8; ++i) b[135 - i] = static_cast<char>((size >> (8 * i)) & 0xff);
    } else {
      std::string s = fmt::format("{:011o}", size);
      std::copy(s.begin(), s.end(), &b[124]);
    }
    b[156] = type;
    std::string magic("ustar  \0", 8);
    std::copy(magic.begin(), magic.end(), &b[257]);
    std::fill_n(&b[148], 8, ' ');
    unsigned sum = 0;
    for (unsigned char c : b) sum += c;
    std::string cs = fmt::format("{:06o}", sum);
    std::copy(cs.begin(), cs.end(), &b[148]);
    b[154] = '\0';
    return b;
  };
  const std::string name = std::string(120, 'g') + ".png";
  std::string bytes = header("dir/", 0, '5', false);
  bytes += header("././@LongLink", name.size() + 1, 'L', false) + name + '\0';
  bytes.resize(TarPadded(bytes.size()), '\0');
  bytes += header("ggg", 3, '0', true) + std::string("abc") + std::string(509, '\0');
  bytes += std::string(1024, '\0');
  auto file = io::NewSpanFile(bytes, "gnu.tar");
  TarReader r(*file, "gnu.tar");
  TarMember m;
  auto more = r.Next(&m);
  ASSERT_TRUE(more.ok()) << more.status().message();
  ASSERT_TRUE(*more);
  EXPECT_EQ(m.name, name);
  EXPECT_EQ(m.size, 3u);
  EXPECT_EQ(bytes.substr(m.data_offset, 3), "abc");
  EXPECT_EQ(m.header_offset, 512u);  // the long-name header, after the directory
  EXPECT_EQ(r.skipped_entries(), 1u);
  EXPECT_FALSE(*r.Next(&m));
}

TEST(WdsTest, KeysSamplesAndFields) {
  EXPECT_EQ(SplitWdsName("train/n0144_10026.seg.png"),
            (std::pair<std::string_view, std::string_view>{"train/n0144_10026", "seg.png"}));
  EXPECT_EQ(SplitWdsName("a.b/c"), (std::pair<std::string_view, std::string_view>{"a.b/c", ""}));
  EXPECT_TRUE(IsWdsImageExtension("seg.PNG"));
  EXPECT_TRUE(IsWdsImageExtension("jpg"));
  EXPECT_FALSE(IsWdsImageExtension("json"));
  std::string bytes = Write({{"k1.jpg", "J1"},
                             {"k1.cls", " 7\n"},
                             {"k1.txt", "a caption"},
                             {"k2.JPEG", "J2"},
                             {"k3.json", "{}"},
                             {"k4.jpg", "J4"},
                             {"k4.cls", "seven"}});
  auto file = io::NewSpanFile(bytes, "s.tar");
  TarReader tar(*file, "s.tar");
  WdsReader r(tar);
  std::vector<WdsSample> samples;
  WdsSample s;
  while (*r.Next(&s)) samples.push_back(s);
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].key, "k1");
  EXPECT_EQ(samples[0].members.size(), 3u);
  auto f1 = ParseWdsSample(std::string_view(bytes).substr(samples[0].offset, samples[0].size), "s.tar");
  ASSERT_TRUE(f1.ok()) << f1.status().message();
  EXPECT_EQ(f1->image, "J1");
  EXPECT_TRUE(f1->has_label);
  EXPECT_EQ(f1->label, 7);
  EXPECT_EQ(f1->members[2].first, "txt");
  EXPECT_EQ(f1->members[2].second, "a caption");
  // No label member: an error naming what was looked for, unless the
  // dataset is declared to have no labels.
  auto f2 = ParseWdsSample(std::string_view(bytes).substr(samples[1].offset, samples[1].size), "s.tar");
  ASSERT_FALSE(f2.ok());
  EXPECT_NE(f2.status().message().find("has no label: none of its files is k2.cls"), std::string::npos)
      << f2.status().message();
  auto unlabelled = ParseWdsSample(std::string_view(bytes).substr(samples[1].offset, samples[1].size), "s.tar",
                                   *ParseWdsSchema(kWdsImageDefault, "none"));
  ASSERT_TRUE(unlabelled.ok()) << unlabelled.status().message();
  EXPECT_EQ(unlabelled->image, "J2");
  EXPECT_FALSE(unlabelled->has_label);
  auto f3 = ParseWdsSample(std::string_view(bytes).substr(samples[2].offset, samples[2].size), "s.tar");
  EXPECT_EQ(f3.status().code(), StatusCode::kCorruption);
  EXPECT_NE(f3.status().message().find("no image"), std::string::npos);
  auto f4 = ParseWdsSample(std::string_view(bytes).substr(samples[3].offset, samples[3].size), "s.tar");
  EXPECT_NE(f4.status().message().find("'seven'"), std::string::npos) << f4.status().message();
}

// Members are chosen by their whole extension, as the webdataset library
// chooses them: in a name-sorted tar KEY.depth.png comes before KEY.jpg,
// and the jpg is still the image; the user names other members.
TEST(WdsTest, MembersAreChosenByTheirWholeExtension) {
  const std::string bytes = Write({{"k.depth.png", "DEPTH"},
                                   {"k.jpg", "RGB"},
                                   {"k.json", R"({"annotation": {"label": 4}, "tags": [1, "9"]})"},
                                   {"k.seg.png", "SEG"},
                                   {"k.v2.cls", "5"},
                                   {"k.v2.jpg", "RGB2"}});
  auto parse = [&](std::string_view image, std::string_view label) {
    auto schema = ParseWdsSchema(image, label);
    EXPECT_TRUE(schema.ok()) << schema.status().message();
    return ParseWdsSample(bytes, "s.tar", *schema);
  };
  auto plain = parse(kWdsImageDefault, "v2.cls");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->image, "RGB");
  EXPECT_EQ(plain->label, 5);
  auto v2 = parse("v2.jpg", "v2.cls");
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->image, "RGB2");
  auto seg = parse("seg.png;jpg", "json:annotation.label");
  ASSERT_TRUE(seg.ok()) << seg.status().message();
  EXPECT_EQ(seg->image, "SEG");
  EXPECT_EQ(seg->label, 4);
  EXPECT_EQ(parse("jpg", "json:tags.1")->label, 9);
  EXPECT_NE(parse("jpg", "json:annotation.missing").status().message().find("has no field 'annotation.missing'"),
            std::string::npos);
  EXPECT_NE(parse("webp", "none").status().message().find("has no image: none of its files is k.webp"),
            std::string::npos);
  EXPECT_FALSE(ParseWdsSchema("", "cls").ok());
  EXPECT_FALSE(ParseWdsSchema("jpg", "json:").ok());
  EXPECT_FALSE(ParseWdsSchema(".jpg", "cls").ok());
}

// An archive cut inside a sample: every sample before the cut is given,
// the one with its members whole too, then the error.
TEST(WdsTest, ACutArchiveGivesEverySampleBeforeTheCut) {
  const std::string bytes = Write({{"a.jpg", "A"}, {"a.cls", "1"}, {"b.jpg", "B"}, {"b.cls", "2"}, {"c.jpg", "C"}});
  const size_t cut = bytes.find("C") - 10;  // inside c.jpg's header... or data
  const std::string cut_bytes = bytes.substr(0, cut);
  auto file = io::NewSpanFile(cut_bytes, "s.tar");
  TarReader tar(*file, "s.tar");
  WdsReader r(tar);
  WdsSample s;
  std::vector<std::string> keys;
  Status error;
  while (true) {
    auto more = r.Next(&s);
    if (!more.ok()) {
      error = more.status();
      break;
    }
    if (!*more) break;
    keys.push_back(s.key);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(error.ok()) << "the cut went unreported";
  EXPECT_NE(error.message().find("after sample 'b'"), std::string::npos) << error.message();
}

}  // namespace
}  // namespace aq::format
