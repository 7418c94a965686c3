// aquifer dataset pack: image folder -> TFRecord shards (tf.Example, as
// TensorFlow's build_imagenet_data.py), MXNet RecordIO (.rec/.idx/.lst, as
// im2rec) or WebDataset tar shards (KEY.jpg, KEY.cls, KEY.json per image,
// as webdataset's ShardWriter writes them). Images are spread over shards in a seeded shuffled order. Each
// shard is written under a temporary name, synced and renamed, so a crash or
// a full disk never leaves a shard that looks complete but is not.
//
// No image is lost without a word: every JPEG is decoded (damage found
// anywhere in it), other image formats are converted to JPEG and listed, and
// what cannot be packed stops the run or is listed as left out. Packing
// nothing is an error. The output depends only on the input and the seed,
// never on the thread count.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <tuple>

#include "common/crc32c.h"
#include "common/mutex.h"
#include "common/progress.h"
#include "common/random.h"
#include "common/thread_pool.h"
#include "dataset/commands.h"
#include "format/example.h"
#include "format/json_text.h"
#include "format/manifest.h"
#include "format/recordio.h"
#include "format/tar.h"
#include "format/tfrecord.h"
#include "image/decode.h"
#include "image/jpeg.h"
#include "image/orientation.h"
#include "image/resize.h"

