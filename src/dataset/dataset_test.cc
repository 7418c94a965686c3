// The dataset commands end to end on the in-memory file system.
#include "dataset/dataset.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>

#include "dataset/commands.h"
#include "format/example.h"
#include "format/manifest.h"
#include "format/tfrecord.h"
#include "image/decode.h"
#include "image/jpeg.h"
#include "io/forwarding_file_system.h"

namespace aq::dataset {
namespace {

class DatasetTest : public testing::Test {
 protected:
  void SetUp() override {
    fs_ = io::NewMemFileSystem();
    SynthOptions s;
    s.out = "/raw";
    s.classes = 4;
    s.images = 24;
    s.seed = 9;
    s.common.progress = false;
    auto r = Synthesize(*fs_, s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->images, 24u);
  }
  PackOptions PackTo(const std::string& out, Format f, size_t shards) {
    PackOptions p;
    p.input = "/raw";
    p.out = out;
    p.format = f;
    p.shards = shards;
    p.common.progress = false;
    return p;
  }
  VerifyReport MustVerify(const std::string& path) {
    VerifyOptions v;
    v.path = path;
    v.common.progress = false;
    auto r = Verify(*fs_, v);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : VerifyReport{};
  }
  void Corrupt(const std::string& path, size_t at) {
    std::string s = *io::ReadFileToString(*fs_, path);
    s[at] ^= 0x20;
    ASSERT_TRUE(io::WriteFileAtomic(*fs_, path, s).ok());
  }
  std::unique_ptr<io::FileSystem> fs_;
};

TEST_F(DatasetTest, SynthIsDeterministicBySeed) {
  SynthOptions s;
  s.out = "/raw2";
  s.classes = 4;
  s.images = 24;
  s.seed = 9;
  s.common.threads = 1;  // a different thread count must not change the bytes
  s.common.progress = false;
  ASSERT_TRUE(Synthesize(*fs_, s).ok());
  auto a = format::ScanImageFolder(*fs_, "/raw"), b = format::ScanImageFolder(*fs_, "/raw2");
  ASSERT_EQ(a->images.size(), b->images.size());
  for (size_t i = 0; i < a->images.size(); ++i) {
    EXPECT_EQ(*io::ReadFileToString(*fs_, a->images[i].path), *io::ReadFileToString(*fs_, b->images[i].path));
  }
  EXPECT_EQ(a->classes.size(), 4u);
}

TEST_F(DatasetTest, PackTFRecordThenVerify) {
  auto p = Pack(*fs_, PackTo("/tf", Format::kTFRecord, 3));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->files.size(), 3u);
  EXPECT_EQ(p->files[0], "/tf/train-00000-of-00003");
  EXPECT_TRUE(fs_->Exists("/tf/idx/train-00000-of-00003.idx"));
  VerifyReport v = MustVerify("/tf");
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.records, 24u);
  EXPECT_EQ(v.labels.size(), 4u);
  EXPECT_EQ(v.labels.begin()->first, 1);  // 1-based, as the ImageNet converters
  // The record carries the ImageNet keys.
  auto f = fs_->OpenRead("/tf/train-00000-of-00003");
  format::TFRecordReader r(**f);
  std::string rec;
  ASSERT_TRUE(*r.Next(&rec));
  auto img = format::FromExample(*format::ParseExample(rec));
  ASSERT_TRUE(img.ok());
  EXPECT_EQ(img->synset.substr(0, 1), "n");
  EXPECT_EQ(img->text.substr(0, 15), "synthetic class");
  auto info = image::ReadJpegInfo(img->encoded);
  EXPECT_EQ(info->width, img->width);
}

TEST_F(DatasetTest, PackIsDeterministicAndSpreadsShuffledImages) {
  ASSERT_TRUE(Pack(*fs_, PackTo("/a", Format::kTFRecord, 2)).ok());
  ASSERT_TRUE(Pack(*fs_, PackTo("/b", Format::kTFRecord, 2)).ok());
  EXPECT_EQ(*io::ReadFileToString(*fs_, "/a/train-00000-of-00002"),
            *io::ReadFileToString(*fs_, "/b/train-00000-of-00002"));
  InspectOptions io;
  io.path = "/a/train-00000-of-00002";
  io.limit = 0;
  auto rows = Inspect(*fs_, io);
  ASSERT_TRUE(rows.ok());
  std::set<int64_t> labels;
  for (const auto& r : *rows) labels.insert(r.label);
  EXPECT_GT(labels.size(), 1u);  // shuffled, not one class per shard
}

