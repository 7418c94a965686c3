// aquifer dataset verify: every record's framing and CRC, every payload's
// structure (tf.Example or im2rec header), label and JPEG header (or full
// decode), and the index files against the records they point to. All
// problems are counted; the first max_problems are listed with file, record
// and offset.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <set>

#include "common/crc32c.h"
#include "common/mutex.h"
#include "common/progress.h"
#include "common/thread_pool.h"
#include "dataset/commands.h"
#include "format/manifest.h"
#include "format/recordio.h"
#include "format/tfrecord.h"
#include "image/decode.h"

namespace aq::dataset {
namespace {

using format::ManifestFile;
using format::ManifestName;
using format::ManifestPath;
using format::UpdateManifest;

// All problems are counted; the first max (in file order, then in the
// order they were found) are kept, so the report is the same whatever order the threads
// finish in.
class Collector {
 public:
  Collector(VerifyReport* rep, size_t max) : rep_(rep), max_(max) {}
  void Add(size_t file_index, Problem p) {
    MutexLock lock(mu_);
    ++rep_->problem_count;
    if (max_ == 0) return;
    kept_.push_back({file_index, std::move(p)});
    if (kept_.size() >= 2 * max_) Trim();
  }
  void Merge(uint64_t records, uint64_t bytes, uint64_t image_bytes, const std::map<int64_t, uint64_t>& labels) {
    MutexLock lock(mu_);
    rep_->records += records;
    rep_->bytes += bytes;
    rep_->image_bytes += image_bytes;
    for (const auto& [l, c] : labels) rep_->labels[l] += c;
  }
  uint64_t count() {
    MutexLock lock(mu_);
    return rep_->problem_count;
  }
  void Finish() {
    MutexLock lock(mu_);
    Trim();
    for (auto& k : kept_) rep_->problems.push_back(std::move(k.problem));
    kept_.clear();
  }

 private:
  struct Kept {
    size_t file_index;
    Problem problem;
  };
  void Trim() AQ_REQUIRES(mu_) {
    // One thread checks one file, so a file's problems arrive in a fixed
    // order: a stable sort by file gives the same list on every run.
    std::stable_sort(kept_.begin(), kept_.end(),
                     [](const Kept& a, const Kept& b) { return a.file_index < b.file_index; });
    if (kept_.size() > max_) kept_.resize(max_);
  }

