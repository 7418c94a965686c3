// The local file system. pread for concurrent random access, posix_fadvise
// for the access hint, fsync for durability, and for whole-file copies a
// reflink (FICLONE) when the file system shares extents, else
// copy_file_range, else a read/write loop.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "io/file_system.h"

namespace aq::io {
namespace {

// A file's identity (device and inode) in one number.
uint64_t NodeOf(const struct stat& st) {
  return static_cast<uint64_t>(st.st_ino) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(st.st_dev);
}

// What a file that is neither a directory nor a regular file is.
const char* NonRegularKind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(int fd, std::string path, uint64_t size) : fd_(fd), path_(std::move(path)), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  Result<size_t> ReadAt(uint64_t offset, size_t n, void* buf) const override {
    size_t done = 0;
    auto* p = static_cast<char*>(buf);
    while (done < n) {
      // Stop at the size seen at open: one short read at the tail, never a
      // second pread at an unaligned offset (O_DIRECT would refuse it).
      if (offset + done >= size_ && done > 0) break;
      ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, fmt::format("read at offset {} of", offset + done), path_);
      }
      if (r == 0) break;  // end of file
      done += static_cast<size_t>(r);
    }
    return done;
  }
  uint64_t size() const override { return size_; }
  int native_fd() const override { return fd_; }
  const std::string& path() const override { return path_; }

 private:
  int fd_;
  std::string path_;
  uint64_t size_;
};

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) { buf_.reserve(kBufSize); }
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(std::string_view data) override {
    if (fd_ < 0) return InvalidArgument(fmt::format("append to closed file '{}'", path_));
    size_ += data.size();
    if (buf_.size() + data.size() <= kBufSize) {
      buf_.append(data);
      return Status::Ok();
    }
    AQ_TRY(Flush());
    if (data.size() >= kBufSize) return WriteAll(data);
    buf_.append(data);
    return Status::Ok();
  }

  Status WriteAt(uint64_t offset, std::string_view data) override {
    if (fd_ < 0) return InvalidArgument(fmt::format("write to closed file '{}'", path_));
    AQ_TRY(Flush());
    for (size_t done = 0; done < data.size();) {
      ssize_t w = ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
      if (w < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, "write", path_);
      }
      done += static_cast<size_t>(w);
    }
    size_ = std::max<uint64_t>(size_, offset + data.size());
    end_ = size_;
    return Status::Ok();
  }

  Status Truncate(uint64_t to) override {
    if (fd_ < 0) return InvalidArgument(fmt::format("truncate closed file '{}'", path_));
    AQ_TRY(Flush());
    if (::ftruncate(fd_, static_cast<off_t>(to)) != 0) return ErrnoStatus(errno, "truncate", path_);
    size_ = to;
    end_ = to;
    return Status::Ok();
  }

  Status Sync() override {
    AQ_TRY(Flush());
    if (::fsync(fd_) != 0) {
      // A device, pipe or socket (`aquifer cp URL /dev/null`) holds nothing
      // to make durable: fsync refuses those with EINVAL. A file that cannot
      // be synced is still an error.
      const int e = errno;
      struct stat st {};
      if (e == EINVAL && ::fstat(fd_, &st) == 0 && !S_ISREG(st.st_mode)) return Status::Ok();
      return ErrnoStatus(e, "fsync", path_);
    }
    return Status::Ok();
  }

  Status Close() override {
    if (fd_ < 0) return Status::Ok();
    Status s = Flush();
    if (::close(fd_) != 0 && s.ok()) s = ErrnoStatus(errno, "close", path_);
    fd_ = -1;
    return s;
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  static constexpr size_t kBufSize = 1 << 20;

  Status Flush() {
    if (buf_.empty()) return Status::Ok();
    Status s = WriteAll(buf_);
    buf_.clear();
    return s;
  }
  Status WriteAll(std::string_view data) {
    const char* p = data.data();
    size_t left = data.size();
    while (left > 0) {
      ssize_t w = ::pwrite(fd_, p, left, static_cast<off_t>(end_));
      if (w < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, "write", path_);
      }
      p += w;
      left -= static_cast<size_t>(w);
      end_ += static_cast<uint64_t>(w);
    }
    return Status::Ok();
  }

  int fd_;
  std::string path_;
  std::string buf_;
  uint64_t size_ = 0;
  uint64_t end_ = 0;  // where the buffer's first byte goes: size_ - buf_.size()
};

