// Tar archives and the WebDataset convention over them.
//
// Tar: POSIX ustar headers, with the extensions the tools people use write:
// pax extended headers ('x': path and size override the next member's;
// 'g' is read and ignored), GNU long names ('L'), GNU base-256 sizes, and
// GNU's "ustar  " magic. Python's tarfile (all three of its formats), GNU
// tar and bsdtar archives read. Every header's checksum is checked;
// directories, links and other non-file entries are passed over.
//
// WebDataset: a sample is a run of consecutive members sharing a key; a
// member's key is its path up to the first '.' of its last component and
// the rest is the extension ("train/n01440764_10026.seg.png" is key
// "train/n01440764_10026", extension "seg.png"). As in the webdataset
// library, members are chosen by their whole extension (WdsSchema): the
// image is the first of jpg, jpeg, png, ppm, pgm, pnm, bmp, gif, webp the
// sample has, in that order (never "depth.png" beside "jpg"); the class
// label the text integer of its cls (or cls2, class, label) member, or a
// member and field the user names ("v2.cls", "json:annotation.label"). A
// sample without its label is an error, not label -1. A sample is stored
// as one byte range (its first header to the end of its last member's
// padded data), so a reader fetches it in one read.
//
// Thread safety: readers and writers are used by one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "io/file_system.h"

namespace aq::format {

inline constexpr uint64_t kTarBlock = 512;
inline constexpr uint64_t TarPadded(uint64_t n) { return (n + kTarBlock - 1) / kTarBlock * kTarBlock; }

struct TarMember {
  std::string name;            // the full path (pax path or GNU long name applied)
  uint64_t header_offset = 0;  // its first header block (a pax or GNU long-name header included)
  uint64_t data_offset = 0;
  uint64_t size = 0;
  uint64_t end() const { return data_offset + TarPadded(size); }
};

// Reads the members of a tar file in order, headers only (data is skipped,
// read in large chunks so a remote file is read sequentially, not one
// request per header). `where` names the file in errors.
class TarReader {
 public:
  TarReader(const io::RandomAccessFile& file, std::string where);
  // The next regular file; false at the end of the archive (two zero
  // blocks, or the end of the file on a block boundary).
  Result<bool> Next(TarMember* member);
  uint64_t skipped_entries() const { return skipped_; }  // directories, links, ...
  uint64_t position() const { return pos_; }             // where the next header is read

 private:
  Result<std::string_view> Block(uint64_t offset);  // one 512-byte block
  Result<std::string> Bytes(uint64_t offset, uint64_t n);
  const io::RandomAccessFile& file_;
  std::string where_;
  uint64_t pos_ = 0;
  std::string buf_;
  uint64_t buf_start_ = 0;
  uint64_t skipped_ = 0;
  bool done_ = false;
};

// Parses the members in tar bytes held in memory (one WebDataset sample as
// stored, or a whole small archive); offsets are relative to `bytes`.
Result<std::vector<TarMember>> ParseTarMembers(std::string_view bytes, std::string_view where);

// ---- WebDataset ----

// (key, extension) of a member name.
std::pair<std::string_view, std::string_view> SplitWdsName(std::string_view name);
bool IsWdsImageExtension(std::string_view ext);
bool IsWdsLabelExtension(std::string_view ext);

// Which members of a sample are its image and its label.
struct WdsSchema {
  // Whole extensions, lower case, in order of preference: the first one a
  // sample has is its image.
  std::vector<std::string> image = {"jpg", "jpeg", "png", "ppm", "pgm", "pnm", "bmp", "gif", "webp"};
  // Whole extensions of the label member, in order of preference; empty:
  // the dataset has no labels (every label -1, no error).
  std::vector<std::string> label = {"cls", "cls2", "class", "label"};
  // When set, the label member is JSON and this dotted path in it holds
  // the integer label ("annotation.label").
  std::string label_json_path;
};
inline constexpr const char* kWdsImageDefault = "jpg;jpeg;png;ppm;pgm;pnm;bmp;gif;webp";
inline constexpr const char* kWdsLabelDefault = "cls;cls2;class;label";
// Parses the user's words: image "jpg;png" or "v2.jpg"; label "cls",
// "v2.cls;cls", "json:PATH" (the json member's field), "EXT:PATH" (another
// JSON member's) or "none".
Result<WdsSchema> ParseWdsSchema(std::string_view image, std::string_view label);

struct WdsSample {
  std::string key;
  uint64_t offset = 0;  // the first member's header
  uint64_t size = 0;    // through the end of the last member's padded data
  std::vector<TarMember> members;
};

// Groups a tar's members into samples.
class WdsReader {
 public:
  explicit WdsReader(TarReader& tar) : tar_(tar) {}
  Result<bool> Next(WdsSample* sample);

 private:
  TarReader& tar_;
  TarMember pending_;
  bool has_pending_ = false;
  // The archive's error found while reading ahead for the end of the
  // sample just returned: given at the next call, so a cut archive still
  // yields every sample before the cut.
  Status deferred_;
};

// The fields of one sample from its stored bytes.
struct WdsFields {
  std::string key;
  std::string_view image;  // encoded image bytes (a view into the bytes given)
  std::string image_extension;
  int64_t label = -1;
  bool has_label = false;
  std::vector<std::pair<std::string, std::string_view>> members;  // extension -> data, in order
};
Result<WdsFields> ParseWdsSample(std::string_view stored, std::string_view where,
                                 const WdsSchema& schema = WdsSchema());

// Writes a tar (POSIX pax format: ustar headers, a pax header before a
// member whose name does not fit). Members get mode 0644, owner 0/0 and
// the given modification time.
class TarWriter {
 public:
  explicit TarWriter(io::WritableFile& file) : file_(file) {}
  Status Add(std::string_view name, std::string_view data, uint64_t mtime = 0);
  // The end-of-archive blocks. Call once, after the last Add().
  Status Finish();
  uint64_t offset() const { return offset_; }  // bytes written so far

 private:
  Status Header(std::string_view name, uint64_t size, char type, uint64_t mtime);
  io::WritableFile& file_;
  uint64_t offset_ = 0;
};

}  // namespace aq::format
