#include "io/file_system.h"

#include <fmt/format.h>

#include <cstring>

namespace aq::io {

std::string_view CopyMethodName(CopyMethod m) {
  switch (m) {
    case CopyMethod::kReflink: return "reflink";
    case CopyMethod::kCopyFileRange: return "copy_file_range";
    case CopyMethod::kReadWrite: return "read/write";
  }
  return "?";
}

Status WritableFile::WriteAt(uint64_t offset, std::string_view) {
  return Unsupported(
      fmt::format("'{}': a write at byte {} ({} written): this file is written front to back", path(), offset, size()));
}

Status WritableFile::Truncate(uint64_t to) {
  return Unsupported(
      fmt::format("'{}': truncate to {} bytes of {}: this file is written front to back", path(), to, size()));
}

Result<uint64_t> FileSystem::FreeBytes(const std::string& dir) {
  return Unsupported(fmt::format("'{}': free space is not known here", dir));
}

Result<CopyMethod> FileSystem::Copy(const std::string& from, const std::string& to) {
  auto in = AQ_TRY(OpenRead(from, AccessHint::kSequential));
  auto out = AQ_TRY(OpenWrite(to));
  std::string buf(1 << 20, '\0');
  uint64_t off = 0;
  while (off < in->size()) {
    size_t got = AQ_TRY(in->ReadAt(off, buf.size(), buf.data()));
    if (got == 0) break;
    AQ_TRY(out->Append(std::string_view(buf.data(), got)));
    off += got;
  }
  AQ_TRY(out->Close());
  return CopyMethod::kReadWrite;
}

Result<std::unique_ptr<FileSystem::Lock>> FileSystem::TryLock(const std::string& path, std::string_view owner) {
  (void)path;
  (void)owner;
  return std::make_unique<Lock>();
}

namespace {
class SpanFile final : public RandomAccessFile {
 public:
  SpanFile(std::string_view bytes, std::string name) : bytes_(bytes), name_(std::move(name)) {}
  Result<size_t> ReadAt(uint64_t offset, size_t n, void* buf) const override {
    if (offset >= bytes_.size()) return size_t{0};
    size_t k = std::min<uint64_t>(n, bytes_.size() - offset);
    std::memcpy(buf, bytes_.data() + offset, k);
    return k;
  }
  uint64_t size() const override { return bytes_.size(); }
  const std::string& path() const override { return name_; }

 private:
  std::string_view bytes_;
  std::string name_;
};
}  // namespace

std::unique_ptr<RandomAccessFile> NewSpanFile(std::string_view bytes, std::string name) {
  return std::make_unique<SpanFile>(bytes, std::move(name));
}

Result<std::string> ReadFileToString(FileSystem& fs, const std::string& path) {
  auto f = AQ_TRY(fs.OpenRead(path, AccessHint::kSequential));
  std::string s(f->size(), '\0');
  size_t got = AQ_TRY(f->ReadAt(0, s.size(), s.data()));
  s.resize(got);
  return s;
}

Result<std::unique_ptr<WritableFile>> CreateFresh(FileSystem& fs, const std::string& path) {
  // A file left at the name by an earlier run, or anything planted there (a
  // link to a file elsewhere), is unlinked, never written through; a name
  // that reappears before the create fails it.
  if (Status s = fs.Remove(path); !s.ok() && s.code() != StatusCode::kNotFound) return s;
  return fs.OpenWriteNew(path);
}

Status WriteFileAtomic(FileSystem& fs, const std::string& path, std::string_view data) {
  std::string tmp = path + ".tmp";
  {
    auto f = AQ_TRY(CreateFresh(fs, tmp));
    AQ_TRY(f->Append(data));
    AQ_TRY(f->Sync());
    AQ_TRY(f->Close());
  }
  return fs.Rename(tmp, path);
}

std::string JoinPath(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  if (!b.empty() && b.front() == '/') return std::string(b);
  std::string s(a);
  if (s.back() != '/') s += '/';
  s += b;
  return s;
}

std::string_view BaseName(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  auto pos = path.rfind('/');
  return pos == std::string_view::npos ? path : path.substr(pos + 1);
}

std::string_view DirName(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  auto pos = path.rfind('/');
  if (pos == std::string_view::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

}  // namespace aq::io