TEST_F(DatasetTest, PackRecordIOThenVerifyAndInspect) {
  auto p = Pack(*fs_, PackTo("/rec", Format::kRecordIO, 0));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->files, std::vector<std::string>{"/rec/train.rec"});
  EXPECT_TRUE(fs_->Exists("/rec/train.idx"));
  EXPECT_TRUE(fs_->Exists("/rec/train.lst"));
  VerifyReport v = MustVerify("/rec");
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.records, 24u);
  EXPECT_EQ(v.labels.begin()->first, 0);
  InspectOptions io;
  io.path = "/rec";
  io.limit = 5;
  auto rows = Inspect(*fs_, io);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 5u);
  EXPECT_GT((*rows)[0].width, 0);
}

TEST_F(DatasetTest, VerifyFindsCorruptionAndNamesWhere) {
  ASSERT_TRUE(Pack(*fs_, PackTo("/tf", Format::kTFRecord, 2)).ok());
  Corrupt("/tf/train-00001-of-00002", 5000);
  VerifyReport v = MustVerify("/tf");
  EXPECT_FALSE(v.ok());
  ASSERT_FALSE(v.problems.empty());
  EXPECT_EQ(v.problems[0].file, "/tf/train-00001-of-00002");
  EXPECT_NE(v.problems[0].message.find("CRC"), std::string::npos) << v.problems[0].message;
}

TEST_F(DatasetTest, VerifyFindsAStaleIndex) {
  ASSERT_TRUE(Pack(*fs_, PackTo("/tf", Format::kTFRecord, 1)).ok());
  ASSERT_TRUE(io::WriteFileAtomic(*fs_, "/tf/idx/train-00000-of-00001.idx", "0 16\n").ok());
  VerifyReport v = MustVerify("/tf");
  EXPECT_FALSE(v.ok());
  EXPECT_NE(v.problems[0].message.find("index"), std::string::npos);
}

TEST_F(DatasetTest, PackRejectsNonJpegOrSkipsIt) {
  auto f = fs_->OpenWrite("/raw/" + format::ScanImageFolder(*fs_, "/raw")->classes[0] + "/bad.jpg");
  ASSERT_TRUE((*f)->Append("this is text, not a JPEG").ok());
  ASSERT_TRUE((*f)->Close().ok());
  auto fail = Pack(*fs_, PackTo("/tf", Format::kTFRecord, 2));
  ASSERT_FALSE(fail.ok());
  EXPECT_NE(fail.status().message().find("bad.jpg"), std::string::npos);
  EXPECT_NE(fail.status().message().find("not a JPEG"), std::string::npos);
  // A failed pack leaves nothing that looks like a dataset: not the shard
  // that failed, nor the one finished before it.
  for (const char* left : {"/tf/train-00000-of-00002.partial", "/tf/train-00000-of-00002", "/tf/train-00001-of-00002",
                           "/tf/idx/train-00000-of-00002.idx"}) {
    EXPECT_FALSE(fs_->Exists(left)) << left;
  }
  EXPECT_NE(fail.status().message().find("no shard of it was kept"), std::string::npos) << fail.status().ToString();
  PackOptions p = PackTo("/tf2", Format::kTFRecord, 2);
  p.policy = format::ErrorPolicy::kSkip;
  auto skip = Pack(*fs_, p);
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ(skip->images, 24u);
  ASSERT_EQ(skip->skipped.size(), 1u);
  EXPECT_NE(skip->skipped[0].file.find("bad.jpg"), std::string::npos);
}

