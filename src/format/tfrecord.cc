#include "format/tfrecord.h"

#include <fmt/format.h>

#include <charconv>
#include <cstring>

#include "common/crc32c.h"
#include "format/index_text.h"

namespace aq::format {
namespace {

uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void Store64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
void Store32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }

std::string Where(const io::RandomAccessFile& f, uint64_t record, uint64_t offset) {
  return fmt::format("{}: record {} at offset {}", f.path(), record, offset);
}

}  // namespace

void AppendTFRecord(std::string_view data, std::string* out) {
  char header[kTFRecordHeaderSize];
  Store64(header, data.size());
  Store32(header + 8, crc32c::Mask(crc32c::Value(header, 8)));
  char footer[kTFRecordFooterSize];
  Store32(footer, crc32c::Mask(crc32c::Value(data)));
  out->append(header, sizeof header);
  out->append(data);
  out->append(footer, sizeof footer);
}

Status TFRecordWriter::Write(std::string_view record) {
  last_offset_ = file_.size();
  frame_.clear();
  // Header and footer are small; append the data straight from the caller
  // to avoid copying multi-megabyte images into a frame buffer.
  char header[kTFRecordHeaderSize];
  Store64(header, record.size());
  Store32(header + 8, crc32c::Mask(crc32c::Value(header, 8)));
  char footer[kTFRecordFooterSize];
  Store32(footer, crc32c::Mask(crc32c::Value(record)));
  AQ_TRY(file_.Append(std::string_view(header, sizeof header)));
  AQ_TRY(file_.Append(record));
  AQ_TRY(file_.Append(std::string_view(footer, sizeof footer)));
  ++count_;
  return Status::Ok();
}

TFRecordReader::TFRecordReader(const io::RandomAccessFile& file, TFRecordReaderOptions options)
    : file_(file), opt_(options), in_(file, options.buffer_size) {}

Result<TFRecordReader::Outcome> TFRecordReader::ReadOne(std::string* record, Damage* why) {
  const uint64_t start = in_.position();
  if (in_.remaining() == 0) return Outcome::kEnd;
  char header[kTFRecordHeaderSize];
  size_t got = AQ_TRY(in_.Read(sizeof header, header));
  if (got < sizeof header) {
    *why = {StatusCode::kTruncated,
            fmt::format("file ends inside a record header ({} of {} bytes): truncated file", got, sizeof header)};
    return Outcome::kBadFraming;
  }
  const uint64_t len = Load64(header);
  if (opt_.verify_crc) {
    uint32_t expect = crc32c::Unmask(Load32(header + 8));
    uint32_t actual = crc32c::Value(header, 8);
    if (expect != actual) {
      *why = {StatusCode::kCorruption,
              fmt::format("length CRC mismatch (length field {}, stored CRC {:#010x}, computed {:#010x}): bad framing",
                          len, expect, actual)};
      return Outcome::kBadFraming;
    }
  }
  const uint64_t left = file_.size() - start - kTFRecordHeaderSize;
  if (len > left || left - len < kTFRecordFooterSize) {
    *why = {opt_.verify_crc ? StatusCode::kTruncated : StatusCode::kCorruption,
            fmt::format("record length {} but only {} bytes remain in the file: {}", len,
                        left >= kTFRecordFooterSize ? left - kTFRecordFooterSize : 0,
                        opt_.verify_crc ? "truncated file" : "truncated or corrupt")};
    return Outcome::kBadFraming;
  }
  AQ_TRY(in_.Read(static_cast<size_t>(len), record));
  char footer[kTFRecordFooterSize];
  AQ_TRY(in_.Read(sizeof footer, footer));
  record_framed_ = len + kTFRecordOverhead;
  if (opt_.verify_crc) {
    uint32_t expect = crc32c::Unmask(Load32(footer));
    uint32_t actual = crc32c::Value(*record);
    if (expect != actual) {
      *why = {StatusCode::kCorruption,
              fmt::format("data CRC mismatch over {} bytes (stored {:#010x}, computed {:#010x})", len, expect, actual)};
      return Outcome::kBadData;
    }
  }
  return Outcome::kRecord;
}

Result<bool> TFRecordReader::Next(std::string* record) {
  while (true) {
    const uint64_t start = in_.position();
    const uint64_t number = next_index_;
    Damage why;
    Outcome o = AQ_TRY(ReadOne(record, &why));
    if (o == Outcome::kEnd) return false;
    ++next_index_;
    if (o == Outcome::kRecord) {
      record_offset_ = start;
      record_index_ = number;
      return true;
    }
    if (opt_.policy == ErrorPolicy::kFail) {
      return Status(why.code, fmt::format("{}: {}", Where(file_, number, start), why.message));
    }
    if (o == Outcome::kBadFraming) Resync(start + 1);
    skipped_.push_back({file_.path(), start, number, in_.position() - start, why.message});
  }
}

void TFRecordReader::Resync(uint64_t from) {
  const uint64_t size = file_.size();
  std::string data;
  for (uint64_t p = from; p + kTFRecordOverhead <= size; ++p) {
    in_.Seek(p);
    char header[kTFRecordHeaderSize];
    auto got = in_.Read(sizeof header, header);
    if (!got.ok() || *got < sizeof header) break;
    if (crc32c::Unmask(Load32(header + 8)) != crc32c::Value(header, 8)) continue;
    uint64_t len = Load64(header);
    if (len > size - p - kTFRecordOverhead) continue;
    auto r = in_.Read(static_cast<size_t>(len), &data);
    char footer[kTFRecordFooterSize];
    auto f = in_.Read(sizeof footer, footer);
    if (!r.ok() || !f.ok() || *f < sizeof footer) continue;
    if (crc32c::Unmask(Load32(footer)) != crc32c::Value(data)) continue;
    in_.Seek(p);
    return;
  }
  in_.Seek(size);
}