// flock(2) on an open descriptor: released when the descriptor closes,
// which the kernel also does when the holder dies.
class PosixLock final : public FileSystem::Lock {
 public:
  explicit PosixLock(int fd) : fd_(fd) {}
  ~PosixLock() override { ::close(fd_); }

 private:
  int fd_;
};

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<Lock>> TryLock(const std::string& path, std::string_view owner) override {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus(errno, "create the lock file", path);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      std::string holder(256, '\0');
      const ssize_t n = ::pread(fd, holder.data(), holder.size(), 0);
      holder.resize(n > 0 ? static_cast<size_t>(n) : 0);
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
      ::close(fd);
      if (e != EWOULDBLOCK) return ErrnoStatus(e, "lock", path);
      return Status(StatusCode::kConflict,
                    fmt::format("'{}' is locked by {}", path, holder.empty() ? "another process" : holder));
    }
    std::string text = std::string(owner) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      const int e = errno;
      ::close(fd);
      return ErrnoStatus(e, "write", path);
    }
    return std::unique_ptr<Lock>(std::make_unique<PosixLock>(fd));
  }

  Result<std::unique_ptr<RandomAccessFile>> OpenRead(const std::string& path, AccessHint hint) override {
    // O_NONBLOCK: opening a FIFO for reading would wait for a writer
    // forever; it changes nothing for a regular file.
    const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (hint == AccessHint::kDirect ? O_DIRECT : 0);
    int fd = ::open(path.c_str(), flags);
    if (fd < 0 && hint == AccessHint::kDirect && errno == EINVAL) {
      return Status(StatusCode::kInvalidArgument, fmt::format("'{}': the file system does not support O_DIRECT", path));
    }
    if (fd < 0) return ErrnoStatus(errno, "open", path);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ::close(fd);
      return ErrnoStatus(e, "stat", path);
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return Status(StatusCode::kInvalidArgument, fmt::format("'{}' is a directory, not a file", path));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("'{}' is {}, not a regular file: not read", path, NonRegularKind(st.st_mode)));
    }
    if (hint == AccessHint::kSequential) ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    if (hint == AccessHint::kRandom) ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    return std::unique_ptr<RandomAccessFile>(
        std::make_unique<PosixRandomAccessFile>(fd, path, static_cast<uint64_t>(st.st_size)));
  }

  Status DropCache(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "open", path);
    int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    if (rc != 0) return ErrnoStatus(rc, "drop the page cache of", path);
    return Status::Ok();
  }

  Status MakePrivate(const std::string& dir) override {
    if (::chmod(dir.c_str(), 0700) != 0) return ErrnoStatus(errno, "make private (chmod 700)", dir);
    return Status::Ok();
  }

  Result<std::unique_ptr<WritableFile>> OpenWrite(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus(errno, "create", path);
    return std::unique_ptr<WritableFile>(std::make_unique<PosixWritableFile>(fd, path));
  }

  Result<std::unique_ptr<WritableFile>> OpenWriteNew(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus(errno, "create (as a new file)", path);
    return std::unique_ptr<WritableFile>(std::make_unique<PosixWritableFile>(fd, path));
  }

  Result<FileInfo> Stat(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "stat", path);
    FileInfo info{path, static_cast<uint64_t>(st.st_size), S_ISDIR(st.st_mode), st.st_mtim.tv_sec};
    info.node = NodeOf(st);
    return info;
  }

  Result<std::vector<FileInfo>> List(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus(errno, "list directory", dir);
    std::vector<FileInfo> out;
    while (true) {
      errno = 0;
      dirent* e = ::readdir(d);
      if (e == nullptr) {
        if (errno != 0) {
          int err = errno;
          ::closedir(d);
          return ErrnoStatus(err, "list directory", dir);
        }
        break;
      }
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st {};
      if (::fstatat(::dirfd(d), e->d_name, &st, 0) != 0) {
        const int err = errno;
        struct stat link {};
        if (::fstatat(::dirfd(d), e->d_name, &link, AT_SYMLINK_NOFOLLOW) != 0) continue;  // vanished meanwhile
        FileInfo bad{name, 0, false, link.st_mtim.tv_sec};
        bad.unreadable = err == ENOENT && S_ISLNK(link.st_mode) ? "a dangling symbolic link"
                         : err == ELOOP                         ? "a symbolic link loop"
                                                                : std::strerror(err);
        out.push_back(std::move(bad));
        continue;
      }
      FileInfo info{name, static_cast<uint64_t>(st.st_size), S_ISDIR(st.st_mode), st.st_mtim.tv_sec};
      info.node = NodeOf(st);
      // A FIFO, socket or device is listed as unreadable: opening one can
      // wait forever (a FIFO without a writer) or read without end.
      if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        info.size = 0;
        info.unreadable = fmt::format("{}, not a regular file", NonRegularKind(st.st_mode));
        info.special = true;
      }
      out.push_back(std::move(info));
    }
    ::closedir(d);
    std::sort(out.begin(), out.end(), [](const FileInfo& a, const FileInfo& b) { return a.name < b.name; });
    return out;
  }

  Status MakeDirs(const std::string& path) override {
    if (path.empty()) return Status::Ok();
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = path.find('/', pos + 1);
      cur = path.substr(0, pos);
      if (cur.empty()) continue;
      if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus(errno, "create directory", cur);
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "create directory", path);
    if (!S_ISDIR(st.st_mode))
      return Status(StatusCode::kAlreadyExists, fmt::format("'{}' exists and is not a directory", path));
    return Status::Ok();
  }

  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) {
      if (errno == EISDIR && ::rmdir(path.c_str()) == 0) return Status::Ok();
      return ErrnoStatus(errno, "remove", path);
    }
    return Status::Ok();
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus(errno, fmt::format("rename to '{}' of", to), from);
    // The new name is durable only once its directory is: fsync it, so a
    // rename after fsync (WriteFileAtomic, block writes) survives a crash.
    std::string dir(DirName(to));
    int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      int rc = ::fsync(fd);
      int e = errno;
      ::close(fd);
      if (rc != 0 && e != EINVAL) return ErrnoStatus(e, "fsync the directory of", to);
    }
    return Status::Ok();
  }

  Result<uint64_t> FreeBytes(const std::string& dir) override {
    struct statvfs v {};
    if (::statvfs(dir.c_str(), &v) != 0) return ErrnoStatus(errno, "statvfs", dir);
    return static_cast<uint64_t>(v.f_bavail) * static_cast<uint64_t>(v.f_frsize);
  }

  Result<CopyMethod> Copy(const std::string& from, const std::string& to) override {
    int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return ErrnoStatus(errno, "open", from);
    int out =
        ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);  // a link at `to`: refused
    if (out < 0) {
      int e = errno;
      ::close(in);
      return ErrnoStatus(e, "create", to);
    }
    Result<CopyMethod> r = CopyFds(in, out, from, to);
    if (::close(out) != 0 && r.ok()) r = ErrnoStatus(errno, "close", to);
    ::close(in);
    return r;
  }

 private:
  static Result<CopyMethod> CopyFds(int in, int out, const std::string& from, const std::string& to) {
    if (::ioctl(out, FICLONE, in) == 0) return CopyMethod::kReflink;
    struct stat st {};
    if (::fstat(in, &st) != 0) return ErrnoStatus(errno, "stat", from);
    auto left = static_cast<uint64_t>(st.st_size);
    bool in_kernel = true;
    while (left > 0) {
      ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, std::min<uint64_t>(left, 1ull << 30), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if ((errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL) &&
            left == static_cast<uint64_t>(st.st_size)) {
          in_kernel = false;
          break;
        }
        return ErrnoStatus(errno, fmt::format("copy to '{}' from", to), from);
      }
      if (n == 0) return Truncated(fmt::format("'{}' shrank while being copied", from));
      left -= static_cast<uint64_t>(n);
    }
    if (in_kernel) return CopyMethod::kCopyFileRange;
    std::string buf(1 << 20, '\0');
    while (true) {
      ssize_t n = ::read(in, buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, "read", from);
      }
      if (n == 0) break;
      for (ssize_t done = 0; done < n;) {
        ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(n - done));
        if (w < 0) {
          if (errno == EINTR) continue;
          return ErrnoStatus(errno, "write", to);
        }
        done += w;
      }
    }
    return CopyMethod::kReadWrite;
  }
};

}  // namespace

std::unique_ptr<FileSystem> NewPosixFileSystem() { return std::make_unique<PosixFileSystem>(); }

}  // namespace aq::io
