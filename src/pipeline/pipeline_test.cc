#include "pipeline/pipeline.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "dataset/commands.h"
#include "format/example.h"
#include "format/manifest.h"
#include "format/tfrecord.h"
#include "image/jpeg.h"
#include "io/file_system.h"
#include "io/forwarding_file_system.h"

namespace aq::pipeline {
namespace {

// A 4x3 RGB PNG, written by PIL.
constexpr unsigned char kPng[] = {
    137, 80, 78,  71,  13,  10,  26,  10, 0,   0,   0,   13, 73,  72,  68,  82,  0,   0,   0,   4,   0,   0,
    0,   3,  8,   2,   0,   0,   0,   59, 150, 57,  145, 0,  0,   0,   50,  73,  68,  65,  84,  120, 156, 1,
    39,  0,  216, 255, 0,   255, 228, 34, 121, 243, 189, 6,  131, 102, 168, 82,  193, 0,   187, 150, 81,  243,
    205, 24, 236, 8,   246, 164, 231, 36, 4,   23,  217, 91, 223, 24,  95,  8,   234, 179, 206, 219, 27,  146,
    96,  19, 250, 21,  62,  12,  198, 0,  0,   0,   0,   73, 69,  78,  68,  174, 66,  96,  130};

std::string TinyPng() { return std::string(reinterpret_cast<const char*>(kPng), sizeof kPng); }

class PipelineTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs_ = io::NewMemFileSystem().release();
    dataset::SynthOptions s;
    s.out = "/raw";
    s.classes = 5;
    s.images = 60;
    s.seed = 4;
    s.common.progress = false;
    ASSERT_TRUE(dataset::Synthesize(*fs_, s).ok());
    dataset::PackOptions p;
    p.input = "/raw";
    p.out = "/tf";
    p.shards = 4;
    p.common.progress = false;
    ASSERT_TRUE(dataset::Pack(*fs_, p).ok());
    p.out = "/rec";
    p.format = dataset::Format::kRecordIO;
    p.shards = 2;
    ASSERT_TRUE(dataset::Pack(*fs_, p).ok());
  }
  static void TearDownTestSuite() { delete fs_; }

  static PipelineOptions Options(const std::string& data) {
    PipelineOptions o;
    o.data = data;
    o.batch_size = 12;
    o.image_size = 32;
    o.shuffle_buffer = 16;
    o.store.dtype = image::DType::kUint8;
    o.workers = 2;
    return o;
  }

  struct Run {
    std::string bytes;
    std::vector<int32_t> labels;
    std::vector<uint32_t> samples;
    PipelineStats stats;
  };
  static Run RunAll(const PipelineOptions& o, io::FileSystem* fs = fs_) {
    Run r;
    auto p = Pipeline::Create(*fs, o);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return r;
    while (true) {
      auto b = (*p)->Next();
      EXPECT_TRUE(b.ok()) << b.status().ToString();
      if (!b.ok() || *b == nullptr) break;
      r.bytes.append(static_cast<const char*>((*b)->data), (*b)->size * (*b)->sample_bytes);
      r.labels.insert(r.labels.end(), (*b)->labels, (*b)->labels + (*b)->size);
      r.samples.insert(r.samples.end(), (*b)->samples, (*b)->samples + (*b)->size);
    }
    r.stats = (*p)->Stats();
    return r;
  }

  static io::FileSystem* fs_;
};
io::FileSystem* PipelineTest::fs_ = nullptr;

TEST_F(PipelineTest, SameSeedSameBatchesWhateverTheThreadCounts) {
  for (const char* data : {"/tf", "/rec", "/raw"}) {
    PipelineOptions a = Options(data);
    a.workers = 1;
    a.readers = 1;
    PipelineOptions b = Options(data);
    b.workers = 3;
    b.readers = 2;
    b.prefetch_batches = 4;
    Run ra = RunAll(a), rb = RunAll(b);
    ASSERT_EQ(ra.samples.size(), 60u) << data;
    EXPECT_EQ(ra.samples, rb.samples) << data;
    EXPECT_EQ(ra.labels, rb.labels) << data;
    EXPECT_TRUE(ra.bytes == rb.bytes) << data << ": pixels differ between thread counts";
  }
}

TEST_F(PipelineTest, EveryEpochSeesEverySampleOnceWithLabels) {
  PipelineOptions o = Options("/tf");
  o.epochs = 2;
  Run r = RunAll(o);
  ASSERT_EQ(r.samples.size(), 120u);
  for (int e = 0; e < 2; ++e) {
    std::set<uint32_t> seen(r.samples.begin() + e * 60, r.samples.begin() + (e + 1) * 60);
    EXPECT_EQ(seen.size(), 60u);
  }
  EXPECT_NE(std::vector<uint32_t>(r.samples.begin(), r.samples.begin() + 60),
            std::vector<uint32_t>(r.samples.begin() + 60, r.samples.end()));
  for (int32_t l : r.labels) {
    EXPECT_GE(l, 0);  // TFRecord's 1-based labels come out 0-based
    EXPECT_LT(l, 5);
  }
  EXPECT_EQ(r.stats.bad_samples, 0u);
  EXPECT_EQ(r.stats.images, 120u);
}