Result<std::string> ReadTFRecordAt(const io::RandomAccessFile& file, uint64_t offset, bool verify_crc) {
  if (offset >= file.size()) {
    return Status(StatusCode::kInvalidArgument, fmt::format("{}: offset {} is past the end of the file ({} bytes)",
                                                            file.path(), offset, file.size()));
  }
  TFRecordReaderOptions opt;
  opt.verify_crc = verify_crc;
  opt.buffer_size = 64 << 10;
  // A reader positioned at `offset` gives the same checks as a sequential scan.
  io::SequentialReader in(file, opt.buffer_size, offset);
  char header[kTFRecordHeaderSize];
  size_t got = AQ_TRY(in.Read(sizeof header, header));
  if (got < sizeof header)
    return Truncated(fmt::format("{}: file ends inside the record header at offset {}", file.path(), offset));
  uint64_t len = Load64(header);
  if (verify_crc && crc32c::Unmask(Load32(header + 8)) != crc32c::Value(header, 8)) {
    return Corruption(fmt::format(
        "{}: no valid record header at offset {} (length CRC mismatch): stale or wrong index?", file.path(), offset));
  }
  if (offset + kTFRecordOverhead > file.size() || len > file.size() - offset - kTFRecordOverhead) {
    return Truncated(
        fmt::format("{}: record at offset {} claims {} bytes, past the end of the file", file.path(), offset, len));
  }
  std::string data;
  AQ_TRY(in.Read(static_cast<size_t>(len), &data));
  char footer[kTFRecordFooterSize];
  AQ_TRY(in.Read(sizeof footer, footer));
  if (verify_crc && crc32c::Unmask(Load32(footer)) != crc32c::Value(data)) {
    return Corruption(fmt::format("{}: data CRC mismatch in the record at offset {}", file.path(), offset));
  }
  return data;
}

Result<std::string_view> UnframeTFRecord(std::string_view framed, bool verify_crc, std::string_view where) {
  if (framed.size() < kTFRecordOverhead) {
    return Truncated(fmt::format("{}: {} bytes cannot hold a framed record", where, framed.size()));
  }
  const uint64_t len = Load64(framed.data());
  if (verify_crc && crc32c::Unmask(Load32(framed.data() + 8)) != crc32c::Value(framed.data(), 8)) {
    return Corruption(fmt::format("{}: length CRC mismatch", where));
  }
  if (len != framed.size() - kTFRecordOverhead) {
    return Corruption(fmt::format("{}: length field {} does not match the indexed size {}: stale index?", where, len,
                                  framed.size() - kTFRecordOverhead));
  }
  std::string_view data = framed.substr(kTFRecordHeaderSize, len);
  if (verify_crc && crc32c::Unmask(Load32(framed.data() + kTFRecordHeaderSize + len)) != crc32c::Value(data)) {
    return Corruption(fmt::format("{}: data CRC mismatch over {} bytes", where, len));
  }
  return data;
}

std::string FormatTFRecordIndex(const std::vector<IndexEntry>& entries) {
  std::string s;
  s.reserve(entries.size() * 20);
  for (const auto& e : entries) fmt::format_to(std::back_inserter(s), "{} {}\n", e.offset, e.size);
  return s;
}

Result<std::vector<IndexEntry>> ParseTFRecordIndex(std::string_view text, std::string_view name) {
  std::vector<IndexEntry> out;
  AQ_TRY(ForEachIndexLine(text, name, "offset size", [&](size_t line_no, uint64_t offset, uint64_t size) -> Status {
    if (!out.empty() && offset < out.back().offset + out.back().size) {
      return Corruption(
          fmt::format("{}: line {}: entry at offset {} overlaps the previous one", name, line_no, offset));
    }
    if (size < kTFRecordOverhead) {
      return Corruption(fmt::format("{}: line {}: size {} is smaller than a record's framing", name, line_no, size));
    }
    out.push_back({offset, size});
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<IndexEntry>> BuildTFRecordIndex(const io::RandomAccessFile& file) {
  std::vector<IndexEntry> out;
  AQ_TRY(BuildTFRecordIndex(file, &out));
  return out;
}

Status BuildTFRecordIndex(const io::RandomAccessFile& file, std::vector<IndexEntry>* entries) {
  std::vector<IndexEntry>& out = *entries;
  out.clear();
  io::SequentialReader in(file, 256 << 10);
  const uint64_t size = file.size();
  uint64_t off = 0;
  while (off < size) {
    in.Seek(off);
    char header[kTFRecordHeaderSize];
    size_t got = AQ_TRY(in.Read(sizeof header, header));
    if (got < sizeof header) {
      return Truncated(
          fmt::format("{}: record {} at offset {}: file ends inside a record header", file.path(), out.size(), off));
    }
    if (crc32c::Unmask(Load32(header + 8)) != crc32c::Value(header, 8)) {
      return Corruption(fmt::format("{}: record {} at offset {}: length CRC mismatch", file.path(), out.size(), off));
    }
    uint64_t len = Load64(header);
    if (off + kTFRecordOverhead > size || len > size - off - kTFRecordOverhead) {
      return Truncated(fmt::format("{}: record {} at offset {}: length {} runs past the end of the file", file.path(),
                                   out.size(), off, len));
    }
    out.push_back({off, len + kTFRecordOverhead});
    off += len + kTFRecordOverhead;
  }
  return Status::Ok();
}

}  // namespace aq::format
