#include "format/recordio.h"

#include <fmt/format.h>

#include <charconv>
#include <cstring>

#include "format/index_text.h"

namespace aq::format {
namespace {

uint32_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void Put32(std::string* out, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out->append(b, 4);
}
constexpr uint32_t EncodeLRec(uint32_t cflag, uint32_t length) { return (cflag << 29) | length; }
constexpr uint32_t Align4(uint64_t n) { return static_cast<uint32_t>((n + 3) & ~uint64_t{3}); }

}  // namespace

Status RecordIOWriter::Write(std::string_view rec) {
  last_offset_ = file_.size();
  static constexpr char kZeros[4] = {0, 0, 0, 0};
  const uint32_t magic = kRecordIOMagic;
  char magic_bytes[4];
  std::memcpy(magic_bytes, &magic, 4);
  std::string header;
  auto emit = [&](uint32_t cflag, std::string_view part) -> Status {
    if (part.size() > kRecordIOMaxLength) {
      return InvalidArgument(fmt::format("{}: record part of {} bytes exceeds RecordIO's limit of {}", file_.path(),
                                         part.size(), kRecordIOMaxLength));
    }
    header.clear();
    Put32(&header, kRecordIOMagic);
    Put32(&header, EncodeLRec(cflag, static_cast<uint32_t>(part.size())));
    AQ_TRY(file_.Append(header));
    AQ_TRY(file_.Append(part));
    return Status::Ok();
  };
  // Split at every 4-aligned occurrence of the magic, as dmlc-core does, so a
  // reader that scans for aligned magic words can always find record starts.
  const size_t lower_align = rec.size() & ~size_t{3};
  size_t dptr = 0;
  for (size_t i = 0; i < lower_align; i += 4) {
    if (std::memcmp(rec.data() + i, magic_bytes, 4) == 0) {
      AQ_TRY(emit(dptr == 0 ? 1 : 2, rec.substr(dptr, i - dptr)));
      dptr = i + 4;
    }
  }
  AQ_TRY(emit(dptr != 0 ? 3 : 0, rec.substr(dptr)));
  size_t pad = Align4(rec.size() - dptr) - (rec.size() - dptr);
  if (pad != 0) AQ_TRY(file_.Append(std::string_view(kZeros, pad)));
  ++count_;
  return Status::Ok();
}

RecordIOReader::RecordIOReader(const io::RandomAccessFile& file, RecordIOReaderOptions options)
    : file_(file), opt_(options), in_(file, options.buffer_size) {}

Result<bool> RecordIOReader::ReadOne(std::string* record, Damage* damage) {
  record->clear();
  uint32_t expect_next = 0;  // 0: a record start (cflag 0 or 1); else cflag 2 or 3 expected
  std::string part;
  while (true) {
    const uint64_t at = in_.position();
    if (in_.remaining() == 0) {
      if (expect_next == 0) return false;
      *damage = {StatusCode::kTruncated, fmt::format("file ends after part of a split record (at offset {})", at)};
      return false;
    }
    char h[8];
    size_t got = AQ_TRY(in_.Read(8, h));
    if (got < 8) {
      *damage = {StatusCode::kTruncated,
                 fmt::format("file ends inside a record header at offset {} ({} of 8 bytes)", at, got)};
      return false;
    }
    uint32_t magic = Load32(h);
    if (magic != kRecordIOMagic) {
      *damage = {StatusCode::kCorruption,
                 fmt::format("bad magic {:#010x} at offset {} (expected {:#010x})", magic, at, kRecordIOMagic)};
      return false;
    }
    uint32_t lrec = Load32(h + 4);
    uint32_t cflag = lrec >> 29;
    uint32_t len = lrec & kRecordIOMaxLength;
    if (cflag > 3 || (expect_next == 0 && (cflag == 2 || cflag == 3)) ||
        (expect_next != 0 && (cflag == 0 || cflag == 1))) {
      *damage = {StatusCode::kCorruption,
                 fmt::format("unexpected continuation flag {} at offset {}: broken split record", cflag, at)};
      return false;
    }
    uint64_t padded = Align4(len);
    if (padded > in_.remaining()) {
      *damage = {StatusCode::kTruncated,
                 fmt::format("record part at offset {} claims {} bytes but only {} remain: truncated file", at, len,
                             in_.remaining())};
      return false;
    }
    AQ_TRY(in_.Read(static_cast<size_t>(padded), &part));
    record->append(part.data(), len);
    if (cflag == 0 || cflag == 3) return true;
    const uint32_t m = kRecordIOMagic;
    record->append(reinterpret_cast<const char*>(&m), 4);
    expect_next = 2;
  }
}

Result<bool> RecordIOReader::Next(std::string* record) {
  while (true) {
    const uint64_t start = in_.position();
    const uint64_t number = next_index_;
    Damage damage{StatusCode::kOk, {}};
    bool have = AQ_TRY(ReadOne(record, &damage));
    if (have) {
      ++next_index_;
      record_offset_ = start;
      record_index_ = number;
      record_framed_ = in_.position() - start;
      return true;
    }
    if (damage.code == StatusCode::kOk) return false;
    ++next_index_;
    if (opt_.policy == ErrorPolicy::kFail) {
      return Status(damage.code,
                    fmt::format("{}: record {} at offset {}: {}", file_.path(), number, start, damage.message));
    }
    Resync(start + 4);
    skipped_.push_back({file_.path(), start, number, in_.position() - start, damage.message});
  }
}

void RecordIOReader::Resync(uint64_t from) {
  from = Align4(from);
  const uint64_t size = file_.size();
  for (uint64_t p = from; p + 8 <= size; p += 4) {
    in_.Seek(p);
    char h[8];
    auto got = in_.Read(8, h);
    if (!got.ok() || *got < 8) break;
    if (Load32(h) != kRecordIOMagic) continue;
    uint32_t cflag = Load32(h + 4) >> 29;
    if (cflag == 0 || cflag == 1) {
      in_.Seek(p);
      return;
    }
  }
  in_.Seek(size);
}

Result<std::string> ReadRecordIOAt(const io::RandomAccessFile& file, uint64_t offset) {
  RecordIOReaderOptions opt;
  opt.buffer_size = 64 << 10;
  RecordIOReader r(file, opt);
  r.Seek(offset);
  std::string rec;
  bool ok = AQ_TRY(r.Next(&rec));
  if (!ok) return InvalidArgument(fmt::format("{}: no record at offset {} (end of file)", file.path(), offset));
  return rec;
}

Result<std::string_view> UnframeRecordIO(std::string_view framed, std::string* scratch, std::string_view where) {
  size_t pos = 0;
  scratch->clear();
  while (true) {
    if (framed.size() - pos < 8) return Truncated(fmt::format("{}: record ends inside a part header", where));
    if (Load32(framed.data() + pos) != kRecordIOMagic) {
      return Corruption(
          fmt::format("{}: bad magic {:#010x} at byte {} of the record", where, Load32(framed.data() + pos), pos));
    }
    const uint32_t lrec = Load32(framed.data() + pos + 4);
    const uint32_t cflag = lrec >> 29, len = lrec & kRecordIOMaxLength;
    if ((pos == 0) != (cflag == 0 || cflag == 1)) {
      return Corruption(fmt::format("{}: unexpected continuation flag {}", where, cflag));
    }
    pos += 8;
    if (framed.size() - pos < len) return Truncated(fmt::format("{}: record part runs past its indexed size", where));
    if (cflag == 0) return framed.substr(pos, len);
    scratch->append(framed.data() + pos, len);
    pos += Align4(len);
    if (cflag == 3) return std::string_view(*scratch);
    const uint32_t m = kRecordIOMagic;
    scratch->append(reinterpret_cast<const char*>(&m), 4);
    if (pos > framed.size()) return Truncated(fmt::format("{}: split record runs past its indexed size", where));
  }
}

std::string PackImageRecord(const ImageHeader& h, std::string_view image) {
  std::string out;
  out.reserve(kImageHeaderSize + h.labels.size() * 4 + image.size());
  uint32_t flag = static_cast<uint32_t>(h.labels.size());
  Put32(&out, flag);
  uint32_t lbits;
  std::memcpy(&lbits, &h.label, 4);
  Put32(&out, lbits);
  char ids[16];
  std::memcpy(ids, &h.id, 8);
  std::memcpy(ids + 8, &h.id2, 8);
  out.append(ids, 16);
  for (float l : h.labels) {
    std::memcpy(&lbits, &l, 4);
    Put32(&out, lbits);
  }
  out.append(image);
  return out;
}

Result<ImageRecordView> UnpackImageRecord(std::string_view payload) {
  if (payload.size() < kImageHeaderSize) {
    return Corruption(
        fmt::format("image record of {} bytes is shorter than its {}-byte header", payload.size(), kImageHeaderSize));
  }
  ImageRecordView v;
  v.header.flag = Load32(payload.data());
  std::memcpy(&v.header.label, payload.data() + 4, 4);
  std::memcpy(&v.header.id, payload.data() + 8, 8);
  std::memcpy(&v.header.id2, payload.data() + 16, 8);
  size_t extra = static_cast<size_t>(v.header.flag) * 4;
  if (v.header.flag > 0) {
    if (extra > payload.size() - kImageHeaderSize) {
      return Corruption(
          fmt::format("image header claims {} labels but the record has {} bytes", v.header.flag, payload.size()));
    }
    v.header.labels.resize(v.header.flag);
    std::memcpy(v.header.labels.data(), payload.data() + kImageHeaderSize, extra);
  }
  v.image = payload.substr(kImageHeaderSize + extra);
  return v;
}

std::string FormatRecordIOIndex(const std::vector<RecordIOIndexEntry>& entries) {
  std::string s;
  for (const auto& e : entries) fmt::format_to(std::back_inserter(s), "{}\t{}\n", e.key, e.offset);
  return s;
}

Result<std::vector<RecordIOIndexEntry>> ParseRecordIOIndex(std::string_view text, std::string_view name) {
  std::vector<RecordIOIndexEntry> out;
  AQ_TRY(ForEachIndexLine(text, name, "key<TAB>offset", [&](size_t line_no, uint64_t key, uint64_t offset) -> Status {
    if (offset % 4 != 0) {
      return Corruption(fmt::format("{}: line {}: offset {} is not 4-byte aligned", name, line_no, offset));
    }
    out.push_back({key, offset});
    return Status::Ok();
  }));
  return out;
}

}  // namespace aq::format