// Files that once made pack lose the valid images packed after them on the
// same thread, and damaged files that once passed.
class DamagedFolderTest : public DatasetTest {
 protected:
  void Put(const std::string& name, const std::string& data) {
    auto f = fs_->OpenWrite("/raw/" + cls_ + "/" + name);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append(data).ok());
    ASSERT_TRUE((*f)->Close().ok());
  }
  void SetUp() override {
    DatasetTest::SetUp();
    cls_ = format::ScanImageFolder(*fs_, "/raw")->classes[1];
    const auto folder = format::ScanImageFolder(*fs_, "/raw");
    const std::string good = *io::ReadFileToString(*fs_, folder->images[0].path);
    std::string twelve_bit = good;
    for (size_t i = 2; i + 4 < twelve_bit.size(); ++i) {
      if (static_cast<uint8_t>(twelve_bit[i]) == 0xff && (static_cast<uint8_t>(twelve_bit[i + 1]) & 0xfe) == 0xc0) {
        twelve_bit[i + 4] = 12;
        break;
      }
    }
    std::string png_as_jpeg("\x89PNG\r\n\x1a\n", 8);
    Put("a0_12bit.JPEG", twelve_bit);
    Put("a1_cut_header.JPEG", good.substr(0, 150));
    Put("a2_garbage_after_soi.JPEG", "\xff\xd8\xff\x13 garbage garbage");
    Put("a3_cut_60.JPEG", good.substr(0, good.size() * 6 / 10));
    Put("a4_not_an_image.JPEG", "<html>404</html>");
    Put("a5_truncated_png.JPEG", png_as_jpeg + "\0\0\0\rIHDR");
    bad_ = 6;
  }
  std::string cls_;
  size_t bad_ = 0;
};

TEST_F(DamagedFolderTest, PackKeepsEveryValidImageAndListsEveryBadOne) {
  for (size_t threads : {1u, 2u}) {
    PackOptions p = PackTo(fmt::format("/tf{}", threads), Format::kTFRecord, 3);
    p.policy = format::ErrorPolicy::kSkip;
    p.common.threads = threads;
    auto r = Pack(*fs_, p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->images, 24u) << threads << " thread(s): every valid image is packed";
    EXPECT_EQ(r->found, 24u + bad_);
    ASSERT_EQ(r->skipped.size(), bad_);
    EXPECT_NE(r->skipped[0].file.find("a0_12bit"), std::string::npos) << "sorted by file";
    EXPECT_NE(r->skipped[0].reason.find("12-bit"), std::string::npos) << r->skipped[0].reason;
    EXPECT_NE(r->skipped[3].reason.find("cut short"), std::string::npos) << r->skipped[3].reason;
  }
  // Identical shards whatever the thread count.
  for (int s = 0; s < 3; ++s) {
    const std::string name = ShardName("train", s, 3);
    EXPECT_EQ(*io::ReadFileToString(*fs_, "/tf1/" + name), *io::ReadFileToString(*fs_, "/tf2/" + name));
  }
  // Under the default policy the first bad image stops the run and is named.
  auto fail = Pack(*fs_, PackTo("/tf3", Format::kTFRecord, 3));
  ASSERT_FALSE(fail.ok());
  EXPECT_NE(fail.status().message().find(cls_), std::string::npos) << fail.status().ToString();
}

TEST_F(DamagedFolderTest, VerifyAndInspectReportOnlyTheDamagedFiles) {
  for (bool decode : {false, true}) {
    for (size_t threads : {1u, 2u}) {
      VerifyOptions v;
      v.path = "/raw";
      v.decode = decode;
      v.common.threads = threads;
      v.common.progress = false;
      auto r = Verify(*fs_, v);
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->problem_count, bad_) << "decode " << decode << ", " << threads << " thread(s)";
      for (const auto& p : r->problems) EXPECT_NE(p.file.find("/a"), std::string::npos) << p.file << ": " << p.message;
    }
  }
  InspectOptions io;
  io.path = "/raw";
  io.limit = 0;
  auto rows = Inspect(*fs_, io);
  ASSERT_TRUE(rows.ok());
  size_t errors = 0;
  for (const auto& r : *rows) {
    if (!r.error.empty()) {
      ++errors;
      EXPECT_NE(r.file.find("/a"), std::string::npos) << r.file << ": " << r.error;
    } else {
      EXPECT_GT(r.width, 0) << r.file;
    }
  }
  EXPECT_EQ(errors, bad_);
}