namespace aq::dataset {
namespace {

using format::ManifestFile;
using format::ManifestName;
using format::ManifestPath;
using format::UpdateManifest;

// "synset text..." per line -> synset -> text.
Result<std::map<std::string, std::string>> LoadLabels(io::FileSystem& fs, const std::string& path) {
  std::map<std::string, std::string> m;
  std::string text = AQ_TRY(io::ReadFileToString(fs, path));
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto sp = line.find_first_of(" \t");
    if (line.empty()) continue;
    m[line.substr(0, sp)] = sp == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", sp));
  }
  return m;
}

// One image made ready for a record: JPEG bytes (as read, or converted)
// and the pixel size.
struct Prepared {
  int width = 0, height = 0;
  std::string converted_from;         // "PNG", "JPEG, EXIF orientation 6", ...; "" when packed as read
  std::string notice;                 // passed over without harm (extraneous bytes), kept
  ImageForm form = ImageForm::kJpeg;  // as stored: kJpeg, kReencode or kRaw
};

// Binary PPM: the raw form (a header, then the RGB rows).
std::string Ppm(const image::Image& img) {
  std::string out = fmt::format("P6\n{} {}\n255\n", img.width, img.height);
  out.append(reinterpret_cast<const char*>(img.pixels.data()), img.pixels.size());
  return out;
}

// The image in the asked form: the longer side capped, then stored raw or
// as JPEG at the asked quality.
Result<Prepared> InForm(std::string* bytes, image::Image img, const PackOptions& o) {
  img = image::ToRgb(std::move(img));
  const int side = std::max(img.width, img.height);
  if (o.max_side > 0 && side > static_cast<int>(o.max_side)) {
    const double s = static_cast<double>(o.max_side) / side;
    img = AQ_TRY(image::Resize(img, std::max(1, static_cast<int>(std::lround(img.width * s))),
                               std::max(1, static_cast<int>(std::lround(img.height * s)))));
  }
  const bool raw = o.form == ImageForm::kRaw ||
                   (o.form == ImageForm::kAuto &&
                    static_cast<uint64_t>(img.width) * static_cast<uint64_t>(img.height) <= o.raw_max_pixels);
  if (raw) {
    *bytes = Ppm(img);
  } else {
    *bytes = AQ_TRY(image::EncodeJpeg(img, {o.quality, o.quality < 100}));
  }
  Prepared p;
  p.width = img.width;
  p.height = img.height;
  p.form = raw ? ImageForm::kRaw : ImageForm::kReencode;
  return p;
}

// Pixels re-encoded for a record: JPEG quality 100, 4:4:4.
Result<Prepared> Reencoded(std::string* bytes, const image::Image& img, std::string from) {
  image::EncodeOptions eo;
  eo.quality = 100;
  eo.subsample_420 = false;
  *bytes = AQ_TRY(image::EncodeJpeg(img, eo));
  return Prepared{img.width, img.height, std::move(from), ""};
}

Result<Prepared> PrepareImage(std::string* bytes, const PackOptions& o) {
  const image::ImageFormat f = image::SniffImageFormat(*bytes);
  if (image::IsConvertible(f)) {
    if (!o.convert) {
      return Unsupported(
          fmt::format("a {} image, not a JPEG (converting was not asked for)", image::ImageFormatName(f)));
    }
    image::Image img = AQ_TRY(image::DecodeImage(*bytes));
    if (o.form != ImageForm::kJpeg) {
      Prepared p = AQ_TRY(InForm(bytes, std::move(img), o));
      p.converted_from = image::ImageFormatName(f);
      return p;
    }
    return Reencoded(bytes, img, std::string(image::ImageFormatName(f)));
  }
  image::JpegInfo info = AQ_TRY(image::ReadJpegInfo(*bytes));  // names what non-JPEG bytes look like
  if (o.form != ImageForm::kJpeg) {
    // Decoded in full (damage anywhere is an error, as the check would find).
    image::Image img = AQ_TRY(image::DecodeJpeg(*bytes));
    const int turn = o.exif_orientation_apply ? image::ExifOrientation(*bytes) : 1;
    Prepared p = AQ_TRY(InForm(bytes, image::ApplyOrientation(img, turn), o));
    if (turn != 1) p.converted_from = fmt::format("JPEG, EXIF orientation {}", turn);
    return p;
  }
  if (o.exif_orientation_apply) {
    if (const int turn = image::ExifOrientation(*bytes); turn != 1) {
      image::Image img = AQ_TRY(image::DecodeJpeg(*bytes));
      return Reencoded(bytes, image::ApplyOrientation(img, turn), fmt::format("JPEG, EXIF orientation {}", turn));
    }
  }
  std::string notice;
  if (o.decode_check) AQ_TRY(image::CheckJpeg(*bytes, &notice));
  return Prepared{info.width, info.height, "", notice};
}

struct ShardPlan {
  std::string final_path;  // .rec for RecordIO
  size_t begin, end;       // range in the shuffled order
};

// One image on its way into a record.
struct PackItem {
  size_t id;  // its number in the folder scan
  const format::ImageFolderEntry& entry;
  std::string_view relative;  // its path below the root: class/[sub/...]file
  const std::string& synset;
  const std::string& jpeg;
  const Prepared& info;
};

// One shard's records in one of the three formats, and the files beside
// it (index, .lst) once it is in place.
class ShardWriter {
 public:
  virtual ~ShardWriter() = default;
  // Bytes read besides the image (sidecar files).
  virtual Result<uint64_t> Add(const PackItem& item) = 0;
  // Ends the record stream (before the shard is synced).
  virtual Status Finish() { return Status::Ok(); }
  // Writes the side files of the shard now at final_path.
  virtual Status WriteSideFiles(io::FileSystem& fs, const std::string& final_path) = 0;
};

// The files a shard has beside it, for writing and for removal.
std::vector<std::string> SideFiles(Format format, bool write_index, const std::string& final_path) {
  if (format == Format::kRecordIO) {
    return {RecordIOIndexPath(final_path), final_path.substr(0, final_path.size() - 4) + ".lst"};
  }
  if (write_index) return {TFRecordIndexPath(final_path)};
  return {};
}

// tf.Example records, labels 1-based (0 = background), as the ImageNet
// converters write them.
class TFRecordShard final : public ShardWriter {
 public:
  TFRecordShard(io::WritableFile& out, std::string tmp, const std::map<std::string, std::string>& texts,
                bool write_index)
      : w_(out), tmp_(std::move(tmp)), texts_(texts), write_index_(write_index) {}

  Result<uint64_t> Add(const PackItem& it) override {
    format::ImageRecord r;
    r.encoded = it.jpeg;
    if (it.info.form == ImageForm::kRaw) r.format = "PPM";
    r.label = static_cast<int64_t>(it.entry.class_index) + 1;
    r.height = it.info.height;
    r.width = it.info.width;
    r.filename = std::string(io::BaseName(it.entry.path));
    r.synset = it.synset;
    auto t = texts_.find(it.synset);
    r.text = t == texts_.end() ? it.synset : t->second;
    record_ = format::SerializeExample(format::ToExample(r));
    AQ_TRY(w_.Write(record_).WithContext(tmp_));
    index_.push_back({w_.offset(), record_.size() + format::kTFRecordOverhead});
    return uint64_t{0};
  }
  Status WriteSideFiles(io::FileSystem& fs, const std::string& final_path) override {
    if (!write_index_) return Status::Ok();
    return io::WriteFileAtomic(fs, TFRecordIndexPath(final_path), format::FormatTFRecordIndex(index_));
  }

