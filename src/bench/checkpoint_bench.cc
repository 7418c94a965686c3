#include "bench/checkpoint_bench.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/clock.h"

namespace aq::bench {
namespace {

Status Errno(const std::string& what, const std::string& path) {
  return Status(StatusCode::kIoError, fmt::format("{} {}: {}", what, path, std::strerror(errno)));
}

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

Status WriteAll(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Errno("write", path);
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

// A POSIX save: to a temporary name and renamed into place (local), or
// straight to its name (the mount stores the file at its close).
Status SavePosix(const CheckpointRankOptions& o, const std::string& pattern) {
  const bool rename = o.target == CheckpointTarget::kLocal;
  const std::string tmp = rename ? o.path + ".tmp" : o.path;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("create", tmp);
  Status s;
  for (uint64_t at = 0; s.ok() && at < o.bytes; at += pattern.size()) {
    s = WriteAll(fd, pattern.data(), static_cast<size_t>(std::min<uint64_t>(pattern.size(), o.bytes - at)), tmp);
  }
  if (s.ok() && ::fsync(fd) != 0) s = Errno("fsync", tmp);
  if (::close(fd) != 0 && s.ok()) s = Errno("close (the store refused the file?)", tmp);
  if (!s.ok() || !rename) return s;
  if (::rename(tmp.c_str(), o.path.c_str()) != 0) return Errno("rename into place", o.path);
  const std::string dir = Parent(o.path);
  const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0) return Errno("open the folder", dir);
  const int rc = ::fsync(d);
  ::close(d);
  return rc == 0 ? Status::Ok() : Errno("fsync the folder", dir);
}

Status SaveStore(io::FileSystem& fs, const CheckpointRankOptions& o, const std::string& pattern) {
  auto w = AQ_TRY(fs.OpenWrite(o.path));
  for (uint64_t at = 0; at < o.bytes; at += pattern.size()) {
    AQ_TRY(w->Append(
        std::string_view(pattern).substr(0, static_cast<size_t>(std::min<uint64_t>(pattern.size(), o.bytes - at)))));
  }
  return w->Close();  // returns once the node acknowledged the whole file
}

// Reads the whole file `chunk` bytes at a time and checks each chunk.
template <typename ReadFn>
Status ReadAndCheck(const CheckpointRankOptions& o, const std::string& pattern, ReadFn read) {
  std::unique_ptr<char[]> buf(new char[pattern.size()]);
  uint64_t at = 0;
  while (true) {
    const size_t want = pattern.size();
    size_t got = 0;
    while (got < want) {
      const size_t n = AQ_TRY(read(at + got, want - got, buf.get() + got));
      if (n == 0) break;
      got += n;
    }
    if (got == 0) break;
    const size_t expect = static_cast<size_t>(std::min<uint64_t>(pattern.size(), o.bytes - std::min(at, o.bytes)));
    if (got > expect || std::memcmp(buf.get(), pattern.data(), got) != 0) {
      return Corruption(fmt::format("{}: other bytes than were saved, in the {} bytes at offset {}", o.path, got, at));
    }
    at += got;
    if (got < want) break;
  }
  if (at != o.bytes) return Corruption(fmt::format("{}: {} bytes read back of the {} saved", o.path, at, o.bytes));
  return Status::Ok();
}

}  // namespace

std::string_view CheckpointTargetName(CheckpointTarget t) {
  switch (t) {
    case CheckpointTarget::kLocal: return "local disk";
    case CheckpointTarget::kStore: return "aquifer://";
    case CheckpointTarget::kMount: return "mount";
  }
  return "?";
}

uint64_t CheckpointSeed(uint32_t rank, uint32_t save) {
  return 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(rank) << 32) ^ (static_cast<uint64_t>(save) + 1);
}

std::string CheckpointPattern(uint64_t seed, size_t chunk) {
  std::string out(chunk, '\0');
  uint64_t x = seed | 1;
  for (size_t i = 0; i + 8 <= chunk; i += 8) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    const uint64_t v = x * 0x2545F4914F6CDD1Dull;
    std::memcpy(out.data() + i, &v, 8);
  }
  return out;
}

Result<double> RunCheckpointRank(io::FileSystem& fs, const CheckpointRankOptions& o, const std::string& pattern) {
  if (pattern.empty()) return InvalidArgument("checkpoint bench: an empty pattern");
  Clock& clock = Clock::Real();
  const double t0 = clock.Now();
  if (o.save) {
    AQ_TRY(o.target == CheckpointTarget::kStore ? SaveStore(fs, o, pattern) : SavePosix(o, pattern));
    return clock.Now() - t0;
  }
  if (o.target == CheckpointTarget::kStore) {
    auto f = AQ_TRY(fs.OpenRead(o.path, io::AccessHint::kSequential));
    AQ_TRY(ReadAndCheck(o, pattern, [&](uint64_t at, size_t n, char* into) { return f->ReadAt(at, n, into); }));
    return clock.Now() - t0;
  }
  const int fd = ::open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open", o.path);
  Status s = ReadAndCheck(o, pattern, [&](uint64_t at, size_t n, char* into) -> Result<size_t> {
    while (true) {
      const ssize_t r = ::pread(fd, into, n, static_cast<off_t>(at));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Errno("read", o.path);
      return static_cast<size_t>(r);
    }
  });
  ::close(fd);
  AQ_TRY(std::move(s));
  return clock.Now() - t0;
}

}  // namespace aq::bench