// The decode-cheap forms: every image capped at the longer side, stored as
// JPEG at the asked quality or as raw pixels (binary PPM), or each as its
// size says (auto); the records verify and every image's size is capped.
TEST_F(DatasetTest, ImageFormsCapTheSideAndStoreRawOrReencoded) {
  for (auto [form, raw_max] :
       {std::pair{ImageForm::kReencode, uint64_t{0}}, std::pair{ImageForm::kRaw, uint64_t{0}},
        std::pair{ImageForm::kAuto, uint64_t{0}}, std::pair{ImageForm::kAuto, uint64_t{1} << 30}}) {
    const std::string out = fmt::format("/form-{}-{}", ImageFormName(form), raw_max);
    PackOptions p = PackTo(out, Format::kRecordIO, 1);
    p.form = form;
    p.max_side = 40;
    p.quality = 80;
    p.raw_max_pixels = raw_max;
    auto r = Pack(*fs_, p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const bool all_raw = form == ImageForm::kRaw || (form == ImageForm::kAuto && raw_max > 0);
    EXPECT_EQ(r->raw, all_raw ? 24u : 0u) << out;
    EXPECT_EQ(r->reencoded, all_raw ? 0u : 24u) << out;
    uint64_t records = 0;
    auto walked = WalkFile(*fs_, Format::kRecordIO, out + "/train.rec", {}, [&](const Sample& s) {
      auto c = image::CheckImage(s.image, true);
      EXPECT_TRUE(c.ok()) << c.status().ToString();
      if (c.ok()) {
        EXPECT_EQ(c->format, all_raw ? image::ImageFormat::kPnm : image::ImageFormat::kJpeg);
        EXPECT_LE(std::max(c->width, c->height), 40);
      }
      ++records;
      return Status::Ok();
    });
    ASSERT_TRUE(walked.ok());
    EXPECT_EQ(records, 24u);
    VerifyOptions v;
    v.path = out;
    v.decode = true;
    v.common.progress = false;
    EXPECT_TRUE(Verify(*fs_, v)->ok()) << out;
  }
  PackOptions bad = PackTo("/form-bad", Format::kTFRecord, 1);
  bad.max_side = 40;  // the jpeg form keeps the file as read: no side to cap
  EXPECT_EQ(Pack(*fs_, bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseImageForm("png").ok());
}

TEST_F(DatasetTest, PackConvertsPngGifAndBmpAndSaysSo) {
  // A PNG named .JPEG (as in ImageNet) and a real .png file: a 4x3 RGB PNG
  // written by PIL (tests/fixtures/small_images.py).
  static const unsigned char kPng[] = {
      137, 80, 78,  71,  13,  10,  26,  10, 0,   0,   0,   13, 73,  72,  68,  82,  0,   0,   0,   4,   0,   0,
      0,   3,  8,   2,   0,   0,   0,   59, 150, 57,  145, 0,  0,   0,   50,  73,  68,  65,  84,  120, 156, 1,
      39,  0,  216, 255, 0,   255, 228, 34, 121, 243, 189, 6,  131, 102, 168, 82,  193, 0,   187, 150, 81,  243,
      205, 24, 236, 8,   246, 164, 231, 36, 4,   23,  217, 91, 223, 24,  95,  8,   234, 179, 206, 219, 27,  146,
      96,  19, 250, 21,  62,  12,  198, 0,  0,   0,   0,   73, 69,  78,  68,  174, 66,  96,  130};
  const std::string png(reinterpret_cast<const char*>(kPng), sizeof(kPng));
  const std::string cls = format::ScanImageFolder(*fs_, "/raw")->classes[0];
  ASSERT_TRUE(io::WriteFileAtomic(*fs_, "/raw/" + cls + "/imagenet_png.JPEG", png).ok());
  ASSERT_TRUE(io::WriteFileAtomic(*fs_, "/raw/" + cls + "/real.png", png).ok());
  auto r = Pack(*fs_, PackTo("/tf", Format::kTFRecord, 2));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->images, 26u);
  ASSERT_EQ(r->converted.size(), 2u);
  EXPECT_EQ(r->converted[0].from, "PNG");
  VerifyOptions v;
  v.path = "/tf";
  v.decode = true;
  v.common.progress = false;
  EXPECT_TRUE(Verify(*fs_, v)->ok()) << "converted images are JPEGs in the records";
  // Without conversion they are images that cannot be packed.
  PackOptions no = PackTo("/tf2", Format::kTFRecord, 2);
  no.convert = false;
  no.policy = format::ErrorPolicy::kSkip;
  auto n = Pack(*fs_, no);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->images, 24u);
  EXPECT_EQ(n->skipped.size(), 2u);
}