 private:
  format::TFRecordWriter w_;
  std::string tmp_, record_;
  const std::map<std::string, std::string>& texts_;
  bool write_index_;
  std::vector<format::IndexEntry> index_;
};

// A path as a .lst line can carry it: its fields are tab-separated, one
// image a line, with no escape of their own; control characters (tab,
// newline, ...) and '%' itself are written as %XX, so a name that holds
// "%09" stays apart from one that holds a tab. Other bytes, UTF-8 or not,
// are written as they are.
std::string LstPath(std::string_view path) {
  std::string out;
  for (char ch : path) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u == 0x7f || u == '%') {
      out += fmt::format("%{:02X}", u);
    } else {
      out += ch;
    }
  }
  return out;
}

// RecordIO image records (label = class index, id = image number) with
// im2rec's .idx and .lst.
class RecordIOShard final : public ShardWriter {
 public:
  explicit RecordIOShard(io::WritableFile& out) : w_(out) {}

  Result<uint64_t> Add(const PackItem& it) override {
    format::ImageHeader h;
    h.label = static_cast<float>(it.entry.class_index);
    h.id = it.id;
    AQ_TRY(w_.Write(format::PackImageRecord(h, it.jpeg)));
    index_.push_back({it.id, w_.offset()});
    lst_ += fmt::format("{}\t{:f}\t{}\n", it.id, static_cast<float>(it.entry.class_index), LstPath(it.relative));
    return uint64_t{0};
  }
  Status WriteSideFiles(io::FileSystem& fs, const std::string& final_path) override {
    auto side = SideFiles(Format::kRecordIO, true, final_path);
    AQ_TRY(io::WriteFileAtomic(fs, side[0], format::FormatRecordIOIndex(index_)));
    return io::WriteFileAtomic(fs, side[1], lst_);
  }

 private:
  format::RecordIOWriter w_;
  std::vector<format::RecordIOIndexEntry> index_;
  std::string lst_;
};

// WebDataset samples: KEY.jpg, KEY.cls (0-based), the sidecars and
// KEY.meta.json. The key is the image's number (unique, no dots); the
// JSON keeps where it came from.
class WdsShard final : public ShardWriter {
 public:
  WdsShard(io::FileSystem& fs, io::WritableFile& out, std::string tmp, bool write_index)
      : fs_(fs), tar_(out), tmp_(std::move(tmp)), write_index_(write_index) {}

  Result<uint64_t> Add(const PackItem& it) override {
    const std::string key = fmt::format("{:08d}", it.id);
    const uint64_t start = tar_.offset();
    nlohmann::json meta = {{"file", it.relative},
                           {"class", it.synset},
                           {"label", it.entry.class_index},
                           {"width", it.info.width},
                           {"height", it.info.height}};
    AQ_TRY(tar_.Add(key + (it.info.form == ImageForm::kRaw ? ".ppm" : ".jpg"), it.jpeg).WithContext(tmp_));
    AQ_TRY(tar_.Add(key + ".cls", std::to_string(it.entry.class_index)).WithContext(tmp_));
    uint64_t read = 0;
    for (const auto& [ext, path] : it.entry.sidecars) {
      std::string data = AQ_TRY(io::ReadFileToString(fs_, path));
      read += data.size();
      AQ_TRY(tar_.Add(key + "." + ext, data).WithContext(tmp_));
    }
    AQ_TRY(tar_.Add(key + ".meta.json", format::DumpJson(meta)).WithContext(tmp_));
    index_.push_back({start, tar_.offset() - start});
    return read;
  }
  Status Finish() override { return tar_.Finish().WithContext(tmp_); }
  Status WriteSideFiles(io::FileSystem& fs, const std::string& final_path) override {
    if (!write_index_) return Status::Ok();
    return io::WriteFileAtomic(fs, TFRecordIndexPath(final_path), format::FormatTFRecordIndex(index_));
  }

