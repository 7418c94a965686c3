#include "io/fault_injection.h"

#include <fmt/format.h>

namespace aq::io {

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultInjectionFileSystem& fs, std::unique_ptr<WritableFile> target, std::string path)
      : fs_(fs), target_(std::move(target)), path_(std::move(path)) {}
  Status Append(std::string_view data) override {
    AQ_TRY(fs_.Mutate("append to", path_));
    AQ_TRY(fs_.Appended(path_, data.size()));
    AQ_TRY(target_->Append(data));
    shadow_.append(data);
    return Status::Ok();
  }
  Status Sync() override {
    AQ_TRY(fs_.Mutate("sync", path_));
    AQ_TRY(target_->Sync());
    fs_.Synced(path_, shadow_);
    return Status::Ok();
  }
  Status Close() override {
    AQ_TRY(fs_.Mutate("close", path_));
    return target_->Close();
  }
  uint64_t size() const override { return target_->size(); }
  const std::string& path() const override { return path_; }

 private:
  FaultInjectionFileSystem& fs_;
  std::unique_ptr<WritableFile> target_;
  std::string path_;
  std::string shadow_;  // everything appended, to become durable at Sync
};

namespace {

// A read-only file whose reads fail (the EIO of a bad sector).
class FailingFile final : public RandomAccessFile {
 public:
  FailingFile(std::unique_ptr<RandomAccessFile> f) : f_(std::move(f)) {}
  Result<size_t> ReadAt(uint64_t offset, size_t, void*) const override {
    return IoError(fmt::format("read '{}' at offset {}: Input/output error (injected)", f_->path(), offset));
  }
  uint64_t size() const override { return f_->size(); }
  const std::string& path() const override { return f_->path(); }

 private:
  std::unique_ptr<RandomAccessFile> f_;
};

}  // namespace

void FaultInjectionFileSystem::CrashAt(uint64_t op) {
  MutexLock lock(mu_);
  crash_at_ = op == 0 ? 0 : ops_.load() + op;
  crashed_ = false;
}

bool FaultInjectionFileSystem::crashed() const {
  MutexLock lock(mu_);
  return crashed_;
}

void FaultInjectionFileSystem::FailWritesAfter(uint64_t bytes, StatusCode code) {
  MutexLock lock(mu_);
  write_limited_ = bytes > 0;
  write_budget_ = bytes;
  write_fail_code_ = code;
}

void FaultInjectionFileSystem::FailReads(std::string fragment) {
  MutexLock lock(mu_);
  read_fault_ = std::move(fragment);
}

Status FaultInjectionFileSystem::Mutate(const char* what, const std::string& path) {
  const uint64_t n = ++ops_;
  MutexLock lock(mu_);
  if (crash_at_ != 0 && n >= crash_at_) crashed_ = true;
  if (crashed_) return IoError(fmt::format("{} '{}': simulated crash (operation {})", what, path, n));
  return Status::Ok();
}

Status FaultInjectionFileSystem::Appended(const std::string& path, uint64_t n) {
  MutexLock lock(mu_);
  if (!write_limited_) return Status::Ok();
  if (n > write_budget_) {
    write_budget_ = 0;
    return Status(write_fail_code_,
                  fmt::format("append to '{}': {} (injected)", path,
                              write_fail_code_ == StatusCode::kNoSpace ? "No space left on device" : "write failed"));
  }
  write_budget_ -= n;
  return Status::Ok();
}

void FaultInjectionFileSystem::Synced(const std::string& path, const std::string& durable) {
  MutexLock lock(mu_);
  auto& t = written_[path];
  t.durable = durable;
  t.synced = true;
}

Result<std::unique_ptr<RandomAccessFile>> FaultInjectionFileSystem::OpenRead(const std::string& path, AccessHint hint) {
  auto f = AQ_TRY(target_.OpenRead(path, hint));
  {
    MutexLock lock(mu_);
    if (!read_fault_.empty() && path.find(read_fault_) != std::string::npos) {
      return std::unique_ptr<RandomAccessFile>(std::make_unique<FailingFile>(std::move(f)));
    }
  }
  return f;
}

Result<std::unique_ptr<WritableFile>> FaultInjectionFileSystem::OpenWrite(const std::string& path) {
  AQ_TRY(Mutate("create", path));
  auto f = AQ_TRY(target_.OpenWrite(path));
  {
    MutexLock lock(mu_);
    written_[path] = Tracked{};  // nothing durable until the first Sync
    removed_.erase(path);
  }
  return std::unique_ptr<WritableFile>(std::make_unique<FaultWritableFile>(*this, std::move(f), path));
}

Result<FileInfo> FaultInjectionFileSystem::Stat(const std::string& path) { return target_.Stat(path); }

Result<std::vector<FileInfo>> FaultInjectionFileSystem::List(const std::string& dir) { return target_.List(dir); }

Status FaultInjectionFileSystem::MakeDirs(const std::string& path) {
  AQ_TRY(Mutate("make directory", path));
  return target_.MakeDirs(path);
}

Status FaultInjectionFileSystem::Remove(const std::string& path) {
  AQ_TRY(Mutate("remove", path));
  // What a crash could bring back: the file's durable contents.
  std::string durable;
  bool known = false;
  {
    MutexLock lock(mu_);
    auto it = written_.find(path);
    if (it != written_.end()) {
      known = true;
      if (it->second.synced) {
        durable = it->second.durable;
      } else {
        known = false;  // never durable: nothing to bring back
      }
    }
  }
  bool had_file = false;
  if (!known) {
    auto st = target_.Stat(path);
    if (st.ok() && !st->is_dir) {
      auto text = ReadFileToString(target_, path);
      if (text.ok()) {
        durable = std::move(*text);
        had_file = true;
      }
    }
  }
  AQ_TRY(target_.Remove(path));
  MutexLock lock(mu_);
  const bool never_durable = written_.count(path) && !written_[path].synced;
  written_.erase(path);
  if (!never_durable && (known || had_file)) removed_[path] = std::move(durable);
  return Status::Ok();
}

Status FaultInjectionFileSystem::Rename(const std::string& from, const std::string& to) {
  AQ_TRY(Mutate("rename", from));
  AQ_TRY(target_.Rename(from, to));
  MutexLock lock(mu_);
  auto it = written_.find(from);
  if (it != written_.end()) {
    written_[to] = std::move(it->second);
    written_.erase(from);
  } else {
    written_.erase(to);  // an untracked file: durable as it is
  }
  removed_.erase(to);
  return Status::Ok();
}

Status FaultInjectionFileSystem::DropUnsyncedData() {
  std::map<std::string, Tracked> written;
  std::map<std::string, std::string> removed;
  {
    MutexLock lock(mu_);
    written.swap(written_);
    removed.swap(removed_);
    crash_at_ = 0;
    crashed_ = false;
  }
  for (const auto& [path, t] : written) {
    if (!target_.Stat(path).ok()) continue;
    if (!t.synced) {
      AQ_TRY(target_.Remove(path));
      continue;
    }
    auto f = AQ_TRY(target_.OpenWrite(path));
    AQ_TRY(f->Append(t.durable));
    AQ_TRY(f->Sync());
    AQ_TRY(f->Close());
  }
  for (const auto& [path, data] : removed) {
    if (target_.Stat(path).ok()) continue;
    auto f = AQ_TRY(target_.OpenWrite(path));
    AQ_TRY(f->Append(data));
    AQ_TRY(f->Sync());
    AQ_TRY(f->Close());
  }
  return Status::Ok();
}

}  // namespace aq::io