TEST_F(DatasetTest, PackingNothingIsAnError) {
  ASSERT_TRUE(fs_->MakeDirs("/junk/c").ok());
  ASSERT_TRUE(io::WriteFileAtomic(*fs_, "/junk/c/a.jpg", "not a jpeg").ok());
  ASSERT_TRUE(io::WriteFileAtomic(*fs_, "/junk/c/b.jpg", "").ok());
  PackOptions p = PackTo("/out", Format::kTFRecord, 2);
  p.input = "/junk";
  p.policy = format::ErrorPolicy::kSkip;
  auto r = Pack(*fs_, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("none of the 2 images"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(fs_->Exists("/out/train-00000-of-00002"));
}

TEST_F(DatasetTest, ExpandMakesNamedCopies) {
  ASSERT_TRUE(Pack(*fs_, PackTo("/tf", Format::kTFRecord, 2)).ok());
  ExpandOptions e;
  e.input = "/tf";
  e.copies = 3;
  e.common.progress = false;
  auto r = Expand(*fs_, e);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files, 2u * 3u * 2u);  // shards x copies x (shard + index)
  EXPECT_EQ(*io::ReadFileToString(*fs_, "/tf/train-00001-of-00002-copy-002"),
            *io::ReadFileToString(*fs_, "/tf/train-00001-of-00002"));
  EXPECT_TRUE(fs_->Exists("/tf/idx/train-00001-of-00002-copy-002.idx"));
  VerifyReport v = MustVerify("/tf");
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.records, 24u * 4u);
  // Running it again does not copy the copies.
  auto again = Expand(*fs_, e);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files, 12u);
}

// A disk with `free` bytes left: expand refuses copies that would not fit
// before writing any (README's 150 copies of a 2 GB dataset need 334 GB).
class SmallDisk final : public io::ForwardingFileSystem {
 public:
  SmallDisk(io::FileSystem& base, uint64_t free) : io::ForwardingFileSystem(base), free_(free) {}
  Result<uint64_t> FreeBytes(const std::string&) override { return free_; }

 private:
  uint64_t free_;
};

TEST_F(DatasetTest, ExpandChecksFreeSpaceFirst) {
  ASSERT_TRUE(Pack(*fs_, PackTo("/tf_space", Format::kTFRecord, 2)).ok());
  const uint64_t shards =
      fs_->Stat("/tf_space/train-00000-of-00002")->size + fs_->Stat("/tf_space/train-00001-of-00002")->size;
  SmallDisk disk(*fs_, shards * 3);  // room for about 3 copies of the shards, not 5 with their indexes
  ExpandOptions e;
  e.input = "/tf_space";
  e.copies = 5;
  e.common.progress = false;
  auto r = Expand(disk, e);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNoSpace);
  EXPECT_NE(r.status().message().find("5 copies of '/tf_space' need"), std::string::npos) << r.status().ToString();
  const auto listed = fs_->List("/tf_space");
  ASSERT_TRUE(listed.ok());
  for (const auto& f : *listed) EXPECT_EQ(f.name.find("-copy-"), std::string::npos) << f.name;
  e.copies = 2;
  EXPECT_TRUE(Expand(disk, e).ok());
  // Where it is told: --out elsewhere leaves the input as it was.
  e.out = "/tf_space_big";
  e.copies = 1;
  auto moved = Expand(*fs_, e);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_TRUE(fs_->Exists("/tf_space_big/train-00000-of-00002-copy-000"));
}