 private:
  io::FileSystem& fs_;
  format::TarWriter tar_;
  std::string tmp_;
  bool write_index_;
  std::vector<format::IndexEntry> index_;
};

Status CheckPackOptions(const PackOptions& o) {
  if (o.input.empty()) return InvalidArgument("pack: an input image folder is required");
  if (o.format != Format::kTFRecord && o.format != Format::kRecordIO && o.format != Format::kWebDataset) {
    return InvalidArgument("pack: the output format must be tfrecord, recordio or wds");
  }
  if (o.prefix.empty() || o.prefix.find('/') != std::string::npos) {
    return InvalidArgument(fmt::format("pack: bad shard prefix '{}'", o.prefix));
  }
  if (!o.sidecars.empty() && o.format != Format::kWebDataset) {
    return InvalidArgument("pack: sidecar files (--sidecar) go into WebDataset shards only (--format wds)");
  }
  for (const auto& ext : o.sidecars) {
    if (ext.empty() || ext.find_first_of("./") != std::string::npos || ext == "jpg" || ext == "cls" ||
        ext == "meta.json" || format::IsWdsImageExtension(ext)) {
      return InvalidArgument(fmt::format(
          "pack: --sidecar {}: expected an extension such as json or txt (not an image's, cls, or with a dot)", ext));
    }
  }
  return Status::Ok();
}

// The shards' names and ranges of the shuffled order; refuses to replace
// an existing shard unless asked to.
Result<std::vector<ShardPlan>> PlanShards(io::FileSystem& fs, const PackOptions& o, size_t n) {
  size_t shards = o.shards != 0 ? o.shards : (o.format == Format::kRecordIO ? 1 : 8);
  shards = std::min(shards, n);
  std::vector<ShardPlan> plan(shards);
  for (size_t s = 0; s < shards; ++s) {
    std::string name = o.format == Format::kTFRecord     ? ShardName(o.prefix, s, shards)
                       : o.format == Format::kWebDataset ? ShardName(o.prefix, s, shards) + ".tar"
                       : shards == 1                     ? o.prefix + ".rec"
                                                         : ShardName(o.prefix, s, shards) + ".rec";
    plan[s] = {io::JoinPath(o.out, name), s * n / shards, (s + 1) * n / shards};
    if (!o.overwrite && fs.Exists(plan[s].final_path)) {
      return Status(StatusCode::kAlreadyExists,
                    fmt::format("pack: '{}' exists (overwriting was not asked for)", plan[s].final_path));
    }
  }
  return plan;
}

// One pack run: the scanned folder, its shuffled order and the shards,
// written in parallel; the report collects what each image became.
class Packer {
 public:
  Packer(io::FileSystem& fs, const PackOptions& o, format::ImageFolder folder, std::map<std::string, std::string> texts)
      : fs_(fs),
        o_(o),
        folder_(std::move(folder)),
        texts_(std::move(texts)),
        order_(folder_.images.size()),
        progress_({"pack", folder_.images.size(), folder_.total_bytes, "images", o.common.progress}) {
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    Rng rng(o.seed);
    rng.Shuffle(order_);
    rep_.out = o.out;
    rep_.format = o.format;
    rep_.classes = folder_.classes.size();
    rep_.found = folder_.images.size();
    rep_.skipped = folder_.skipped;
    rep_.ignored = folder_.ignored;
    rep_.empty_classes = folder_.empty_classes;
  }

