#include "format/tar.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

namespace aq::format {
namespace {

constexpr uint64_t kChunk = 1 << 20;  // TarReader's read size
constexpr uint64_t kMaxNameBytes = 1 << 16;

bool AllZero(std::string_view b) {
  return std::all_of(b.begin(), b.end(), [](char c) { return c == '\0'; });
}

std::string_view Field(std::string_view block, size_t off, size_t len) {
  std::string_view f = block.substr(off, len);
  size_t nul = f.find('\0');
  return nul == std::string_view::npos ? f : f.substr(0, nul);
}

// An octal number field (leading spaces, trailing NUL or space), or GNU's
// base-256 form (first byte with its high bit set).
Result<uint64_t> Number(std::string_view f, std::string_view what, std::string_view where, uint64_t at) {
  if (!f.empty() && (static_cast<unsigned char>(f[0]) & 0x80) != 0) {
    if ((static_cast<unsigned char>(f[0]) & 0x40) != 0) {
      return Corruption(fmt::format("{}: tar header at offset {}: negative {}", where, at, what));
    }
    uint64_t v = static_cast<unsigned char>(f[0]) & 0x3f;
    for (size_t i = 1; i < f.size(); ++i) {
      if (v >> 56 != 0) return Corruption(fmt::format("{}: tar header at offset {}: {} too large", where, at, what));
      v = v << 8 | static_cast<unsigned char>(f[i]);
    }
    return v;
  }
  size_t i = 0;
  while (i < f.size() && f[i] == ' ') ++i;
  uint64_t v = 0;
  size_t digits = 0;
  for (; i < f.size() && f[i] >= '0' && f[i] <= '7'; ++i, ++digits) {
    if (v >> 60 != 0) return Corruption(fmt::format("{}: tar header at offset {}: {} too large", where, at, what));
    v = v * 8 + static_cast<uint64_t>(f[i] - '0');
  }
  for (; i < f.size(); ++i) {
    if (f[i] != ' ' && f[i] != '\0') {
      return Corruption(fmt::format("{}: tar header at offset {}: {} is not an octal number", where, at, what));
    }
  }
  if (digits == 0 && what == "size") {
    return Corruption(fmt::format("{}: tar header at offset {}: no size", where, at));
  }
  return v;
}

Status CheckSum(std::string_view b, std::string_view where, uint64_t at) {
  uint64_t stored = AQ_TRY(Number(b.substr(148, 8), "checksum", where, at));
  int64_t unsigned_sum = 0, signed_sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i) {
    const bool in_field = i >= 148 && i < 156;
    unsigned char c = in_field ? ' ' : static_cast<unsigned char>(b[i]);
    unsigned_sum += c;
    signed_sum += in_field ? ' ' : static_cast<signed char>(b[i]);
  }
  if (static_cast<int64_t>(stored) != unsigned_sum && static_cast<int64_t>(stored) != signed_sum) {
    return Corruption(fmt::format(
        "{}: tar header at offset {}: checksum {} does not match the header's bytes ({}): damaged, or not a tar file",
        where, at, stored, unsigned_sum));
  }
  return Status::Ok();
}

// pax records: "LEN key=value\n", LEN counting the whole record.
Status ApplyPax(std::string_view data, std::string* path, uint64_t* size, bool* has_size, std::string_view where,
                uint64_t at) {
  size_t pos = 0;
  while (pos < data.size()) {
    if (data[pos] == '\0') break;  // padding some writers leave
    size_t sp = data.find(' ', pos);
    if (sp == std::string_view::npos) break;
    uint64_t len = 0;
    auto [p, ec] = std::from_chars(data.data() + pos, data.data() + sp, len);
    if (ec != std::errc() || p != data.data() + sp || len <= sp - pos + 1 || pos + len > data.size() ||
        data[pos + len - 1] != '\n') {
      return Corruption(fmt::format("{}: pax header at offset {}: malformed record at byte {}", where, at, pos));
    }
    std::string_view rec = data.substr(sp + 1, pos + len - 1 - (sp + 1));
    size_t eq = rec.find('=');
    if (eq != std::string_view::npos) {
      std::string_view key = rec.substr(0, eq), value = rec.substr(eq + 1);
      if (key == "path") *path = std::string(value);
      if (key == "size") {
        uint64_t v = 0;
        auto [q, e2] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (e2 != std::errc() || q != value.data() + value.size()) {
          return Corruption(fmt::format("{}: pax header at offset {}: size '{}' is not a number", where, at, value));
        }
        *size = v;
        *has_size = true;
      }
    }
    pos += len;
  }
  return Status::Ok();
}

// The next regular file from `pos` (advanced past it), through block and
// byte accessors shared by the file reader and the in-memory parser.
struct Access {
  std::function<Result<std::string_view>(uint64_t)> block;  // empty view: end of data
  std::function<Result<std::string>(uint64_t, uint64_t)> bytes;
  uint64_t limit = UINT64_MAX;  // bytes available (for size checks)
};

Result<bool> NextMember(const Access& a, uint64_t* pos, TarMember* m, uint64_t* skipped, std::string_view where) {
  std::string long_name, pax_path;
  uint64_t pax_size = 0;
  bool has_pax_size = false;
  uint64_t first_header = *pos;
  bool extension_pending = false;
  while (true) {
    const uint64_t at = *pos;
    std::string_view b = AQ_TRY(a.block(at));
    if (b.empty()) {
      if (extension_pending) {
        return Truncated(fmt::format("{}: tar ends after an extended header at offset {}", where, first_header));
      }
      return false;
    }
    if (AllZero(b)) {
      if (extension_pending) {
        return Corruption(
            fmt::format("{}: tar: an empty block follows the extended header at offset {}", where, first_header));
      }
      return false;  // end of archive (a second zero block may follow)
    }
    AQ_TRY(CheckSum(b, where, at));
    const char type = b[156];
    uint64_t size = AQ_TRY(Number(b.substr(124, 12), "size", where, at));
    if (has_pax_size && type != 'x' && type != 'g' && type != 'L' && type != 'K') size = pax_size;
    const uint64_t data = at + kTarBlock;
    if (size > a.limit || data + TarPadded(size) > a.limit) {
      return Truncated(fmt::format("{}: tar member at offset {} claims {} bytes, past the end of the data ({} bytes)",
                                   where, at, size, a.limit));
    }
    *pos = data + TarPadded(size);
    if (type == 'x' || type == 'L') {
      if (size > kMaxNameBytes) {
        return Corruption(fmt::format("{}: tar extended header at offset {} is {} bytes", where, at, size));
      }
      std::string ext = AQ_TRY(a.bytes(data, size));
      if (type == 'x') {
        AQ_TRY(ApplyPax(ext, &pax_path, &pax_size, &has_pax_size, where, at));
      } else {
        long_name = std::string(Field(ext, 0, ext.size()));
      }
      if (!extension_pending) first_header = at;
      extension_pending = true;
      continue;
    }
    if (type == 'g' || type == 'K') {  // global pax header, GNU long link name: nothing a reader needs
      if (!extension_pending) first_header = at;
      extension_pending = true;
      continue;
    }
    std::string name;
    if (!pax_path.empty()) {
      name = pax_path;
    } else if (!long_name.empty()) {
      name = long_name;
    } else {
      name = std::string(Field(b, 0, 100));
      std::string_view magic = b.substr(257, 6);
      std::string_view prefix = Field(b, 345, 155);
      if (magic == std::string_view("ustar\0", 6) && !prefix.empty()) name = std::string(prefix) + "/" + name;
    }
    const bool regular = type == '0' || type == '\0' || type == '7';
    if (!regular || name.empty() || name.back() == '/') {
      ++*skipped;
      long_name.clear();
      pax_path.clear();
      has_pax_size = false;
      extension_pending = false;
      first_header = *pos;
      continue;
    }
    m->name = std::move(name);
    m->header_offset = extension_pending ? first_header : at;
    m->data_offset = data;
    m->size = size;
    return true;
  }
}

}  // namespace

