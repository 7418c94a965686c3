// The mount's file system, apart from FUSE: inodes by path with the
// kernel's lookup counts, a cache of directory listings, open handles (an
// explicit state each), read-ahead for sequential readers, spooled uploads
// and the rules a write-once object store imposes (mount.h lists them).
// mount.cc adapts the kernel's low-level requests to these calls and back
// (fuse_reply_*); unit tests drive MountFs directly over an in-memory store
// and count the requests it makes.
//
// Every call answers with an errno (0: done); the reasons are logged here.
//
// Thread safety: every member may be called from any thread, as FUSE's
// request threads do; one handle is used by one request at a time except
// for reads, which may run concurrently.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/latency.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "io/file_system.h"
#include "io/read_ahead.h"
#include "mount/mount.h"

namespace aq::mount {

using Ino = uint64_t;
inline constexpr Ino kRootIno = 1;  // FUSE_ROOT_ID

// The plan file: `.aquifer-plan` in the mount's root, not listed, writable
// by anyone who can reach the mount (also on a read-only mount: it changes
// no data). Each line written is a file below the mount, relative to its
// root or as an absolute path under the mountpoint, optionally followed by
// a tab, an offset, a tab and a length (a range of a record file); the
// lines of one open descriptor are a read plan, sent to the store as they
// arrive (io::FileSystem::Plan), so its nodes stage those files from slow
// pools in that order before the reader opens them. A line naming nothing
// below the mount fails the write (EINVAL) and is logged.
inline constexpr const char* kPlanName = ".aquifer-plan";
inline constexpr Ino kPlanIno = UINT64_MAX - 1;

// The errno for a store's Status (ENOENT, EEXIST, EACCES, ENOSPC, ...; EIO
// when nothing closer fits; ESTALE for an object that changed while open).
int Errno(const Status& s);

struct EntryReply {
  Ino ino = 0;  // 0: a negative entry (remembered for negative_ttl_s)
  struct stat attr {};
  double attr_timeout = 0, entry_timeout = 0;
};

struct OpenReply {
  uint64_t fh = 0;
  bool keep_cache = false;  // the kernel's pages of this object are still right
  bool direct_io = false;   // read around the page cache (the kernel's size is another version's)
  bool noflush = false;     // a reader: close needs no flush
};

// What an open handle is doing, one state at a time.
enum class HandleState {
  kReading,   // reading one version (opened lazily at the first read when validated within the TTL)
  kExisting,  // opened for writing an existing object without O_TRUNC: a truncate to 0 makes it kWriting
  kWriting,   // spooling a new version front to back
  kSent,      // what was written is stored, or failed (every close says so); a further write continues it
  kBroken,    // a write failed: nothing is ever sent, every later call fails with its errno
  kPlan,      // the plan file: lines written are sent as a read plan
};

// A read-ahead chunk, fetched on the thread pool.
struct Chunk;

class MountFs {
 public:
  // `invalidate(ino)` tells the kernel an inode's attributes and pages are
  // stale (the adapter queues it: never from inside a request). `clock`:
  // the attribute and listing TTLs' time.
  MountFs(io::FileSystem& store, const MountOptions& options, std::function<void(Ino)> invalidate,
          Clock& clock = Clock::Real());
  ~MountFs();

  int Lookup(Ino parent, const std::string& name, EntryReply* out);
  void Forget(Ino ino, uint64_t n);
  // `fh`: the handle it is asked through (0: none): its version's size.
  int GetAttr(Ino ino, uint64_t fh, struct stat* out);
  // truncate(2)/ftruncate(2): only to 0 (a whole replacement) or to the size written.
  int Truncate(Ino ino, uint64_t fh, uint64_t size);

  // Whether the inode is known and still named by its path.
  bool Known(Ino ino) { return PathOf(ino).has_value(); }