  Result<PackReport> Run(const std::vector<ShardPlan>& plan) {
    Status st = ParallelFor(plan.size(), o_.common.threads, [&](size_t s) { return WriteShard(plan[s]); });
    progress_.Finish();
    if (!st.ok()) {
      // A failed pack leaves nothing that looks like a dataset: the shards
      // finished before the failure go too, with their side files.
      for (const auto& sp : plan) {
        (void)fs_.Remove(sp.final_path + ".partial");
        (void)fs_.Remove(sp.final_path);
        for (const auto& side : SideFiles(o_.format, o_.write_index, sp.final_path)) (void)fs_.Remove(side);
      }
      return st.WithContext(fmt::format("pack stopped; no shard of it was kept in '{}'", o_.out));
    }
    for (const auto& sp : plan) rep_.files.push_back(sp.final_path);
    // Reports in file order, whatever order the threads finished in.
    std::sort(rep_.skipped.begin(), rep_.skipped.end(),
              [](const auto& a, const auto& b) { return std::tie(a.file, a.record) < std::tie(b.file, b.record); });
    std::sort(rep_.converted.begin(), rep_.converted.end(),
              [](const auto& a, const auto& b) { return a.file < b.file; });
    std::sort(rep_.warnings.begin(), rep_.warnings.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
    if (images_ == 0) {
      for (const auto& sp : plan) {
        (void)fs_.Remove(sp.final_path);
        for (const auto& side : SideFiles(o_.format, o_.write_index, sp.final_path)) (void)fs_.Remove(side);
      }
      return Corruption(fmt::format("pack: none of the {} images under '{}' could be packed; the first, {}: {}",
                                    rep_.found, o_.input, rep_.skipped.empty() ? "?" : rep_.skipped.front().file,
                                    rep_.skipped.empty() ? "?" : rep_.skipped.front().reason));
    }
    // After the shards: a crash before this leaves them unverified, never
    // trusted with CRCs of other bytes.
    std::map<std::string, ManifestFile> verified;
    {
      MutexLock lock(mu_);
      verified.swap(verified_);
    }
    AQ_TRY(UpdateManifest(fs_, manifest_path_, "dataset pack", std::move(verified)));
    rep_.manifest = manifest_path_;
    rep_.images = images_;
    rep_.bytes_in = bytes_in_;
    rep_.bytes_out = bytes_out_;
    return std::move(rep_);
  }

 private:
  std::unique_ptr<ShardWriter> MakeWriter(io::WritableFile& out, const std::string& tmp) const {
    switch (o_.format) {
      case Format::kTFRecord: return std::make_unique<TFRecordShard>(out, tmp, texts_, o_.write_index);
      case Format::kWebDataset: return std::make_unique<WdsShard>(fs_, out, tmp, o_.write_index);
      default: return std::make_unique<RecordIOShard>(out);
    }
  }

  // Writes one shard under a temporary name, syncs it, renames it into
  // place, then writes its side files.
  Status WriteShard(const ShardPlan& sp) {
    const std::string tmp = sp.final_path + ".partial";
    auto out = AQ_TRY(io::CreateFresh(fs_, tmp));
    auto writer = MakeWriter(*out, tmp);
    std::string jpeg;
    ManifestFile verified;
    for (size_t k = sp.begin; k < sp.end; ++k) AQ_TRY(PackOne(order_[k], *writer, jpeg, verified));
    AQ_TRY(writer->Finish());
    AQ_TRY(out->Sync());
    AQ_TRY(out->Close());
    bytes_out_ += out->size();
    verified.bytes = out->size();
    AQ_TRY(fs_.Rename(tmp, sp.final_path));
    AQ_TRY(writer->WriteSideFiles(fs_, sp.final_path));
    MutexLock lock(mu_);
    verified_[ManifestName(manifest_path_, sp.final_path)] = std::move(verified);
    return Status::Ok();
  }

  // Reads, checks or converts, and writes image `id`; an image that
  // cannot be packed stops the run or is listed, as the policy says.
  // The record's image CRC goes into `verified`: its image was fully
  // decoded (the check) or made here (converted, another form).
  Status PackOne(size_t id, ShardWriter& writer, std::string& jpeg, ManifestFile& verified) {
    const auto& img = folder_.images[id];
    size_t got = 0;
    Result<Prepared> info = Status(StatusCode::kNotFound, img.unreadable);
    if (img.unreadable.empty()) {
      auto in = AQ_TRY(fs_.OpenRead(img.path, io::AccessHint::kSequential));
      jpeg.resize(in->size());
      got = AQ_TRY(in->ReadAt(0, jpeg.size(), jpeg.data()));
      jpeg.resize(got);
      info = PrepareImage(&jpeg, o_);
    }
    progress_.Add(1, got);
    bytes_in_ += got;
    if (!info.ok()) {
      if (o_.policy == format::ErrorPolicy::kFail) return info.status().WithContext(img.path);
      MutexLock lock(mu_);
      rep_.skipped.push_back({img.path, 0, id, got, info.status().message()});
      return Status::Ok();
    }
    if (!info->notice.empty()) {
      MutexLock lock(mu_);
      rep_.warnings.push_back({img.path, info->notice});
    }
    if (info->form != ImageForm::kJpeg) {
      MutexLock lock(mu_);
      (info->form == ImageForm::kRaw ? rep_.raw : rep_.reencoded) += 1;
    }
    if (!info->converted_from.empty()) {
      MutexLock lock(mu_);
      rep_.converted.push_back({img.path, info->converted_from, got, jpeg.size()});
    }
    const std::string_view relative = std::string_view(img.path).substr(folder_.root.size() + 1);
    bytes_in_ += AQ_TRY(writer.Add({id, img, relative, folder_.classes[img.class_index], jpeg, *info}));
    images_ += 1;
    const bool checked = o_.decode_check || info->form != ImageForm::kJpeg || !info->converted_from.empty();
    if (!checked) verified.unverified.push_back(static_cast<uint32_t>(verified.image_crc32c.size()));
    verified.image_crc32c.push_back(crc32c::Value(jpeg));
    return Status::Ok();
  }

  io::FileSystem& fs_;
  const PackOptions& o_;
  const format::ImageFolder folder_;
  const std::map<std::string, std::string> texts_;
  std::vector<size_t> order_;
  Progress progress_;
  std::atomic<uint64_t> images_{0}, bytes_in_{0}, bytes_out_{0};
  const std::string manifest_path_ = ManifestPath(o_.out, false);
  Mutex mu_;
  PackReport rep_;  // skipped and converted: under mu_ while shards are written
  std::map<std::string, ManifestFile> verified_ AQ_GUARDED_BY(mu_);
};

}  // namespace