TarReader::TarReader(const io::RandomAccessFile& file, std::string where) : file_(file), where_(std::move(where)) {}

Result<std::string_view> TarReader::Block(uint64_t offset) {
  const uint64_t size = file_.size();
  if (offset >= size) return std::string_view();
  if (offset + kTarBlock > size) {
    return Truncated(fmt::format("{}: tar ends inside a header block at offset {} ({} bytes)", where_, offset, size));
  }
  if (offset < buf_start_ || offset + kTarBlock > buf_start_ + buf_.size()) {
    buf_start_ = offset;
    buf_.resize(std::min<uint64_t>(kChunk, size - offset));
    size_t got = AQ_TRY(file_.ReadAt(offset, buf_.size(), buf_.data()));
    if (got < kTarBlock) return Truncated(fmt::format("{}: short read at offset {}", where_, offset));
    buf_.resize(got);
  }
  return std::string_view(buf_).substr(offset - buf_start_, kTarBlock);
}

Result<std::string> TarReader::Bytes(uint64_t offset, uint64_t n) {
  std::string out(n, '\0');
  size_t got = AQ_TRY(file_.ReadAt(offset, n, out.data()));
  if (got != n) return Truncated(fmt::format("{}: short read of {} bytes at offset {}", where_, n, offset));
  return out;
}

