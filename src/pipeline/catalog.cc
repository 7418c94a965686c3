#include "pipeline/catalog.h"

#include <fmt/format.h>

#include <algorithm>

#include "format/recordio.h"
#include "format/tar.h"
#include "format/tfrecord.h"

namespace aq::pipeline {
namespace {

Status AddTFRecord(io::FileSystem& fs, Catalog& cat, uint32_t fi) {
  const std::string& path = cat.files[fi];
  std::vector<format::IndexEntry> entries;
  const std::string idx = dataset::TFRecordIndexPath(path);
  if (fs.Exists(idx)) {
    std::string text = AQ_TRY(io::ReadFileToString(fs, idx));
    entries = AQ_TRY(format::ParseTFRecordIndex(text, idx));
  } else {
    auto f = AQ_TRY(fs.OpenRead(path, io::AccessHint::kSequential));
    entries = AQ_TRY(format::BuildTFRecordIndex(*f));
    ++cat.indexes_built;
  }
  for (size_t r = 0; r < entries.size(); ++r) {
    cat.samples.push_back({fi, static_cast<uint32_t>(r), entries[r].offset, entries[r].size, -1});
  }
  return Status::Ok();
}

Status AddRecordIO(io::FileSystem& fs, Catalog& cat, uint32_t fi) {
  const std::string& path = cat.files[fi];
  auto st = AQ_TRY(fs.Stat(path));
  std::vector<uint64_t> offsets;
  const std::string idx = dataset::RecordIOIndexPath(path);
  if (fs.Exists(idx)) {
    std::string text = AQ_TRY(io::ReadFileToString(fs, idx));
    for (const auto& e : AQ_TRY(format::ParseRecordIOIndex(text, idx))) offsets.push_back(e.offset);
    std::sort(offsets.begin(), offsets.end());
  } else {
    auto f = AQ_TRY(fs.OpenRead(path, io::AccessHint::kSequential));
    format::RecordIOReader r(*f);
    std::string rec;
    while (AQ_TRY(r.Next(&rec))) offsets.push_back(r.offset());
    ++cat.indexes_built;
  }
  for (size_t r = 0; r < offsets.size(); ++r) {
    uint64_t end = r + 1 < offsets.size() ? offsets[r + 1] : st.size;
    if (end <= offsets[r]) return Corruption(fmt::format("{}: index offsets are not increasing at entry {}", idx, r));
    cat.samples.push_back({fi, static_cast<uint32_t>(r), offsets[r], end - offsets[r], -1});
  }
  return Status::Ok();
}

// WebDataset: one sample per key, its bytes from its first header to the
// end of its last member. The index pack writes (idx/<shard>.idx, "offset
// size" per sample) saves scanning the headers.
Status AddTar(io::FileSystem& fs, Catalog& cat, uint32_t fi) {
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
    while (AQ_TRY(wds.Next(&s))) entries.push_back({s.offset, s.size});
    ++cat.indexes_built;
  }
  for (size_t r = 0; r < entries.size(); ++r) {
    cat.samples.push_back({fi, static_cast<uint32_t>(r), entries[r].offset, entries[r].size, -1});
  }
  return Status::Ok();
}

}  // namespace

Result<Catalog> BuildCatalog(io::FileSystem& fs, const std::string& path, dataset::Format format) {
  dataset::DatasetFiles ds = AQ_TRY(dataset::FindDataset(fs, path, format));
  Catalog cat;
  cat.format = ds.format;
  cat.files = ds.files;
  cat.total_bytes = ds.total_bytes;
  if (cat.files.size() > UINT32_MAX) return Unsupported("more than 2^32 files");
  for (uint32_t fi = 0; fi < cat.files.size(); ++fi) {
    switch (ds.format) {
      case dataset::Format::kTFRecord: AQ_TRY(AddTFRecord(fs, cat, fi)); break;
      case dataset::Format::kRecordIO: AQ_TRY(AddRecordIO(fs, cat, fi)); break;
      case dataset::Format::kWebDataset: AQ_TRY(AddTar(fs, cat, fi)); break;
      case dataset::Format::kFolder: {
        const auto& img = ds.folder.images[fi];
        cat.samples.push_back({fi, 0, 0, img.size, static_cast<int32_t>(img.class_index)});
        break;
      }
      case dataset::Format::kAuto: return Internal("unresolved dataset format");
    }
  }
  if (cat.samples.empty()) return InvalidArgument(fmt::format("dataset '{}' holds no samples", path));
  return cat;
}

}  // namespace aq::pipeline
