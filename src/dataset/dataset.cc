#include "dataset/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "format/example.h"
#include "format/recordio.h"
#include "format/tar.h"
#include "format/tfrecord.h"

namespace aq::dataset {

std::string_view FormatName(Format f) {
  switch (f) {
    case Format::kAuto: return "auto";
    case Format::kTFRecord: return "tfrecord";
    case Format::kRecordIO: return "recordio";
    case Format::kFolder: return "folder";
    case Format::kWebDataset: return "wds";
  }
  return "?";
}

Result<Format> ParseFormat(std::string_view s) {
  if (s == "auto") return Format::kAuto;
  if (s == "tfrecord") return Format::kTFRecord;
  if (s == "recordio") return Format::kRecordIO;
  if (s == "folder") return Format::kFolder;
  if (s == "wds" || s == "webdataset") return Format::kWebDataset;
  return InvalidArgument(fmt::format("unknown format '{}' (expected auto, tfrecord, recordio, wds or folder)", s));
}

bool IsTFRecordName(std::string_view name) {
  static const std::regex kShard(R"(.*-\d+-of-\d+(-copy-\d+)?)");
  if (std::regex_match(name.begin(), name.end(), kShard)) return true;
  auto ends = [&](std::string_view suf) {
    return name.size() >= suf.size() && name.substr(name.size() - suf.size()) == suf;
  };
  return ends(".tfrecord") || ends(".tfrecords");
}

std::string TFRecordIndexPath(const std::string& shard) {
  return io::JoinPath(io::JoinPath(io::DirName(shard), "idx"), std::string(io::BaseName(shard)) + ".idx");
}

std::string RecordIOIndexPath(const std::string& rec) {
  if (rec.size() > 4 && rec.substr(rec.size() - 4) == ".rec") return rec.substr(0, rec.size() - 4) + ".idx";
  return rec + ".idx";
}

std::string ShardName(std::string_view prefix, size_t index, size_t count) {
  return fmt::format("{}-{:05d}-of-{:05d}", prefix, index, count);
}

std::vector<std::string> ShardSetGaps(const std::vector<std::string>& files) {
  // (directory, prefix, count, extension) -> the numbers present
  std::map<std::tuple<std::string, std::string, uint64_t, std::string>, std::set<uint64_t>> sets;
  std::vector<std::string> out;
  for (const auto& f : files) {
    const std::string base(io::BaseName(f));
    const size_t of = base.rfind("-of-");
    if (of == std::string::npos || of < 6 || base[of - 6] != '-') continue;
    const std::string index = base.substr(of - 5, 5), count = base.substr(of + 4, 5);
    if (base.size() < of + 9 || !std::all_of(index.begin(), index.end(), ::isdigit) ||
        !std::all_of(count.begin(), count.end(), ::isdigit)) {
      continue;
    }
    const std::string ext = base.substr(of + 9);
    if (!ext.empty() && ext[0] != '.') continue;
    const uint64_t n = std::stoull(count), i = std::stoull(index);
    if (i >= n) {
      out.push_back(fmt::format("{}: shard {} of a set of {}: numbered past its count", f, i, n));
      continue;
    }
    sets[{std::string(io::DirName(f)), base.substr(0, of - 6), n, ext}].insert(i);
  }
  for (const auto& [k, have] : sets) {
    const auto& [dir, prefix, n, ext] = k;
    if (have.size() == n) continue;
    size_t listed = 0;
    for (uint64_t i = 0; i < n && listed < 20; ++i) {
      if (have.count(i) != 0) continue;
      out.push_back(fmt::format("{}: missing: shard {} of {} is not there ({} of the set are)",
                                io::JoinPath(dir, ShardName(prefix, i, n) + ext), i, n, have.size()));
      ++listed;
    }
  }
  return out;
}

Status PrepareOutputDir(io::FileSystem& fs, const std::string& out, bool overwrite) {
  if (out.empty()) return InvalidArgument("an output directory is required");
  auto st = fs.Stat(out);
  if (st.ok() && !overwrite) {
    if (!st->is_dir) return Status(StatusCode::kAlreadyExists, fmt::format("'{}' exists and is not a directory", out));
    auto list = AQ_TRY(fs.List(out));
    if (!list.empty()) {
      return Status(StatusCode::kAlreadyExists,
                    fmt::format("output directory '{}' is not empty (overwriting was not asked for)", out));
    }
  }
  return fs.MakeDirs(out);
}

namespace {

bool EndsWith(const std::string& s, std::string_view end) {
  return s.size() > end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

// A directory's record files by format, and its class-like subdirectories
// (not idx/, not hidden).
struct RecordFiles {
  struct Group {
    std::vector<std::string> files;
    uint64_t bytes = 0;
    void Add(const std::string& path, uint64_t size) {
      files.push_back(path);
      bytes += size;
    }
  };
  Group tf, rec, tar;
  size_t subdirs = 0;
  std::vector<std::string> subdir_names;  // the first few, for messages

  Group& Of(Format f) { return f == Format::kRecordIO ? rec : f == Format::kWebDataset ? tar : tf; }
};

RecordFiles ClassifyEntries(const std::string& path, const std::vector<io::FileInfo>& list) {
  RecordFiles r;
  for (const auto& e : list) {
    if (e.is_dir) {
      if (e.name != "idx" && !e.name.empty() && e.name[0] != '.') {
        ++r.subdirs;
        if (r.subdir_names.size() < 3) r.subdir_names.push_back(e.name);
      }
    } else if (EndsWith(e.name, ".rec")) {
      r.rec.Add(io::JoinPath(path, e.name), e.size);
    } else if (EndsWith(e.name, ".tar")) {
      r.tar.Add(io::JoinPath(path, e.name), e.size);
    } else if (IsTFRecordName(e.name)) {
      r.tf.Add(io::JoinPath(path, e.name), e.size);
    }
  }
  return r;
}

// The format a directory's contents say. A directory that reads two ways
// (a stray backup.tar or *.rec beside class folders, shards of two
// formats) is refused with both readings named: taking one silently drops
// the other's data.
Result<Format> DetectFormat(const std::string& path, const RecordFiles& r) {
  std::vector<std::pair<Format, std::string>> readings;
  auto files = [](const RecordFiles::Group& g) {
    return fmt::format("{}{}", io::BaseName(g.files.front()),
                       g.files.size() > 1 ? fmt::format(" and {} more", g.files.size() - 1) : "");
  };
  if (!r.rec.files.empty()) readings.emplace_back(Format::kRecordIO, "RecordIO (" + files(r.rec) + ")");
  if (!r.tf.files.empty()) readings.emplace_back(Format::kTFRecord, "TFRecord (" + files(r.tf) + ")");
  if (!r.tar.files.empty()) readings.emplace_back(Format::kWebDataset, "WebDataset (" + files(r.tar) + ")");
  if (r.subdirs > 0) {
    std::string names;
    for (const auto& n : r.subdir_names) names += (names.empty() ? "" : ", ") + n;
    if (r.subdirs > r.subdir_names.size()) names += fmt::format(" and {} more", r.subdirs - r.subdir_names.size());
    readings.emplace_back(Format::kFolder, fmt::format("an image folder ({} class folder{}: {})", r.subdirs,
                                                       r.subdirs == 1 ? "" : "s", names));
  }
  if (readings.size() == 1) return readings[0].first;
  if (readings.size() > 1) {
    std::string ways, flags;
    for (size_t i = 0; i < readings.size(); ++i) {
      ways += fmt::format("{}{}", i == 0 ? "" : i + 1 == readings.size() ? " and as " : ", as ", readings[i].second);
      flags += fmt::format("{}--format {}", i == 0 ? "" : " or ", FormatName(readings[i].first));
    }
    return InvalidArgument(
        fmt::format("'{}' reads two ways: as {}; say which with {} (format= in the Loader)", path, ways, flags));
  }
  return InvalidArgument(
      fmt::format("no dataset found in '{}': expected TFRecord shards (name-00000-of-00008 or *.tfrecord), .rec files, "
                  "WebDataset .tar shards, or class subdirectories with JPEGs",
                  path));
}

// A single record file: its format from its name unless given.
Result<DatasetFiles> SingleFile(const std::string& path, uint64_t size, Format format) {
  if (format == Format::kFolder) return InvalidArgument(fmt::format("'{}' is a file, not an image folder", path));
  if (format == Format::kAuto) {
    format = EndsWith(path, ".rec")   ? Format::kRecordIO
             : EndsWith(path, ".tar") ? Format::kWebDataset
                                      : Format::kTFRecord;
  }
  DatasetFiles ds;
  ds.root = path;
  ds.format = format;
  ds.files.push_back(path);
  ds.total_bytes = size;
  return ds;
}

}  // namespace

Result<DatasetFiles> FindDataset(io::FileSystem& fs, const std::string& path, Format format,
                                 const format::FolderScanOptions& folder) {
  auto st = fs.Stat(path);
  if (!st.ok()) return st.status().WithContext("dataset");
  if (!st->is_dir) return SingleFile(path, st->size, format);
  auto list = fs.List(path);
  if (!list.ok()) return list.status().WithContext("dataset");
  RecordFiles found = ClassifyEntries(path, *list);
  if (format == Format::kAuto) format = AQ_TRY(DetectFormat(path, found));
  DatasetFiles ds;
  ds.root = path;
  ds.format = format;
  if (format == Format::kFolder) {
    ds.folder = AQ_TRY(format::ScanImageFolder(fs, path, folder));
    for (const auto& img : ds.folder.images) ds.files.push_back(img.path);
    ds.total_bytes = ds.folder.total_bytes;
    if (ds.files.empty()) return InvalidArgument(fmt::format("image folder '{}' holds no JPEG files", path));
    return ds;
  }
  RecordFiles::Group& g = found.Of(format);
  if (g.files.empty()) {
    return InvalidArgument(fmt::format("no {} in '{}'",
                                       format == Format::kRecordIO     ? ".rec files"
                                       : format == Format::kWebDataset ? "WebDataset .tar shards"
                                                                       : "TFRecord shards",
                                       path));
  }
  ds.files = std::move(g.files);
  ds.total_bytes = g.bytes;
  return ds;
}

namespace {

void FillFromExample(Sample& s) {
  auto f = format::ParseImageFields(s.payload);
  if (!f.ok()) {
    s.parse_error = f.status();
    return;
  }
  s.image = f->encoded;
  s.key = std::string(f->filename);
  s.label = f->label;
  s.has_label = f->has_label;
  if (!f->has_label) s.parse_error = Corruption("Example has no image/class/label");
}

void FillFromRecordIO(Sample& s) {
  auto v = format::UnpackImageRecord(s.payload);
  if (!v.ok()) {
    s.parse_error = v.status();
    return;
  }
  s.image = v->image;
  s.key = std::to_string(v->header.id);
  float l = v->header.flag > 0 ? v->header.labels.front() : v->header.label;
  s.label = static_cast<int64_t>(l);
  s.has_label = true;
}

// The records of one file through its format's reader, from the options'
// first record, at most `limit`; `fill` reads the format's fields.
template <typename Reader>
Status WalkRecords(Reader& r, const std::string& file, const WalkOptions& opt, void (*fill)(Sample&), WalkResult& res,
                   const std::function<Status(const Sample&)>& fn) {
  std::string payload;
  uint64_t seen = 0;
  while (opt.limit == 0 || seen < opt.start_record + opt.limit) {
    if (!AQ_TRY(r.Next(&payload))) break;
    if (seen++ < opt.start_record) continue;
    Sample s;
    s.file = &file;
    s.record = r.index();
    s.offset = r.offset();
    s.framed_size = r.framed_size();
    s.payload = payload;
    fill(s);
    ++res.records;
    res.bytes += r.framed_size();
    AQ_TRY(fn(s));
  }
  res.skipped = r.skipped();
  return Status::Ok();
}

}  // namespace

Result<WalkResult> WalkFile(io::FileSystem& fs, Format format, const std::string& file, const WalkOptions& opt,
                            const std::function<Status(const Sample&)>& fn) {
  WalkResult res;
  auto f = AQ_TRY(fs.OpenRead(file, io::AccessHint::kSequential));
  if (format == Format::kFolder) {
    std::string payload(f->size(), '\0');
    Sample s;
    s.file = &file;
    size_t got = AQ_TRY(f->ReadAt(0, payload.size(), payload.data()));
    if (got != payload.size()) return Truncated(fmt::format("{}: file shrank while being read", file));
    s.payload = s.image = payload;
    s.framed_size = payload.size();
    s.key = file;
    // A folder image's label is its class index, which the caller knows
    // from DatasetFiles::folder.
    res.records = 1;
    res.bytes = payload.size();
    AQ_TRY(fn(s));
    return res;
  }

  if (format == Format::kTFRecord) {
    format::TFRecordReaderOptions ro;
    ro.policy = opt.policy;
    ro.verify_crc = opt.verify_crc;
    format::TFRecordReader r(*f, ro);
    AQ_TRY(WalkRecords(r, file, opt, FillFromExample, res, fn));
    return res;
  }
  if (format == Format::kWebDataset) {
    // One sample per key; its bytes are read whole, as the pipeline reads
    // them, and parsed the same way.
    format::TarReader tar(*f, file);
    format::WdsReader wds(tar);
    format::WdsSample ws;
    std::string stored;
    uint64_t seen = 0;
    while (opt.limit == 0 || seen < opt.start_record + opt.limit) {
      auto more = wds.Next(&ws);
      if (!more.ok()) {
        if (opt.policy == format::ErrorPolicy::kFail) return more.status();
        const uint64_t at = tar.position();
        res.skipped.push_back({file, at, seen, f->size() > at ? f->size() - at : 0, more.status().message()});
        break;  // a damaged header: the rest of the archive cannot be found
      }
      if (!*more) break;
      const uint64_t record = seen++;
      if (record < opt.start_record) continue;
      stored.resize(ws.size);
      size_t got = AQ_TRY(f->ReadAt(ws.offset, ws.size, stored.data()));
      if (got != ws.size) return Truncated(fmt::format("{}: sample '{}' cut short", file, ws.key));
      Sample s;
      s.file = &file;
      s.record = record;
      s.offset = ws.offset;
      s.framed_size = ws.size;
      s.payload = stored;
      s.key = ws.key;
      auto fields =
          format::ParseWdsSample(stored, fmt::format("{}: sample {} at offset {}", file, record, ws.offset), opt.wds);
      if (fields.ok()) {
        s.image = fields->image;
        s.label = fields->label;
        s.has_label = fields->has_label;
      } else {
        s.parse_error = fields.status();
      }
      ++res.records;
      res.bytes += ws.size;
      AQ_TRY(fn(s));
    }
    return res;
  }
  format::RecordIOReaderOptions ro;
  ro.policy = opt.policy;
  format::RecordIOReader r(*f, ro);
  AQ_TRY(WalkRecords(r, file, opt, FillFromRecordIO, res, fn));
  return res;
}

}  // namespace aq::dataset
