// aquifer dataset pack: image folder -> TFRecord shards (tf.Example, as
// TensorFlow's build_imagenet_data.py), MXNet RecordIO (.rec/.idx/.lst, as
// im2rec) or WebDataset tar shards (KEY.jpg, KEY.cls, KEY.json per image,
// as webdataset's ShardWriter writes them). Images are spread over shards in a seeded shuffled order. Each
// shard is written under a temporary name, synced and renamed, so a crash or
// a full disk never leaves a shard that looks complete but is not.
//
// No image is lost without a word: every JPEG is decoded (damage found
// anywhere in it), PNG/GIF/BMP files are converted to JPEG and listed, and
// what cannot be packed stops the run or is listed as left out. Packing
// nothing is an error. The output depends only on the input and the seed,
// never on the thread count.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <tuple>

#include "common/progress.h"
#include "common/random.h"
#include "common/thread_pool.h"
#include "dataset/commands.h"
#include "format/example.h"
#include "format/recordio.h"
#include "format/tar.h"
#include "format/tfrecord.h"
#include "image/decode.h"
#include "image/jpeg.h"

namespace aq::dataset {
namespace {

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
  image::ImageFormat converted_from = image::ImageFormat::kJpeg;
};

Result<Prepared> PrepareImage(std::string* bytes, const PackOptions& o) {
  const image::ImageFormat f = image::SniffImageFormat(*bytes);
  if (image::IsConvertible(f)) {
    if (!o.convert) {
      return Unsupported(
          fmt::format("a {} image, not a JPEG (converting was not asked for)", image::ImageFormatName(f)));
    }
    image::Image img = AQ_TRY(image::DecodeImage(*bytes));
    image::EncodeOptions eo;
    eo.quality = 100;
    eo.subsample_420 = false;
    *bytes = AQ_TRY(image::EncodeJpeg(img, eo));
    return Prepared{img.width, img.height, f};
  }
  image::JpegInfo info = AQ_TRY(image::ReadJpegInfo(*bytes));  // names what non-JPEG bytes look like
  if (o.decode_check) AQ_TRY(image::CheckJpeg(*bytes));
  return Prepared{info.width, info.height, image::ImageFormat::kJpeg};
}

struct ShardPlan {
  std::string final_path;  // .rec for RecordIO
  size_t begin, end;       // range in the shuffled order
};

}  // namespace

