// A FileSystem that forwards every call to another (LevelDB's EnvWrapper):
// a test overrides the one call it changes (how files are read, how much
// room is left) and keeps the rest of the real or in-memory one.
//
// Thread safety: as the file system it forwards to.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/file_system.h"

namespace aq::io {

class ForwardingFileSystem : public FileSystem {
 public:
  explicit ForwardingFileSystem(FileSystem& base) : base_(base) {}
  Result<std::unique_ptr<RandomAccessFile>> OpenRead(const std::string& p, AccessHint h) override {
    return base_.OpenRead(p, h);
  }
  Result<std::unique_ptr<WritableFile>> OpenWrite(const std::string& p) override { return base_.OpenWrite(p); }
  Result<std::unique_ptr<WritableFile>> OpenWriteNew(const std::string& p) override { return base_.OpenWriteNew(p); }
  Result<FileInfo> Stat(const std::string& p) override { return base_.Stat(p); }
  Result<std::vector<FileInfo>> List(const std::string& d) override { return base_.List(d); }
  Status MakeDirs(const std::string& p) override { return base_.MakeDirs(p); }
  Status Remove(const std::string& p) override { return base_.Remove(p); }
  Status Rename(const std::string& a, const std::string& b) override { return base_.Rename(a, b); }
  Result<uint64_t> FreeBytes(const std::string& d) override { return base_.FreeBytes(d); }

 protected:
  FileSystem& base_;
};

}  // namespace aq::io
