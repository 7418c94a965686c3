// In-memory FileSystem for unit tests and fuzz targets: the same contract as
// the POSIX one without touching a disk. Files are snapshotted at OpenRead
// (a reader keeps the contents it opened even if the file is replaced).
#include <fmt/format.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "common/mutex.h"
#include "io/file_system.h"

namespace aq::io {
namespace {

using Bytes = std::shared_ptr<const std::string>;

class MemReadFile final : public RandomAccessFile {
 public:
  MemReadFile(Bytes data, std::string path) : data_(std::move(data)), path_(std::move(path)) {}
  Result<size_t> ReadAt(uint64_t offset, size_t n, void* buf) const override {
    if (offset >= data_->size()) return size_t{0};
    size_t k = std::min<uint64_t>(n, data_->size() - offset);
    std::memcpy(buf, data_->data() + offset, k);
    return k;
  }
  uint64_t size() const override { return data_->size(); }
  const std::string& path() const override { return path_; }

 private:
  Bytes data_;
  std::string path_;
};

class MemFileSystem;

class MemWriteFile final : public WritableFile {
 public:
  MemWriteFile(MemFileSystem* fs, std::string path) : fs_(fs), path_(std::move(path)) {}
  ~MemWriteFile() override { (void)Close(); }
  Status Append(std::string_view data) override {
    if (closed_) return InvalidArgument(fmt::format("append to closed file '{}'", path_));
    buf_.append(data);
    size_ += data.size();
    return Status::Ok();
  }
  Status Sync() override;
  Status Close() override;
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  MemFileSystem* fs_;
  std::string path_;
  std::string buf_;
  uint64_t size_ = 0;
  bool closed_ = false;
};

class MemFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<Lock>> TryLock(const std::string& path, std::string_view owner) override {
    MutexLock lock(mu_);
    auto [it, inserted] = locks_.emplace(path, std::string(owner));
    if (!inserted) return Status(StatusCode::kConflict, fmt::format("'{}' is locked by {}", path, it->second));
    return std::unique_ptr<Lock>(std::make_unique<MemLock>(this, path));
  }

  Result<std::unique_ptr<RandomAccessFile>> OpenRead(const std::string& path, AccessHint) override {
    MutexLock lock(mu_);
    auto it = files_.find(path);
    if (it == files_.end()) {
      if (IsDirLocked(path)) return InvalidArgument(fmt::format("'{}' is a directory, not a file", path));
      return NotFound(fmt::format("open '{}': No such file or directory", path));
    }
    return std::unique_ptr<RandomAccessFile>(std::make_unique<MemReadFile>(it->second, path));
  }
  Result<std::unique_ptr<WritableFile>> OpenWrite(const std::string& path) override {
    {
      MutexLock lock(mu_);
      files_[path] = std::make_shared<const std::string>();
    }
    return std::unique_ptr<WritableFile>(std::make_unique<MemWriteFile>(this, path));
  }
  Result<FileInfo> Stat(const std::string& path) override {
    MutexLock lock(mu_);
    auto it = files_.find(path);
    if (it != files_.end()) return FileInfo{path, it->second->size(), false};
    if (IsDirLocked(path)) return FileInfo{path, 0, true};
    return NotFound(fmt::format("stat '{}': No such file or directory", path));
  }
  Result<std::vector<FileInfo>> List(const std::string& dir) override {
    MutexLock lock(mu_);
    if (!IsDirLocked(dir)) return NotFound(fmt::format("list directory '{}': No such file or directory", dir));
    std::string prefix = dir.empty() || dir.back() == '/' ? dir : dir + "/";
    std::map<std::string, FileInfo> out;
    for (const auto& [p, data] : files_) {
      if (p.compare(0, prefix.size(), prefix) != 0) continue;
      std::string rest = p.substr(prefix.size());
      auto slash = rest.find('/');
      if (slash == std::string::npos) {
        out[rest] = {rest, data->size(), false};
      } else {
        out.emplace(rest.substr(0, slash), FileInfo{rest.substr(0, slash), 0, true});
      }
    }
    for (const auto& d : dirs_) {
      if (d.size() <= prefix.size() || d.compare(0, prefix.size(), prefix) != 0) continue;
      std::string rest = d.substr(prefix.size());
      if (rest.find('/') == std::string::npos) out.emplace(rest, FileInfo{rest, 0, true});
    }
    std::vector<FileInfo> v;
    for (auto& [name, info] : out) v.push_back(info);
    return v;
  }
  Status MakeDirs(const std::string& path) override {
    MutexLock lock(mu_);
    if (files_.count(path))
      return Status(StatusCode::kAlreadyExists, fmt::format("'{}' exists and is not a directory", path));
    std::string p = path;
    while (!p.empty() && p.back() == '/') p.pop_back();
    dirs_.insert(p);
    return Status::Ok();
  }
  Status Remove(const std::string& path) override {
    MutexLock lock(mu_);
    if (files_.erase(path) == 0 && dirs_.erase(path) == 0) {
      return NotFound(fmt::format("remove '{}': No such file or directory", path));
    }
    return Status::Ok();
  }
  Status Rename(const std::string& from, const std::string& to) override {
    MutexLock lock(mu_);
    auto it = files_.find(from);
    if (it == files_.end()) return NotFound(fmt::format("rename '{}': No such file or directory", from));
    files_[to] = it->second;
    files_.erase(from);
    return Status::Ok();
  }

  void Store(const std::string& path, std::string data) {
    MutexLock lock(mu_);
    files_[path] = std::make_shared<const std::string>(std::move(data));
  }

 private:
  bool IsDirLocked(const std::string& path) const AQ_REQUIRES(mu_) {
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    if (p.empty() || p == "/" || p == "." || dirs_.count(p)) return true;
    std::string prefix = p + "/";
    auto it = files_.lower_bound(prefix);
    if (it != files_.end() && it->first.compare(0, prefix.size(), prefix) == 0) return true;
    auto d = dirs_.lower_bound(prefix);
    return d != dirs_.end() && d->compare(0, prefix.size(), prefix) == 0;
  }

  Mutex mu_;
  std::map<std::string, Bytes> files_ AQ_GUARDED_BY(mu_);
  std::set<std::string> dirs_ AQ_GUARDED_BY(mu_);
  std::map<std::string, std::string> locks_ AQ_GUARDED_BY(mu_);  // path -> owner

  class MemLock final : public Lock {
   public:
    MemLock(MemFileSystem* fs, std::string path) : fs_(fs), path_(std::move(path)) {}
    ~MemLock() override {
      MutexLock lock(fs_->mu_);
      fs_->locks_.erase(path_);
    }

   private:
    MemFileSystem* fs_;
    std::string path_;
  };
};

Status MemWriteFile::Sync() {
  fs_->Store(path_, buf_);
  return Status::Ok();
}
Status MemWriteFile::Close() {
  if (closed_) return Status::Ok();
  closed_ = true;
  fs_->Store(path_, std::move(buf_));
  return Status::Ok();
}

}  // namespace

std::unique_ptr<FileSystem> NewMemFileSystem() { return std::make_unique<MemFileSystem>(); }

}  // namespace aq::io
