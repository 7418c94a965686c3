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
#include <tuple>

#include "common/mutex.h"
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

// Where an input file's rewrite goes: a folder's relative path (PNG, GIF
// and BMP come out as JPEG, and are named so), a record file's name.
std::string OutputPath(const DatasetFiles& ds, const std::string& in_path, const std::string& out_dir) {
  if (ds.format != Format::kFolder) return io::JoinPath(out_dir, std::string(io::BaseName(in_path)));
  std::string rel = in_path.substr(ds.root.size() + 1);
  if (rel.size() > 4) {
    std::string ext = rel.substr(rel.size() - 4);
    for (auto& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (ext == ".png" || ext == ".gif" || ext == ".bmp") rel = rel.substr(0, rel.size() - 4) + ".jpg";
  }
  return io::JoinPath(out_dir, rel);
}

// One output file: each record as it was with the image replaced, then
// the file's index once it is in place.
class Rewriter {
 public:
  Rewriter(Format format, io::WritableFile& out) : format_(format), out_(out), tw_(out), rw_(out) {}

  Status Write(const Sample& s, std::string scaled) {
    switch (format_) {
      case Format::kFolder: return out_.Append(scaled);
      case Format::kTFRecord: {
        format::Example ex = AQ_TRY(format::ParseExample(s.payload));
        auto info = AQ_TRY(image::ReadJpegInfo(scaled));
        ex.features[std::string(format::keys::kEncoded)] = format::Feature::Bytes({std::move(scaled)});
        ex.features[std::string(format::keys::kHeight)] = format::Feature::Ints({info.height});
        ex.features[std::string(format::keys::kWidth)] = format::Feature::Ints({info.width});
        std::string rec = format::SerializeExample(ex);
        AQ_TRY(tw_.Write(rec));
        tf_index_.push_back({tw_.offset(), rec.size() + format::kTFRecordOverhead});
        return Status::Ok();
      }
      default: {
        auto v = AQ_TRY(format::UnpackImageRecord(s.payload));
        AQ_TRY(rw_.Write(format::PackImageRecord(v.header, scaled)));
        rec_index_.push_back({v.header.id, rw_.offset()});
        return Status::Ok();
      }
    }
  }
  Status WriteIndex(io::FileSystem& fs, const std::string& path) const {
    if (format_ == Format::kTFRecord) {
      return io::WriteFileAtomic(fs, TFRecordIndexPath(path), format::FormatTFRecordIndex(tf_index_));
    }
    if (format_ == Format::kRecordIO) {
      return io::WriteFileAtomic(fs, RecordIOIndexPath(path), format::FormatRecordIOIndex(rec_index_));
    }
    return Status::Ok();
  }

 private:
  Format format_;
  io::WritableFile& out_;
  format::TFRecordWriter tw_;
  format::RecordIOWriter rw_;
  std::vector<format::IndexEntry> tf_index_;
  std::vector<format::RecordIOIndexEntry> rec_index_;
};

// One resize run over a dataset's files, in parallel; the report collects
// the images left out.
class Resizer {
 public:
  Resizer(io::FileSystem& fs, const ResizeOptions& o, const DatasetFiles& ds)
      : fs_(fs),
        o_(o),
        ds_(ds),
        progress_({"resize", ds.files.size(), ds.total_bytes, ds.format == Format::kFolder ? "images" : "files",
                   o.common.progress}) {}

  Result<ResizeReport> Run() {
    Status st = ParallelFor(ds_.files.size(), o_.common.threads, [&](size_t i) { return RewriteFile(ds_.files[i]); });
    progress_.Finish();
    if (!st.ok()) return st;
    std::sort(rep_.skipped.begin(), rep_.skipped.end(),
              [](const auto& a, const auto& b) { return std::tie(a.file, a.record) < std::tie(b.file, b.record); });
    rep_.files = ds_.files.size();
    rep_.images = images_;
    rep_.bytes_in = bytes_in_;
    rep_.bytes_out = bytes_out_;
    return std::move(rep_);
  }

 private:
  // Writes the file's rewrite under a temporary name, then renames it into
  // place and writes its index. A folder image that was left out leaves
  // no file.
  Status RewriteFile(const std::string& in_path) {
    const std::string out_path = OutputPath(ds_, in_path, o_.out);
    if (ds_.format == Format::kFolder) AQ_TRY(fs_.MakeDirs(std::string(io::DirName(out_path))));
    const std::string tmp = out_path + ".partial";
    auto out = AQ_TRY(io::CreateFresh(fs_, tmp));
    Rewriter rewriter(ds_.format, *out);
    WalkOptions wo;
    wo.policy = o_.policy;
    auto walked =
        AQ_TRY(WalkFile(fs_, ds_.format, in_path, wo, [&](const Sample& s) { return Rescaled(s, rewriter); }));
    {
      MutexLock lock(mu_);
      rep_.skipped.insert(rep_.skipped.end(), walked.skipped.begin(), walked.skipped.end());
    }
    bytes_in_ += walked.bytes;
    progress_.Add(1, walked.bytes);
    AQ_TRY(out->Sync());
    AQ_TRY(out->Close());
    if (ds_.format == Format::kFolder && out->size() == 0) return fs_.Remove(tmp);
    bytes_out_ += out->size();
    AQ_TRY(fs_.Rename(tmp, out_path));
    return rewriter.WriteIndex(fs_, out_path);
  }

  // One record rescaled and written; one that cannot be stops the run or
  // is listed, as the policy says.
  Status Rescaled(const Sample& s, Rewriter& rewriter) {
    auto fail_or_skip = [&](const Status& why) -> Status {
      if (o_.policy == format::ErrorPolicy::kFail) {
        return why.WithContext(fmt::format("{}: record {} at offset {}", *s.file, s.record, s.offset));
      }
      MutexLock lock(mu_);
      rep_.skipped.push_back({*s.file, s.offset, s.record, s.framed_size, why.message()});
      return Status::Ok();
    };
    if (!s.parse_error.ok()) return fail_or_skip(s.parse_error);
    auto scaled = Rescale(s.image, o_.scale, o_.quality);
    if (!scaled.ok()) return fail_or_skip(scaled.status());
    AQ_TRY(rewriter.Write(s, std::move(*scaled)));
    images_ += 1;
    return Status::Ok();
  }

  io::FileSystem& fs_;
  const ResizeOptions& o_;
  const DatasetFiles& ds_;
  Progress progress_;
  std::atomic<uint64_t> images_{0}, bytes_in_{0}, bytes_out_{0};
  Mutex mu_;
  ResizeReport rep_;  // skipped: under mu_ while files are rewritten
};

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
  if (ds.format == Format::kTFRecord) AQ_TRY(fs.MakeDirs(io::JoinPath(o.out, "idx")));
  ResizeReport rep = AQ_TRY(Resizer(fs, o, ds).Run());
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace aq::dataset