  int OpenDir(Ino ino, uint64_t* dh);
  // The directory's entries (a snapshot of one listing) from `from` on.
  struct DirEntry {
    std::string name;
    bool is_dir = false;
  };
  size_t DirSize(uint64_t dh) const;
  DirEntry DirAt(uint64_t dh, size_t i) const;
  // readdirplus: the entry as a lookup would answer it, not yet counted;
  // CountLookup once the kernel took it.
  EntryReply DirEntryPlus(Ino dir, uint64_t dh, size_t i);
  void CountLookup(Ino ino);
  void ReleaseDir(uint64_t dh);

  // `flags`: open(2)'s; `process`: the opener's process (thread group) id.
  int Open(Ino ino, int flags, pid_t process, OpenReply* out);
  int Create(Ino parent, const std::string& name, mode_t mode, pid_t process, EntryReply* entry, OpenReply* out);
  int Read(uint64_t fh, uint64_t offset, size_t size, char* out, size_t* got);
  int Write(uint64_t fh, const char* data, size_t size, uint64_t offset);
  // close(2) by `process`: the opener's close sends the file.
  int Flush(uint64_t fh, pid_t process);
  void Release(uint64_t fh);
  HandleState StateOf(uint64_t fh) const;

  int Unlink(Ino parent, const std::string& name);
  int MkDir(Ino parent, const std::string& name, EntryReply* out);
  int RmDir(Ino parent, const std::string& name);
  // `exchange`/`noreplace`: RENAME_EXCHANGE/RENAME_NOREPLACE.
  int Rename(Ino parent, const std::string& name, Ino newparent, const std::string& newname, bool exchange,
             bool noreplace);
  // An operation a write-once store cannot do: counted, logged, `err`.
  int Refuse(const std::string& what_of, const std::string& what, int err);

  MountStats& stats() { return stats_; }
  std::string StatsText();
  // The same counters as Prometheus text (`aquifer mount --metrics`):
  // aquifer_mount_* counters and a read-duration histogram.
  std::string PrometheusText();
  // Read-ahead runs on `threads` threads (started here; stopped by the destructor).
  void StartFetchers(unsigned threads);

 private:
  // An inode: a file or a directory by its path below the root.
  struct Node {
    std::string path;  // "" for the root; no leading or trailing '/'
    bool is_dir = false;
    uint64_t size = 0;
    int64_t mtime = 0;
    std::string version;   // the ETag whose pages the kernel may hold ("" none)
    uint64_t lookups = 0;  // the kernel's references (lookup count)
    double attr_at = 0;    // when size and mtime were learned
    int writers = 0;       // handles writing it: its size is what they wrote
    int readers = 0;       // handles reading it (never at once with writers)
    // While readers are open, the kernel keeps the size of the version the
    // first of them opened (open_size), whatever lookups find meanwhile: a
    // new size would end their reads early (the kernel reads up to its size).
    bool pinned = false;
    uint64_t open_size = 0;
    bool unlinked = false;  // its path no longer names it
  };
  // A directory's entries, from one listing.
  struct Listing {
    std::map<std::string, io::FileInfo> entries;
    double at = 0;
  };
  static constexpr uint64_t kChunk = 4 << 20;  // read ahead in store blocks

