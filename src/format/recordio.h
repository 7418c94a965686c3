// MXNet RecordIO (.rec) files and their .idx indexes, as written by dmlc-core
// and MXNet's im2rec.
//
// Each record part is framed as
//   uint32 magic = 0xced7230a
//   uint32 lrecord = cflag << 29 | length       (length < 2^29)
//   byte   data[length], zero-padded to a multiple of 4
// A payload containing the magic word at a 4-byte-aligned position is split
// there (the magic itself is dropped): parts carry cflag 1 (first), 2
// (middle), 3 (last); an unsplit record has cflag 0. The reader re-inserts
// the magic between parts. See docs/formats.md.
//
// Image records (im2rec) start with a 24-byte header `IfQQ`: uint32 flag,
// float label, uint64 id, uint64 id2; when flag > 0, `flag` float labels
// follow and the header's label is unused. Then the encoded image.
//
// Thread safety: a reader or writer belongs to one thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/error_policy.h"
#include "io/file_system.h"
#include "io/sequential_reader.h"

namespace aq::format {

constexpr uint32_t kRecordIOMagic = 0xced7230a;
constexpr uint32_t kRecordIOMaxLength = (1u << 29) - 1;

struct RecordIOReaderOptions {
  ErrorPolicy policy = ErrorPolicy::kFail;
  size_t buffer_size = 1 << 20;
};

class RecordIOReader {
 public:
  explicit RecordIOReader(const io::RandomAccessFile& file, RecordIOReaderOptions options = {});

  // Reads the next (reassembled) record: true, or false at a clean end.
  Result<bool> Next(std::string* record);
  // Positions the reader at a record boundary (from an .idx offset).
  void Seek(uint64_t offset) { in_.Seek(offset); }

  uint64_t offset() const { return record_offset_; }
  uint64_t index() const { return record_index_; }
  uint64_t framed_size() const { return record_framed_; }
  const std::vector<SkippedRecord>& skipped() const { return skipped_; }

 private:
  struct Damage {
    StatusCode code;
    std::string message;
  };
  Result<bool> ReadOne(std::string* record, Damage* damage);  // false: damaged or end (damage.code != kOk)
  void Resync(uint64_t from);                                 // next aligned magic with a plausible header

  const io::RandomAccessFile& file_;
  RecordIOReaderOptions opt_;
  io::SequentialReader in_;
  uint64_t next_index_ = 0;
  uint64_t record_offset_ = 0;
  uint64_t record_index_ = 0;
  uint64_t record_framed_ = 0;
  std::vector<SkippedRecord> skipped_;
};

// Reads the record starting at `offset`.
Result<std::string> ReadRecordIOAt(const io::RandomAccessFile& file, uint64_t offset);

class RecordIOWriter {
 public:
  explicit RecordIOWriter(io::WritableFile& file) : file_(file) {}
  // REQUIRES: each part of the record is shorter than 2^29 bytes.
  Status Write(std::string_view record);
  uint64_t offset() const { return last_offset_; }  // where the last record starts
  uint64_t records() const { return count_; }

 private:
  io::WritableFile& file_;
  uint64_t last_offset_ = 0;
  uint64_t count_ = 0;
};

// Reassembles one record from its framed parts held in memory (the bytes
// from its .idx offset to the next record). Returns a view into `framed` when
// the record is not split, else into *scratch. `where` names it in errors.
Result<std::string_view> UnframeRecordIO(std::string_view framed, std::string* scratch, std::string_view where);

// ---- im2rec image records ----
constexpr size_t kImageHeaderSize = 24;

struct ImageHeader {
  uint32_t flag = 0;  // 0: single label in `label`; n > 0: n labels in `labels`
  float label = 0;
  uint64_t id = 0;
  uint64_t id2 = 0;
  std::vector<float> labels;
  bool operator==(const ImageHeader&) const = default;
};

std::string PackImageRecord(const ImageHeader& header, std::string_view image);

struct ImageRecordView {
  ImageHeader header;
  std::string_view image;  // points into the payload
};
Result<ImageRecordView> UnpackImageRecord(std::string_view payload);

// ---- .idx: "key\toffset\n" per record ----
struct RecordIOIndexEntry {
  uint64_t key = 0;
  uint64_t offset = 0;
  bool operator==(const RecordIOIndexEntry&) const = default;
};
std::string FormatRecordIOIndex(const std::vector<RecordIOIndexEntry>& entries);
Result<std::vector<RecordIOIndexEntry>> ParseRecordIOIndex(std::string_view text, std::string_view name);

}  // namespace aq::format
