// MultiRootFileSystem: one dataset reachable under several roots, such as
// the same export mounted through each storage node's address
// (/mnt/s1/train, /mnt/s2/train). Callers use paths under the first root;
// reads go to the root chosen by policy:
//   kSpread  each file to root hash(relative path) % roots, so a rank's reads
//            spread over every mount (and storage node);
//   kPinned  every file of rank r to root r % roots, the documents'
//            round-robin-by-rank placement.
// Listing and stat use the first root; writes are refused (datasets are
// read-only here). Bytes and opens are counted per root.
//
// Thread safety: as FileSystem; the counters are atomic.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "io/file_system.h"

namespace aq::io {

enum class RootPolicy { kSpread, kPinned };
Result<RootPolicy> ParseRootPolicy(std::string_view s);  // spread | pinned

// "a:b:c" -> {"a", "b", "c"} (empty parts are an error).
Result<std::vector<std::string>> SplitRoots(std::string_view spec);

class MultiRootFileSystem final : public FileSystem {
 public:
  MultiRootFileSystem(FileSystem& base, std::vector<std::string> roots, RootPolicy policy, uint32_t rank);

  Result<std::unique_ptr<RandomAccessFile>> OpenRead(const std::string& path,
                                                     AccessHint hint = AccessHint::kNormal) override;
  Result<std::unique_ptr<WritableFile>> OpenWrite(const std::string& path) override;
  Result<FileInfo> Stat(const std::string& path) override { return base_.Stat(path); }
  Result<std::vector<FileInfo>> List(const std::string& dir) override { return base_.List(dir); }
  Status MakeDirs(const std::string& path) override;
  Status Remove(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status DropCache(const std::string& path) override;  // every root's copy
  // Each read to the root its path's reads go to.
  Result<size_t> Plan(const std::string& stream, const std::vector<PlannedRead>& reads) override;

  // The root a path's reads go to.
  size_t RootOf(const std::string& path) const;
  const std::vector<std::string>& roots() const { return roots_; }
  uint64_t bytes_read(size_t root) const { return counters_[root].bytes.load(); }
  uint64_t opens(size_t root) const { return counters_[root].opens.load(); }

 private:
  struct Counters {
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> opens{0};
  };
  FileSystem& base_;
  std::vector<std::string> roots_;
  RootPolicy policy_;
  uint32_t rank_;
  std::unique_ptr<Counters[]> counters_;
};

}  // namespace aq::io