  // An open file. Its state is read without a lock; it changes under `mu`.
  struct Handle {
    Ino ino = 0;
    std::string url;
    pid_t opener = 0;  // the process that opened it: only its close sends the file
    // Writes, truncates and closes hold `mu`.
    Mutex mu;
    std::atomic<HandleState> state{HandleState::kReading};
    // kReading: the version read, null until a lazy open's first read
    // (set once, under chunks_mu; then read without it). Shared with chunk
    // fetches in flight.
    std::shared_ptr<io::RandomAccessFile> reader;
    std::string expected;  // a lazily opened reader must find this version
    Mutex chunks_mu;       // read-ahead state and the lazy open
    std::map<uint64_t, std::shared_ptr<Chunk>> chunks AQ_GUARDED_BY(chunks_mu);
    // Reads within two chunks of the previous ones' end, twice in a row.
    io::SequentialDetector sequential AQ_GUARDED_BY(chunks_mu){2 * kChunk, 2};
    // kWriting, kSent:
    std::unique_ptr<io::WritableFile> writer AQ_GUARDED_BY(mu);
    uint64_t written AQ_GUARDED_BY(mu) = 0;
    int finish_errno AQ_GUARDED_BY(mu) = 0;  // kSent: the upload's outcome
    // kExisting: a write or truncate was refused, and every close says so.
    int refused AQ_GUARDED_BY(mu) = 0;
    // kBroken: the failed write's errno, set under `mu` before the state
    // says kBroken, read once it does.
    int broken = 0;
    // kPlan: the stream its lines go to, and a line not yet ended.
    std::string plan_stream;
    std::string plan_partial AQ_GUARDED_BY(mu);
  };
  struct DirHandle;

  std::string Url(const std::string& path) const { return path.empty() ? root_ : root_ + "/" + path; }
  std::string ParentOf(const std::string& url) const;
  static std::string Join(const std::string& dir, const std::string& name) {
    return dir.empty() ? name : dir + "/" + name;
  }
  std::optional<std::string> PathOf(Ino ino);
  Result<Node> GetNode(Ino ino);
  void Learn(Node& n, const io::FileInfo& info) AQ_REQUIRES(mu_);
  EntryReply Enter(const std::string& path, const io::FileInfo& info, bool counted);
  struct stat Attr(Ino ino, const Node& n) const;
  struct stat PlanAttr() const;
  Result<io::FileInfo> Find(const std::string& dir, const std::string& path, const std::string& name);
  Result<std::shared_ptr<const Listing>> List(const std::string& dir);
  void DropListing(const std::string& dir);
  void Forgotten(const std::string& dir, const std::string& path);
  Status PutEmpty(const std::string& url);
  int StartWriter(Ino ino, const std::string& url, pid_t process, bool created, OpenReply* out);
  // Open's read path: lazily (no request) when the kernel's pages are of a
  // version validated within the TTL, else through the store's open.
  int OpenForReading(Ino ino, const Node& n, OpenReply* out);
  bool AddReader(Ino ino);
  void DropReader(Ino ino);
  Result<size_t> ReadThrough(Handle& h, uint64_t off, size_t size, char* out);
  Status OpenLazily(Handle& h);
  Status Reopen(Handle& h) AQ_REQUIRES(h.mu);
  int Break(Handle& h, const Status& s) AQ_REQUIRES(h.mu);
  int Finish(Handle& h);
  int Fail(const Status& s, const std::string& what);
  // The plan file's complete lines in `text` (all of it when `last`) sent
  // as a read plan. REQUIRES: h.mu held.
  int SendPlan(Handle& h, bool last) AQ_REQUIRES(h.mu);

  io::FileSystem& store_;
  const MountOptions o_;
  const std::function<void(Ino)> invalidate_;
  Clock& clock_;
  std::string root_;
  uid_t uid_;
  gid_t gid_;
  Mutex mu_;  // inodes, paths, listings
  std::unordered_map<Ino, Node> nodes_ AQ_GUARDED_BY(mu_);
  std::unordered_map<std::string, Ino> by_path_ AQ_GUARDED_BY(mu_);
  Ino next_ino_ AQ_GUARDED_BY(mu_) = kRootIno + 1;
  std::unordered_map<std::string, std::shared_ptr<const Listing>> listings_ AQ_GUARDED_BY(mu_);
  Mutex latency_mu_;
  LatencyHistogram read_latency_ AQ_GUARDED_BY(latency_mu_);
  MountStats stats_;
  std::unique_ptr<ThreadPool> fetchers_;  // read-ahead fetches
};

}  // namespace aq::mount