Result<bool> TarReader::Next(TarMember* member) {
  if (done_) return false;
  Access a{[this](uint64_t o) { return Block(o); }, [this](uint64_t o, uint64_t n) { return Bytes(o, n); },
           file_.size()};
  bool more = AQ_TRY(NextMember(a, &pos_, member, &skipped_, where_));
  if (!more) done_ = true;
  return more;
}

Result<std::vector<TarMember>> ParseTarMembers(std::string_view bytes, std::string_view where) {
  Access a{[bytes, where](uint64_t o) -> Result<std::string_view> {
             if (o >= bytes.size()) return std::string_view();
             if (o + kTarBlock > bytes.size()) {
               return Truncated(fmt::format("{}: tar ends inside a header block at offset {}", where, o));
             }
             return bytes.substr(o, kTarBlock);
           },
           [bytes](uint64_t o, uint64_t n) -> Result<std::string> { return std::string(bytes.substr(o, n)); },
           bytes.size()};
  std::vector<TarMember> out;
  uint64_t pos = 0, skipped = 0;
  TarMember m;
  while (AQ_TRY(NextMember(a, &pos, &m, &skipped, where))) out.push_back(m);
  return out;
}

std::pair<std::string_view, std::string_view> SplitWdsName(std::string_view name) {
  size_t slash = name.rfind('/');
  size_t base = slash == std::string_view::npos ? 0 : slash + 1;
  size_t dot = name.find('.', base);
  if (dot == std::string_view::npos) return {name, {}};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

namespace {
std::string_view LastExtension(std::string_view ext) {
  size_t dot = ext.rfind('.');
  return dot == std::string_view::npos ? ext : ext.substr(dot + 1);
}
std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}
}  // namespace

bool IsWdsImageExtension(std::string_view ext) {
  static const char* kImage[] = {"jpg", "jpeg", "png", "ppm", "pgm", "pnm", "bmp", "gif", "webp"};
  const std::string e = Lower(LastExtension(ext));
  return std::any_of(std::begin(kImage), std::end(kImage), [&](const char* x) { return e == x; });
}

bool IsWdsLabelExtension(std::string_view ext) {
  const std::string e = Lower(ext);
  return e == "cls" || e == "cls2" || e == "class" || e == "label";
}

Result<WdsSchema> ParseWdsSchema(std::string_view image, std::string_view label) {
  WdsSchema schema;
  auto split = [](std::string_view text) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find_first_of(";,", start);
      if (end == std::string_view::npos) end = text.size();
      std::string part = Lower(text.substr(start, end - start));
      while (!part.empty() && part.front() == ' ') part.erase(part.begin());
      while (!part.empty() && part.back() == ' ') part.pop_back();
      if (!part.empty()) out.push_back(part);
      start = end + 1;
    }
    return out;
  };
  auto check = [](const std::vector<std::string>& exts, std::string_view what) -> Status {
    for (const auto& e : exts) {
      if (e.front() == '.' || e.find('/') != std::string::npos) {
        return InvalidArgument(
            fmt::format("{} '{}': expected an extension after the key, such as jpg or v2.cls", what, e));
      }
    }
    return Status::Ok();
  };
  schema.image = split(image);
  if (schema.image.empty()) return InvalidArgument("WebDataset image: expected extensions such as jpg;png");
  AQ_TRY(check(schema.image, "WebDataset image"));
  const std::string l = Lower(label);
  if (l == "none" || l.empty()) {
    schema.label.clear();
    return schema;
  }
  if (const size_t colon = l.find(':'); colon != std::string::npos) {
    schema.label = {l.substr(0, colon)};
    schema.label_json_path = std::string(label.substr(colon + 1));
    if (schema.label[0].empty() || schema.label_json_path.empty()) {
      return InvalidArgument(fmt::format("WebDataset label '{}': expected EXT:PATH, such as json:label", label));
    }
  } else {
    schema.label = split(l);
  }
  AQ_TRY(check(schema.label, "WebDataset label"));
  return schema;
}

