#include "pipeline/catalog.h"

#include <fmt/format.h>

#include <algorithm>

#include "format/recordio.h"
#include "format/tar.h"
#include "format/tfrecord.h"

namespace aq::pipeline {
namespace {

// A scan's error: fatal, or (skip) the records before it kept and the rest
// of the file named as lost.
Status Lost(Catalog& cat, format::ErrorPolicy policy, uint32_t fi, uint64_t records, uint64_t offset,
            const Status& error) {
  if (policy == format::ErrorPolicy::kFail || format::IsOutage(error)) return error;
  cat.losses.push_back(
      {cat.files[fi], records, offset,
       fmt::format("{} (the rest of the file is not read; {} records before it are)", error.message(), records)});
  return Status::Ok();
}

Status AddTFRecord(io::FileSystem& fs, Catalog& cat, uint32_t fi, format::ErrorPolicy policy) {
  const std::string& path = cat.files[fi];
  std::vector<format::IndexEntry> entries;
  const std::string idx = dataset::TFRecordIndexPath(path);
  if (fs.Exists(idx)) {
    std::string text = AQ_TRY(io::ReadFileToString(fs, idx));
    entries = AQ_TRY(format::ParseTFRecordIndex(text, idx));
  } else {
    auto f = AQ_TRY(fs.OpenRead(path, io::AccessHint::kSequential));
    if (Status s = format::BuildTFRecordIndex(*f, &entries); !s.ok()) {
      const uint64_t at = entries.empty() ? 0 : entries.back().offset + entries.back().size;
      AQ_TRY(Lost(cat, policy, fi, entries.size(), at, s));
    }
    ++cat.indexes_built;
  }
  for (size_t r = 0; r < entries.size(); ++r) {
    cat.samples.push_back({fi, static_cast<uint32_t>(r), entries[r].offset, entries[r].size, -1});
  }
  return Status::Ok();
}

Status AddRecordIO(io::FileSystem& fs, Catalog& cat, uint32_t fi, format::ErrorPolicy policy) {
  const std::string& path = cat.files[fi];
  auto st = AQ_TRY(fs.Stat(path));
  std::vector<uint64_t> offsets;
  std::vector<uint64_t> ends;  // from a scan: each record's own end (damage may follow it)
  const std::string idx = dataset::RecordIOIndexPath(path);
  if (fs.Exists(idx)) {
    std::string text = AQ_TRY(io::ReadFileToString(fs, idx));
    for (const auto& e : AQ_TRY(format::ParseRecordIOIndex(text, idx))) offsets.push_back(e.offset);
    std::sort(offsets.begin(), offsets.end());
  } else {
    auto f = AQ_TRY(fs.OpenRead(path, io::AccessHint::kSequential));
    format::RecordIOReaderOptions ro;
    ro.policy = policy;  // skip: passes over damage to the next record it can find
    format::RecordIOReader r(*f, ro);
    std::string rec;
    while (true) {
      auto more = r.Next(&rec);
      if (!more.ok()) {
        AQ_TRY(Lost(cat, policy, fi, offsets.size(), ends.empty() ? 0 : ends.back(), more.status()));
        break;
      }
      if (!*more) break;
      offsets.push_back(r.offset());
      ends.push_back(r.offset() + r.framed_size());
    }
    for (const auto& k : r.skipped()) {
      cat.losses.push_back({path, k.record, k.offset,
                            fmt::format("{}: record {} at offset {}: {} ({} bytes passed over)", path, k.record,
                                        k.offset, k.reason, k.bytes)});
    }
    ++cat.indexes_built;
  }
  for (size_t r = 0; r < offsets.size(); ++r) {
    uint64_t end = !ends.empty() ? ends[r] : r + 1 < offsets.size() ? offsets[r + 1] : st.size;
    if (end <= offsets[r]) return Corruption(fmt::format("{}: index offsets are not increasing at entry {}", idx, r));
    cat.samples.push_back({fi, static_cast<uint32_t>(r), offsets[r], end - offsets[r], -1});
  }
  return Status::Ok();
}

// WebDataset: one sample per key, its bytes from its first header to the
// end of its last member. The index pack writes (idx/<shard>.idx, "offset
// size" per sample) saves scanning the headers.
Status AddTar(io::FileSystem& fs, Catalog& cat, uint32_t fi, format::ErrorPolicy policy) {
  const std::string& path = cat.files[fi];
  const std::string idx = dataset::TFRecordIndexPath(path);
  std::vector<format::IndexEntry> entries;
  if (fs.Exists(idx)) {
    std::string text = AQ_TRY(io::ReadFileToString(fs, idx));
    entries = AQ_TRY(format::ParseTFRecordIndex(text, idx));
  } else {
    auto f = AQ_TRY(fs.OpenRead(path, io::AccessHint::kSequential));
    format::TarReader tar(*f, path);
    format::WdsReader wds(tar);
    format::WdsSample s;
    while (true) {
      auto more = wds.Next(&s);  // every whole sample before damage comes first
      if (!more.ok()) {
        const uint64_t at = entries.empty() ? 0 : entries.back().offset + entries.back().size;
        AQ_TRY(Lost(cat, policy, fi, entries.size(), at, more.status()));
        break;
      }
      if (!*more) break;
      entries.push_back({s.offset, s.size});
    }
    ++cat.indexes_built;
  }
  for (size_t r = 0; r < entries.size(); ++r) {
    cat.samples.push_back({fi, static_cast<uint32_t>(r), entries[r].offset, entries[r].size, -1});
  }
  return Status::Ok();
}

}  // namespace

Result<Catalog> BuildCatalog(io::FileSystem& fs, const std::string& path, const CatalogOptions& options) {
  const format::ErrorPolicy policy = options.policy;
  format::FolderScanOptions folder;
  folder.allow_empty_classes = options.allow_empty_classes;
  dataset::DatasetFiles ds = AQ_TRY(dataset::FindDataset(fs, path, options.format, folder));
  Catalog cat;
  cat.format = ds.format;
  cat.files = ds.files;
  cat.total_bytes = ds.total_bytes;
  if (cat.files.size() > UINT32_MAX) return Unsupported("more than 2^32 files");
  for (uint32_t fi = 0; fi < cat.files.size(); ++fi) {
    switch (ds.format) {
      case dataset::Format::kTFRecord: AQ_TRY(AddTFRecord(fs, cat, fi, policy)); break;
      case dataset::Format::kRecordIO: AQ_TRY(AddRecordIO(fs, cat, fi, policy)); break;
      case dataset::Format::kWebDataset: AQ_TRY(AddTar(fs, cat, fi, policy)); break;
      case dataset::Format::kFolder: {
        const auto& img = ds.folder.images[fi];
        cat.samples.push_back({fi, 0, 0, img.size, static_cast<int32_t>(img.class_index)});
        break;
      }
      case dataset::Format::kAuto: return Internal("unresolved dataset format");
    }
  }
  if (cat.samples.empty()) {
    return InvalidArgument(fmt::format("dataset '{}' holds no samples{}", path,
                                       cat.losses.empty() ? "" : fmt::format(" ({})", cat.losses.front().message)));
  }
  return cat;
}

}  // namespace aq::pipeline
