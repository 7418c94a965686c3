// aquifer dataset resize: re-encode every image at a new scale and quality,
// record files in, record files out (the documents' large-image dataset:
// 3x height and width, JPEG quality 100). Everything else in each record is
// kept: other Example features, RecordIO header fields, file names.
#include "image/resize.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <mutex>
#include <tuple>

#include "common/progress.h"
#include "common/thread_pool.h"
#include "dataset/commands.h"
#include "format/example.h"
#include "format/recordio.h"
#include "format/tfrecord.h"
#include "image/decode.h"
#include "image/jpeg.h"

namespace aq::dataset {
namespace {

// Any image aquifer decodes (JPEG, PNG, GIF, BMP) in, JPEG out.
Result<std::string> Rescale(std::string_view encoded, double scale, int quality) {
  image::Image img = image::IsConvertible(image::SniffImageFormat(encoded))
                         ? image::ToRgb(AQ_TRY(image::DecodeImage(encoded)))
                         : AQ_TRY(image::DecodeJpeg(encoded));
  int w = std::max(1, static_cast<int>(std::lround(img.width * scale)));
  int h = std::max(1, static_cast<int>(std::lround(img.height * scale)));
  image::Image out = AQ_TRY(image::Resize(img, w, h));
  return image::EncodeJpeg(out, {quality, quality < 100});
}

}  // namespace

Result<ResizeReport> Resize(io::FileSystem& fs, const ResizeOptions& o) {
  if (!(o.scale > 0 && o.scale <= 16)) return InvalidArgument(fmt::format("resize: scale {} not in (0, 16]", o.scale));
  if (o.quality < 1 || o.quality > 100) return InvalidArgument("resize: JPEG quality must be in 1..100");
  if (o.out.empty()) return InvalidArgument("resize: an output directory is required");
  const auto t0 = std::chrono::steady_clock::now();
  DatasetFiles ds = AQ_TRY(FindDataset(fs, o.input, o.format));
  if (ds.format == Format::kWebDataset) {
    return Unsupported(fmt::format(
        "resize: '{}' holds WebDataset shards, which resize does not rewrite; pack the image folder again with "
        "--format wds after resizing it",
        o.input));
  }
  AQ_TRY(PrepareOutputDir(fs, o.out, o.overwrite));
  const bool tf = ds.format == Format::kTFRecord;
  if (tf) AQ_TRY(fs.MakeDirs(io::JoinPath(o.out, "idx")));

  ResizeReport rep;
  std::mutex mu;  // guards rep.skipped
  std::atomic<uint64_t> images{0}, bytes_in{0}, bytes_out{0};
  Progress progress({"resize", ds.files.size(), ds.total_bytes, ds.format == Format::kFolder ? "images" : "files",
                     o.common.progress});
  auto note_skip = [&](const Sample& s, const Status& why) {
    std::lock_guard<std::mutex> lock(mu);
    rep.skipped.push_back({*s.file, s.offset, s.record, s.framed_size, why.message()});
  };

  Status st = ParallelFor(ds.files.size(), o.common.threads, [&](size_t i) -> Status {
    const std::string& in_path = ds.files[i];
    std::string rel =
        ds.format == Format::kFolder ? in_path.substr(ds.root.size() + 1) : std::string(io::BaseName(in_path));
    // A folder's PNG/GIF/BMP files come out as JPEG: name them so.
    if (ds.format == Format::kFolder && rel.size() > 4) {
      std::string ext = rel.substr(rel.size() - 4);
      for (auto& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (ext == ".png" || ext == ".gif" || ext == ".bmp") rel = rel.substr(0, rel.size() - 4) + ".jpg";
    }
    std::string out_path = io::JoinPath(o.out, rel);
    if (ds.format == Format::kFolder) AQ_TRY(fs.MakeDirs(std::string(io::DirName(out_path))));
    const std::string tmp = out_path + ".partial";
    auto out = AQ_TRY(fs.OpenWrite(tmp));
    format::TFRecordWriter tw(*out);
    format::RecordIOWriter rw(*out);
    std::vector<format::IndexEntry> tf_index;
    std::vector<format::RecordIOIndexEntry> rec_index;
    WalkOptions wo;
    wo.policy = o.policy;
    auto walked = WalkFile(fs, ds.format, in_path, wo, [&](const Sample& s) -> Status {
      auto fail_or_skip = [&](const Status& why) -> Status {
        Status where = why.WithContext(fmt::format("{}: record {} at offset {}", *s.file, s.record, s.offset));
        if (o.policy == format::ErrorPolicy::kFail) return where;
        note_skip(s, why);
        return Status::Ok();
      };
      if (!s.parse_error.ok()) return fail_or_skip(s.parse_error);
      auto scaled = Rescale(s.image, o.scale, o.quality);
      if (!scaled.ok()) return fail_or_skip(scaled.status());
      if (ds.format == Format::kFolder) {
        AQ_TRY(out->Append(*scaled));
      } else if (tf) {
        format::Example ex = AQ_TRY(format::ParseExample(s.payload));
        auto info = AQ_TRY(image::ReadJpegInfo(*scaled));
        ex.features[std::string(format::keys::kEncoded)] = format::Feature::Bytes({std::move(*scaled)});
        ex.features[std::string(format::keys::kHeight)] = format::Feature::Ints({info.height});
        ex.features[std::string(format::keys::kWidth)] = format::Feature::Ints({info.width});
        std::string rec = format::SerializeExample(ex);
        AQ_TRY(tw.Write(rec));
        tf_index.push_back({tw.offset(), rec.size() + format::kTFRecordOverhead});
      } else {
        auto v = AQ_TRY(format::UnpackImageRecord(s.payload));
        AQ_TRY(rw.Write(format::PackImageRecord(v.header, *scaled)));
        rec_index.push_back({v.header.id, rw.offset()});
      }
      images += 1;
      return Status::Ok();
    });
    if (!walked.ok()) return walked.status();
    for (const auto& sk : walked->skipped) {
      std::lock_guard<std::mutex> lock(mu);
      rep.skipped.push_back(sk);
    }
    bytes_in += walked->bytes;
    progress.Add(1, walked->bytes);
    AQ_TRY(out->Sync());
    AQ_TRY(out->Close());
    if (ds.format == Format::kFolder && out->size() == 0) return fs.Remove(tmp);  // the image was skipped
    bytes_out += out->size();
    AQ_TRY(fs.Rename(tmp, out_path));
    if (tf) AQ_TRY(io::WriteFileAtomic(fs, TFRecordIndexPath(out_path), format::FormatTFRecordIndex(tf_index)));
    if (ds.format == Format::kRecordIO) {
      AQ_TRY(io::WriteFileAtomic(fs, RecordIOIndexPath(out_path), format::FormatRecordIOIndex(rec_index)));
    }
    return Status::Ok();
  });
  progress.Finish();
  if (!st.ok()) return st;
  std::sort(rep.skipped.begin(), rep.skipped.end(),
            [](const auto& a, const auto& b) { return std::tie(a.file, a.record) < std::tie(b.file, b.record); });
  rep.files = ds.files.size();
  rep.images = images;
  rep.bytes_in = bytes_in;
  rep.bytes_out = bytes_out;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace aq::dataset
