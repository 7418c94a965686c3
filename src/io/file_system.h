// io::FileSystem: the one interface through which aquifer reads and writes
// bytes. Formats, dataset tools and the pipeline use it and never call
// open(2) themselves, so the same code runs on a local disk, an in-memory
// file system (tests, fuzzing) and, later, NFS mounts or the store client.
//
// Thread safety: FileSystem methods and RandomAccessFile::ReadAt are safe to
// call concurrently. A WritableFile is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace aq::io {

struct FileInfo {
  std::string name;  // last path component (List) or the path given (Stat)
  uint64_t size = 0;
  bool is_dir = false;
  int64_t mtime_s = 0;  // last modification, seconds since the epoch (0: unknown)
  // Changes whenever the content does (a store's ETag; "" where unknown).
  std::string version;
  // List on local files: why the entry could not be examined ("a dangling
  // symbolic link", "a symbolic link loop", an errno's text); "" when it
  // could. Such entries are listed (size 0, not a directory), never dropped.
  std::string unreadable = {};
  // List on local files: a FIFO, socket or device (unreadable says which).
  // Never opened by the dataset tools: a FIFO without a writer blocks.
  bool special = false;
  // List on local files: the device and inode it names, mixed (0 where
  // unknown): the same directory reached twice by links has the same one.
  uint64_t node = 0;
};

// How a file will be read; implementations turn it into readahead advice.
// kDirect bypasses the client's page cache (O_DIRECT) where the
// implementation supports it; reads must then use offsets, sizes and buffers
// aligned to kDirectAlignment (the file's tail may be read short).
// Implementations without a page cache treat it as kSequential.
enum class AccessHint { kNormal, kSequential, kRandom, kDirect };
inline constexpr size_t kDirectAlignment = 4096;

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to n bytes at offset into buf. Returns the count read, which is
  // less than n only at end of file. Never a silent short read otherwise.
  virtual Result<size_t> ReadAt(uint64_t offset, size_t n, void* buf) const = 0;
  // Size when opened.
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
  // The version of the content being read (FileInfo::version), "" where unknown.
  virtual std::string version() const { return {}; }
  // The OS file descriptor when the file is a local one, for callers that
  // drive the kernel directly (the storage bench's io_uring queue); -1
  // otherwise. The file keeps ownership.
  virtual int native_fd() const { return -1; }
};

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::string_view data) = 0;
  // Writes at a byte offset, as pwrite(2): before the end overwrites, past
  // it leaves a hole of zeros; size() becomes the larger of the two ends.
  // Writers that seek back (zip's local headers, HDF5) need it; a file that
  // can only be written front to back refuses (kUnimplemented) and stays
  // usable.
  virtual Status WriteAt(uint64_t offset, std::string_view data);
  // Sets the size, as ftruncate(2).
  virtual Status Truncate(uint64_t size);
  // Makes appended data durable (fsync).
  virtual Status Sync() = 0;
  // Flushes and closes; further calls are errors. Destruction without
  // Close() closes silently (errors lost): call Close().
  virtual Status Close() = 0;
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
};