// Slots are sized at the 99th percentile of record sizes; a record past it
// is read whole into memory of its own, and a slot it used serves small
// records again afterwards.
TEST_F(PipelineTest, RecordsLargerThanTheSlotsAreReadWhole) {
  dataset::SynthOptions s;
  s.out = "/mixed";
  s.classes = 2;
  s.images = 120;
  s.seed = 9;
  s.common.progress = false;
  ASSERT_TRUE(dataset::Synthesize(*fs_, s).ok());
  s.out = "/large";
  s.classes = 1;
  s.images = 1;
  s.profile = dataset::SizeProfile::kLarge;
  ASSERT_TRUE(dataset::Synthesize(*fs_, s).ok());
  auto first_dir = [&](const std::string& dir) {
    auto l = fs_->List(dir);
    EXPECT_TRUE(l.ok());
    for (const auto& f : l.ok() ? *l : std::vector<io::FileInfo>{}) {
      if (f.is_dir) return dir + "/" + f.name;
    }
    return std::string();
  };
  const std::string mixed_class = first_dir("/mixed"), large_class = first_dir("/large");
  ASSERT_FALSE(mixed_class.empty() || large_class.empty());
  auto large_files = fs_->List(large_class);
  ASSERT_TRUE(large_files.ok() && large_files->size() == 1);
  const std::string large_path = large_class + "/" + large_files->front().name;
  auto large = io::ReadFileToString(*fs_, large_path);
  ASSERT_TRUE(large.ok());
  const std::string in_mixed = mixed_class + "/zz_large.jpg";
  ASSERT_TRUE(io::WriteFileAtomic(*fs_, in_mixed, *large).ok());

  // Evaluation transform: each sample's pixels depend on the sample alone.
  auto outputs_of_large = [&](const std::string& data, uint32_t epochs, const std::string& file) {
    PipelineOptions o = Options(data);
    o.training = false;
    o.epochs = epochs;
    o.remainder = Remainder::kPad;
    std::vector<std::string> got;
    auto p = Pipeline::Create(*fs_, o);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return got;
    while (true) {
      auto b = (*p)->Next();
      EXPECT_TRUE(b.ok()) << b.status().ToString();
      if (!b.ok() || *b == nullptr) break;
      for (uint32_t i = 0; i < (*b)->size; ++i) {
        if ((*p)->files()[(*p)->where((*b)->samples[i]).file] != file) continue;
        got.emplace_back(static_cast<const char*>((*b)->data) + i * (*b)->sample_bytes, (*b)->sample_bytes);
      }
    }
    EXPECT_EQ((*p)->Stats().bad_samples, 0u) << data;
    return got;
  };
  const auto alone = outputs_of_large("/large", 1, large_path);
  const auto mixed = outputs_of_large("/mixed", 3, in_mixed);
  ASSERT_FALSE(alone.empty());  // padded to a whole batch
  ASSERT_GE(mixed.size(), 3u);
  for (const auto& m : mixed)
    EXPECT_TRUE(m == alone[0]) << "the large record's pixels differ when it is past the slots";
}

TEST_F(PipelineTest, FormatsAgreeOnLabels) {
  // The same image has the same label whichever format it was packed into.
  PipelineOptions o = Options("/raw");
  o.shuffle_buffer = 1;
  Run folder = RunAll(o);
  std::map<int32_t, int> count_folder, count_rec;
  for (int32_t l : folder.labels) count_folder[l]++;
  o.data = "/rec";
  for (int32_t l : RunAll(o).labels) count_rec[l]++;
  EXPECT_EQ(count_folder, count_rec);
}

TEST_F(PipelineTest, OutputLayoutsAndTypes) {
  PipelineOptions o = Options("/tf");
  o.store.dtype = image::DType::kFloat32;
  auto p = Pipeline::Create(*fs_, o);
  ASSERT_TRUE(p.ok());
  auto b = (*p)->Next();
  ASSERT_TRUE(b.ok() && *b != nullptr);
  EXPECT_EQ((*b)->sample_bytes, 32u * 32u * 3u * 4u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*b)->data) % 64, 0u);
  const float* f = static_cast<const float*>((*b)->data);
  double mean = 0;
  for (size_t i = 0; i < 32 * 32 * 3; ++i) mean += f[i];
  mean /= 32 * 32 * 3;
  EXPECT_GT(mean, -3);  // normalised values, not raw pixels
  EXPECT_LT(mean, 3);
}

