// A FileSystem that forwards every call to another one and injects faults
// on command, so crash windows and full disks are tested in-process (the
// idea of LevelDB's FaultInjectionTestEnv / EnvWrapper):
//   - a simulated crash at the Nth mutating operation (create, append, sync,
//     close, rename, remove, mkdir): it and every later one fail;
//   - DropUnsyncedData(), the power loss that follows: each file written
//     through this wrapper keeps only what its last Sync made durable (a
//     file never synced disappears), and every Remove since the last drop is
//     undone, as a directory entry removal may be after a crash;
//   - ENOSPC (or any code) once N bytes have been appended;
//   - EIO on reads of paths that contain a given string;
//   - added latency on every operation.
// The durability model is the FileSystem contract: data is durable after
// Sync, a Rename is durable when it returns (PosixFileSystem fsyncs the
// directory), a MakeDirs is durable.
//
// Thread safety: as FileSystem; the fault settings may change between
// operations from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "io/file_system.h"

namespace aq::io {

class FaultInjectionFileSystem final : public FileSystem {
 public:
  explicit FaultInjectionFileSystem(FileSystem& target) : target_(target) {}

  // The op-th mutating operation from now (1-based) and all after it fail
  // with IoError "simulated crash". 0 clears it.
  void CrashAt(uint64_t op);
  bool crashed() const;
  // Appends fail with `code` once `bytes` more have been written (0 clears).
  void FailWritesAfter(uint64_t bytes, StatusCode code = StatusCode::kNoSpace);
  // Reads of any path containing `fragment` fail with IoError ("" clears).
  void FailReads(std::string fragment);
  // Mutating operations so far.
  uint64_t ops() const { return ops_.load(); }

  // The power loss after a crash (see above); then operations work again.
  Status DropUnsyncedData();

  Result<std::unique_ptr<RandomAccessFile>> OpenRead(const std::string& path, AccessHint hint) override;
  Result<std::unique_ptr<WritableFile>> OpenWrite(const std::string& path) override;
  Result<FileInfo> Stat(const std::string& path) override;
  Result<std::vector<FileInfo>> List(const std::string& dir) override;
  Status MakeDirs(const std::string& path) override;
  Status MakePrivate(const std::string& dir) override { return target_.MakePrivate(dir); }
  Status Remove(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Result<std::unique_ptr<Lock>> TryLock(const std::string& path, std::string_view owner) override {
    return target_.TryLock(path, owner);
  }

 private:
  friend class FaultWritableFile;
  // Counts a mutating operation; an error when the crash has come.
  Status Mutate(const char* what, const std::string& path);
  Status Appended(const std::string& path, uint64_t n);
  void Synced(const std::string& path, const std::string& durable);

  struct Tracked {
    std::string durable;  // the file's contents as of its last Sync
    bool synced = false;
  };

  FileSystem& target_;
  std::atomic<uint64_t> ops_{0};
  mutable Mutex mu_;
  uint64_t crash_at_ AQ_GUARDED_BY(mu_) = 0;  // absolute op count, 0 = never
  bool crashed_ AQ_GUARDED_BY(mu_) = false;
  uint64_t write_budget_ AQ_GUARDED_BY(mu_) = 0;
  bool write_limited_ AQ_GUARDED_BY(mu_) = false;
  StatusCode write_fail_code_ AQ_GUARDED_BY(mu_) = StatusCode::kNoSpace;
  std::string read_fault_ AQ_GUARDED_BY(mu_);
  std::map<std::string, Tracked> written_ AQ_GUARDED_BY(mu_);      // files created through this wrapper
  std::map<std::string, std::string> removed_ AQ_GUARDED_BY(mu_);  // path -> durable contents before removal
};

}  // namespace aq::io