// How Copy() moved the bytes: shared extents (reflink), an in-kernel copy, or
// a read/write loop through user space.
enum class CopyMethod { kReflink, kCopyFileRange, kReadWrite };
std::string_view CopyMethodName(CopyMethod m);

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  virtual Result<std::unique_ptr<RandomAccessFile>> OpenRead(const std::string& path,
                                                             AccessHint hint = AccessHint::kNormal) = 0;
  // Creates or truncates.
  virtual Result<std::unique_ptr<WritableFile>> OpenWrite(const std::string& path) = 0;
  // Creates `path`, which must not exist (AlreadyExists otherwise), never
  // through a symbolic link: what a tool writes beside user data under a
  // temporary name. Where names cannot be links (object stores), OpenWrite.
  virtual Result<std::unique_ptr<WritableFile>> OpenWriteNew(const std::string& path) { return OpenWrite(path); }
  virtual Result<FileInfo> Stat(const std::string& path) = 0;
  // Direct children of a directory, sorted by name, without "." and "..".
  virtual Result<std::vector<FileInfo>> List(const std::string& dir) = 0;
  // List, also naming (in `skipped`) the children no file name can stand
  // for: an object store's keys with an empty, "." or ".." path segment
  // ("a//x", "/abs/x", "a/../x"; a prefix stands for every key below it),
  // which List leaves out. A copy or a mount reports them instead of
  // passing over them in silence. The default skips nothing.
  virtual Result<std::vector<FileInfo>> ListWithSkipped(const std::string& dir, std::vector<std::string>* skipped) {
    (void)skipped;
    return List(dir);
  }
  // Creates the directory and its missing parents; OK if it exists.
  virtual Status MakeDirs(const std::string& path) = 0;
  virtual Status Remove(const std::string& path) = 0;
  // Atomic replace of `to` where the implementation allows.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Copies a whole file, the cheapest way the implementation knows.
  virtual Result<CopyMethod> Copy(const std::string& from, const std::string& to);
  // Bytes an unprivileged writer may still put in `dir`'s file system, or
  // Unsupported where the implementation cannot tell.
  virtual Result<uint64_t> FreeBytes(const std::string& dir);
  // Evicts the file's pages from this machine's page cache, so the next
  // read comes from storage (posix_fadvise DONTNEED, allowed for any user).
  // No-op where there is no such cache.
  virtual Status DropCache(const std::string& path) {
    (void)path;
    return Status::Ok();
  }
  // What the caller will read next, in order: ranges of files (length
  // UINT64_MAX: to the end). A store stages them ahead of need (a node
  // reads them from slow media while the caller is still reading earlier
  // ones); `stream` names the caller's sequence (one per reader, e.g. per
  // rank), and each call appends to it. Advice only: nothing is read back,
  // and a file system without such staging does nothing. Returns how many
  // ranges were taken up (0 where there is nothing to stage).
  struct PlannedRead {
    std::string path;
    uint64_t offset = 0;
    uint64_t length = UINT64_MAX;
  };
  virtual Result<size_t> Plan(const std::string& stream, const std::vector<PlannedRead>& reads) {
    (void)stream;
    (void)reads;
    return size_t{0};
  }
  // Forgets what `stream` planned (reads not yet staged, blocks held for
  // it), on the store `where` names (any path of it). A file system
  // without staging does nothing.
  virtual Status CancelPlan(const std::string& where, const std::string& stream) {
    (void)where;
    (void)stream;
    return Status::Ok();
  }
  // Makes a directory private to its owner (mode 0700): what a storage
  // node keeps there is no other local user's to read. No-op where there
  // are no such modes.
  virtual Status MakePrivate(const std::string& dir) {
    (void)dir;
    return Status::Ok();
  }

  // An exclusive lock on the file `path` (created if missing), held until
  // the returned object is destroyed, so two processes (or two nodes in one
  // process) never share what the file guards. `owner` is written into the
  // file for the next would-be holder to read: a lock already held is
  // kConflict, and the message quotes its owner. File systems without locks
  // grant every request.
  class Lock {
   public:
    virtual ~Lock() = default;
  };
  virtual Result<std::unique_ptr<Lock>> TryLock(const std::string& path, std::string_view owner);

  bool Exists(const std::string& path) { return Stat(path).ok(); }
};

// The local POSIX file system (pread, posix_fadvise, fsync, FICLONE,
// copy_file_range).
std::unique_ptr<FileSystem> NewPosixFileSystem();

// An in-memory file system for tests and fuzzing. Paths are plain strings;
// directories exist implicitly when a file below them exists or MakeDirs
// created them.
std::unique_ptr<FileSystem> NewMemFileSystem();

// A RandomAccessFile over bytes owned by the caller (must outlive the file).
std::unique_ptr<RandomAccessFile> NewSpanFile(std::string_view bytes, std::string name = "<memory>");

// Reads the whole file into a string (small files: indexes, lists).
Result<std::string> ReadFileToString(FileSystem& fs, const std::string& path);
// Creates `path` fresh (a temporary, or a file a tool makes anew): whatever
// is at the name (a file an earlier run left, a planted symbolic link) is
// unlinked first, and the file is then created exclusively, not through a
// link (OpenWriteNew).
Result<std::unique_ptr<WritableFile>> CreateFresh(FileSystem& fs, const std::string& path);
// Writes data to path via a temporary name (CreateFresh) and a rename,
// after fsync, so a reader sees the old or the new file, never half of
// one; a link at `path` itself is replaced, not followed.
Status WriteFileAtomic(FileSystem& fs, const std::string& path, std::string_view data);

// Path helpers (POSIX '/' separators).
std::string JoinPath(std::string_view a, std::string_view b);
std::string_view BaseName(std::string_view path);
std::string_view DirName(std::string_view path);

}  // namespace aq::io