Result<bool> WdsReader::Next(WdsSample* s) {
  s->members.clear();
  s->key.clear();
  if (!deferred_.ok()) {
    Status e = std::move(deferred_);
    deferred_ = Status::Ok();
    return e;
  }
  if (!has_pending_) {
    if (!AQ_TRY(tar_.Next(&pending_))) return false;
    has_pending_ = true;
  }
  s->key = std::string(SplitWdsName(pending_.name).first);
  s->offset = pending_.header_offset;
  s->members.push_back(pending_);
  has_pending_ = false;
  TarMember m;
  while (true) {
    auto more = tar_.Next(&m);
    if (!more.ok()) {
      // Every member of this sample so far is whole: return it, and the
      // archive's error with the next call.
      deferred_ = more.status().WithContext(fmt::format("after sample '{}'", s->key));
      break;
    }
    if (!*more) break;
    if (SplitWdsName(m.name).first != s->key) {
      pending_ = std::move(m);
      has_pending_ = true;
      break;
    }
    s->members.push_back(std::move(m));
  }
  s->size = s->members.back().end() - s->offset;
  return true;
}

namespace {

Result<int64_t> IntegerText(std::string_view t) {
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ' || t.back() == '\0')) {
    t.remove_suffix(1);
  }
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size()) {
    return Corruption(fmt::format("holds '{}', not an integer class", std::string(t.substr(0, 40))));
  }
  return v;
}

Result<int64_t> JsonLabel(std::string_view text, const std::string& path) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Corruption("is not valid JSON");
  const nlohmann::json* at = &j;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('.', start);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(start, end - start);
    if (at->is_object() && at->contains(part)) {
      at = &(*at)[part];
    } else if (at->is_array() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit) &&
               std::stoul(part) < at->size()) {
      at = &(*at)[std::stoul(part)];
    } else {
      return Corruption(fmt::format("has no field '{}'", path));
    }
    start = end + 1;
  }
  if (at->is_number_integer()) return at->get<int64_t>();
  if (at->is_number_float() && at->get<double>() == std::floor(at->get<double>())) {
    return static_cast<int64_t>(at->get<double>());
  }
  if (at->is_string()) return IntegerText(at->get<std::string>());
  return Corruption(fmt::format("holds {} at '{}', not an integer class", at->dump().substr(0, 40), path));
}

std::string Joined(const std::vector<std::string>& v, std::string_view key) {
  std::string out;
  for (const auto& e : v) out += fmt::format("{}{}.{}", out.empty() ? "" : ", ", key, e);
  return out;
}

}  // namespace