  Mutex mu_;
  VerifyReport* rep_ AQ_GUARDED_BY(mu_);
  std::vector<Kept> kept_ AQ_GUARDED_BY(mu_);
  size_t max_;
};

// Problems of one file, in the collector's order.
struct ProblemsOf {
  Collector& c;
  size_t index;
  void Add(Problem p) const { c.Add(index, std::move(p)); }
};

// Checks an index file against the record offsets found by the scan.
void CheckIndex(io::FileSystem& fs, Format format, size_t file_index, const std::string& file,
                const std::vector<uint64_t>& offsets, const std::vector<uint64_t>& sizes, Collector& collector) {
  const ProblemsOf out{collector, file_index};
  // WebDataset shards get the TFRecord index's format ("offset size" per sample).
  const bool offset_size = format == Format::kTFRecord || format == Format::kWebDataset;
  const std::string idx = offset_size ? TFRecordIndexPath(file) : RecordIOIndexPath(file);
  if (!fs.Exists(idx)) return;
  auto text = io::ReadFileToString(fs, idx);
  if (!text.ok()) {
    out.Add({idx, 0, 0, text.status().message()});
    return;
  }
  if (offset_size) {
    auto entries = format::ParseTFRecordIndex(*text, idx);
    if (!entries.ok()) {
      out.Add({idx, 0, 0, entries.status().message()});
      return;
    }
    if (entries->size() != offsets.size()) {
      out.Add({idx, 0, 0, fmt::format("index lists {} records, the file holds {}", entries->size(), offsets.size())});
    }
    for (size_t i = 0; i < std::min(entries->size(), offsets.size()); ++i) {
      if ((*entries)[i].offset != offsets[i] || (*entries)[i].size != sizes[i]) {
        out.Add({idx, i, offsets[i],
                 fmt::format("index entry {} says offset {} size {}, the record is at {} with size {}", i,
                             (*entries)[i].offset, (*entries)[i].size, offsets[i], sizes[i])});
        return;  // one mismatch usually means all later ones differ
      }
    }
    return;
  }
  auto entries = format::ParseRecordIOIndex(*text, idx);
  if (!entries.ok()) {
    out.Add({idx, 0, 0, entries.status().message()});
    return;
  }
  std::set<uint64_t> starts(offsets.begin(), offsets.end());
  for (size_t i = 0; i < entries->size(); ++i) {
    if (!starts.count((*entries)[i].offset)) {
      out.Add({idx, i, (*entries)[i].offset,
               fmt::format("index key {} points at offset {}, which is not the start of a record", (*entries)[i].key,
                           (*entries)[i].offset)});
    }
  }
  if (entries->size() != offsets.size()) {
    out.Add({idx, 0, 0, fmt::format("index lists {} records, the file holds {}", entries->size(), offsets.size())});
  }
}

// The files walked whole, into the dataset's manifest. Not being able to
// write it (a read-only dataset) is reported, not an error: the data was
// verified all the same.
void WriteVerified(io::FileSystem& fs, const DatasetFiles& ds, std::vector<std::optional<ManifestFile>>& verified,
                   VerifyReport& rep) {
  const bool one_file = ds.files.size() == 1 && ds.files[0] == ds.root;
  const std::string path = ManifestPath(ds.root, one_file);
  std::map<std::string, ManifestFile> files;
  for (size_t i = 0; i < verified.size(); ++i) {
    if (!verified[i]) continue;
    rep.manifest_records += verified[i]->image_crc32c.size() - verified[i]->unverified.size();
    files[ManifestName(path, ds.files[i])] = std::move(*verified[i]);
  }
  if (Status st = UpdateManifest(fs, path, "dataset verify --decode", std::move(files)); !st.ok()) {
    rep.manifest_error = st.message();
    rep.manifest_records = 0;
    return;
  }
  rep.manifest = path;
}

}  // namespace

Result<VerifyReport> Verify(io::FileSystem& fs, const VerifyOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  format::FolderScanOptions scan;
  scan.allow_empty_classes = o.allow_empty_classes;
  DatasetFiles ds = AQ_TRY(FindDataset(fs, o.path, o.format, scan));
  const format::WdsSchema wds = AQ_TRY(format::ParseWdsSchema(o.wds_image, o.wds_label));
  VerifyReport rep;
  rep.path = o.path;
  rep.format = ds.format;
  rep.files = ds.files.size();
  Collector out(&rep, o.max_problems);
  for (const auto& sk : ds.folder.skipped) out.Add(0, {sk.file, sk.record, sk.offset, sk.reason});
  // A set of -NNNNN-of-MMMMM shards with some missing (a pack stopped
  // half way, a copy cut short) is not whole, whatever each file holds.
  for (const auto& gap : ShardSetGaps(ds.files)) {
    const size_t colon = gap.find(": ");
    out.Add(0, {gap.substr(0, colon), 0, 0, gap.substr(colon + 2)});
  }
  Progress progress({"verify", ds.files.size(), ds.total_bytes, ds.format == Format::kFolder ? "images" : "files",
                     o.common.progress});
  const bool folder = ds.format == Format::kFolder;
  // Header checks leave verify waiting on storage: keep two files in flight
  // per core so the device streams while the other thread checks CRCs
  // (measured on 2 cores from a cold cache: 2 streams reach ~0.8x of cat's
  // read rate, 4 streams ~0.87x; more only costs when data is cached). Full
  // decodes are CPU-bound: one thread per core.
  const size_t threads = o.common.threads != 0 ? o.common.threads : HardwareThreads() * (o.decode ? 1 : 2);
  // With --decode: each file walked whole with its records numbered as a
  // reader numbers them goes into the manifest (one slot per file).
  const bool manifest = o.decode && o.write_manifest;
  std::vector<std::optional<ManifestFile>> verified(manifest ? ds.files.size() : 0);

  Status st = ParallelFor(ds.files.size(), threads, [&](size_t i) -> Status {
    if (o.fail_fast && out.count() > 0) return Status::Ok();
    const std::string& file = ds.files[i];
    std::map<int64_t, uint64_t> labels;
    std::vector<uint64_t> offsets, sizes;
    uint64_t image_bytes = 0, shown = 0;
    ManifestFile mf;
    bool numbered = true;  // records arrived as 0, 1, 2, ...
    WalkOptions wo;
    wo.wds = wds;
    wo.policy = format::ErrorPolicy::kSkip;  // verify reports all damage, then fails
    auto walked = WalkFile(fs, ds.format, file, wo, [&](const Sample& s) -> Status {
      offsets.push_back(s.offset);
      sizes.push_back(s.framed_size);
      // Progress as records go by, so a few large shards do not sit at 0%.
      progress.Add(0, s.framed_size);
      shown += s.framed_size;
      bool clean = true;
      auto problem = [&](const std::string& m) {
        clean = false;
        out.Add(i, {file, s.record, s.offset, m});
      };
      // The record's entry in the manifest, once its checks are done.
      auto record = [&] {
        numbered = numbered && s.record == mf.image_crc32c.size();
        if (!clean) mf.unverified.push_back(static_cast<uint32_t>(mf.image_crc32c.size()));
        mf.image_crc32c.push_back(crc32c::Value(s.image));
        return Status::Ok();
      };
      if (!s.parse_error.ok()) {
        problem(s.parse_error.message());
        if (s.image.empty()) return record();
      }
      int64_t label = folder ? ds.folder.images[i].class_index : s.label;
      if (folder || s.has_label) {
        labels[label] += 1;
        if (o.num_classes > 0) {
          int64_t lo = ds.format == Format::kTFRecord ? 1 : 0;
          if (label < lo || label >= lo + o.num_classes) {
            problem(fmt::format("label {} outside {}..{}", label, lo, lo + o.num_classes - 1));
          }
        }
      }
      image_bytes += s.image.size();
      // A JPEG's headers and end marker (with --decode: every pixel), any
      // other image by decoding it.
      auto checked = image::CheckImage(s.image, o.decode);
      if (!checked.ok()) problem(checked.status().message());
      return record();
    });
    if (!walked.ok()) {
      out.Add(i, {file, 0, 0, walked.status().message()});
      progress.Add(1, 0);
      return Status::Ok();
    }
    for (const auto& sk : walked->skipped) {
      out.Add(i, {sk.file, sk.record, sk.offset, fmt::format("{} ({} bytes skipped)", sk.reason, sk.bytes)});
    }
    if (!folder) CheckIndex(fs, ds.format, i, file, offsets, sizes, out);
    if (manifest && numbered && walked->skipped.empty()) {
      mf.bytes = walked->bytes;
      verified[i] = std::move(mf);
    }
    out.Merge(walked->records, walked->bytes, image_bytes, labels);
    progress.Add(1, walked->bytes > shown ? walked->bytes - shown : 0);
    return Status::Ok();
  });
  progress.Finish();
  out.Finish();
  AQ_TRY(std::move(st));
  if (manifest) WriteVerified(fs, ds, verified, rep);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The label base, where the readers would get it wrong: a TFRecord is
  // read as 1-based (TensorFlow's ImageNet convention), and a label 0 in
  // one stops the pipeline.
  if (!rep.labels.empty() && rep.format == Format::kTFRecord && rep.labels.begin()->first == 0) {
    rep.label_note =
        "labels start at 0: a TFRecord is read as 1-based (TensorFlow's ImageNet convention, 0 = background), so read "
        "this one with labels_zero_based=False (bench: --raw-labels)";
  } else if (!rep.labels.empty() && rep.labels.begin()->first < 0) {
    rep.label_note =
        fmt::format("negative labels (down to {}): no reader takes them as classes", rep.labels.begin()->first);
  }
  return rep;
}

}  // namespace aq::dataset
