// TFRecord files: the record container TensorFlow trains from.
//
// Each record is framed as
//   uint64 length            (little-endian)
//   uint32 masked_crc32c(length bytes)
//   byte   data[length]
//   uint32 masked_crc32c(data)
// See docs/formats.md. The reader checks both CRCs, refuses lengths that run
// past the end of the file, and under ErrorPolicy::kSkip resynchronises
// after damaged framing by searching for the next header whose CRCs check.
//
// Thread safety: a reader or writer belongs to one thread; several readers
// may share one RandomAccessFile.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/error_policy.h"
#include "io/file_system.h"
#include "io/sequential_reader.h"

namespace aq::format {

constexpr size_t kTFRecordHeaderSize = 12;  // length + length CRC
constexpr size_t kTFRecordFooterSize = 4;   // data CRC
constexpr size_t kTFRecordOverhead = 16;

struct TFRecordReaderOptions {
  bool verify_crc = true;
  ErrorPolicy policy = ErrorPolicy::kFail;
  size_t buffer_size = 1 << 20;
};

class TFRecordReader {
 public:
  explicit TFRecordReader(const io::RandomAccessFile& file, TFRecordReaderOptions options = {});

  // Reads the next record into *record: true if one was read, false at a
  // clean end of file. Damage is a kCorruption/kTruncated error naming file,
  // offset and record number, or (kSkip) is passed over and noted in skipped().
  Result<bool> Next(std::string* record);

  // Offset and 0-based number of the record last returned by Next().
  uint64_t offset() const { return record_offset_; }
  uint64_t index() const { return record_index_; }
  // Framed bytes of the record last returned (data + 16).
  uint64_t framed_size() const { return record_framed_; }
  const std::vector<SkippedRecord>& skipped() const { return skipped_; }

 private:
  enum class Outcome { kRecord, kEnd, kBadFraming, kBadData };
  struct Damage {
    StatusCode code = StatusCode::kOk;
    std::string message;
  };
  Result<Outcome> ReadOne(std::string* record, Damage* why);
  // Searches forward from `from` for a header whose length CRC checks, whose
  // length fits and whose data CRC checks; positions the reader there.
  void Resync(uint64_t from);

  const io::RandomAccessFile& file_;
  TFRecordReaderOptions opt_;
  io::SequentialReader in_;
  uint64_t next_index_ = 0;
  uint64_t record_offset_ = 0;
  uint64_t record_index_ = 0;
  uint64_t record_framed_ = 0;
  std::vector<SkippedRecord> skipped_;
};

// Reads the single record framed at `offset` (random access through an index).
Result<std::string> ReadTFRecordAt(const io::RandomAccessFile& file, uint64_t offset, bool verify_crc = true);

class TFRecordWriter {
 public:
  explicit TFRecordWriter(io::WritableFile& file) : file_(file) {}
  // Appends one framed record; offset() then tells where it starts.
  Status Write(std::string_view record);
  uint64_t offset() const { return last_offset_; }
  uint64_t records() const { return count_; }

 private:
  io::WritableFile& file_;
  uint64_t last_offset_ = 0;
  uint64_t count_ = 0;
  std::string frame_;
};

// Checks the framing of one whole framed record held in memory and returns
// its data (a view into `framed`). `where` names the record in errors.
Result<std::string_view> UnframeTFRecord(std::string_view framed, bool verify_crc, std::string_view where);

// Appends the framing of `data` (header, data, footer) to *out.
void AppendTFRecord(std::string_view data, std::string* out);

// ---- Index (DALI tfrecord2idx text format: "offset size\n" per record, where
// size is the framed size, data + 16 bytes) ----
struct IndexEntry {
  uint64_t offset = 0;
  uint64_t size = 0;
  bool operator==(const IndexEntry&) const = default;
};

std::string FormatTFRecordIndex(const std::vector<IndexEntry>& entries);
// `name` is used in error messages.
Result<std::vector<IndexEntry>> ParseTFRecordIndex(std::string_view text, std::string_view name);
// Walks the framing (length CRCs checked, data skipped) to build the index.
// The same, the entries found before any error left in *out.
Status BuildTFRecordIndex(const io::RandomAccessFile& file, std::vector<IndexEntry>* out);
Result<std::vector<IndexEntry>> BuildTFRecordIndex(const io::RandomAccessFile& file);

}  // namespace aq::format