Result<WdsFields> ParseWdsSample(std::string_view stored, std::string_view where, const WdsSchema& schema) {
  WdsFields f;
  auto members = AQ_TRY(ParseTarMembers(stored, where));
  if (members.empty()) return Corruption(fmt::format("{}: no file in the sample's tar bytes", where));
  f.key = std::string(SplitWdsName(members[0].name).first);
  size_t image_rank = schema.image.size(), label_rank = schema.label.size();
  std::string_view label_data;
  std::string label_name;
  for (const auto& m : members) {
    auto [key, ext] = SplitWdsName(m.name);
    if (key != f.key) {
      return Corruption(fmt::format("{}: member '{}' does not belong to sample '{}'", where, m.name, f.key));
    }
    std::string_view data = stored.substr(m.data_offset, m.size);
    f.members.emplace_back(std::string(ext), data);
    const std::string e = Lower(ext);
    for (size_t i = 0; i < image_rank; ++i) {
      if (schema.image[i] == e) {
        image_rank = i;
        f.image = data;
        f.image_extension = std::string(ext);
        break;
      }
    }
    for (size_t i = 0; i < label_rank; ++i) {
      if (schema.label[i] == e) {
        label_rank = i;
        label_data = data;
        label_name = m.name;
        break;
      }
    }
  }
  auto files = [&] {
    std::string exts;
    for (const auto& [e, d] : f.members) exts += (exts.empty() ? "" : ", ") + e;
    return exts;
  };
  if (image_rank == schema.image.size()) {
    return Corruption(fmt::format("{}: sample '{}' has no image: none of its files is {} (its files: {})", where, f.key,
                                  Joined(schema.image, f.key), files()));
  }
  if (!schema.label.empty()) {
    if (label_rank == schema.label.size()) {
      return Corruption(fmt::format(
          "{}: sample '{}' has no label: none of its files is {} (its files: {}); name the label member, or 'none' "
          "for a dataset without labels",
          where, f.key, Joined(schema.label, f.key), files()));
    }
    auto v = schema.label_json_path.empty() ? IntegerText(label_data) : JsonLabel(label_data, schema.label_json_path);
    if (!v.ok())
      return Corruption(fmt::format("{}: sample '{}': {} {}", where, f.key, label_name, v.status().message()));
    f.label = *v;
    f.has_label = true;
  }
  return f;
}

Status TarWriter::Header(std::string_view name, uint64_t size, char type, uint64_t mtime) {
  std::string b(kTarBlock, '\0');
  auto put = [&](size_t off, size_t len, std::string_view v) {
    std::copy_n(v.data(), std::min(len, v.size()), &b[off]);
  };
  auto octal = [&](size_t off, size_t len, uint64_t v) {
    std::string s = fmt::format("{:0{}o}", v, len - 1);
    put(off, len, s);
  };
  put(0, 100, name);
  octal(100, 8, type == '5' ? 0755 : 0644);
  octal(108, 8, 0);
  octal(116, 8, 0);
  octal(124, 12, size);
  octal(136, 12, mtime);
  b[156] = type;
  put(257, 6, std::string_view("ustar\0", 6));
  put(263, 2, "00");
  std::fill_n(&b[148], 8, ' ');
  uint64_t sum = 0;
  for (unsigned char c : b) sum += c;
  put(148, 8, fmt::format("{:06o}", sum));
  b[154] = '\0';
  b[155] = ' ';
  AQ_TRY(file_.Append(b));
  offset_ += kTarBlock;
  return Status::Ok();
}

Status TarWriter::Add(std::string_view name, std::string_view data, uint64_t mtime) {
  if (name.empty()) return InvalidArgument("tar: a member needs a name");
  if (data.size() >= (uint64_t{1} << 33)) return InvalidArgument(fmt::format("tar: '{}' is 8 GiB or more", name));
  if (name.size() > 100) {
    // A pax header carries the whole name; the ustar field keeps its start.
    std::string rec = "path=" + std::string(name) + "\n";
    size_t len = rec.size() + 2;
    while (std::to_string(len).size() + 1 + rec.size() != len) ++len;
    std::string pax = std::to_string(len) + " " + rec;
    AQ_TRY(Header(fmt::format("PaxHeaders/{}", name.substr(0, 80)), pax.size(), 'x', mtime));
    AQ_TRY(file_.Append(pax));
    AQ_TRY(file_.Append(std::string(TarPadded(pax.size()) - pax.size(), '\0')));
    offset_ += TarPadded(pax.size());
  }
  AQ_TRY(Header(name.substr(0, 100), data.size(), '0', mtime));
  AQ_TRY(file_.Append(data));
  AQ_TRY(file_.Append(std::string(TarPadded(data.size()) - data.size(), '\0')));
  offset_ += TarPadded(data.size());
  return Status::Ok();
}

Status TarWriter::Finish() {
  AQ_TRY(file_.Append(std::string(2 * kTarBlock, '\0')));
  offset_ += 2 * kTarBlock;
  return Status::Ok();
}

}  // namespace aq::format