Result<PackReport> Pack(io::FileSystem& fs, const PackOptions& o) {
  if (o.input.empty()) return InvalidArgument("pack: an input image folder is required");
  if (o.format != Format::kTFRecord && o.format != Format::kRecordIO && o.format != Format::kWebDataset) {
    return InvalidArgument("pack: the output format must be tfrecord, recordio or wds");
  }
  if (o.prefix.empty() || o.prefix.find('/') != std::string::npos) {
    return InvalidArgument(fmt::format("pack: bad shard prefix '{}'", o.prefix));
  }
  const auto t0 = std::chrono::steady_clock::now();
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
  format::ImageFolder folder = AQ_TRY(format::ScanImageFolder(fs, o.input, o.policy, o.sidecars));
  if (folder.images.empty()) {
    return InvalidArgument(
        fmt::format("pack: no images under '{}' (.jpg, .jpeg, .png, .gif or .bmp in class folders)", o.input));
  }
  std::map<std::string, std::string> texts;
  std::string labels_file = o.labels_file.empty() ? io::JoinPath(o.input, "synset_labels.txt") : o.labels_file;
  if (!o.labels_file.empty() || fs.Exists(labels_file)) texts = AQ_TRY(LoadLabels(fs, labels_file));

  const size_t n = folder.images.size();
  size_t shards = o.shards != 0 ? o.shards : (o.format == Format::kRecordIO ? 1 : 8);
  shards = std::min(shards, n);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  Rng rng(o.seed);
  rng.Shuffle(order);

  AQ_TRY(fs.MakeDirs(o.out));
  const bool tf = o.format == Format::kTFRecord;
  const bool wds = o.format == Format::kWebDataset;
  if ((tf || wds) && o.write_index) AQ_TRY(fs.MakeDirs(io::JoinPath(o.out, "idx")));
  std::vector<ShardPlan> plan(shards);
  for (size_t s = 0; s < shards; ++s) {
    std::string name = tf    ? ShardName(o.prefix, s, shards)
                       : wds ? ShardName(o.prefix, s, shards) + ".tar"
                             : (shards == 1 ? o.prefix + ".rec" : ShardName(o.prefix, s, shards) + ".rec");
    plan[s] = {io::JoinPath(o.out, name), s * n / shards, (s + 1) * n / shards};
    if (!o.overwrite && fs.Exists(plan[s].final_path)) {
      return Status(StatusCode::kAlreadyExists,
                    fmt::format("pack: '{}' exists (overwriting was not asked for)", plan[s].final_path));
    }
  }

  PackReport rep;
  rep.out = o.out;
  rep.format = o.format;
  rep.classes = folder.classes.size();
  rep.found = n;
  rep.skipped = folder.skipped;
  rep.ignored_files = folder.ignored_files;
  rep.ignored_some = folder.ignored_some;
  std::mutex mu;  // guards rep.skipped, rep.converted
  std::atomic<uint64_t> images{0}, bytes_in{0}, bytes_out{0};
  Progress progress({"pack", n, folder.total_bytes, "images", o.common.progress});

  Status st = ParallelFor(shards, o.common.threads, [&](size_t s) -> Status {
    const ShardPlan& sp = plan[s];
    const std::string tmp = sp.final_path + ".partial";
    auto out = AQ_TRY(fs.OpenWrite(tmp));
    format::TFRecordWriter tw(*out);
    format::RecordIOWriter rw(*out);
    format::TarWriter tar(*out);
    std::vector<format::IndexEntry> tf_index;
    std::vector<format::RecordIOIndexEntry> rec_index;
    std::string lst;
    std::string jpeg, record;
    for (size_t k = sp.begin; k < sp.end; ++k) {
      const size_t id = order[k];
      const auto& img = folder.images[id];
      auto in = AQ_TRY(fs.OpenRead(img.path, io::AccessHint::kSequential));
      jpeg.resize(in->size());
      size_t got = AQ_TRY(in->ReadAt(0, jpeg.size(), jpeg.data()));
      jpeg.resize(got);
      progress.Add(1, got);
      bytes_in += got;
      auto info = PrepareImage(&jpeg, o);
      if (!info.ok()) {
        if (o.policy == format::ErrorPolicy::kFail) return info.status().WithContext(img.path);
        std::lock_guard<std::mutex> lock(mu);
        rep.skipped.push_back({img.path, 0, id, got, info.status().message()});
        continue;
      }
      if (info->converted_from != image::ImageFormat::kJpeg) {
        std::lock_guard<std::mutex> lock(mu);
        rep.converted.push_back(
            {img.path, std::string(image::ImageFormatName(info->converted_from)), got, jpeg.size()});
      }
      const std::string& synset = folder.classes[img.class_index];
      if (wds) {
        // The key is the image's number (unique, no dots); the JSON keeps
        // where it came from. Labels are 0-based class indexes.
        const std::string key = fmt::format("{:08d}", id);
        const uint64_t start = tar.offset();
        nlohmann::json meta = {{"file", synset + "/" + std::string(io::BaseName(img.path))},
                               {"class", synset},
                               {"label", img.class_index},
                               {"width", info->width},
                               {"height", info->height}};
        AQ_TRY(tar.Add(key + ".jpg", jpeg).WithContext(tmp));
        AQ_TRY(tar.Add(key + ".cls", std::to_string(img.class_index)).WithContext(tmp));
        for (const auto& [ext, path] : img.sidecars) {
          std::string data = AQ_TRY(io::ReadFileToString(fs, path));
          bytes_in += data.size();
          AQ_TRY(tar.Add(key + "." + ext, data).WithContext(tmp));
        }
        AQ_TRY(tar.Add(key + ".meta.json", meta.dump()).WithContext(tmp));
        tf_index.push_back({start, tar.offset() - start});
      } else if (tf) {
        format::ImageRecord r;
        r.encoded = jpeg;
        r.label = static_cast<int64_t>(img.class_index) + 1;  // 1-based, 0 = background, as the ImageNet converters
        r.height = info->height;
        r.width = info->width;
        r.filename = std::string(io::BaseName(img.path));
        r.synset = synset;
        auto t = texts.find(synset);
        r.text = t == texts.end() ? synset : t->second;
        record = format::SerializeExample(format::ToExample(r));
        AQ_TRY(tw.Write(record).WithContext(tmp));
        tf_index.push_back({tw.offset(), record.size() + format::kTFRecordOverhead});
      } else {
        format::ImageHeader h;
        h.label = static_cast<float>(img.class_index);
        h.id = id;
        record = format::PackImageRecord(h, jpeg);
        AQ_TRY(rw.Write(record));
        rec_index.push_back({id, rw.offset()});
        std::string rel = synset + "/" + std::string(io::BaseName(img.path));
        lst += fmt::format("{}\t{:f}\t{}\n", id, static_cast<float>(img.class_index), rel);
      }
      images += 1;
    }
    if (wds) AQ_TRY(tar.Finish().WithContext(tmp));
    AQ_TRY(out->Sync());
    AQ_TRY(out->Close());
    bytes_out += out->size();
    AQ_TRY(fs.Rename(tmp, sp.final_path));
    if ((tf || wds) && o.write_index) {
      AQ_TRY(io::WriteFileAtomic(fs, TFRecordIndexPath(sp.final_path), format::FormatTFRecordIndex(tf_index)));
    }
    if (!tf && !wds) {
      AQ_TRY(io::WriteFileAtomic(fs, RecordIOIndexPath(sp.final_path), format::FormatRecordIOIndex(rec_index)));
      std::string lst_path = sp.final_path.substr(0, sp.final_path.size() - 4) + ".lst";
      AQ_TRY(io::WriteFileAtomic(fs, lst_path, lst));
    }
    return Status::Ok();
  });
  progress.Finish();
  if (!st.ok()) {
    for (const auto& sp : plan) (void)fs.Remove(sp.final_path + ".partial");
    return st;
  }
  for (const auto& sp : plan) rep.files.push_back(sp.final_path);
  // Reports in file order, whatever order the threads finished in.
  std::sort(rep.skipped.begin(), rep.skipped.end(),
            [](const auto& a, const auto& b) { return std::tie(a.file, a.record) < std::tie(b.file, b.record); });
  std::sort(rep.converted.begin(), rep.converted.end(), [](const auto& a, const auto& b) { return a.file < b.file; });
  if (images == 0) {
    for (const auto& sp : plan) {
      (void)fs.Remove(sp.final_path);
      if ((tf || wds) && o.write_index) (void)fs.Remove(TFRecordIndexPath(sp.final_path));
      if (!tf && !wds) {
        (void)fs.Remove(RecordIOIndexPath(sp.final_path));
        (void)fs.Remove(sp.final_path.substr(0, sp.final_path.size() - 4) + ".lst");
      }
    }
    return Corruption(fmt::format("pack: none of the {} images under '{}' could be packed; the first, {}: {}", n,
                                  o.input, rep.skipped.empty() ? "?" : rep.skipped.front().file,
                                  rep.skipped.empty() ? "?" : rep.skipped.front().reason));
  }
  rep.images = images;
  rep.bytes_in = bytes_in;
  rep.bytes_out = bytes_out;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace aq::dataset
