#include "mount/mount.h"

#define FUSE_USE_VERSION 312
#include <fmt/format.h>
#include <fuse3/fuse_lowlevel.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "common/latency.h"
#include "common/log.h"
#include "common/mutex.h"

namespace aq::mount {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int Errno(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kNotFound: return ENOENT;
    case StatusCode::kAlreadyExists: return EEXIST;
    case StatusCode::kPermissionDenied: return EACCES;
    case StatusCode::kNoSpace: return ENOSPC;
    case StatusCode::kUnsupported: return EOPNOTSUPP;
    case StatusCode::kInvalidArgument: return EINVAL;
    case StatusCode::kNotEmpty: return ENOTEMPTY;
    case StatusCode::kTimedOut: return ETIMEDOUT;
    case StatusCode::kConflict: return ESTALE;  // the object changed while open
    default: return EIO;
  }
}

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

// A range of a file read ahead for a sequential reader.
struct Chunk {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  std::string data;
};

// Threads that fetch chunks.
class Fetchers {
 public:
  void Start(unsigned n) {
    for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { Run(); });
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  void Submit(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

struct Handle {
  fuse_ino_t ino = 0;
  std::string url;
  std::shared_ptr<io::RandomAccessFile> reader;  // shared with chunk fetches in flight
  std::mutex chunks_mu;                          // a reader's read-ahead state
  std::map<uint64_t, std::shared_ptr<Chunk>> chunks;
  uint64_t last_end = 0;
  int streak = 1;        // reads in a row near the previous one's end (a read from 0 starts a streak)
  std::string expected;  // a lazily opened reader must find this version (the kernel holds its pages)
  std::unique_ptr<io::WritableFile> writer;
  std::mutex mu;  // a writer's state
  uint64_t written = 0;
  bool finished = false;  // what was written is stored (or failed: finish_errno)
  int finish_errno = 0;
  bool existing = false;  // opened for writing without O_TRUNC: only a truncate to 0 makes it a writer
  pid_t opener = 0;       // the process (thread group) that opened it: only its close sends the file
  bool reading = false;   // counted in its inode's readers
  int broken = 0;         // a write failed (errno): nothing is ever sent, every later call fails
};

// The thread group (process) of a thread: FUSE names the calling thread.
pid_t ProcessOf(pid_t tid) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Tgid:", 0) == 0) return static_cast<pid_t>(std::atol(line.c_str() + 5));
  }
  return tid;  // gone already (an exiting process): its own id
}

struct DirHandle {
  std::shared_ptr<const Listing> listing;
  std::vector<const io::FileInfo*> entries;
};

class Fs {
 public:
  Fs(io::FileSystem& store, const MountOptions& o) : store_(store), o_(o), uid_(::getuid()), gid_(::getgid()) {
    root_ = o.root;
    while (!root_.empty() && root_.back() == '/') root_.pop_back();
    Node root;
    root.is_dir = true;
    root.lookups = 1;
    root.mtime = ::time(nullptr);
    nodes_[FUSE_ROOT_ID] = root;
    by_path_[""] = FUSE_ROOT_ID;
  }

  MountStats& stats() { return stats_; }
  void set_session(fuse_session* se) { se_ = se; }

  // ---- the low-level operations ----
  void Init(fuse_conn_info* conn) {
    conn->max_write = o_.max_read;
    conn->max_read = o_.max_read;  // must match the max_read mount option
    conn->max_readahead = std::max<unsigned>(conn->max_readahead, o_.max_read);
    auto want = [&](unsigned cap) {
      if (conn->capable & cap) conn->want |= cap;
    };
    want(FUSE_CAP_ATOMIC_O_TRUNC);  // open(O_TRUNC) arrives as one open, not setattr + open
    want(FUSE_CAP_READDIRPLUS);     // a listing brings attributes: no lookup per entry
    want(FUSE_CAP_READDIRPLUS_AUTO);
    want(FUSE_CAP_PARALLEL_DIROPS);
    want(FUSE_CAP_ASYNC_READ);
    conn->want &= ~static_cast<unsigned>(FUSE_CAP_WRITEBACK_CACHE);
  }