std::string_view ImageFormName(ImageForm f) {
  switch (f) {
    case ImageForm::kJpeg: return "jpeg";
    case ImageForm::kReencode: return "reencode";
    case ImageForm::kRaw: return "raw";
    case ImageForm::kAuto: return "auto";
  }
  return "?";
}

Result<ImageForm> ParseImageForm(std::string_view s) {
  for (ImageForm f : {ImageForm::kJpeg, ImageForm::kReencode, ImageForm::kRaw, ImageForm::kAuto}) {
    if (s == ImageFormName(f)) return f;
  }
  return InvalidArgument(fmt::format("image form '{}': expected jpeg, reencode, raw or auto", s));
}

Result<PackReport> Pack(io::FileSystem& fs, const PackOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  AQ_TRY(CheckPackOptions(o));
  if (o.quality < 1 || o.quality > 100) return InvalidArgument("pack: --quality must be in 1..100");
  if (o.form == ImageForm::kJpeg && o.max_side > 0) {
    return InvalidArgument("pack: --max-side needs an image form that stores new pixels (reencode, raw or auto)");
  }
  format::ImageFolder folder =
      AQ_TRY(format::ScanImageFolder(fs, o.input, {o.policy, o.sidecars, o.allow_empty_classes}));
  if (folder.images.empty()) {
    return InvalidArgument(
        fmt::format("pack: no images under '{}' (.jpg, .jpeg, .png, .gif, .bmp, .webp, .tif, .tiff, .ppm or .pgm in "
                    "class folders)",
                    o.input));
  }
  std::map<std::string, std::string> texts;
  std::string labels_file = o.labels_file.empty() ? io::JoinPath(o.input, "synset_labels.txt") : o.labels_file;
  if (!o.labels_file.empty() || fs.Exists(labels_file)) {
    texts = AQ_TRY(LoadLabels(fs, labels_file));
    // Still listed among the files not taken as images, but with what it was used for.
    for (auto& ig : folder.ignored) {
      if (ig.path == labels_file) ig.reason = "read as the classes' label texts (--labels)";
    }
  }

  AQ_TRY(fs.MakeDirs(o.out));
  if (o.format != Format::kRecordIO && o.write_index) AQ_TRY(fs.MakeDirs(io::JoinPath(o.out, "idx")));
  auto plan = AQ_TRY(PlanShards(fs, o, folder.images.size()));
  Packer packer(fs, o, std::move(folder), std::move(texts));
  PackReport rep = AQ_TRY(packer.Run(plan));
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace aq::dataset
