// Catalog: where every sample of a dataset lives (file, byte offset, size),
// so an epoch can be planned (shuffled, sharded across ranks) before any
// data is read. Built from the indexes written by `aquifer dataset pack`
// (TFRecord idx/<shard>.idx, RecordIO .idx), by scanning record headers when
// an index is missing, or from an image folder's listing.
//
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataset/dataset.h"
#include "format/error_policy.h"
#include "io/file_system.h"

namespace aq::pipeline {

struct SampleRef {
  uint32_t file = 0;    // index into Catalog::files
  uint32_t record = 0;  // record number within the file
  uint64_t offset = 0;  // start of the framed record (0 for folder images)
  uint64_t size = 0;    // framed size (whole file for folder images)
  int32_t label = -1;   // known up front for folders; otherwise read from the record
};

struct Catalog {
  dataset::Format format = dataset::Format::kAuto;
  std::vector<std::string> files;
  std::vector<SampleRef> samples;  // in file order, then record order
  uint64_t total_bytes = 0;
  uint32_t indexes_built = 0;  // files whose index had to be built by scanning
  // Parts of record files a scan could not read (a file cut short or
  // damaged, with no index to go by), each named: under ErrorPolicy::kSkip
  // every record before the damage is in `samples` and the loss is here;
  // under kFail the first one fails BuildCatalog.
  std::vector<dataset::Problem> losses;
};

struct CatalogOptions {
  dataset::Format format = dataset::Format::kAuto;
  format::ErrorPolicy policy = format::ErrorPolicy::kFail;  // a record file a scan cannot read to its end
  bool allow_empty_classes = false;                         // an image folder's class folder with no image
};
Result<Catalog> BuildCatalog(io::FileSystem& fs, const std::string& path, const CatalogOptions& options);
inline Result<Catalog> BuildCatalog(io::FileSystem& fs, const std::string& path,
                                    dataset::Format format = dataset::Format::kAuto) {
  return BuildCatalog(fs, path, CatalogOptions{format});
}

}  // namespace aq::pipeline