  void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
    stats_.lookups++;
    auto p = PathOf(parent);
    if (!p) return (void)fuse_reply_err(req, ENOENT);
    const std::string path = Join(*p, name);
    auto info = Find(*p, path, name);
    if (!info.ok()) {
      if (info.status().code() == StatusCode::kNotFound) {
        fuse_entry_param e{};  // ino 0: a negative entry the kernel remembers
        e.entry_timeout = o_.negative_ttl_s;
        return (void)fuse_reply_entry(req, &e);
      }
      return Fail(req, info.status(), "lookup");
    }
    fuse_entry_param e = Enter(path, *info, true);
    fuse_reply_entry(req, &e);
  }

  void Forget(fuse_ino_t ino, uint64_t n) {
    MutexLock lock(mu_);
    auto it = nodes_.find(ino);
    if (it == nodes_.end() || ino == FUSE_ROOT_ID) return;
    it->second.lookups = it->second.lookups > n ? it->second.lookups - n : 0;
    if (it->second.lookups == 0 && it->second.writers == 0) {
      auto bp = by_path_.find(it->second.path);
      if (bp != by_path_.end() && bp->second == ino) by_path_.erase(bp);
      nodes_.erase(it);
    }
  }

  void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    Node n;
    {
      MutexLock lock(mu_);
      auto it = nodes_.find(ino);
      if (it == nodes_.end()) return (void)fuse_reply_err(req, ENOENT);
      n = it->second;
    }
    if (!n.is_dir && n.writers == 0 && !n.unlinked && Now() - n.attr_at > o_.attr_ttl_s) {
      auto info = store_.Stat(Url(n.path));
      if (!info.ok()) return Fail(req, info.status(), "stat");
      MutexLock lock(mu_);
      auto it = nodes_.find(ino);
      if (it != nodes_.end()) {
        Learn(it->second, *info);
        n = it->second;
      }
    }
    struct stat st = Attr(ino, n);
    // Asked through an open file (the kernel's read path, fstat): the size
    // of the version that handle reads, so the kernel never cuts its reads
    // at another version's size.
    if (fi != nullptr && fi->fh != 0) {
      auto* h = reinterpret_cast<Handle*>(fi->fh);
      if (h->reader) st.st_size = static_cast<off_t>(h->reader->size());
    }
    fuse_reply_attr(req, &st, o_.attr_ttl_s);
  }

  void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
    if (to_set & FUSE_SET_ATTR_SIZE) {
      if (o_.read_only) return (void)fuse_reply_err(req, EROFS);
      const uint64_t want = static_cast<uint64_t>(attr->st_size);
      Handle* h = fi ? reinterpret_cast<Handle*>(fi->fh) : nullptr;
      if (h != nullptr && h->broken != 0) return (void)fuse_reply_err(req, h->broken);
      if (h != nullptr && h->existing && !h->writer) {
        auto got = GetNode(ino);
        const uint64_t size = got.ok() ? got->size : 0;
        if (want != 0 && want != size) {
          return Refuse(req, h->url, fmt::format("truncate to {} bytes of {}", want, size));
        }
        if (want == 0) {  // from here on a writer of a new version, sent on close
          std::lock_guard<std::mutex> lock(h->mu);
          {
            MutexLock nl(mu_);
            Node& n = nodes_[ino];
            if (n.readers > 0) {
              log::warn("mount: {}: not written while this mount reads it (EBUSY)", h->url);
              return (void)fuse_reply_err(req, EBUSY);
            }
            n.writers++;
          }
          auto w = store_.OpenWrite(h->url);
          if (!w.ok()) {
            MutexLock nl(mu_);
            nodes_[ino].writers--;
            return Fail(req, w.status(), "truncate");
          }
          h->writer = std::move(*w);
          MutexLock nl(mu_);
          Node& n = nodes_[ino];
          n.size = 0;
          n.version.clear();
        }
      } else if (h != nullptr && h->writer) {
        std::lock_guard<std::mutex> lock(h->mu);
        if (want != h->written) return Refuse(req, h->url, fmt::format("truncate to {} bytes of {}", want, h->written));
      } else {
        auto got = GetNode(ino);
        if (!got.ok()) return (void)fuse_reply_err(req, ENOENT);
        const Node& n = *got;
        if (n.writers > 0) return Refuse(req, Url(n.path), "truncate while it is being written");
        if (want != n.size) {
          if (want != 0) return Refuse(req, Url(n.path), fmt::format("truncate to {} bytes of {}", want, n.size));
          Status s = PutEmpty(Url(n.path));  // truncate to 0: an empty object replaces it whole
          if (!s.ok()) return Fail(req, s, "truncate");
          MutexLock lock(mu_);
          auto it = nodes_.find(ino);
          if (it != nodes_.end()) {
            it->second.size = 0;
            it->second.version.clear();
            it->second.attr_at = Now();
          }
        }
      }
    }
    // Mode, owner and times have nowhere to live in an object store: the
    // call succeeds (tar and cp -p set them) and the attributes stay.
    if (to_set & ~FUSE_SET_ATTR_SIZE) log::debug("mount: attributes other than the size are not kept (ino {})", ino);
    GetAttr(req, ino, nullptr);
  }

  void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    auto p = PathOf(ino);
    if (!p) return (void)fuse_reply_err(req, ENOENT);
    auto listing = List(*p);
    if (!listing.ok()) return Fail(req, listing.status(), "list");
    auto* d = new DirHandle;
    d->listing = *listing;
    for (const auto& [name, info] : d->listing->entries) d->entries.push_back(&info);
    fi->fh = reinterpret_cast<uint64_t>(d);
    fi->cache_readdir = 0;
    fuse_reply_open(req, fi);
  }

  void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus) {
    auto* d = reinterpret_cast<DirHandle*>(fi->fh);
    auto p = PathOf(ino);
    if (!p) return (void)fuse_reply_err(req, ENOENT);
    std::string buf(size, '\0');
    size_t used = 0;
    for (size_t i = static_cast<size_t>(off); i < d->entries.size() + 2; ++i) {
      const bool dot = i < 2;
      const char* name = i == 0 ? "." : i == 1 ? ".." : d->entries[i - 2]->name.c_str();
      size_t need;
      if (!plus) {
        struct stat st {};
        st.st_ino = dot ? ino : 0;
        st.st_mode = (dot || d->entries[i - 2]->is_dir) ? S_IFDIR : S_IFREG;
        need = fuse_add_direntry(req, buf.data() + used, size - used, name, &st, static_cast<off_t>(i + 1));
      } else if (dot) {
        fuse_entry_param e{};
        e.attr.st_ino = ino;
        e.attr.st_mode = S_IFDIR;
        need = fuse_add_direntry_plus(req, buf.data() + used, size - used, name, &e, static_cast<off_t>(i + 1));
      } else {
        // Counted as a lookup only when it fits: the kernel takes a
        // reference for each entry it receives.
        const io::FileInfo& info = *d->entries[i - 2];
        fuse_entry_param e = Enter(Join(*p, info.name), info, false);
        need = fuse_add_direntry_plus(req, buf.data() + used, size - used, name, &e, static_cast<off_t>(i + 1));
        if (need <= size - used) {
          MutexLock lock(mu_);
          nodes_[e.ino].lookups++;
        }
      }
      if (need > size - used) break;
      used += need;
    }
    fuse_reply_buf(req, buf.data(), used);
  }

  void ReleaseDir(fuse_req_t req, fuse_file_info* fi) {
    delete reinterpret_cast<DirHandle*>(fi->fh);
    fuse_reply_err(req, 0);
  }

  void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    stats_.opens++;
    auto got = GetNode(ino);
    if (!got.ok()) return (void)fuse_reply_err(req, ENOENT);
    const Node& n = *got;
    if (n.is_dir) return (void)fuse_reply_err(req, EISDIR);
    const std::string url = Url(n.path);
    const int acc = fi->flags & O_ACCMODE;
    if (acc != O_RDONLY) {
      if (o_.read_only) return (void)fuse_reply_err(req, EROFS);
      if (fi->flags & O_APPEND && n.size > 0) return Refuse(req, url, "append to an existing object");
      if (!(fi->flags & O_TRUNC) && n.size > 0) {
        // Refused at the first write, unless a truncate to 0 comes first
        // (truncate(1), then writes: a whole replacement).
        auto h = std::make_unique<Handle>();
        h->ino = ino;
        h->url = url;
        h->existing = true;
        h->opener = ProcessOf(fuse_req_ctx(req)->pid);
        fi->fh = reinterpret_cast<uint64_t>(h.release());
        return (void)fuse_reply_open(req, fi);
      }
      return StartWriter(req, ino, url, fi, nullptr);
    }
    // Within one mount a file is read or written, not both at once: the
    // kernel's one inode would show the writer's size to the readers of the
    // stored version (short reads, or zeros past its end).
    if (!AddReader(ino)) {
      log::warn("mount: {}: not opened for reading while this mount writes it (EBUSY)", url);
      return (void)fuse_reply_err(req, EBUSY);
    }
    bool lazy = !n.version.empty() && Now() - n.attr_at < o_.attr_ttl_s;
    if (lazy) {  // the kernel's size must be this version's (see Node::pinned)
      MutexLock lock(mu_);
      Node& node = nodes_[ino];
      if (!node.pinned) {
        node.pinned = true;
        node.open_size = node.size;
      }
      lazy = node.open_size == node.size && node.version == n.version;
    }
    if (lazy) {
      // Validated within the attribute TTL and its pages are in the kernel:
      // no request now; the store is asked only if the kernel asks to read.
      auto h = std::make_unique<Handle>();
      h->reading = true;
      h->ino = ino;
      h->url = url;
      h->expected = n.version;
      fi->keep_cache = 1;
      stats_.opens_kept_cache++;
      fi->noflush = 1;
      fi->fh = reinterpret_cast<uint64_t>(h.release());
      return (void)fuse_reply_open(req, fi);
    }
    auto file = store_.OpenRead(url, io::AccessHint::kSequential);
    if (!file.ok()) {
      DropReader(ino);
      return Fail(req, file.status(), "open");
    }
    auto h = std::make_unique<Handle>();
    h->reading = true;
    h->ino = ino;
    h->url = url;
    h->reader = std::move(*file);
    const std::string version = h->reader->version();
    bool attrs_changed = false;
    {
      MutexLock lock(mu_);
      auto it = nodes_.find(ino);
      if (it != nodes_.end()) {
        // Blocks are immutable: an unchanged ETag means the kernel's pages
        // of this object are still right.
        Node& node = it->second;
        fi->keep_cache = !version.empty() && node.version == version;
        const uint64_t kernel_size = node.pinned ? node.open_size : node.size;  // what the kernel was told
        attrs_changed =
            kernel_size != h->reader->size() || (!node.version.empty() && !version.empty() && node.version != version);
        if (!node.pinned) {
          node.pinned = true;
          node.open_size = h->reader->size();
        }
        it->second.version = version;
        it->second.size = h->reader->size();
        it->second.attr_at = Now();
      }
    }
    if (fi->keep_cache) stats_.opens_kept_cache++;
    if (attrs_changed) {
      // The kernel's size is of another version (the object changed between
      // its lookup and this open): it would cut reads short, or end them
      // early. This handle reads around the page cache, to the end of the
      // version it opened; the kernel learns the new size meanwhile.
      fi->direct_io = 1;
      Invalidate(ino);
    }
    fi->noflush = 1;
    fi->fh = reinterpret_cast<uint64_t>(h.release());
    fuse_reply_open(req, fi);
  }

  void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
    if (o_.read_only) return (void)fuse_reply_err(req, EROFS);
    auto p = PathOf(parent);
    if (!p) return (void)fuse_reply_err(req, ENOENT);
    if (!S_ISREG(mode)) return Refuse(req, Url(Join(*p, name)), "create something other than a regular file");
    const std::string path = Join(*p, name);
    io::FileInfo info{name, 0, false, ::time(nullptr), ""};
    fuse_entry_param e = Enter(path, info, true);
    StartWriter(req, e.ino, Url(path), fi, &e);
  }

  void Read(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi) {
    auto* h = reinterpret_cast<Handle*>(fi->fh);
    if (h->writer || h->broken != 0 || (h->existing && !h->reader)) return (void)fuse_reply_err(req, EBADF);
    if (!h->expected.empty()) {
      Status s = OpenLazily(*h);
      if (!s.ok()) return Fail(req, s, "read");
    }
    thread_local std::string buf;
    if (buf.size() < size) buf.resize(size);
    const auto t0 = std::chrono::steady_clock::now();
    auto got = ReadThrough(*h, static_cast<uint64_t>(off), size, buf.data());
    const auto ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    stats_.reads++;
    if (!got.ok()) {
      stats_.read_errors++;
      return Fail(req, got.status(), fmt::format("read {} bytes at {} of", size, off));
    }
    stats_.read_bytes += *got;
    {
      MutexLock lock(latency_mu_);
      read_latency_.Record(ns);
    }
    fuse_reply_buf(req, buf.data(), *got);
  }

  void Write(fuse_req_t req, const char* data, size_t size, off_t off, fuse_file_info* fi) {
    auto* h = reinterpret_cast<Handle*>(fi->fh);
    if (h->broken != 0) return (void)fuse_reply_err(req, h->broken);
    if (h->existing && !h->writer) {
      return Refuse(req, h->url,
                    fmt::format("write at byte {} into an existing object (objects are written whole: "
                                "open with O_TRUNC to replace it)",
                                off));
    }
    if (!h->writer) return (void)fuse_reply_err(req, EBADF);
    std::unique_lock<std::mutex> lock(h->mu);
    if (static_cast<uint64_t>(off) != h->written) {
      return Refuse(req, h->url,
                    fmt::format("write at byte {} (objects are written front to back; {} written)", off, h->written));
    }
    if (h->finished) {
      // A close of one descriptor (a shell's redirect closes the original
      // after dup2) sent what was written so far; the next write continues
      // from those bytes, and the next close sends the whole again.
      if (h->finish_errno != 0) return (void)fuse_reply_err(req, h->finish_errno);
      Status r = Reopen(*h);
      if (!r.ok()) return Break(req, *h, r);
    }
    Status s = h->writer->Append(std::string_view(data, size));
    if (!s.ok()) return Break(req, *h, s);
    h->written += size;
    stats_.writes++;
    stats_.written_bytes += size;
    {
      MutexLock nl(mu_);
      auto it = nodes_.find(h->ino);
      if (it != nodes_.end()) it->second.size = h->written;
    }
    fuse_reply_write(req, size);
  }

  // close(2) of a descriptor. The file is sent when the process that opened
  // it closes it (the writer learns the upload's outcome from close); a
  // close by another process (a child that inherited the descriptor and
  // exited, while the parent still writes) sends nothing. A file whose
  // opener closed first is sent at the last close (Release), when the
  // error can only be logged. A failed write fails every close.
  void Flush(fuse_req_t req, fuse_file_info* fi) {
    auto* h = reinterpret_cast<Handle*>(fi->fh);
    if (h->broken != 0) return (void)fuse_reply_err(req, h->broken);
    if (!h->writer) return (void)fuse_reply_err(req, 0);
    const pid_t by = ProcessOf(fuse_req_ctx(req)->pid);
    if (by != h->opener) {
      log::debug("mount: {} closed by process {}, opened by {}: sent at the opener's close", h->url, by, h->opener);
      std::lock_guard<std::mutex> lock(h->mu);
      return (void)fuse_reply_err(req, h->finished ? h->finish_errno : 0);
    }
    fuse_reply_err(req, Finish(*h));
  }

  void Release(fuse_req_t req, fuse_file_info* fi) {
    std::unique_ptr<Handle> h(reinterpret_cast<Handle*>(fi->fh));
    if (h->reading) DropReader(h->ino);
    if (h->broken != 0) {
      MutexLock lock(mu_);
      auto it = nodes_.find(h->ino);
      if (it != nodes_.end() && it->second.writers > 0) it->second.writers--;
    } else if (h->writer) {
      Finish(*h);  // sent now if its opener closed before the others (a failure is logged)
      MutexLock lock(mu_);
      auto it = nodes_.find(h->ino);
      if (it != nodes_.end() && it->second.writers > 0) it->second.writers--;
    }
    fuse_reply_err(req, 0);
  }

  void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
    if (o_.read_only) return (void)fuse_reply_err(req, EROFS);
    auto p = PathOf(parent);
    if (!p) return (void)fuse_reply_err(req, ENOENT);
    const std::string path = Join(*p, name);
    Status s = store_.Remove(Url(path));
    if (!s.ok()) return Fail(req, s, "unlink");
    Forgotten(*p, path);
    fuse_reply_err(req, 0);
  }

  void MkDir(fuse_req_t req, fuse_ino_t parent, const char* name) {
    if (o_.read_only) return (void)fuse_reply_err(req, EROFS);
    auto p = PathOf(parent);
    if (!p) return (void)fuse_reply_err(req, ENOENT);
    const std::string path = Join(*p, name);
    if (Find(*p, path, name).ok()) return (void)fuse_reply_err(req, EEXIST);
    // A prefix exists once something is below it: a "name/" marker object
    // keeps an empty directory.
    Status s = PutEmpty(Url(path) + "/");
    if (!s.ok()) return Fail(req, s, "mkdir");
    DropListing(*p);
    fuse_entry_param e = Enter(path, io::FileInfo{name, 0, true, ::time(nullptr), ""}, true);
    fuse_reply_entry(req, &e);
  }

  void RmDir(fuse_req_t req, fuse_ino_t parent, const char* name) {
    if (o_.read_only) return (void)fuse_reply_err(req, EROFS);
    auto p = PathOf(parent);
    if (!p) return (void)fuse_reply_err(req, ENOENT);
    const std::string path = Join(*p, name);
    auto below = store_.List(Url(path));
    if (!below.ok()) return Fail(req, below.status(), "rmdir");
    if (!below->empty()) return (void)fuse_reply_err(req, ENOTEMPTY);
    Status s = store_.Remove(Url(path) + "/");
    if (!s.ok() && s.code() != StatusCode::kNotFound) return Fail(req, s, "rmdir");
    Forgotten(*p, path);
    DropListing(path);
    fuse_reply_err(req, 0);
  }

  void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
              unsigned flags) {
    if (o_.read_only) return (void)fuse_reply_err(req, EROFS);
    auto p = PathOf(parent);
    auto q = PathOf(newparent);
    if (!p || !q) return (void)fuse_reply_err(req, ENOENT);
    const std::string from = Join(*p, name), to = Join(*q, newname);
    if (flags & RENAME_EXCHANGE) return Refuse(req, Url(from), "exchange two names (RENAME_EXCHANGE)");
    auto src = Find(*p, from, name);
    if (!src.ok()) return Fail(req, src.status(), "rename");
    // A prefix has no one object to rename: EXDEV makes mv copy it.
    if (src->is_dir) return (void)fuse_reply_err(req, EXDEV);
    auto dst = Find(*q, to, newname);
    if (dst.ok()) {
      if (flags & RENAME_NOREPLACE) return (void)fuse_reply_err(req, EEXIST);
      if (dst->is_dir) return (void)fuse_reply_err(req, EISDIR);
    }
    Status s = store_.Rename(Url(from), Url(to));
    if (!s.ok()) return Fail(req, s, "rename");
    {
      MutexLock lock(mu_);
      auto old = by_path_.find(to);
      if (old != by_path_.end()) {
        nodes_[old->second].unlinked = true;
        by_path_.erase(old);
      }
      auto it = by_path_.find(from);
      if (it != by_path_.end()) {
        const fuse_ino_t ino = it->second;
        by_path_.erase(it);
        by_path_[to] = ino;
        nodes_[ino].path = to;
        nodes_[ino].attr_at = 0;  // its ETag may differ after the copy
      }
    }
    DropListing(*p);
    DropListing(*q);
    fuse_reply_err(req, 0);
  }

  void Refuse(fuse_req_t req, const std::string& url, const std::string& what, int err = EOPNOTSUPP) {
    stats_.refused++;
    log::warn("mount: refused to {} for {}: a write-once object store cannot ({})", what, url, std::strerror(err));
    fuse_reply_err(req, err);
  }

  void StatFs(fuse_req_t req) {
    struct statvfs st {};
    st.f_bsize = 1 << 20;
    st.f_frsize = 4096;
    st.f_blocks = st.f_bfree = st.f_bavail = 1ull << 40;  // an object store's space is not counted here
    st.f_files = st.f_ffree = st.f_favail = 1ull << 32;
    st.f_namemax = 1024;
    fuse_reply_statfs(req, &st);
  }

  std::string Stats() {
    nlohmann::json j = nlohmann::json::parse(StatsJson(stats_, o_));
    MutexLock lock(latency_mu_);
    j["read_latency_ms"] = {{"p50", read_latency_.Quantile(0.5) / 1e6},
                            {"p99", read_latency_.Quantile(0.99) / 1e6},
                            {"max", static_cast<double>(read_latency_.max_ns()) / 1e6}};
    return j.dump(1);
  }

  // Attribute invalidations go through this thread: the kernel must not be
  // told from inside a request it is waiting on.
  void RunInvalidator(std::atomic<bool>& stop) {
    std::unique_lock<std::mutex> lock(inval_mu_);
    while (!stop) {
      inval_cv_.wait_for(lock, std::chrono::milliseconds(200));
      while (!inval_.empty()) {
        const fuse_ino_t ino = inval_.front();
        inval_.pop_front();
        lock.unlock();
        if (se_ != nullptr) fuse_lowlevel_notify_inval_inode(se_, ino, -1, 0);
        lock.lock();
      }
    }
  }

 private:
  std::string Url(const std::string& path) const { return path.empty() ? root_ : root_ + "/" + path; }
  // The directory (path below the root) holding the object at url.
  std::string ParentOf(const std::string& url) const {
    const std::string rel = url.size() > root_.size() ? url.substr(root_.size() + 1) : "";
    const size_t slash = rel.rfind('/');
    return slash == std::string::npos ? "" : rel.substr(0, slash);
  }
  static std::string Join(const std::string& dir, const std::string& name) {
    return dir.empty() ? name : dir + "/" + name;
  }

  std::optional<std::string> PathOf(fuse_ino_t ino) {
    MutexLock lock(mu_);
    auto it = nodes_.find(ino);
    if (it == nodes_.end() || it->second.unlinked) return std::nullopt;
    return it->second.path;
  }
  Result<Node> GetNode(fuse_ino_t ino) {
    MutexLock lock(mu_);
    auto it = nodes_.find(ino);
    if (it == nodes_.end()) return NotFound(Subject::kNone, "no such inode");
    return it->second;
  }

  static std::string Unquoted(const std::string& etag) {
    return etag.size() >= 2 && etag.front() == '"' && etag.back() == '"' ? etag.substr(1, etag.size() - 2) : etag;
  }
  void Learn(Node& n, const io::FileInfo& info) AQ_REQUIRES(mu_) {
    // A listing saw another version than the kernel's pages hold.
    if (!info.version.empty() && !n.version.empty() && Unquoted(info.version) != Unquoted(n.version)) {
      n.version.clear();
    }
    n.is_dir = info.is_dir;
    if (n.writers == 0) {
      n.size = info.size;
      if (info.mtime_s != 0) n.mtime = info.mtime_s;
    }
    if (n.mtime == 0) n.mtime = ::time(nullptr);
    n.attr_at = Now();
  }

  // The inode for path, made or refreshed from info; `counted` takes a
  // kernel reference.
  fuse_entry_param Enter(const std::string& path, const io::FileInfo& info, bool counted) {
    MutexLock lock(mu_);
    fuse_ino_t ino;
    auto it = by_path_.find(path);
    if (it != by_path_.end()) {
      ino = it->second;
    } else {
      ino = next_ino_++;
      by_path_[path] = ino;
      nodes_[ino].path = path;
    }
    Node& n = nodes_[ino];
    Learn(n, info);
    if (counted) n.lookups++;
    fuse_entry_param e{};
    e.ino = ino;
    e.generation = 1;
    e.attr = Attr(ino, n);
    e.attr_timeout = o_.attr_ttl_s;
    e.entry_timeout = o_.attr_ttl_s;
    return e;
  }

  struct stat Attr(fuse_ino_t ino, const Node& n) const {
    struct stat st {};
    st.st_ino = ino;
    const mode_t w = o_.read_only ? 0 : 0200;
    st.st_mode = n.is_dir ? (S_IFDIR | 0555 | w) : (S_IFREG | 0444 | w);
    st.st_nlink = n.is_dir ? 2 : 1;
    st.st_uid = uid_;
    st.st_gid = gid_;
    const uint64_t size = n.pinned ? n.open_size : n.size;
    st.st_size = static_cast<off_t>(size);
    st.st_blksize = 1 << 20;
    st.st_blocks = static_cast<blkcnt_t>((size + 511) / 512);
    st.st_mtim.tv_sec = st.st_ctim.tv_sec = st.st_atim.tv_sec = n.mtime;
    return st;
  }

  // A name in a directory: from a fresh listing of it, from an inode that
  // is being written, else asked of the store.
  Result<io::FileInfo> Find(const std::string& dir, const std::string& path, const std::string& name) {
    {
      MutexLock lock(mu_);
      auto bp = by_path_.find(path);
      if (bp != by_path_.end()) {
        const Node& n = nodes_[bp->second];
        if (n.writers > 0 || (Now() - n.attr_at < o_.attr_ttl_s && n.attr_at > 0)) {
          return io::FileInfo{name, n.size, n.is_dir, n.mtime, n.version};
        }
      }
      auto l = listings_.find(dir);
      if (l != listings_.end() && Now() - l->second->at < o_.attr_ttl_s) {
        auto e = l->second->entries.find(name);
        if (e == l->second->entries.end()) return NotFound(Subject::kObject, path);
        return e->second;
      }
    }
    return store_.Stat(Url(path));
  }

  Result<std::shared_ptr<const Listing>> List(const std::string& dir) {
    {
      MutexLock lock(mu_);
      auto l = listings_.find(dir);
      if (l != listings_.end() && Now() - l->second->at < o_.attr_ttl_s) return l->second;
    }
    std::vector<std::string> skipped;
    auto entries = AQ_TRY(store_.ListWithSkipped(Url(dir), &skipped));
    if (!skipped.empty()) {
      stats_.unnameable += skipped.size();
      log::warn(
          "mount: {} key(s) or prefix(es) under {} are not shown: an empty, '.' or '..' path segment is no "
          "file name (first: {})",
          skipped.size(), Url(dir), skipped.front());
    }
    stats_.listings++;
    stats_.listed_entries += entries.size();
    auto l = std::make_shared<Listing>();
    l->at = Now();
    for (auto& e : entries) {
      if (e.name.find('/') != std::string::npos || e.name.empty()) continue;  // not a POSIX name
      std::string name = e.name;
      l->entries.emplace(std::move(name), std::move(e));
    }
    MutexLock lock(mu_);
    if (listings_.size() > 4096) listings_.clear();
    listings_[dir] = l;
    return std::shared_ptr<const Listing>(l);
  }

  void DropListing(const std::string& dir) {
    MutexLock lock(mu_);
    listings_.erase(dir);
  }

  void Forgotten(const std::string& dir, const std::string& path) {
    {
      MutexLock lock(mu_);
      auto bp = by_path_.find(path);
      if (bp != by_path_.end()) {
        nodes_[bp->second].unlinked = true;
        by_path_.erase(bp);
      }
    }
    DropListing(dir);
  }

  Status PutEmpty(const std::string& url) {
    auto w = AQ_TRY(store_.OpenWrite(url));
    return w->Close();
  }

  void StartWriter(fuse_req_t req, fuse_ino_t ino, const std::string& url, fuse_file_info* fi,
                   const fuse_entry_param* created) {
    bool busy = false;
    {
      MutexLock lock(mu_);
      Node& n = nodes_[ino];
      busy = n.readers > 0;
      if (!busy) n.writers++;
    }
    if (busy) {
      log::warn("mount: {}: not written while this mount reads it (EBUSY)", url);
      if (created) Forget(created->ino, 1);
      return (void)fuse_reply_err(req, EBUSY);
    }
    auto w = store_.OpenWrite(url);
    if (!w.ok()) {
      {
        MutexLock lock(mu_);
        nodes_[ino].writers--;
      }
      if (created) Forget(created->ino, 1);
      return Fail(req, w.status(), "create");
    }
    auto h = std::make_unique<Handle>();
    h->ino = ino;
    h->url = url;
    h->writer = std::move(*w);
    h->opener = ProcessOf(fuse_req_ctx(req)->pid);
    {
      MutexLock lock(mu_);
      Node& n = nodes_[ino];
      n.size = 0;
      n.version.clear();
      n.mtime = ::time(nullptr);
    }
    DropListing(ParentOf(url));
    fi->direct_io = 0;
    fi->keep_cache = 0;
    fi->fh = reinterpret_cast<uint64_t>(h.release());
    if (created) {
      fuse_reply_create(req, created, fi);
    } else {
      fuse_reply_open(req, fi);
    }
  }

  // A reader of the inode, unless this mount writes it now.
  bool AddReader(fuse_ino_t ino) {
    MutexLock lock(mu_);
    Node& n = nodes_[ino];
    if (n.writers > 0) return false;
    n.readers++;
    return true;
  }
  void DropReader(fuse_ino_t ino) {
    MutexLock lock(mu_);
    auto it = nodes_.find(ino);
    if (it != nodes_.end() && it->second.readers > 0 && --it->second.readers == 0) it->second.pinned = false;
  }

  // A read: straight from the store for a random reader or a small file
  // (its open brought it); for a sequential reader from chunks of
  // kChunk bytes (a store block), the next read_ahead bytes fetched in
  // parallel while the reader works.
  static constexpr uint64_t kChunk = 4 << 20;
  Result<size_t> ReadThrough(Handle& h, uint64_t off, size_t size, char* out) {
    const uint64_t file_size = h.reader->size();
    if (off >= file_size) return size_t{0};
    size = static_cast<size_t>(std::min<uint64_t>(size, file_size - off));
    if (o_.read_ahead == 0 || file_size <= (1u << 20)) return h.reader->ReadAt(off, size, out);
    std::vector<std::pair<uint64_t, std::shared_ptr<Chunk>>> need;
    {
      std::lock_guard<std::mutex> lock(h.chunks_mu);
      const uint64_t dist = off > h.last_end ? off - h.last_end : h.last_end - off;
      h.streak = dist <= 2 * kChunk ? h.streak + 1 : 0;
      h.last_end = std::max(h.last_end, off + size);
      if (dist > 2 * kChunk) h.last_end = off + size;
      if (h.streak < 2) {
        h.chunks.clear();
      } else {
        const uint64_t first = off / kChunk, last = (off + size - 1) / kChunk;
        const uint64_t ahead = std::max<uint64_t>(1, o_.read_ahead / kChunk);
        for (uint64_t i = first; i <= last + ahead && i * kChunk < file_size; ++i) {
          auto& c = h.chunks[i];
          if (!c) {
            c = std::make_shared<Chunk>();
            const uint64_t at = i * kChunk, len = std::min(kChunk, file_size - at);
            fetchers_.Submit([c, at, len, r = h.reader, this] {
              std::string data(len, '\0');
              auto got = r->ReadAt(at, len, data.data());
              Status st = !got.ok()     ? got.status()
                          : *got != len ? Truncated(fmt::format("{}: {} of {} bytes at {}", r->path(), *got, len, at))
                                        : Status::Ok();
              std::lock_guard<std::mutex> cl(c->mu);
              c->status = st;
              c->data = std::move(data);
              c->done = true;
              c->cv.notify_all();
              stats_.read_ahead_bytes += len;
            });
          }
          if (i <= last) need.emplace_back(i, c);
        }
        // Behind the reader: no longer wanted.
        while (!h.chunks.empty() && h.chunks.begin()->first + 1 < first) h.chunks.erase(h.chunks.begin());
      }
    }
    if (need.empty()) return h.reader->ReadAt(off, size, out);
    size_t copied = 0;
    for (auto& [i, c] : need) {
      std::unique_lock<std::mutex> cl(c->mu);
      c->cv.wait(cl, [&] { return c->done; });
      if (!c->status.ok()) {
        Status st = c->status;
        cl.unlock();
        std::lock_guard<std::mutex> lock(h.chunks_mu);
        h.chunks.erase(i);  // the next read tries again
        return st;
      }
      const uint64_t at = i * kChunk;
      const uint64_t from = std::max(off, at), to = std::min<uint64_t>(off + size, at + c->data.size());
      std::memcpy(out + (from - off), c->data.data() + (from - at), to - from);
      copied += to - from;
    }
    stats_.read_ahead_used_bytes += copied;
    return copied;
  }

  // The reader of a handle opened without asking the store.
  Status OpenLazily(Handle& h) {
    std::lock_guard<std::mutex> lock(h.chunks_mu);
    if (h.reader) return Status::Ok();
    auto r = AQ_TRY(store_.OpenRead(h.url, io::AccessHint::kSequential));
    if (r->version() != h.expected) {
      // The kernel's pages are of another version: never mix the two.
      {
        MutexLock nl(mu_);
        auto it = nodes_.find(h.ino);
        if (it != nodes_.end()) {
          it->second.version.clear();
          it->second.attr_at = 0;
        }
      }
      Invalidate(h.ino);
      return Conflict(fmt::format("{} changed since its pages were cached: open it again", h.url));
    }
    h.reader = std::move(r);
    return Status::Ok();
  }

  // A writer whose bytes were sent gets a new spool holding them again.
  Status Reopen(Handle& h) {
    auto w = AQ_TRY(store_.OpenWrite(h.url));
    if (h.written > 0) {
      auto r = AQ_TRY(store_.OpenRead(h.url, io::AccessHint::kSequential));
      if (r->size() != h.written) return Conflict(fmt::format("{} changed while it was open for writing", h.url));
      std::string buf(std::min<uint64_t>(h.written, 4 << 20), '\0');
      for (uint64_t at = 0; at < h.written;) {
        const size_t n = AQ_TRY(r->ReadAt(at, std::min<uint64_t>(buf.size(), h.written - at), buf.data()));
        if (n == 0) return Truncated(fmt::format("{} ends at {} of {} bytes", h.url, at, h.written));
        AQ_TRY(w->Append(std::string_view(buf.data(), n)));
        at += n;
      }
    }
    h.writer = std::move(w);
    h.finished = false;
    return Status::Ok();
  }

  // A write failed: the spool goes (a full spool disk is freed at once),
  // nothing of this file is ever sent, and every later write and close of
  // it fails with the same errno. An existing object keeps its version.
  void Break(fuse_req_t req, Handle& h, const Status& s) {
    h.broken = Errno(s);
    if (h.broken == 0) h.broken = EIO;
    h.writer.reset();
    stats_.upload_errors++;
    log::error("mount: {}: a write failed, the file will not be stored: {}", h.url, s.message());
    {
      MutexLock nl(mu_);
      auto it = nodes_.find(h.ino);
      if (it != nodes_.end()) {
        it->second.attr_at = 0;  // asked again: the previous version, or nothing
        it->second.size = 0;
      }
    }
    fuse_reply_err(req, h.broken);
  }

  // Sends what a writer spooled; the first call's errno is every call's.
  int Finish(Handle& h) {
    std::lock_guard<std::mutex> lock(h.mu);
    if (h.finished) return h.finish_errno;
    h.finished = true;
    Status s = h.writer->Close();
    stats_.uploads++;
    if (!s.ok()) {
      stats_.upload_errors++;
      h.finish_errno = Errno(s);
      log::error("mount: {} was not stored: {}", h.url, s.message());
    }
    MutexLock nl(mu_);
    auto it = nodes_.find(h.ino);
    if (it != nodes_.end()) {
      it->second.attr_at = s.ok() ? Now() : 0;
      it->second.size = h.written;
      if (!s.ok() && it->second.writers <= 1) {  // it does not exist
        it->second.unlinked = true;
        auto bp = by_path_.find(it->second.path);
        if (bp != by_path_.end() && bp->second == h.ino) by_path_.erase(bp);
      }
    }
    listings_.erase(ParentOf(h.url));
    return h.finish_errno;
  }

  void Fail(fuse_req_t req, const Status& s, const std::string& what) {
    const int err = Errno(s);
    if (err == ENOENT) {
      log::debug("mount: {}: {}", what, s.message());
    } else {
      log::warn("mount: {}: {}", what, s.message());
    }
    fuse_reply_err(req, err);
  }

  void Invalidate(fuse_ino_t ino) {
    std::lock_guard<std::mutex> lock(inval_mu_);
    inval_.push_back(ino);
    inval_cv_.notify_one();
  }

  io::FileSystem& store_;
  MountOptions o_;
  std::string root_;
  uid_t uid_;
  gid_t gid_;
  fuse_session* se_ = nullptr;
  Mutex mu_;
  std::unordered_map<fuse_ino_t, Node> nodes_ AQ_GUARDED_BY(mu_);
  std::unordered_map<std::string, fuse_ino_t> by_path_ AQ_GUARDED_BY(mu_);
  fuse_ino_t next_ino_ AQ_GUARDED_BY(mu_) = FUSE_ROOT_ID + 1;
  std::unordered_map<std::string, std::shared_ptr<const Listing>> listings_ AQ_GUARDED_BY(mu_);
  Mutex latency_mu_;
  LatencyHistogram read_latency_ AQ_GUARDED_BY(latency_mu_);
  std::mutex inval_mu_;
  std::condition_variable inval_cv_;
  std::deque<fuse_ino_t> inval_;
  MountStats stats_;

 public:
  Fetchers fetchers_;
};

