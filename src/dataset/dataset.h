// Datasets on a FileSystem: finding a dataset's record files and walking its
// samples, whatever the format. The dataset commands (synth, pack, expand,
// resize, verify, inspect) are built on this.
//
// Thread safety: functions are reentrant; a Sample's views are valid only
// during the callback that receives it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "format/error_policy.h"
#include "format/image_folder.h"
#include "format/tar.h"
#include "io/file_system.h"

namespace aq::dataset {

// Damage found in a sample: which file, record and byte offset, and why
// (verify and the input pipeline report these).
struct Problem {
  std::string file;
  uint64_t record = 0;
  uint64_t offset = 0;
  std::string message;
};

enum class Format { kAuto, kTFRecord, kRecordIO, kFolder, kWebDataset };
std::string_view FormatName(Format f);
Result<Format> ParseFormat(std::string_view s);  // auto | tfrecord | recordio | folder | wds (webdataset)

struct DatasetFiles {
  Format format = Format::kAuto;
  std::string root;                // the directory (or the single file given)
  std::vector<std::string> files;  // record files (.rec for RecordIO), or images for a folder
  uint64_t total_bytes = 0;
  format::ImageFolder folder;  // when format == kFolder
};

// Finds the dataset at `path`: a record file, a directory of TFRecord shards
// (names like train-00000-of-01024, or *.tfrecord), a directory with .rec
// files, or an image folder (root/<class>/<image>.jpg). With kAuto the format
// is detected; the error says what was found when nothing fits. `folder`
// applies to an image folder's scan (allow_empty_classes, sidecars).
Result<DatasetFiles> FindDataset(io::FileSystem& fs, const std::string& path, Format format = Format::kAuto,
                                 const format::FolderScanOptions& folder = {});

// True for names TensorFlow's converters give shards, or *.tfrecord(s).
bool IsTFRecordName(std::string_view name);

// Where the DALI-style index of a TFRecord shard lives: <dir>/idx/<name>.idx.
std::string TFRecordIndexPath(const std::string& shard_path);
// Where MXNet keeps the index of a .rec file: same name, .idx.
std::string RecordIOIndexPath(const std::string& rec_path);

// One sample as stored, with where it is.
struct Sample {
  const std::string* file = nullptr;
  uint64_t record = 0;       // 0-based number in the file (0 for folder images)
  uint64_t offset = 0;       // byte offset of the record
  uint64_t framed_size = 0;  // bytes the record occupies in the file
  std::string_view payload;  // the whole record (Example bytes, RecordIO payload, or the JPEG file)
  std::string_view image;    // encoded image bytes
  std::string key;           // filename (TFRecord), id (RecordIO), path (folder)
  int64_t label = -1;
  bool has_label = false;
  Status parse_error;  // why image/label could not be read, if so (framing was fine)
};

struct WalkOptions {
  format::ErrorPolicy policy = format::ErrorPolicy::kFail;  // for framing damage
  bool verify_crc = true;
  uint64_t start_record = 0;  // skip this many records first
  uint64_t limit = 0;         // stop after this many samples (0 = all)
  format::WdsSchema wds;      // a WebDataset sample's image and label members
};

struct WalkResult {
  uint64_t records = 0;
  uint64_t bytes = 0;  // file bytes walked
  std::vector<format::SkippedRecord> skipped;
};

// Calls fn for every sample of one file of the dataset. fn returning an error
// stops the walk with it. For folders, `file` is one image.
Result<WalkResult> WalkFile(io::FileSystem& fs, Format format, const std::string& file, const WalkOptions& options,
                            const std::function<Status(const Sample&)>& fn);

// Creates `out` (and parents). An existing non-empty directory is refused
// unless overwrite is set, so a typo never mixes two datasets.
Status PrepareOutputDir(io::FileSystem& fs, const std::string& out, bool overwrite);

// Shard name in TensorFlow's style: <prefix>-00003-of-01024.
std::string ShardName(std::string_view prefix, size_t index, size_t count);

// The shards a set of files named <prefix>-NNNNN-of-MMMMM[.ext] lacks (the
// paths they would have), and those numbered past their count: a shard set
// is whole only when every number below its count is there. Files named
// otherwise are not judged.
std::vector<std::string> ShardSetGaps(const std::vector<std::string>& files);

}  // namespace aq::dataset