TEST(CopyName, KeepsExtensionsLast) {
  EXPECT_EQ(CopyName("train-00000-of-01024", 0), "train-00000-of-01024-copy-000");
  EXPECT_EQ(CopyName("train.rec", 149), "train-copy-149.rec");
  EXPECT_EQ(CopyName("train.idx", 1), "train-copy-001.idx");
  EXPECT_TRUE(IsTFRecordName("train-00000-of-01024-copy-000"));
}

TEST_F(DatasetTest, ResizeScalesEveryImageAndKeepsTheRest) {
  ASSERT_TRUE(Pack(*fs_, PackTo("/tf", Format::kTFRecord, 2)).ok());
  ResizeOptions o;
  o.input = "/tf";
  o.out = "/big";
  o.scale = 2;
  o.quality = 100;
  o.common.progress = false;
  auto r = Resize(*fs_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->images, 24u);
  EXPECT_GT(r->bytes_out, r->bytes_in);
  InspectOptions a, b;
  a.path = "/tf/train-00000-of-00002";
  b.path = "/big/train-00000-of-00002";
  a.limit = b.limit = 0;
  auto ra = Inspect(*fs_, a), rb = Inspect(*fs_, b);
  ASSERT_EQ(ra->size(), rb->size());
  for (size_t i = 0; i < ra->size(); ++i) {
    EXPECT_EQ((*rb)[i].width, (*ra)[i].width * 2);
    EXPECT_EQ((*rb)[i].key, (*ra)[i].key);
    EXPECT_EQ((*rb)[i].label, (*ra)[i].label);
  }
  EXPECT_TRUE(MustVerify("/big").ok());
  // RecordIO too.
  ASSERT_TRUE(Pack(*fs_, PackTo("/rec", Format::kRecordIO, 1)).ok());
  o.input = "/rec";
  o.out = "/bigrec";
  ASSERT_TRUE(Resize(*fs_, o).ok());
  EXPECT_TRUE(MustVerify("/bigrec").ok());
}

TEST_F(DatasetTest, FindDatasetExplainsWhatItExpected) {
  ASSERT_TRUE(fs_->MakeDirs("/empty").ok());
  auto r = FindDataset(*fs_, "/empty");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no dataset found"), std::string::npos);
  auto folder = FindDataset(*fs_, "/raw");
  ASSERT_TRUE(folder.ok());
  EXPECT_EQ(folder->format, Format::kFolder);
  EXPECT_TRUE(MustVerify("/raw").ok());
}

// A stray backup.tar or train.rec beside class folders used to turn the
// folder into that format, every class folder ignored in silence. A
// directory that reads two ways is refused with both readings named, and
// read as the user says.
TEST_F(DatasetTest, AFolderThatReadsTwoWaysIsRefusedWithBoth) {
  auto mem = io::NewMemFileSystem();
  ASSERT_TRUE(io::WriteFileAtomic(*mem, "/d/cat/a.jpg", "x").ok());
  ASSERT_TRUE(io::WriteFileAtomic(*mem, "/d/dog/b.jpg", "x").ok());
  ASSERT_TRUE(io::WriteFileAtomic(*mem, "/d/backup.tar", "").ok());
  auto r = FindDataset(*mem, "/d");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  const std::string m = r.status().message();
  for (const char* want : {"reads two ways", "WebDataset (backup.tar)", "image folder (2 class folders: cat, dog)",
                           "--format wds or --format folder"}) {
    EXPECT_NE(m.find(want), std::string::npos) << want << " not in: " << m;
  }
  auto as_folder = FindDataset(*mem, "/d", Format::kFolder);
  ASSERT_TRUE(as_folder.ok()) << as_folder.status().ToString();
  EXPECT_EQ(as_folder->files.size(), 2u);
  ASSERT_TRUE(io::WriteFileAtomic(*mem, "/d/train.rec", "").ok());
  EXPECT_NE(FindDataset(*mem, "/d").status().message().find("RecordIO (train.rec), as WebDataset"), std::string::npos);
  // Shards beside their idx/ folder read one way only.
  ASSERT_TRUE(Pack(*fs_, PackTo("/two_ways_tf", Format::kTFRecord, 2)).ok());
  auto only = FindDataset(*fs_, "/two_ways_tf");
  ASSERT_TRUE(only.ok()) << only.status().ToString();
  EXPECT_EQ(only->format, Format::kTFRecord);
}