Fs* Self(fuse_req_t req) { return static_cast<Fs*>(fuse_req_userdata(req)); }

fuse_lowlevel_ops Operations() {
  fuse_lowlevel_ops ops{};
  ops.init = [](void* u, fuse_conn_info* c) { static_cast<Fs*>(u)->Init(c); };
  ops.lookup = [](fuse_req_t r, fuse_ino_t p, const char* n) { Self(r)->Lookup(r, p, n); };
  ops.forget = [](fuse_req_t r, fuse_ino_t i, uint64_t n) {
    Self(r)->Forget(i, n);
    fuse_reply_none(r);
  };
  ops.forget_multi = [](fuse_req_t r, size_t count, fuse_forget_data* f) {
    for (size_t k = 0; k < count; ++k) Self(r)->Forget(f[k].ino, f[k].nlookup);
    fuse_reply_none(r);
  };
  ops.getattr = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) { Self(r)->GetAttr(r, i, f); };
  ops.setattr = [](fuse_req_t r, fuse_ino_t i, struct stat* a, int s, fuse_file_info* f) {
    Self(r)->SetAttr(r, i, a, s, f);
  };
  ops.opendir = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) { Self(r)->OpenDir(r, i, f); };
  ops.readdir = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t o, fuse_file_info* f) {
    Self(r)->ReadDir(r, i, s, o, f, false);
  };
  ops.readdirplus = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t o, fuse_file_info* f) {
    Self(r)->ReadDir(r, i, s, o, f, true);
  };
  ops.releasedir = [](fuse_req_t r, fuse_ino_t, fuse_file_info* f) { Self(r)->ReleaseDir(r, f); };
  ops.open = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) { Self(r)->Open(r, i, f); };
  ops.create = [](fuse_req_t r, fuse_ino_t p, const char* n, mode_t m, fuse_file_info* f) {
    Self(r)->Create(r, p, n, m, f);
  };
  ops.read = [](fuse_req_t r, fuse_ino_t, size_t s, off_t o, fuse_file_info* f) { Self(r)->Read(r, s, o, f); };
  ops.write = [](fuse_req_t r, fuse_ino_t, const char* b, size_t s, off_t o, fuse_file_info* f) {
    Self(r)->Write(r, b, s, o, f);
  };
  ops.flush = [](fuse_req_t r, fuse_ino_t, fuse_file_info* f) { Self(r)->Flush(r, f); };
  ops.release = [](fuse_req_t r, fuse_ino_t, fuse_file_info* f) { Self(r)->Release(r, f); };
  // Durability comes with close: the object is stored when the upload that
  // close (flush) makes is acknowledged, and close reports its failure.
  ops.fsync = [](fuse_req_t r, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(r, 0); };
  ops.unlink = [](fuse_req_t r, fuse_ino_t p, const char* n) { Self(r)->Unlink(r, p, n); };
  ops.mkdir = [](fuse_req_t r, fuse_ino_t p, const char* n, mode_t) { Self(r)->MkDir(r, p, n); };
  ops.rmdir = [](fuse_req_t r, fuse_ino_t p, const char* n) { Self(r)->RmDir(r, p, n); };
  ops.rename = [](fuse_req_t r, fuse_ino_t p, const char* n, fuse_ino_t np, const char* nn, unsigned fl) {
    Self(r)->Rename(r, p, n, np, nn, fl);
  };
  ops.link = [](fuse_req_t r, fuse_ino_t, fuse_ino_t, const char* n) {
    Self(r)->Refuse(r, n, "make a hard link", EPERM);
  };
  ops.symlink = [](fuse_req_t r, const char*, fuse_ino_t, const char* n) {
    Self(r)->Refuse(r, n, "make a symbolic link", EPERM);
  };
  ops.mknod = [](fuse_req_t r, fuse_ino_t, const char* n, mode_t, dev_t) {
    Self(r)->Refuse(r, n, "make a device node or FIFO (mknod)", EPERM);
  };
  ops.statfs = [](fuse_req_t r, fuse_ino_t) { Self(r)->StatFs(r); };
  return ops;
}