TEST_F(PipelineTest, BadSampleIsReportedAndReplacedWithinItsBatch) {
  // A shard whose second record holds text instead of a JPEG.
  auto fs = io::NewMemFileSystem();
  std::string shard;
  for (int i = 0; i < 12; ++i) {
    std::string jpeg = *io::ReadFileToString(*fs_, "/raw/" + std::string("n01000000") + "/n01000000_0.JPEG");
    format::ImageRecord r;
    r.encoded = i == 1 ? "this is not a JPEG" : jpeg;
    r.label = 1 + i % 3;
    format::AppendTFRecord(format::SerializeExample(format::ToExample(r)), &shard);
  }
  ASSERT_TRUE(io::WriteFileAtomic(*fs, "/bad/train-00000-of-00001", shard).ok());
  PipelineOptions o = Options("/bad");
  o.batch_size = 6;
  auto p = Pipeline::Create(*fs, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  uint32_t replaced = 0, batches = 0;
  while (true) {
    auto b = (*p)->Next();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    if (*b == nullptr) break;
    replaced += (*b)->replaced;
    ++batches;
  }
  EXPECT_EQ(batches, 2u);
  EXPECT_EQ(replaced, 1u);
  PipelineStats st = (*p)->Stats();
  ASSERT_EQ(st.bad_samples, 1u);
  EXPECT_EQ(st.problems[0].file, "/bad/train-00000-of-00001");
  EXPECT_EQ(st.problems[0].record, 1u);
  EXPECT_NE(st.problems[0].message.find("not a JPEG"), std::string::npos) << st.problems[0].message;
  EXPECT_NE(st.problems[0].message.find("record 1"), std::string::npos) << st.problems[0].message;

  o.policy = format::ErrorPolicy::kFail;
  auto f = Pipeline::Create(*fs, o);
  ASSERT_TRUE(f.ok());
  Status s;
  while (true) {
    auto b = (*f)->Next();
    if (!b.ok()) {
      s = b.status();
      break;
    }
    if (*b == nullptr) break;
  }
  EXPECT_FALSE(s.ok()) << "fail policy must surface the bad sample";
}

// A batch made only of bad samples does not end the run under skip: it is
// filled with a good sample from another batch (before the first good one
// is seen, from the batches after it), and every bad sample is named.
TEST_F(PipelineTest, ABatchOfOnlyBadSamplesIsFilledNotFatal) {
  const std::string jpeg = *io::ReadFileToString(*fs_, "/raw/n01000000/n01000000_0.JPEG");
  for (const std::vector<int>& bad_batches : std::vector<std::vector<int>>{{0}, {1}, {0, 1}}) {
    auto fs = io::NewMemFileSystem();
    std::string shard;
    for (int i = 0; i < 18; ++i) {
      const bool bad = std::find(bad_batches.begin(), bad_batches.end(), i / 6) != bad_batches.end();
      format::ImageRecord r;
      r.encoded = bad ? "this is not a JPEG" : jpeg;
      r.label = bad ? 1 : 2;
      format::AppendTFRecord(format::SerializeExample(format::ToExample(r)), &shard);
    }
    ASSERT_TRUE(io::WriteFileAtomic(*fs, "/bad/train-00000-of-00001", shard).ok());
    PipelineOptions o = Options("/bad");
    o.batch_size = 6;
    o.shuffle_buffer = 1;  // in file order: the bad ones make whole batches
    o.shuffle_files = false;
    auto p = Pipeline::Create(*fs, o);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    uint32_t replaced = 0, batches = 0;
    while (true) {
      auto b = (*p)->Next();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      if (*b == nullptr) break;
      // Stored 1-based: class 1 is every good sample.
      for (uint32_t i = 0; i < (*b)->size; ++i) EXPECT_EQ((*b)->labels[i], 1) << "a bad sample's label went out";
      replaced += (*b)->replaced;
      ++batches;
    }
    EXPECT_EQ(batches, 3u);
    EXPECT_EQ(replaced, 6u * bad_batches.size());
    EXPECT_EQ((*p)->Stats().bad_samples, 6u * bad_batches.size());
  }
}

// A TFRecord written with 0-based labels, read as TensorFlow's 1-based
// ImageNet records: class 0 would become -1 and every other class shift by
// one, silently. The first label 0 stops the run, whatever the error
// policy, and says how to read it; read as it is, every label is kept.
TEST_F(PipelineTest, ZeroBasedTFRecordLabelsAreNotShiftedSilently) {
  const std::string jpeg = *io::ReadFileToString(*fs_, "/raw/n01000000/n01000000_0.JPEG");
  auto fs = io::NewMemFileSystem();
  std::string shard;
  for (int i = 0; i < 12; ++i) {
    format::ImageRecord r;
    r.encoded = jpeg;
    r.label = i % 3;  // 0, 1, 2
    format::AppendTFRecord(format::SerializeExample(format::ToExample(r)), &shard);
  }
  ASSERT_TRUE(io::WriteFileAtomic(*fs, "/zero/train-00000-of-00001", shard).ok());
  PipelineOptions o = Options("/zero");
  o.batch_size = 4;
  for (auto policy : {format::ErrorPolicy::kSkip, format::ErrorPolicy::kFail}) {
    o.policy = policy;
    auto p = Pipeline::Create(*fs, o);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    Status failed;
    while (true) {
      auto b = (*p)->Next();
      if (!b.ok()) {
        failed = b.status();
        break;
      }
      ASSERT_NE(*b, nullptr) << "the run ended without a word about label 0";
    }
    EXPECT_NE(failed.message().find("labels_zero_based=False"), std::string::npos) << failed.ToString();
  }
  o.labels_zero_based = false;
  Run r = RunAll(o, fs.get());
  ASSERT_EQ(r.labels.size(), 12u);
  EXPECT_EQ(std::set<int32_t>(r.labels.begin(), r.labels.end()), (std::set<int32_t>{0, 1, 2}));
}

// Damage does not depend on the random crop: a file damaged below every
// crop, and one cut short, are reported in every epoch; a PNG among the
// JPEGs is decoded.
TEST_F(PipelineTest, DamageAnywhereInAFileIsReportedEveryEpoch) {
  auto fs = io::NewMemFileSystem();
  const std::string jpeg = *io::ReadFileToString(*fs_, "/raw/n01000000/n01000000_0.JPEG");
  std::string damaged_tail = jpeg;  // scrambled just before the end marker
  for (size_t i = damaged_tail.size() - 200; i < damaged_tail.size() - 100; ++i) {
    damaged_tail[i] = static_cast<char>((i * 37 + 11) % 255);
  }
  ASSERT_FALSE(image::CheckJpeg(damaged_tail).ok()) << "libjpeg must see this damage";
  const std::string cut = jpeg.substr(0, jpeg.size() * 6 / 10);
  std::string shard;
  for (int i = 0; i < 12; ++i) {
    format::ImageRecord r;
    r.encoded = i == 3 ? damaged_tail : i == 5 ? cut : i == 7 ? TinyPng() : jpeg;
    r.label = 1 + i % 3;
    format::AppendTFRecord(format::SerializeExample(format::ToExample(r)), &shard);
  }
  ASSERT_TRUE(io::WriteFileAtomic(*fs, "/d/train-00000-of-00001", shard).ok());
  PipelineOptions o = Options("/d");
  o.batch_size = 6;
  o.epochs = 3;
  auto p = Pipeline::Create(*fs, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  while (true) {
    auto b = (*p)->Next();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    if (*b == nullptr) break;
  }
  PipelineStats st = (*p)->Stats();
  EXPECT_EQ(st.bad_samples, 6u) << "two damaged samples in each of three epochs";
  std::set<uint64_t> records;
  for (const auto& pr : st.problems) records.insert(pr.record);
  EXPECT_EQ(records, (std::set<uint64_t>{3, 5}));
}

// pack's manifest covers every record format: the CRC it records is of the
// bytes the pipeline decodes (TFRecord's image/encoded, the RecordIO
// payload after its header, the WebDataset image member).
TEST_F(PipelineTest, PackVouchesForEveryRecordInEveryFormat) {
  dataset::PackOptions p;
  p.input = "/raw";
  p.out = "/wds-manifest";
  p.format = dataset::Format::kWebDataset;
  p.shards = 2;
  p.common.progress = false;
  ASSERT_TRUE(dataset::Pack(*fs_, p).ok());
  for (const char* data : {"/tf", "/rec", "/wds-manifest"}) {
    PipelineOptions o = Options(data);
    o.remainder = Remainder::kPad;
    const Run r = RunAll(o);
    EXPECT_EQ(r.stats.manifest_trusted, 60u) << data << ": " << r.stats.manifest;
    EXPECT_EQ(r.stats.manifest_changed, 0u) << data;
    EXPECT_EQ(r.stats.bad_samples, 0u) << data;
  }
}

// The verification manifest vouches for the bytes it saw and nothing else:
// a verified shard's first epoch skips the end-of-file check and delivers
// the same batches; records changed since (damaged below any crop, cut
// short) are checked and reported; a manifest that does not fit the data
// (another record count, other damage rules, not JSON) is not used.
TEST_F(PipelineTest, TheManifestVouchesOnlyForTheBytesItSaw) {
  auto fs = io::NewMemFileSystem();
  const std::string jpeg = *io::ReadFileToString(*fs_, "/raw/n01000000/n01000000_0.JPEG");
  std::string damaged_tail = jpeg;
  for (size_t i = damaged_tail.size() - 200; i < damaged_tail.size() - 100; ++i) {
    damaged_tail[i] = static_cast<char>((i * 37 + 11) % 255);
  }
  const std::string cut = jpeg.substr(0, jpeg.size() * 6 / 10);
  auto write_shard = [&](int records, bool damaged) {
    std::string shard;
    for (int i = 0; i < records; ++i) {
      format::ImageRecord r;
      r.encoded = damaged && i == 3 ? damaged_tail : damaged && i == 5 ? cut : jpeg;
      r.label = 1 + i % 3;
      format::AppendTFRecord(format::SerializeExample(format::ToExample(r)), &shard);
    }
    ASSERT_TRUE(io::WriteFileAtomic(*fs, "/d/train-00000-of-00001", shard).ok());
  };
  auto verify = [&] {
    dataset::VerifyOptions v;
    v.path = "/d";
    v.decode = true;
    v.common.progress = false;
    auto r = dataset::Verify(*fs, v);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : dataset::VerifyReport{};
  };
  auto run = [&](bool use_manifest) {
    PipelineOptions o = Options("/d");
    o.batch_size = 6;
    o.use_manifest = use_manifest;
    o.policy = format::ErrorPolicy::kSkip;
    return RunAll(o, fs.get());
  };

  write_shard(12, false);
  const dataset::VerifyReport clean = verify();
  EXPECT_EQ(clean.manifest, "/d/aquifer-manifest.json");
  EXPECT_EQ(clean.manifest_records, 12u);
  const Run trusted = run(true), checked = run(false);
  EXPECT_EQ(trusted.stats.manifest_trusted, 12u);
  EXPECT_EQ(trusted.stats.manifest, "/d/aquifer-manifest.json: 12 of 12 samples verified");
  EXPECT_EQ(checked.stats.manifest_trusted, 0u);
  EXPECT_EQ(trusted.bytes, checked.bytes) << "skipping the check must not change a pixel";
  {
    // Pipelines sharing the flags (a loader's epochs: the next starts before
    // the last ends) count each vouched-for sample once, whichever reaches
    // it first; each reports the shared count. The later one runs to its
    // end first here, then the earlier one finds every sample counted.
    PipelineOptions o = Options("/d");
    o.batch_size = 6;
    o.use_manifest = true;
    o.policy = format::ErrorPolicy::kSkip;
    auto earlier = Pipeline::Create(*fs, o);
    ASSERT_TRUE(earlier.ok()) << earlier.status().ToString();
    o.damage_checked = (*earlier)->damage_checked();
    const Run later = RunAll(o, fs.get());
    EXPECT_EQ(later.stats.manifest_trusted, 12u);
    for (auto b = (*earlier)->Next(); b.ok() && *b != nullptr; b = (*earlier)->Next()) {
    }
    EXPECT_EQ((*earlier)->Stats().manifest_trusted, 12u);
  }

  // Rewritten behind the manifest's back, same record count, valid CRCs.
  write_shard(12, true);
  Run changed = run(true);
  EXPECT_EQ(changed.stats.bad_samples, 2u);
  EXPECT_EQ(changed.stats.manifest_changed, 2u);
  EXPECT_EQ(changed.stats.manifest_trusted, 10u);

  // Verified again: the damaged records are listed as not verified.
  const dataset::VerifyReport damaged = verify();
  EXPECT_EQ(damaged.problem_count, 2u);
  EXPECT_EQ(damaged.manifest_records, 10u);
  auto m = format::ReadManifest(*fs, "/d/aquifer-manifest.json");
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_EQ((*m)->files.at("train-00000-of-00001").unverified, (std::vector<uint32_t>{3, 5}));
  changed = run(true);
  EXPECT_EQ(changed.stats.bad_samples, 2u);
  EXPECT_EQ(changed.stats.manifest_changed, 0u);
  EXPECT_EQ(changed.stats.manifest_trusted, 10u);

  // Another record count: the file's entry does not fit.
  write_shard(13, false);
  changed = run(true);
  EXPECT_EQ(changed.stats.manifest_trusted, 0u);
  EXPECT_EQ(changed.stats.manifest, "/d/aquifer-manifest.json: 0 of 13 samples verified");

  // Other damage rules, or not a manifest at all: not used, nothing else changes.
  write_shard(12, true);
  std::string text = *io::ReadFileToString(*fs, "/d/aquifer-manifest.json");
  text.replace(text.find("\"damage_rules\":2"), 16, "\"damage_rules\":9");
  ASSERT_TRUE(io::WriteFileAtomic(*fs, "/d/aquifer-manifest.json", text).ok());
  changed = run(true);
  EXPECT_EQ(changed.stats.manifest_trusted, 0u);
  EXPECT_EQ(changed.stats.bad_samples, 2u);
  EXPECT_NE(changed.stats.manifest.find("damage rules 9"), std::string::npos) << changed.stats.manifest;
  for (const char* junk : {"{", "[]", "{\"aquifer_manifest\": 2}", "{\"aquifer_manifest\": 1, \"files\": 3}"}) {
    ASSERT_TRUE(io::WriteFileAtomic(*fs, "/d/aquifer-manifest.json", junk).ok());
    changed = run(true);
    EXPECT_EQ(changed.stats.manifest_trusted, 0u) << junk;
    EXPECT_EQ(changed.stats.bad_samples, 2u) << junk;
    EXPECT_EQ(changed.stats.manifest.rfind("not used: manifest '/d/aquifer-manifest.json': ", 0), 0u)
        << changed.stats.manifest;
  }
}

// A consumer may keep batches (a Python tensor, a prefetch queue): the
// pipeline must never write into one it handed out, however many are held.
TEST_F(PipelineTest, HeldBatchesAreNeverOverwritten) {
  PipelineOptions o = Options("/tf");
  o.batch_size = 4;
  o.prefetch_batches = 2;
  o.epochs = 2;
  const Run reference = RunAll(o);
  auto p = Pipeline::Create(*fs_, o);
  ASSERT_TRUE(p.ok());
  std::vector<std::unique_ptr<BatchLease>> held;
  std::string bytes;
  while (true) {
    auto l = (*p)->NextLease();
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    if (*l == nullptr) break;
    held.push_back(std::move(*l));
    if (held.size() == 10) {  // ten at once, more than the pipeline's buffers
      for (const auto& h : held) {
        bytes.append(static_cast<const char*>(h->batch().data), h->batch().size * h->batch().sample_bytes);
      }
      std::vector<size_t> order = {3, 0, 9, 1, 8, 2, 7, 4, 6, 5};  // released out of order
      for (size_t k : order) held[k].reset();
      held.clear();
    }
  }
  for (const auto& h : held)
    bytes.append(static_cast<const char*>(h->batch().data), h->batch().size * h->batch().sample_bytes);
  EXPECT_EQ(bytes, reference.bytes);
}

TEST_F(PipelineTest, ALeaseOutlivesItsPipeline) {
  PipelineOptions o = Options("/rec");
  auto p = Pipeline::Create(*fs_, o);
  ASSERT_TRUE(p.ok());
  auto lease = (*p)->NextLease();
  ASSERT_TRUE(lease.ok() && *lease != nullptr);
  const std::string copy(static_cast<const char*>((*lease)->batch().data), (*lease)->batch().sample_bytes);
  p->reset();  // threads stopped and joined mid-epoch
  EXPECT_EQ(std::string(static_cast<const char*>((*lease)->batch().data), (*lease)->batch().sample_bytes), copy);
}

// Checkpoint and resume: a run that starts at step k of epoch e delivers
// exactly what an uninterrupted run delivers from there, and does not read
// what it skips.
TEST_F(PipelineTest, ResumingMidEpochReproducesTheRemainingBatches) {
  for (const char* data : {"/tf", "/raw"}) {
    PipelineOptions o = Options(data);
    o.batch_size = 5;
    o.first_epoch = 3;
    const Run full = RunAll(o);
    auto whole = Pipeline::Create(*fs_, o);
    ASSERT_TRUE(whole.ok());
    const uint64_t steps = (*whole)->steps_per_epoch();
    o.catalog = (*whole)->catalog();  // and the catalog is not read again
    for (uint64_t k : {uint64_t{1}, steps / 2, steps - 1}) {
      o.start_step = k;
      auto p = Pipeline::Create(*fs_, o);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      std::string bytes;
      std::vector<uint32_t> samples;
      uint64_t first_step = UINT64_MAX;
      while (true) {
        auto b = (*p)->Next();
        ASSERT_TRUE(b.ok());
        if (*b == nullptr) break;
        if (first_step == UINT64_MAX) first_step = (*b)->step;
        EXPECT_EQ((*b)->epoch, 3u);
        bytes.append(static_cast<const char*>((*b)->data), (*b)->size * (*b)->sample_bytes);
        samples.insert(samples.end(), (*b)->samples, (*b)->samples + (*b)->size);
      }
      EXPECT_EQ(first_step, k);
      const size_t skip = k * o.batch_size;
      EXPECT_EQ(samples, std::vector<uint32_t>(full.samples.begin() + skip, full.samples.end())) << data << " " << k;
      EXPECT_EQ(bytes, full.bytes.substr(skip * (*p)->sample_bytes())) << data << " step " << k;
      EXPECT_LT((*p)->Stats().bytes_read, full.stats.bytes_read) << "skipped samples are not read";
    }
    o.start_step = steps;
    EXPECT_FALSE(Pipeline::Create(*fs_, o).ok()) << "past the end of the epoch";
  }
}

TEST_F(PipelineTest, EpochNumbersPickTheOrder) {
  PipelineOptions a = Options("/tf");
  a.epochs = 2;
  const Run two = RunAll(a);  // epochs 0 and 1
  PipelineOptions b = Options("/tf");
  b.first_epoch = 1;
  const Run second = RunAll(b);  // epoch 1 alone
  EXPECT_EQ(second.samples, std::vector<uint32_t>(two.samples.begin() + two.samples.size() / 2, two.samples.end()));
}

TEST_F(PipelineTest, NextLeaseCanWaitWithATimeout) {
  auto p = Pipeline::Create(*fs_, Options("/tf"));
  ASSERT_TRUE(p.ok());
  size_t batches = 0, timeouts = 0;
  while (true) {
    auto l = (*p)->NextLease(0.0);
    if (!l.ok()) {
      ASSERT_EQ(l.status().code(), StatusCode::kTimedOut) << l.status().ToString();
      ++timeouts;
      continue;
    }
    if (*l == nullptr) break;
    ++batches;
  }
  EXPECT_EQ(batches, (*p)->steps_per_epoch());
}

TEST_F(PipelineTest, MemoryLimitIsEnforcedUpFront) {
  PipelineOptions o = Options("/tf");
  o.memory_limit = 1 << 20;
  auto p = Pipeline::Create(*fs_, o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("memory limit"), std::string::npos);
}

// What the memory bound counts is what the pipeline holds: Next() gives
// the previous batch back, so the batch buffers are the production window
// and the batch handed out; every record goes back to the shared storage
// once decoded; a second pipeline over the same buffers (a Loader's next
// epochs) takes its records from that storage instead of allocating as
// much again.
TEST_F(PipelineTest, TheMemoryBoundCountsWhatThePipelineHolds) {
  PipelineOptions o = Options("/tf");
  o.epochs = 6;
  o.prefetch_batches = 2;
  auto first = Pipeline::Create(*fs_, o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  uint64_t batches = 0;
  for (auto b = (*first)->Next(); b.ok() && *b != nullptr; b = (*first)->Next()) ++batches;
  ASSERT_EQ(batches, 6 * (*first)->steps_per_epoch());
  const PipelineStats a = (*first)->Stats();
  EXPECT_LE(a.batch_buffers, o.prefetch_batches + 1);
  EXPECT_EQ(a.payload_bytes, 0u) << "records not given back";
  EXPECT_GT(a.payload_peak_bytes, 0u);
  EXPECT_LE(a.payload_peak_bytes, a.payload_pool_bytes);
  EXPECT_LE(a.batch_buffer_bytes + a.payload_pool_bytes, a.memory_bound_bytes);

  o.buffers = (*first)->buffers();
  o.first_epoch = 6;
  auto second = Pipeline::Create(*fs_, o);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  for (auto b = (*second)->Next(); b.ok() && *b != nullptr; b = (*second)->Next()) {
  }
  const PipelineStats b = (*second)->Stats();
  EXPECT_EQ(b.batch_buffers, a.batch_buffers) << "the batch buffers are shared";
  EXPECT_EQ(b.payload_bytes, 0u);
  EXPECT_LT(b.payload_pool_bytes, a.payload_pool_bytes * 3 / 2)
      << "the second pipeline allocated its records again: " << a.payload_pool_bytes << " then "
      << b.payload_pool_bytes;
}

// One pass of a pipeline, batch by batch: each sample's crop, flip, label,
// pixels and (encoded_images) its delivered JPEG, or "" where it has none.
struct Delivered {
  std::vector<std::array<float, 4>> crops;
  std::vector<uint8_t> flips;
  std::vector<int32_t> labels;
  std::vector<uint32_t> samples;
  std::vector<std::string> pixels, encoded;
  PipelineStats stats;
};

Delivered Deliver(io::FileSystem& fs, const PipelineOptions& o) {
  Delivered d;
  auto p = Pipeline::Create(fs, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return d;
  const size_t nf = o.fields.size() + (o.encoded_images ? 1 : 0);
  for (auto b = (*p)->Next(); b.ok() && *b != nullptr; b = (*p)->Next()) {
    const Batch& x = **b;
    for (uint32_t i = 0; i < x.size; ++i) {
      d.crops.push_back({x.crops[4 * i], x.crops[4 * i + 1], x.crops[4 * i + 2], x.crops[4 * i + 3]});
      d.flips.push_back(x.flips[i]);
      d.labels.push_back(x.labels[i]);
      d.samples.push_back(x.samples[i]);
      d.pixels.emplace_back(static_cast<const char*>(x.data) + i * x.sample_bytes, x.sample_bytes);
      const size_t k = nf - 1;
      d.encoded.push_back(o.encoded_images && x.present[i * nf + k] ? x.fields[i * nf + k] : std::string());
    }
  }
  d.stats = (*p)->Stats();
  return d;
}

// encoded_images (a GPU decodes): the JPEGs a GPU decoder takes come out as
// they are stored, with the crop and flip the CPU path chooses for them
// (the same random draws); progressive JPEGs and other formats are decoded
// here, to the CPU path's pixels; damage is still found, every epoch.
TEST_F(PipelineTest, EncodedImagesKeepTheCropsFlipsAndDamageChecks) {
  auto fs = io::NewMemFileSystem();
  const std::string jpeg = *io::ReadFileToString(*fs_, "/raw/n01000000/n01000000_0.JPEG");
  const image::Image photo = *image::DecodeJpeg(jpeg);
  image::EncodeOptions prog;
  prog.progressive = true;
  const std::string progressive = *image::EncodeJpeg(photo, prog);
  const std::string png = TinyPng();
  std::string damaged = jpeg;  // scrambled just before the end marker
  for (size_t i = damaged.size() - 200; i < damaged.size() - 100; ++i) {
    damaged[i] = static_cast<char>((i * 37 + 11) % 255);
  }
  const std::string cut = jpeg.substr(0, jpeg.size() * 6 / 10);
  std::vector<std::string> records;
  for (int i = 0; i < 24; ++i) {
    records.push_back(i == 3 ? damaged : i == 5 ? cut : i == 7 ? progressive : i == 9 ? png : jpeg);
  }
  std::string shard;
  for (size_t i = 0; i < records.size(); ++i) {
    format::ImageRecord r;
    r.encoded = records[i];
    r.label = static_cast<int64_t>(1 + i % 3);
    format::AppendTFRecord(format::SerializeExample(format::ToExample(r)), &shard);
  }
  ASSERT_TRUE(io::WriteFileAtomic(*fs, "/d/train-00000-of-00001", shard).ok());
  PipelineOptions o = Options("/d");
  o.batch_size = 6;
  o.epochs = 2;
  o.fields = {"image/class/label"};  // a field of the caller's own beside the encoded one
  const Delivered cpu = Deliver(*fs, o);
  o.encoded_images = true;
  const Delivered gpu = Deliver(*fs, o);
  ASSERT_EQ(cpu.samples.size(), 48u) << "24 samples, two epochs";
  ASSERT_EQ(gpu.samples, cpu.samples);
  EXPECT_EQ(gpu.labels, cpu.labels);
  EXPECT_EQ(gpu.crops, cpu.crops) << "the crops are the CPU path's";
  EXPECT_EQ(gpu.flips, cpu.flips);
  EXPECT_EQ(gpu.stats.bad_samples, cpu.stats.bad_samples);
  EXPECT_EQ(gpu.stats.bad_samples, 4u) << "two damaged records in each of two epochs";
  size_t passed = 0, here = 0;
  for (size_t i = 0; i < gpu.samples.size(); ++i) {
    const std::string& stored = records[gpu.samples[i]];
    if (stored == progressive || stored == png) {
      EXPECT_EQ(gpu.encoded[i], "") << "sample " << gpu.samples[i] << " is decoded here";
      EXPECT_EQ(gpu.pixels[i], cpu.pixels[i]) << "sample " << gpu.samples[i];
      ++here;
    } else {
      EXPECT_EQ(gpu.encoded[i], stored) << "sample " << gpu.samples[i];
      ++passed;
    }
  }
  EXPECT_GT(here, 0u);
  EXPECT_GT(passed, here);

  o.jitter.brightness = 0.2f;
  auto refused = Pipeline::Create(*fs, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("jitter"), std::string::npos) << refused.status().ToString();
  o.jitter = {};
  o.entropy_only = true;
  EXPECT_FALSE(Pipeline::Create(*fs, o).ok());
}

TEST_F(PipelineTest, RanksSplitTheDataset) {
  std::multiset<uint32_t> all;
  for (uint32_t r = 0; r < 2; ++r) {
    PipelineOptions o = Options("/tf");
    o.batch_size = 10;
    o.rank = r;
    o.world = 2;
    Run run = RunAll(o);
    EXPECT_EQ(run.samples.size(), 30u);
    all.insert(run.samples.begin(), run.samples.end());
  }
  EXPECT_EQ(std::set<uint32_t>(all.begin(), all.end()).size(), 60u);
}

TEST_F(PipelineTest, MissingFileIsAClearError) {
  PipelineOptions o = Options("/nope");
  auto p = Pipeline::Create(*fs_, o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("/nope"), std::string::npos);
}

}  // namespace
}  // namespace aq::pipeline

namespace aq::pipeline {
namespace {

// Regression: a shard that shrank after its index was written (an I/O-level
// short read) crashed the reader instead of being reported per sample.
TEST_F(PipelineTest, ShardTruncatedAfterIndexingIsReportedNotFatal) {
  auto fs = io::NewMemFileSystem();
  std::string shard = *io::ReadFileToString(*fs_, "/tf/train-00000-of-00004");
  std::string idx = *io::ReadFileToString(*fs_, "/tf/idx/train-00000-of-00004.idx");
  ASSERT_TRUE(io::WriteFileAtomic(*fs, "/t/train-00000-of-00001", shard.substr(0, shard.size() / 2)).ok());
  ASSERT_TRUE(fs->MakeDirs("/t/idx").ok());
  ASSERT_TRUE(io::WriteFileAtomic(*fs, "/t/idx/train-00000-of-00001.idx", idx).ok());
  PipelineOptions o = Options("/t");
  o.batch_size = 3;
  o.shuffle_buffer = 1;
  auto p = Pipeline::Create(*fs, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  uint32_t batches = 0;
  while (true) {
    auto b = (*p)->Next();
    if (!b.ok()) {
      // Only possible if a whole batch lies beyond the cut: that is reported, not a crash.
      EXPECT_NE(b.status().message().find("every sample"), std::string::npos) << b.status().ToString();
      break;
    }
    if (*b == nullptr) break;
    ++batches;
  }
  PipelineStats st = (*p)->Stats();
  EXPECT_GT(st.bad_samples, 0u);
  EXPECT_NE(st.problems[0].message.find("train-00000-of-00001"), std::string::npos) << st.problems[0].message;
}

// A record file cut short with no index to go by: under skip every record
// before the cut is delivered and the loss is named (the intact shards
// beside it too); under fail the pipeline refuses to start, naming it.
TEST_F(PipelineTest, ACutFileWithoutAnIndexKeepsEveryRecordBeforeTheCut) {
  for (const char* dir : {"/tf", "/rec"}) {
    SCOPED_TRACE(dir);
    auto fs = io::NewMemFileSystem();
    auto list = fs_->List(dir);
    ASSERT_TRUE(list.ok());
    std::string cut_name;
    size_t intact_records = 0;
    for (const auto& f : *list) {
      if (f.is_dir || f.name.find(".idx") != std::string::npos || f.name.find(".lst") != std::string::npos ||
          f.name.find("manifest") != std::string::npos) {
        continue;  // no index, no manifest
      }
      std::string bytes = *io::ReadFileToString(*fs_, io::JoinPath(dir, f.name));
      if (cut_name.empty()) {
        cut_name = f.name;
        bytes.resize(bytes.size() * 2 / 3);
      }
      ASSERT_TRUE(io::WriteFileAtomic(*fs, io::JoinPath("/cut", f.name), bytes).ok());
    }
    auto whole = BuildCatalog(*fs_, dir);
    ASSERT_TRUE(whole.ok());
    intact_records = whole->samples.size();
    auto cat = BuildCatalog(*fs, "/cut", {dataset::Format::kAuto, format::ErrorPolicy::kSkip});
    ASSERT_TRUE(cat.ok()) << cat.status().ToString();
    ASSERT_EQ(cat->losses.size(), 1u);
    EXPECT_NE(cat->losses[0].message.find(cut_name), std::string::npos) << cat->losses[0].message;
    EXPECT_LT(cat->samples.size(), intact_records);
    EXPECT_GT(cat->samples.size(), intact_records / 2);  // the other shard whole, two thirds of the cut one
    PipelineOptions o = Options("/cut");
    o.batch_size = 4;
    Run r = RunAll(o, fs.get());
    EXPECT_EQ(r.stats.lost_parts, 1u);
    EXPECT_EQ(r.stats.bad_samples, 0u);
    ASSERT_FALSE(r.stats.problems.empty());
    EXPECT_NE(r.stats.problems[0].message.find(cut_name), std::string::npos) << r.stats.problems[0].message;
    o.policy = format::ErrorPolicy::kFail;
    auto failed = Pipeline::Create(*fs, o);
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.status().message().find(cut_name), std::string::npos) << failed.status().ToString();
  }
}

}  // namespace
}  // namespace aq::pipeline

namespace aq::pipeline {
namespace {

// Records the read plan a pipeline sends and the order it opens files in;
// `fail_plans` makes every plan fail (a store that cannot take it).
class PlanRecordingFileSystem final : public io::ForwardingFileSystem {
 public:
  explicit PlanRecordingFileSystem(io::FileSystem& base, bool fail_plans = false)
      : io::ForwardingFileSystem(base), fail_(fail_plans) {}
  Result<std::unique_ptr<io::RandomAccessFile>> OpenRead(const std::string& path, io::AccessHint hint) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      opens.push_back(path);
      planned_at_open.push_back(planned.size());
    }
    return base_.OpenRead(path, hint);
  }
  Result<size_t> Plan(const std::string& stream, const std::vector<PlannedRead>& reads) override {
    if (fail_) return Unavailable("plan: no node answered");
    std::lock_guard<std::mutex> lock(mu_);
    streams.insert(stream);
    planned.insert(planned.end(), reads.begin(), reads.end());
    return reads.size();
  }

  std::mutex mu_;
  std::vector<std::string> opens;
  std::vector<size_t> planned_at_open;
  std::vector<PlannedRead> planned;
  std::set<std::string> streams;

 private:
  bool fail_;
};

// The read plan names every file before it is opened, in the order the
// readers open them, never more than plan_ahead ahead; it changes no batch.
TEST_F(PipelineTest, TheReadPlanNamesEachFileBeforeItIsReadInReadOrder) {
  PipelineOptions o = Options("/raw");
  o.epochs = 2;
  o.plan_ahead = 8;
  const Run plain = [&] {
    PipelineOptions off = o;
    off.plan_ahead = 0;
    PlanRecordingFileSystem rec(*fs_);
    Run r = RunAll(off, &rec);
    EXPECT_TRUE(rec.planned.empty());
    EXPECT_EQ(r.stats.planned, 0u);
    return r;
  }();
  PlanRecordingFileSystem rec(*fs_);
  const Run planned = RunAll(o, &rec);
  EXPECT_EQ(planned.bytes, plain.bytes);
  ASSERT_EQ(rec.planned.size(), rec.opens.size());  // a folder: one read per file, every file planned once
  EXPECT_EQ(planned.stats.planned, rec.planned.size());
  EXPECT_EQ(rec.streams.size(), 1u);
  for (size_t k = 0; k < rec.opens.size(); ++k) {
    EXPECT_EQ(rec.planned[k].path, rec.opens[k]) << k;
    EXPECT_EQ(rec.planned[k].offset, 0u);
    EXPECT_GT(rec.planned_at_open[k], k) << "file " << k << " opened before it was planned";
    EXPECT_LE(rec.planned_at_open[k], k + o.plan_ahead);
  }
  // Records of shards: ranges inside each file, in order.
  PlanRecordingFileSystem shards(*fs_);
  PipelineOptions tf = Options("/tf");
  tf.plan_ahead = 4;
  const Run t = RunAll(tf, &shards);
  ASSERT_FALSE(shards.planned.empty());
  EXPECT_EQ(t.stats.planned, shards.planned.size());
  for (const auto& r : shards.planned) {
    auto info = fs_->Stat(r.path);
    ASSERT_TRUE(info.ok()) << r.path;
    EXPECT_LE(r.offset + r.length, info->size) << r.path;
    EXPECT_GT(r.length, 0u);
  }
  // A store that cannot take the plan: reported once, the run unchanged.
  PlanRecordingFileSystem failing(*fs_, /*fail_plans=*/true);
  const Run f = RunAll(o, &failing);
  EXPECT_EQ(f.bytes, plain.bytes);
  EXPECT_NE(f.stats.plan_error.find("no node answered"), std::string::npos) << f.stats.plan_error;
}

// SendPlan (a job's plan sent ahead, e.g. by a Slurm prolog) names the same
// reads in the same order as a running pipeline with the same options, for
// every rank, and reads no data doing so.
TEST_F(PipelineTest, APlanSentAheadIsTheOneTheJobReadsByWithoutReadingData) {
  for (const char* data : {"/raw", "/tf"}) {
    for (uint32_t rank = 0; rank < 2; ++rank) {
      PipelineOptions o = Options(data);
      o.world = 2;
      o.rank = rank;
      o.plan_ahead = 1 << 20;  // the running pipeline sends the whole epoch at its first read
      PlanRecordingFileSystem running(*fs_);
      RunAll(o, &running);
      PlanRecordingFileSystem ahead(*fs_);
      o.plan_ahead = 3;  // windows of at least 256 runs: the order does not depend on it
      auto sent = Pipeline::SendPlan(ahead, o, "job-7-rank" + std::to_string(rank));
      ASSERT_TRUE(sent.ok()) << sent.status().ToString();
      ASSERT_FALSE(ahead.planned.empty()) << data;
      ASSERT_EQ(ahead.planned.size(), running.planned.size()) << data << " rank " << rank;
      uint64_t bytes = 0;
      for (size_t k = 0; k < ahead.planned.size(); ++k) {
        EXPECT_EQ(ahead.planned[k].path, running.planned[k].path) << k;
        EXPECT_EQ(ahead.planned[k].offset, running.planned[k].offset) << k;
        EXPECT_EQ(ahead.planned[k].length, running.planned[k].length) << k;
        bytes += ahead.planned[k].length;
      }
      EXPECT_EQ(sent->reads, ahead.planned.size());
      EXPECT_EQ(sent->taken_up, ahead.planned.size());
      EXPECT_EQ(sent->bytes, bytes);
      EXPECT_EQ(ahead.streams, std::set<std::string>{"job-7-rank" + std::to_string(rank)});
      // Only indexes were opened, never a planned file's records.
      if (std::string(data) == "/raw") EXPECT_TRUE(ahead.opens.empty()) << ahead.opens.front();
    }
  }
  // A store that refuses the plan: the error, as Create's.
  PlanRecordingFileSystem failing(*fs_, /*fail_plans=*/true);
  auto refused = Pipeline::SendPlan(failing, Options("/raw"), "s");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no node answered"), std::string::npos);
  EXPECT_FALSE(Pipeline::SendPlan(*fs_, Options("/nonexistent"), "s").ok());
}

// Reads past `fail_after` bytes of any file fail with EIO, as a dying disk
// or a dropped NFS mount does.
class FailingFileSystem final : public io::ForwardingFileSystem {
 public:
  FailingFileSystem(io::FileSystem& base, uint64_t fail_after, StatusCode code = StatusCode::kIoError)
      : io::ForwardingFileSystem(base), fail_after_(fail_after), code_(code) {}
  Result<std::unique_ptr<io::RandomAccessFile>> OpenRead(const std::string& path, io::AccessHint hint) override {
    auto f = AQ_TRY(base_.OpenRead(path, hint));
    return std::unique_ptr<io::RandomAccessFile>(std::make_unique<File>(std::move(f), fail_after_, code_));
  }

 private:
  class File final : public io::RandomAccessFile {
   public:
    File(std::unique_ptr<io::RandomAccessFile> f, uint64_t limit, StatusCode code)
        : f_(std::move(f)), limit_(limit), code_(code) {}
    Result<size_t> ReadAt(uint64_t off, size_t n, void* buf) const override {
      if (off + n > limit_) {
        if (code_ == StatusCode::kUnavailable) {
          return Unavailable("read '" + f_->path() + "': no node of the cluster answered within 60 s");
        }
        return IoError("read '" + f_->path() + "': Input/output error");
      }
      return f_->ReadAt(off, n, buf);
    }
    uint64_t size() const override { return f_->size(); }
    const std::string& path() const override { return f_->path(); }

   private:
    std::unique_ptr<io::RandomAccessFile> f_;
    uint64_t limit_;
    StatusCode code_;
  };
  uint64_t fail_after_;
  StatusCode code_;
};

// Regression: an I/O error in a reader dereferenced the failed read's result
// and terminated the process instead of reporting the samples.
TEST_F(PipelineTest, ReadErrorsAreReportedPerSampleNotFatal) {
  FailingFileSystem failing(*fs_, 400'000);  // every shard fails partway
  PipelineOptions o = Options("/tf");
  o.batch_size = 4;
  auto p = Pipeline::Create(failing, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  while (true) {
    auto b = (*p)->Next();
    if (!b.ok() || *b == nullptr) break;  // a batch of only unreadable samples is an error, not a crash
  }
  PipelineStats st = (*p)->Stats();
  ASSERT_GT(st.bad_samples, 0u);
  EXPECT_NE(st.problems[0].message.find("Input/output error"), std::string::npos) << st.problems[0].message;
}

// A store that cannot deliver (its nodes down past the client's retries) is
// an outage, not damage: even with on_error=skip the run stops with
// Unavailable, and no batch goes out with samples replaced by others.
TEST_F(PipelineTest, AnOutageStopsTheRunEvenWhenSkippingDamage) {
  FailingFileSystem down(*fs_, 400'000, StatusCode::kUnavailable);
  PipelineOptions o = Options("/tf");
  o.batch_size = 4;
  o.policy = format::ErrorPolicy::kSkip;
  auto p = Pipeline::Create(down, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Status end;
  while (true) {
    auto b = (*p)->Next();
    if (!b.ok()) {
      end = b.status();
      break;
    }
    ASSERT_NE(*b, nullptr) << "the epoch ended as if every sample had been read";
    EXPECT_EQ((*b)->replaced, 0u) << "a sample the store could not deliver was replaced by another";
  }
  EXPECT_EQ(end.code(), StatusCode::kUnavailable) << end.ToString();
}

}  // namespace
}  // namespace aq::pipeline
