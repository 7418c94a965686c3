// The dataset commands as library calls: each takes an options struct,
// validated up front, and returns a report that the CLI prints as a table or
// as JSON (ToJson). Long work shows a Progress line.
//
// Thread safety: each call is independent; internally they use `threads`
// worker threads.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dataset/dataset.h"
#include "format/error_policy.h"
#include "io/file_system.h"

namespace aq::dataset {

struct CommonOptions {
  size_t threads = 0;    // 0 = one per hardware thread
  bool progress = true;  // draw progress when stdout is a terminal
};

// ---- synth ----
enum class SizeProfile { kTiny, kSmall, kLarge };
Result<SizeProfile> ParseSizeProfile(std::string_view s);

struct SynthOptions {
  std::string out;
  uint32_t classes = 10;
  uint64_t images = 100;
  SizeProfile profile = SizeProfile::kSmall;
  uint64_t seed = 1;
  int quality = 0;  // 0 = the profile's (90 tiny, 95 small, 100 large)
  // Images a small network can learn (image::SynthesizeLearnable) instead
  // of photograph-like ones.
  bool learnable = false;
  bool overwrite = false;
  CommonOptions common;
};
struct SynthReport {
  std::string out;
  uint32_t classes = 0;
  uint64_t images = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};
Result<SynthReport> Synthesize(io::FileSystem& fs, const SynthOptions& options);

// ---- pack ----
enum class ImageForm { kJpeg, kReencode, kRaw, kAuto };
Result<ImageForm> ParseImageForm(std::string_view s);
std::string_view ImageFormName(ImageForm f);

struct PackOptions {
  std::string input;  // image folder
  std::string out;
  Format format = Format::kTFRecord;
  size_t shards = 0;  // 0 = 8 for TFRecord, 1 for RecordIO
  std::string prefix = "train";
  uint64_t seed = 1;
  bool write_index = true;
  std::string labels_file;  // "synset<space>text" lines; default <input>/synset_labels.txt if present
  // Decode every JPEG fully (damage anywhere in a file is found, as
  // TensorFlow's converter decodes every image); false: headers only.
  bool decode_check = true;
  // Re-encode PNG, GIF, BMP, WebP, TIFF and PPM/PGM files as JPEG (quality 100, 4:4:4), as
  // TensorFlow's converter does; false: they are images that cannot be packed.
  bool convert = true;
  // For images that cannot be packed (damaged, not an image, a format that
  // is not converted): stop (kFail) or leave them out and list them (kSkip).
  format::ErrorPolicy policy = format::ErrorPolicy::kFail;
  bool overwrite = false;
  // WebDataset only: files beside each image with its stem and one of
  // these extensions (annotations, captions) become members of its sample.
  std::vector<std::string> sidecars;
  // A class folder with no image keeps its label (torchvision's
  // allow_empty=True) instead of stopping the run.
  bool allow_empty_classes = false;
  // Turn JPEGs with an EXIF orientation tag as it says (re-encoded at
  // quality 100, listed as converted), as PIL's ImageOps.exif_transpose
  // does; false: pixels as stored, as PIL's Image.open and torchvision.
  bool exif_orientation_apply = false;
  // What each image is stored as (the decode-cheap forms, as FFCV's):
  // kJpeg the file as read; kReencode JPEG at `quality`; kRaw its pixels
  // as binary PPM (no decode to read them: a header and a copy); kAuto raw
  // when the stored image has at most raw_max_pixels, else re-encoded.
  // Every form but kJpeg caps the longer side at max_side (0: no cap).
  ImageForm form = ImageForm::kJpeg;
  uint32_t max_side = 0;
  int quality = 90;
  uint64_t raw_max_pixels = 256 * 256;
  CommonOptions common;
};
// An image packed after conversion to JPEG.
struct ConvertedImage {
  std::string file;
  std::string from;  // "PNG", "GIF", "BMP"
  uint64_t bytes_in = 0, bytes_out = 0;
};
struct PackReport {
  std::string out;
  Format format = Format::kTFRecord;
  std::vector<std::string> files;
  uint64_t found = 0;   // image files in the folder
  uint64_t images = 0;  // packed
  uint64_t classes = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  double seconds = 0;
  std::vector<ConvertedImage> converted;       // sorted by file
  std::vector<format::SkippedRecord> skipped;  // left out, sorted by file
  std::vector<format::IgnoredFile> ignored;    // every file not taken, with why, by path
  // Packed, with what a strict reader warns about that left every pixel
  // decoded (extraneous bytes before a marker), by path.
  std::vector<format::IgnoredFile> warnings;
  uint64_t reencoded = 0, raw = 0;         // images stored in those forms (--image-form)
  std::vector<std::string> empty_classes;  // kept with their labels (allow_empty_classes)
  std::string manifest;                    // the verification manifest written (dataset/manifest.h)
};
Result<PackReport> Pack(io::FileSystem& fs, const PackOptions& options);

// ---- expand ----
struct ExpandOptions {
  std::string input;
  std::string out;  // default: input
  uint32_t copies = 1;
  CommonOptions common;
};
struct ExpandReport {
  uint64_t files = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  std::map<std::string, uint64_t> methods;  // copy method -> files
  std::string manifest;                     // the output's manifest, when the input's vouched for the copies
  uint64_t manifest_entries = 0;            // copies it lists
};
Result<ExpandReport> Expand(io::FileSystem& fs, const ExpandOptions& options);
// "train-00000-of-01024" -> "train-00000-of-01024-copy-007"; "train.rec" -> "train-copy-007.rec".
std::string CopyName(std::string_view name, uint32_t copy);

// ---- resize ----
struct ResizeOptions {
  std::string input;
  std::string out;
  double scale = 3.0;
  int quality = 100;
  Format format = Format::kAuto;
  format::ErrorPolicy policy = format::ErrorPolicy::kFail;
  bool overwrite = false;
  CommonOptions common;
};
struct ResizeReport {
  uint64_t files = 0;
  uint64_t images = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  double seconds = 0;
  std::vector<format::SkippedRecord> skipped;
};
Result<ResizeReport> Resize(io::FileSystem& fs, const ResizeOptions& options);

// ---- verify ----
struct VerifyOptions {
  std::string path;
  Format format = Format::kAuto;
  bool decode = false;        // fully decode every JPEG, not only its header
  bool fail_fast = false;     // stop at the first problem
  int64_t num_classes = 0;    // > 0: labels must be in range
  size_t max_problems = 100;  // listed in the report (all are counted)
  // WebDataset: the image and label members (format::ParseWdsSchema).
  std::string wds_image = format::kWdsImageDefault;
  std::string wds_label = format::kWdsLabelDefault;
  bool allow_empty_classes = false;  // an image folder's class with no image is no error
  // With decode: record the records found clean in the dataset's
  // verification manifest (dataset/manifest.h), so the pipeline need not
  // read them to their end again.
  bool write_manifest = true;
  CommonOptions common;
};
struct VerifyReport {
  std::string path;
  Format format = Format::kAuto;
  uint64_t files = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;        // bytes read
  uint64_t image_bytes = 0;  // encoded image bytes
  uint64_t problem_count = 0;
  std::vector<Problem> problems;
  std::map<int64_t, uint64_t> labels;  // label -> count
  std::string label_note;              // the label base where a reader would get it wrong, or ""
  double seconds = 0;
  std::string manifest;           // written (decode, write_manifest)
  uint64_t manifest_records = 0;  // records it lists as verified clean
  std::string manifest_error;     // why it was not written (a read-only dataset, say)
  bool ok() const { return problem_count == 0; }
};
Result<VerifyReport> Verify(io::FileSystem& fs, const VerifyOptions& options);

// ---- inspect ----
struct InspectOptions {
  std::string path;
  Format format = Format::kAuto;
  uint64_t start = 0;   // first record (per file)
  uint64_t limit = 10;  // records in all (0 = all)
  bool decode_header = true;
  std::string wds_image = format::kWdsImageDefault;  // as VerifyOptions
  std::string wds_label = format::kWdsLabelDefault;
  bool allow_empty_classes = false;
};
struct InspectRow {
  std::string file;
  uint64_t record = 0, offset = 0, size = 0;
  std::string key;
  int64_t label = -1;
  uint64_t image_bytes = 0;
  uint32_t image_crc32c = 0;
  int width = 0, height = 0, components = 0;
  std::string image_format;  // "JPEG", "PNG", ... (empty when unreadable)
  std::string subsampling;   // JPEG chroma subsampling
  bool progressive = false;
  std::string error;
};
Result<std::vector<InspectRow>> Inspect(io::FileSystem& fs, const InspectOptions& options);

nlohmann::json ToJson(const SynthReport& r);
nlohmann::json ToJson(const PackReport& r);
nlohmann::json ToJson(const ExpandReport& r);
nlohmann::json ToJson(const ResizeReport& r);
nlohmann::json ToJson(const VerifyReport& r);
nlohmann::json ToJson(const std::vector<InspectRow>& rows);
nlohmann::json ToJson(const std::vector<format::SkippedRecord>& skipped);
nlohmann::json ToJson(const std::vector<Problem>& problems);

}  // namespace aq::dataset