// The kernel reads a FUSE file ahead by its bdi's read_ahead_kb, 128 KiB by
// default: requests of 1 MiB need more. Root may raise it (best effort).
void RaiseKernelReadAhead(const std::string& mountpoint) {
  std::ifstream mi("/proc/self/mountinfo");
  std::string line, dev;
  while (std::getline(mi, line)) {
    std::istringstream ss(line);
    std::string id, parent, majmin, root, point;
    ss >> id >> parent >> majmin >> root >> point;
    if (point == mountpoint) dev = majmin;  // the last one: the newest mount there
  }
  if (dev.empty()) return;
  std::ofstream ra("/sys/class/bdi/" + dev + "/read_ahead_kb");
  ra << 4096 << "\n";
  ra.flush();
  if (!ra) log::debug("mount: kernel read-ahead for {} left at its default (not root?)", mountpoint);
}

}  // namespace

std::string StatsJson(const MountStats& s, const MountOptions& o) {
  nlohmann::json j;
  j["root"] = o.root;
  j["mountpoint"] = o.mountpoint;
  j["lookups"] = s.lookups.load();
  j["listings"] = s.listings.load();
  j["listed_entries"] = s.listed_entries.load();
  j["opens"] = s.opens.load();
  j["opens_kept_cache"] = s.opens_kept_cache.load();
  j["reads"] = s.reads.load();
  j["read_bytes"] = s.read_bytes.load();
  j["read_errors"] = s.read_errors.load();
  j["read_ahead_bytes"] = s.read_ahead_bytes.load();
  j["read_ahead_used_bytes"] = s.read_ahead_used_bytes.load();
  j["writes"] = s.writes.load();
  j["written_bytes"] = s.written_bytes.load();
  j["uploads"] = s.uploads.load();
  j["upload_errors"] = s.upload_errors.load();
  j["refused"] = s.refused.load();
  j["unnameable"] = s.unnameable.load();
  return j.dump(1);
}