// A shard set with a number missing (a pack stopped half way, a copy cut
// short) is named by verify, though every file in it is whole.
TEST(ShardSet, GapsAreNamed) {
  EXPECT_TRUE(ShardSetGaps({"/d/train-00000-of-00002", "/d/train-00001-of-00002", "/d/other.tfrecord"}).empty());
  auto gaps = ShardSetGaps({"/d/train-00000-of-00003.tar", "/d/train-00002-of-00003.tar", "/d/val-00000-of-00001.tar",
                            "/d/x-00005-of-00002", "/d/train-00000-of-00002-copy-000"});
  ASSERT_EQ(gaps.size(), 2u);
  EXPECT_NE(gaps[0].find("x-00005-of-00002: shard 5 of a set of 2"), std::string::npos) << gaps[0];
  EXPECT_EQ(gaps[1], "/d/train-00001-of-00003.tar: missing: shard 1 of 3 is not there (2 of the set are)");
}

TEST_F(DatasetTest, OutputDirectoryIsNotClobbered) {
  SynthOptions s;
  s.out = "/raw";
  s.images = 1;
  s.common.progress = false;
  auto r = Synthesize(*fs_, s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace aq::dataset

namespace aq::dataset {
namespace {

// Regression: resizing an image folder with a skipped (non-JPEG) image left
// an empty file in its place.
TEST_F(DatasetTest, ResizeFolderSkipLeavesNoEmptyFile) {
  const std::string cls = format::ScanImageFolder(*fs_, "/raw")->classes[0];
  auto f = fs_->OpenWrite("/raw/" + cls + "/broken.jpg");
  ASSERT_TRUE((*f)->Append("not a jpeg").ok());
  ASSERT_TRUE((*f)->Close().ok());
  ResizeOptions o;
  o.input = "/raw";
  o.out = "/small";
  o.scale = 0.5;
  o.quality = 80;
  o.policy = format::ErrorPolicy::kSkip;
  o.common.progress = false;
  auto r = Resize(*fs_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->images, 24u);
  EXPECT_EQ(r->skipped.size(), 1u);
  EXPECT_FALSE(fs_->Exists("/small/" + cls + "/broken.jpg"));
  EXPECT_TRUE(MustVerify("/small").ok());
}

}  // namespace
}  // namespace aq::dataset

namespace aq::dataset {
namespace {

using format::FormatManifest;
using format::Manifest;
using format::ManifestName;
using format::ManifestPath;
using format::NewManifest;
using format::ParseManifest;
using format::ReadManifest;

// pack vouches for what it decoded or made; without the decode check its
// JPEGs are listed, unverified. The manifest reader names what is wrong.
TEST(ManifestTest, PackWritesOneEntryPerShard) {
  auto fs = io::NewMemFileSystem();
  SynthOptions s;
  s.out = "/raw";
  s.classes = 3;
  s.images = 12;
  s.common.progress = false;
  ASSERT_TRUE(Synthesize(*fs, s).ok());
  PackOptions p;
  p.input = "/raw";
  p.out = "/tf";
  p.shards = 2;
  p.common.progress = false;
  auto r = Pack(*fs, p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->manifest, "/tf/aquifer-manifest.json");
  auto m = ReadManifest(*fs, r->manifest);
  ASSERT_TRUE(m.ok() && m->has_value()) << m.status().ToString();
  EXPECT_EQ((*m)->verified_by, "dataset pack");
  ASSERT_EQ((*m)->files.size(), 2u);
  size_t records = 0;
  for (const auto& [name, f] : (*m)->files) {
    EXPECT_TRUE(fs->Exists(io::JoinPath("/tf", name))) << name;
    EXPECT_TRUE(f.unverified.empty());
    records += f.image_crc32c.size();
  }
  EXPECT_EQ(records, 12u);

  // expand's copies are listed as their originals are.
  ExpandOptions e;
  e.input = "/tf";
  e.copies = 2;
  e.common.progress = false;
  auto x = Expand(*fs, e);
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(x->manifest, "/tf/aquifer-manifest.json");
  EXPECT_EQ(x->manifest_entries, 4u);
  m = ReadManifest(*fs, r->manifest);
  ASSERT_TRUE(m.ok() && m->has_value());
  ASSERT_EQ((*m)->files.size(), 6u);
  EXPECT_EQ((*m)->files.at("train-00000-of-00002-copy-001").image_crc32c,
            (*m)->files.at("train-00000-of-00002").image_crc32c);

  p.out = "/unchecked";
  p.decode_check = false;
  r = Pack(*fs, p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  m = ReadManifest(*fs, r->manifest);
  ASSERT_TRUE(m.ok() && m->has_value());
  for (const auto& [name, f] : (*m)->files) {
    EXPECT_EQ(f.unverified.size(), f.image_crc32c.size()) << name;
    EXPECT_FALSE(f.Trusted(0));
  }
}

TEST(ManifestTest, ParseErrorsNameTheProblem) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {"", "not a JSON object"},
           {"{\"files\": []}", "no \"aquifer_manifest\" version"},
           {"{\"aquifer_manifest\": 7}", "version 7 (this aquifer reads version 1)"},
           {R"({"aquifer_manifest":1,"damage_rules":1,"files":[{"name":"a","bytes":1,"records":2,)"
            R"("image_crc32c":[1],"unverified":[]}]})",
            "'a' says 2 records and lists 1 CRCs"},
           {R"({"aquifer_manifest":1,"damage_rules":1,"files":[{"name":"a","bytes":1,"records":0,)"
            R"("image_crc32c":[],"unverified":[]},{"name":"a","bytes":1,"records":0,"image_crc32c":[],)"
            R"("unverified":[]}]})",
            "'a' listed twice"},
           {R"({"aquifer_manifest":1,"damage_rules":1,"files":[{"name":"a","bytes":"1"}]})",
            "\"bytes\" is not a count"},
           {R"({"aquifer_manifest":1,"damage_rules":1,"files":[{"name":"a","bytes":1,"records":1,)"
            R"("image_crc32c":[4294967296],"unverified":[]}]})",
            "\"image_crc32c\" holds 4294967296, not a number in 0..4294967295"},
           {R"({"aquifer_manifest":1,"damage_rules":1,"files":[{"name":"a","bytes":1,"records":1,)"
            R"("image_crc32c":[1],"unverified":[-1]}]})",
            "\"unverified\" holds -1"},
           {R"({"aquifer_manifest":1,"damage_rules":1,"files":[{"name":"a","bytes":1}]})",
            "manifest 'M': key 'image_crc32c' not found"},
       }) {
    auto m = ParseManifest(c.text, "M");
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_NE(m.status().message().find(c.error), std::string::npos) << m.status().message();
    EXPECT_EQ(m.status().message().rfind("manifest 'M': ", 0), 0u) << m.status().message();
  }
  Manifest m = NewManifest("test");
  m.files["x/y z.tfrecord"] = {10, {1, 2, 3}, {1}};
  auto back = ParseManifest(FormatManifest(m), "M");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->files.at("x/y z.tfrecord").image_crc32c, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_TRUE(back->files.at("x/y z.tfrecord").Trusted(0));
  EXPECT_FALSE(back->files.at("x/y z.tfrecord").Trusted(1));
  EXPECT_FALSE(back->files.at("x/y z.tfrecord").Trusted(3));
  EXPECT_EQ(ManifestName("/d/aquifer-manifest.json", "/d/sub/f.rec"), "sub/f.rec");
  EXPECT_EQ(ManifestPath("/d/f.rec", true), "/d/aquifer-manifest.json");
}

}  // namespace
}  // namespace aq::dataset