Status Mount(io::FileSystem& store, const MountOptions& options, const std::function<void()>& ready) {
  MountOptions o = options;
  // Absolute: a detached mount runs in /, and unmounting needs the real path.
  char resolved[PATH_MAX];
  if (::realpath(options.mountpoint.c_str(), resolved) == nullptr) {
    return ErrnoStatus(errno, "mount on", options.mountpoint);
  }
  o.mountpoint = resolved;
  if (!o.stats_file.empty() && o.stats_file[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) != nullptr) o.stats_file = std::string(cwd) + "/" + o.stats_file;
  }
  // The root must answer before anything is mounted over the directory.
  auto root = store.Stat(o.root);
  if (!root.ok()) return root.status().WithContext(fmt::format("mount {}", o.root));
  if (!root->is_dir) return InvalidArgument(fmt::format("mount {}: an object, not a bucket or prefix", o.root));
  struct stat mp {};
  if (::stat(o.mountpoint.c_str(), &mp) != 0) return ErrnoStatus(errno, "mount on", o.mountpoint);
  if (!S_ISDIR(mp.st_mode)) return InvalidArgument(fmt::format("mount on {}: not a directory", o.mountpoint));

  std::string opts = "fsname=" + o.root + ",subtype=aquifer,default_permissions";
  if (o.allow_other) opts += ",allow_other";
  if (o.read_only) opts += ",ro";
  opts += fmt::format(",max_read={}", o.max_read);
  for (const auto& extra : o.fuse_options) opts += "," + extra;
  std::vector<std::string> args = {"aquifer", "-o", opts};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  fuse_args fa = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  // Parsing may leave libfuse's own copy of the arguments in fa.
  struct FreeArgs {
    fuse_args* a;
    ~FreeArgs() { fuse_opt_free_args(a); }
  } free_args{&fa};

  Fs fs(store, o);
  const fuse_lowlevel_ops ops = Operations();
  fuse_session* se = fuse_session_new(&fa, &ops, sizeof(ops), &fs);
  if (se == nullptr) return InvalidArgument(fmt::format("mount {}: FUSE refused the options '{}'", o.root, opts));
  fs.set_session(se);
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    return Internal("mount: could not install signal handlers");
  }
  if (fuse_session_mount(se, o.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    const bool no_dev = ::access("/dev/fuse", R_OK | W_OK) != 0;
    return Status(StatusCode::kUnavailable,
                  fmt::format("mount {} on {}: FUSE could not mount{}", o.root, o.mountpoint,
                              no_dev ? " (/dev/fuse is missing or not accessible: load the fuse module, or run "
                                       "where FUSE is allowed)"
                                     : " (see the message above; is it already mounted? fusermount3 -u clears "
                                       "a mount whose process died)"));
  }
  if (ready) ready();
  fuse_daemonize(o.foreground ? 1 : 0);  // threads start after this: they do not survive a fork

  RaiseKernelReadAhead(o.mountpoint);
  fs.fetchers_.Start(std::max(4u, o.threads));
  std::atomic<bool> stop{false};
  std::thread invalidator([&] { fs.RunInvalidator(stop); });
  std::thread stats_writer;
  auto write_stats = [&] {
    if (o.stats_file.empty()) return;
    const std::string tmp = o.stats_file + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      const std::string text = fs.Stats();
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
      std::rename(tmp.c_str(), o.stats_file.c_str());
    }
  };
  if (!o.stats_file.empty()) {
    stats_writer = std::thread([&] {
      while (!stop) {
        write_stats();
        for (int i = 0; i < 10 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(cfg, std::max(2u, o.threads));
  fuse_loop_cfg_set_idle_threads(cfg, std::max(1u, o.threads / 2));
  const int rc = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  stop = true;
  fs.fetchers_.Stop();
  invalidator.join();
  if (stats_writer.joinable()) stats_writer.join();
  write_stats();
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  const MountStats& s = fs.stats();
  log::info(
      "mount: unmounted {}: {} opens ({} kept the page cache), {} reads, {} MB read, {} read errors, {} "
      "uploads ({} failed), {} refused",
      o.mountpoint, s.opens.load(), s.opens_kept_cache.load(), s.reads.load(), s.read_bytes.load() / 1000000,
      s.read_errors.load(), s.uploads.load(), s.upload_errors.load(), s.refused.load());
  if (rc != 0 && rc != SIGTERM && rc != SIGINT && rc != SIGHUP && rc != -EINTR) {
    return IoError(fmt::format("mount {}: the FUSE loop ended with {}", o.mountpoint, rc));
  }
  return Status::Ok();
}

Status Unmount(const std::string& mountpoint, bool lazy) {
  if (::geteuid() == 0) {
    if (::umount2(mountpoint.c_str(), lazy ? MNT_DETACH : 0) == 0) return Status::Ok();
    const int err = errno;
    if (err == EBUSY) {
      return Status(
          StatusCode::kConflict,
          fmt::format("umount {}: busy (a process has a file or its cwd there; --lazy detaches it now)", mountpoint));
    }
    if (err == EINVAL) {
      // umount2 says only "Invalid argument" for a directory nothing is mounted on.
      struct stat st {};
      if (::stat(mountpoint.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        return InvalidArgument(fmt::format("umount {}: nothing is mounted there", mountpoint));
      }
    }
    if (err == ENOENT) return NotFound(fmt::format("umount {}: no such directory", mountpoint));
    return ErrnoStatus(err, "umount", mountpoint);
  }
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus(errno, "fork for fusermount3 -u", mountpoint);
  if (pid == 0) {
    if (lazy) {
      ::execlp("fusermount3", "fusermount3", "-u", "-z", mountpoint.c_str(), nullptr);
    } else {
      ::execlp("fusermount3", "fusermount3", "-u", mountpoint.c_str(), nullptr);
    }
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return Unavailable(fmt::format("umount {}: fusermount3 not found (install fuse3)", mountpoint));
  }
  return IoError(fmt::format("umount {}: fusermount3 -u failed (see its message above)", mountpoint));
}

}  // namespace aq::mount
