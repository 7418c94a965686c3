#include "mount/mount_fs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/log.h"
#include "common/thread_pool.h"
#include "io/read_ahead.h"
#include "monitor/prometheus.h"

namespace aq::mount {

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

// A range of a file read ahead for a sequential reader.
struct Chunk {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  std::string data;
};

struct MountFs::DirHandle {
  std::shared_ptr<const Listing> listing;
  std::vector<const io::FileInfo*> entries;
};

namespace {

std::string Unquoted(const std::string& etag) {
  return etag.size() >= 2 && etag.front() == '"' && etag.back() == '"' ? etag.substr(1, etag.size() - 2) : etag;
}

}  // namespace

MountFs::MountFs(io::FileSystem& store, const MountOptions& o, std::function<void(Ino)> invalidate, Clock& clock)
    : store_(store), o_(o), invalidate_(std::move(invalidate)), clock_(clock), uid_(::getuid()), gid_(::getgid()) {
  root_ = o.root;
  while (!root_.empty() && root_.back() == '/') root_.pop_back();
  Node root;
  root.is_dir = true;
  root.lookups = 1;
  root.mtime = ::time(nullptr);
  MutexLock lock(mu_);
  nodes_[kRootIno] = root;
  by_path_[""] = kRootIno;
}

MountFs::~MountFs() = default;

void MountFs::StartFetchers(unsigned threads) { fetchers_ = std::make_unique<ThreadPool>(threads); }

int MountFs::Lookup(Ino parent, const std::string& name, EntryReply* out) {
  stats_.lookups++;
  if (parent == kRootIno && name == kPlanName) {
    *out = EntryReply{};
    out->ino = kPlanIno;
    out->attr = PlanAttr();
    out->attr_timeout = out->entry_timeout = o_.attr_ttl_s;
    return 0;
  }
  auto p = PathOf(parent);
  if (!p) return ENOENT;
  const std::string path = Join(*p, name);
  auto info = Find(*p, path, name);
  if (!info.ok()) {
    if (info.status().code() == StatusCode::kNotFound) {
      *out = EntryReply{};  // ino 0: a negative entry the kernel remembers
      out->entry_timeout = o_.negative_ttl_s;
      return 0;
    }
    return Fail(info.status(), "lookup");
  }
  *out = Enter(path, *info, true);
  return 0;
}

void MountFs::Forget(Ino ino, uint64_t n) {
  MutexLock lock(mu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end() || ino == kRootIno) return;
  it->second.lookups = it->second.lookups > n ? it->second.lookups - n : 0;
  if (it->second.lookups == 0 && it->second.writers == 0) {
    auto bp = by_path_.find(it->second.path);
    if (bp != by_path_.end() && bp->second == ino) by_path_.erase(bp);
    nodes_.erase(it);
  }
}

int MountFs::GetAttr(Ino ino, uint64_t fh, struct stat* out) {
  if (ino == kPlanIno) {
    *out = PlanAttr();
    return 0;
  }
  Node n;
  {
    MutexLock lock(mu_);
    auto it = nodes_.find(ino);
    if (it == nodes_.end()) return ENOENT;
    n = it->second;
  }
  if (!n.is_dir && n.writers == 0 && !n.unlinked && clock_.Now() - n.attr_at > o_.attr_ttl_s) {
    auto info = store_.Stat(Url(n.path));
    if (!info.ok()) return Fail(info.status(), "stat");
    MutexLock lock(mu_);
    auto it = nodes_.find(ino);
    if (it != nodes_.end()) {
      Learn(it->second, *info);
      n = it->second;
    }
  }
  *out = Attr(ino, n);
  // Asked through an open file (the kernel's read path, fstat): the size
  // of the version that handle reads, so the kernel never cuts its reads
  // at another version's size.
  if (fh != 0) {
    auto* h = reinterpret_cast<Handle*>(fh);
    if (h->state == HandleState::kReading) {
      MutexLock lock(h->chunks_mu);
      if (h->reader) out->st_size = static_cast<off_t>(h->reader->size());
    }
  }
  return 0;
}

int MountFs::Truncate(Ino ino, uint64_t fh, uint64_t want) {
  if (ino == kPlanIno) return 0;  // (open with O_TRUNC: the plan file is always empty)
  if (o_.read_only) return EROFS;
  Handle* h = fh != 0 ? reinterpret_cast<Handle*>(fh) : nullptr;
  const HandleState state = h != nullptr ? h->state.load() : HandleState::kReading;
  if (h != nullptr && state == HandleState::kBroken) return h->broken;
  if (h != nullptr && state == HandleState::kExisting) {
    auto got = GetNode(ino);
    const uint64_t size = got.ok() ? got->size : 0;
    MutexLock lock(h->mu);
    if (h->refused != 0) return h->refused;  // a refused write already failed this file
    if (want != 0 && want != size) {
      h->refused = Refuse(h->url, fmt::format("truncate to {} bytes of {}", want, size), EOPNOTSUPP);
      return h->refused;
    }
    if (want != 0) return 0;
    // From here on a writer of a new version, sent on close.
    {
      MutexLock nl(mu_);
      Node& n = nodes_[ino];
      if (n.readers > 0) {
        log::warn("mount: {}: not written while this mount reads it (EBUSY)", h->url);
        return EBUSY;
      }
      n.writers++;
    }
    auto w = store_.OpenWrite(h->url);
    if (!w.ok()) {
      MutexLock nl(mu_);
      nodes_[ino].writers--;
      return Fail(w.status(), "truncate");
    }
    h->writer = std::move(*w);
    h->state = HandleState::kWriting;
    MutexLock nl(mu_);
    Node& n = nodes_[ino];
    n.size = 0;
    n.version.clear();
    return 0;
  }
  if (h != nullptr && (state == HandleState::kWriting || state == HandleState::kSent)) {
    MutexLock lock(h->mu);
    if (want == h->written) return 0;
    if (h->state == HandleState::kSent) {
      if (h->finish_errno != 0) return h->finish_errno;
      Status r = Reopen(*h);
      if (!r.ok()) return Break(*h, r);
    }
    Status t = h->writer->Truncate(want);
    if (!t.ok()) return Break(*h, t);
    h->written = want;
    MutexLock nl(mu_);
    auto it = nodes_.find(ino);
    if (it != nodes_.end()) it->second.size = want;
    return 0;
  }
  auto got = GetNode(ino);
  if (!got.ok()) return ENOENT;
  const Node& n = *got;
  if (n.writers > 0) return Refuse(Url(n.path), "truncate while it is being written", EOPNOTSUPP);
  if (want == n.size) return 0;
  if (want != 0) return Refuse(Url(n.path), fmt::format("truncate to {} bytes of {}", want, n.size), EOPNOTSUPP);
  Status s = PutEmpty(Url(n.path));  // truncate to 0: an empty object replaces it whole
  if (!s.ok()) return Fail(s, "truncate");
  MutexLock lock(mu_);
  auto it = nodes_.find(ino);
  if (it != nodes_.end()) {
    it->second.size = 0;
    it->second.version.clear();
    it->second.attr_at = clock_.Now();
  }
  return 0;
}

int MountFs::OpenDir(Ino ino, uint64_t* dh) {
  auto p = PathOf(ino);
  if (!p) return ENOENT;
  auto listing = List(*p);
  if (!listing.ok()) return Fail(listing.status(), "list");
  auto* d = new DirHandle;
  d->listing = *listing;
  for (const auto& [name, info] : d->listing->entries) d->entries.push_back(&info);
  *dh = reinterpret_cast<uint64_t>(d);
  return 0;
}

size_t MountFs::DirSize(uint64_t dh) const { return reinterpret_cast<const DirHandle*>(dh)->entries.size(); }

MountFs::DirEntry MountFs::DirAt(uint64_t dh, size_t i) const {
  const auto* e = reinterpret_cast<const DirHandle*>(dh)->entries[i];
  return {e->name, e->is_dir};
}

EntryReply MountFs::DirEntryPlus(Ino dir, uint64_t dh, size_t i) {
  const io::FileInfo& info = *reinterpret_cast<const DirHandle*>(dh)->entries[i];
  auto p = PathOf(dir);
  return Enter(Join(p.value_or(""), info.name), info, false);
}

void MountFs::CountLookup(Ino ino) {
  MutexLock lock(mu_);
  nodes_[ino].lookups++;
}

void MountFs::ReleaseDir(uint64_t dh) { delete reinterpret_cast<DirHandle*>(dh); }

int MountFs::Open(Ino ino, int flags, pid_t process, OpenReply* out) {
  stats_.opens++;
  if (ino == kPlanIno) {
    if ((flags & O_ACCMODE) == O_RDONLY) return EACCES;  // written, never read
    auto h = std::make_unique<Handle>();
    h->ino = ino;
    h->url = root_ + "/" + kPlanName;
    h->opener = process;
    h->state = HandleState::kPlan;
    static std::atomic<uint64_t> opened{0};
    h->plan_stream = fmt::format("mount-{}-{}", process, opened.fetch_add(1));
    *out = OpenReply{};
    out->direct_io = true;  // every write reaches the mount as it is made
    out->fh = reinterpret_cast<uint64_t>(h.release());
    return 0;
  }
  auto got = GetNode(ino);
  if (!got.ok()) return ENOENT;
  const Node& n = *got;
  if (n.is_dir) return EISDIR;
  const std::string url = Url(n.path);
  *out = OpenReply{};
  if ((flags & O_ACCMODE) != O_RDONLY) {
    if (o_.read_only) return EROFS;
    if (flags & O_APPEND && n.size > 0) return Refuse(url, "append to an existing object", EOPNOTSUPP);
    if (!(flags & O_TRUNC) && n.size > 0) {
      // Refused at the first write, unless a truncate to 0 comes first
      // (truncate(1), then writes: a whole replacement).
      auto h = std::make_unique<Handle>();
      h->ino = ino;
      h->url = url;
      h->state = HandleState::kExisting;
      h->opener = process;
      out->fh = reinterpret_cast<uint64_t>(h.release());
      return 0;
    }
    return StartWriter(ino, url, process, false, out);
  }
  return OpenForReading(ino, n, out);
}

int MountFs::OpenForReading(Ino ino, const Node& n, OpenReply* out) {
  const std::string url = Url(n.path);
  // Within one mount a file is read or written, not both at once: the
  // kernel's one inode would show the writer's size to the readers of the
  // stored version (short reads, or zeros past its end).
  if (!AddReader(ino)) {
    log::warn("mount: {}: not opened for reading while this mount writes it (EBUSY)", url);
    return EBUSY;
  }
  bool lazy = !n.version.empty() && clock_.Now() - n.attr_at < o_.attr_ttl_s;
  if (lazy) {  // the kernel's size must be this version's (see Node::pinned)
    MutexLock lock(mu_);
    Node& node = nodes_[ino];
    if (!node.pinned) {
      node.pinned = true;
      node.open_size = node.size;
    }
    lazy = node.open_size == node.size && node.version == n.version;
  }
  auto h = std::make_unique<Handle>();
  h->ino = ino;
  h->url = url;
  if (lazy) {
    // Validated within the attribute TTL and its pages are in the kernel:
    // no request now; the store is asked only if the kernel asks to read.
    h->expected = n.version;
    out->keep_cache = true;
    stats_.opens_kept_cache++;
    out->noflush = true;
    out->fh = reinterpret_cast<uint64_t>(h.release());
    return 0;
  }
  auto file = store_.OpenRead(url, io::AccessHint::kSequential);
  if (!file.ok()) {
    DropReader(ino);
    return Fail(file.status(), "open");
  }
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
      out->keep_cache = !version.empty() && node.version == version;
      const uint64_t kernel_size = node.pinned ? node.open_size : node.size;  // what the kernel was told
      attrs_changed =
          kernel_size != h->reader->size() || (!node.version.empty() && !version.empty() && node.version != version);
      if (!node.pinned) {
        node.pinned = true;
        node.open_size = h->reader->size();
      }
      node.version = version;
      node.size = h->reader->size();
      node.attr_at = clock_.Now();
    }
  }
  if (out->keep_cache) stats_.opens_kept_cache++;
  if (attrs_changed) {
    // The kernel's size is of another version (the object changed between
    // its lookup and this open): it would cut reads short, or end them
    // early. This handle reads around the page cache, to the end of the
    // version it opened; the kernel learns the new size meanwhile.
    out->direct_io = true;
    invalidate_(ino);
  }
  out->noflush = true;
  out->fh = reinterpret_cast<uint64_t>(h.release());
  return 0;
}

int MountFs::Create(Ino parent, const std::string& name, mode_t mode, pid_t process, EntryReply* entry,
                    OpenReply* out) {
  if (o_.read_only) return EROFS;
  auto p = PathOf(parent);
  if (!p) return ENOENT;
  const std::string path = Join(*p, name);
  if (!S_ISREG(mode)) return Refuse(Url(path), "create something other than a regular file", EOPNOTSUPP);
  *entry = Enter(path, io::FileInfo{name, 0, false, ::time(nullptr), ""}, true);
  const int err = StartWriter(entry->ino, Url(path), process, true, out);
  if (err != 0) Forget(entry->ino, 1);
  return err;
}

int MountFs::Read(uint64_t fh, uint64_t off, size_t size, char* out, size_t* got) {
  auto* h = reinterpret_cast<Handle*>(fh);
  if (h->state != HandleState::kReading) return EBADF;
  if (!h->expected.empty()) {
    Status s = OpenLazily(*h);
    if (!s.ok()) return Fail(s, "read");
  }
  const double t0 = clock_.Now();
  auto n = ReadThrough(*h, off, size, out);
  stats_.reads++;
  if (!n.ok()) {
    stats_.read_errors++;
    return Fail(n.status(), fmt::format("read {} bytes at {} of", size, off));
  }
  stats_.read_bytes += *n;
  {
    MutexLock lock(latency_mu_);
    read_latency_.Record(static_cast<uint64_t>(std::max(0.0, clock_.Now() - t0) * 1e9));
  }
  *got = *n;
  return 0;
}

int MountFs::Write(uint64_t fh, const char* data, size_t size, uint64_t off) {
  auto* h = reinterpret_cast<Handle*>(fh);
  MutexLock lock(h->mu);
  if (h->state == HandleState::kPlan) {  // any offset: lines are taken in the order written
    h->plan_partial.append(data, size);
    return SendPlan(*h, false);
  }
  switch (h->state.load()) {
    case HandleState::kBroken: return h->broken;
    case HandleState::kExisting:
      h->refused = Refuse(h->url,
                          fmt::format("write at byte {} into an existing object (objects are written whole: "
                                      "open with O_TRUNC to replace it)",
                                      off),
                          EOPNOTSUPP);
      return h->refused;
    case HandleState::kReading:
    case HandleState::kPlan: return EBADF;
    case HandleState::kWriting:
    case HandleState::kSent: break;
  }
  if (h->state == HandleState::kSent) {
    // A close of one descriptor (a shell's redirect closes the original
    // after dup2) sent what was written so far; the next write continues
    // from those bytes, and the next close sends the whole again.
    if (h->finish_errno != 0) return h->finish_errno;
    Status r = Reopen(*h);
    if (!r.ok()) return Break(*h, r);
  }
  // A write back into the file (zip's local headers, HDF5) goes into the
  // spool where it belongs; the file is still sent whole at close.
  Status s = off == h->written ? h->writer->Append(std::string_view(data, size))
                               : h->writer->WriteAt(off, std::string_view(data, size));
  if (!s.ok()) return Break(*h, s);
  h->written = std::max<uint64_t>(h->written, off + size);
  stats_.writes++;
  stats_.written_bytes += size;
  MutexLock nl(mu_);
  auto it = nodes_.find(h->ino);
  if (it != nodes_.end()) it->second.size = h->written;
  return 0;
}

// close(2) of a descriptor. The file is sent when the process that opened
// it closes it (the writer learns the upload's outcome from close); a
// close by another process (a child that inherited the descriptor and
// exited, while the parent still writes) sends nothing. A file whose
// opener closed first is sent at the last close (Release), when the error
// can only be logged. A failed write fails every close.
int MountFs::Flush(uint64_t fh, pid_t process) {
  auto* h = reinterpret_cast<Handle*>(fh);
  const HandleState state = h->state;
  if (state == HandleState::kBroken) return h->broken;
  if (state == HandleState::kPlan) {  // a last line without its newline
    MutexLock lock(h->mu);
    return SendPlan(*h, true);
  }
  if (state == HandleState::kExisting) {  // nothing was written: a refused write fails its close too
    MutexLock lock(h->mu);
    return h->refused;
  }
  if (state != HandleState::kWriting && state != HandleState::kSent) return 0;
  if (process != h->opener) {
    log::debug("mount: {} closed by process {}, opened by {}: sent at the opener's close", h->url, process, h->opener);
    MutexLock lock(h->mu);
    return h->state == HandleState::kSent ? h->finish_errno : 0;
  }
  return Finish(*h);
}

void MountFs::Release(uint64_t fh) {
  std::unique_ptr<Handle> h(reinterpret_cast<Handle*>(fh));
  const HandleState state = h->state;
  if (state == HandleState::kPlan) {
    MutexLock lock(h->mu);
    (void)SendPlan(*h, true);  // (a process that ended without close)
    return;
  }
  if (state == HandleState::kReading) DropReader(h->ino);
  if (state == HandleState::kWriting || state == HandleState::kSent) {
    Finish(*h);  // sent now if its opener closed before the others (a failure is logged)
  }
  if (state == HandleState::kBroken || state == HandleState::kWriting || state == HandleState::kSent) {
    MutexLock lock(mu_);
    auto it = nodes_.find(h->ino);
    if (it != nodes_.end() && it->second.writers > 0) it->second.writers--;
  }
}

HandleState MountFs::StateOf(uint64_t fh) const { return reinterpret_cast<const Handle*>(fh)->state; }

int MountFs::Unlink(Ino parent, const std::string& name) {
  if (o_.read_only) return EROFS;
  auto p = PathOf(parent);
  if (!p) return ENOENT;
  const std::string path = Join(*p, name);
  Status s = store_.Remove(Url(path));
  if (!s.ok()) return Fail(s, "unlink");
  Forgotten(*p, path);
  return 0;
}

int MountFs::MkDir(Ino parent, const std::string& name, EntryReply* out) {
  if (o_.read_only) return EROFS;
  auto p = PathOf(parent);
  if (!p) return ENOENT;
  const std::string path = Join(*p, name);
  if (Find(*p, path, name).ok()) return EEXIST;
  // A prefix exists once something is below it: a "name/" marker object
  // keeps an empty directory.
  Status s = PutEmpty(Url(path) + "/");
  if (!s.ok()) return Fail(s, "mkdir");
  DropListing(*p);
  *out = Enter(path, io::FileInfo{name, 0, true, ::time(nullptr), ""}, true);
  return 0;
}

int MountFs::RmDir(Ino parent, const std::string& name) {
  if (o_.read_only) return EROFS;
  auto p = PathOf(parent);
  if (!p) return ENOENT;
  const std::string path = Join(*p, name);
  auto below = store_.List(Url(path));
  if (!below.ok()) return Fail(below.status(), "rmdir");
  if (!below->empty()) return ENOTEMPTY;
  Status s = store_.Remove(Url(path) + "/");
  if (!s.ok() && s.code() != StatusCode::kNotFound) return Fail(s, "rmdir");
  Forgotten(*p, path);
  DropListing(path);
  return 0;
}

int MountFs::Rename(Ino parent, const std::string& name, Ino newparent, const std::string& newname, bool exchange,
                    bool noreplace) {
  if (o_.read_only) return EROFS;
  auto p = PathOf(parent);
  auto q = PathOf(newparent);
  if (!p || !q) return ENOENT;
  const std::string from = Join(*p, name), to = Join(*q, newname);
  if (exchange) return Refuse(Url(from), "exchange two names (RENAME_EXCHANGE)", EOPNOTSUPP);
  auto src = Find(*p, from, name);
  if (!src.ok()) return Fail(src.status(), "rename");
  // A prefix has no one object to rename: EXDEV makes mv copy it.
  if (src->is_dir) return EXDEV;
  auto dst = Find(*q, to, newname);
  if (dst.ok()) {
    if (noreplace) return EEXIST;
    if (dst->is_dir) return EISDIR;
  }
  Status s = store_.Rename(Url(from), Url(to));
  if (!s.ok()) return Fail(s, "rename");
  {
    MutexLock lock(mu_);
    auto old = by_path_.find(to);
    if (old != by_path_.end()) {
      nodes_[old->second].unlinked = true;
      by_path_.erase(old);
    }
    auto it = by_path_.find(from);
    if (it != by_path_.end()) {
      const Ino ino = it->second;
      by_path_.erase(it);
      by_path_[to] = ino;
      nodes_[ino].path = to;
      nodes_[ino].attr_at = 0;  // its ETag may differ after the copy
    }
  }
  DropListing(*p);
  DropListing(*q);
  return 0;
}

int MountFs::Refuse(const std::string& what_of, const std::string& what, int err) {
  stats_.refused++;
  log::warn("mount: refused to {} for {}: a write-once object store cannot ({})", what, what_of, std::strerror(err));
  return err;
}

std::string MountFs::StatsText() {
  nlohmann::json j = nlohmann::json::parse(StatsJson(stats_, o_));
  MutexLock lock(latency_mu_);
  j["read_latency_ms"] = {{"p50", read_latency_.Quantile(0.5) / 1e6},
                          {"p99", read_latency_.Quantile(0.99) / 1e6},
                          {"max", static_cast<double>(read_latency_.max_ns()) / 1e6}};
  return j.dump(1);
}

std::string MountFs::PrometheusText() {
  monitor::PrometheusWriter w;
  const monitor::PrometheusWriter::Labels at = {{"mountpoint", o_.mountpoint}};
  auto counter = [&](const char* name, const char* help, const std::atomic<uint64_t>& v) {
    w.Counter(name, help, static_cast<double>(v.load()), at);
  };
  const MountStats& s = stats_;
  counter("aquifer_mount_lookups_total", "Names looked up in the store (the kernel's cache missed)", s.lookups);
  counter("aquifer_mount_listings_total", "Directories listed from the store", s.listings);
  counter("aquifer_mount_opens_total", "Files opened", s.opens);
  counter("aquifer_mount_opens_kept_cache_total", "Opens that kept the kernel's page cache (the object unchanged)",
          s.opens_kept_cache);
  counter("aquifer_mount_reads_total", "Read requests answered", s.reads);
  counter("aquifer_mount_read_bytes_total", "Bytes read", s.read_bytes);
  counter("aquifer_mount_read_errors_total", "Reads that failed (EIO)", s.read_errors);
  counter("aquifer_mount_read_ahead_bytes_total", "Bytes fetched ahead of sequential readers", s.read_ahead_bytes);
  counter("aquifer_mount_read_ahead_used_bytes_total", "Bytes fetched ahead that a reader then read",
          s.read_ahead_used_bytes);
  counter("aquifer_mount_writes_total", "Write requests", s.writes);
  counter("aquifer_mount_written_bytes_total", "Bytes written", s.written_bytes);
  counter("aquifer_mount_uploads_total", "Files stored at their close", s.uploads);
  counter("aquifer_mount_upload_errors_total", "Files whose store failed (their close failed)", s.upload_errors);
  counter("aquifer_mount_refused_total", "Operations a write-once store cannot do, refused", s.refused);
  counter("aquifer_mount_planned_reads_total", "Reads named in the plan file, sent to the store", s.planned);
  counter("aquifer_mount_plan_staged_reads_total", "Planned reads the store took up for staging", s.plan_staged);
  static const double kBounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                   0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  std::vector<std::pair<double, uint64_t>> buckets;
  double sum = 0;
  uint64_t count = 0;
  {
    MutexLock lock(latency_mu_);
    for (double b : kBounds) buckets.emplace_back(b, read_latency_.CountAtMost(b * 1e9));
    sum = static_cast<double>(read_latency_.sum_ns()) / 1e9;
    count = read_latency_.count();
  }
  w.Histogram("aquifer_mount_read_duration_seconds", "Time to answer a read request (buckets to 1/16 of an octave)",
              buckets, sum, count, at);
  return w.Text();
}

// ---- inodes, listings ----

std::string MountFs::ParentOf(const std::string& url) const {
  const std::string rel = url.size() > root_.size() ? url.substr(root_.size() + 1) : "";
  const size_t slash = rel.rfind('/');
  return slash == std::string::npos ? "" : rel.substr(0, slash);
}

std::optional<std::string> MountFs::PathOf(Ino ino) {
  MutexLock lock(mu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end() || it->second.unlinked) return std::nullopt;
  return it->second.path;
}

Result<MountFs::Node> MountFs::GetNode(Ino ino) {
  MutexLock lock(mu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end()) return NotFound(Subject::kNone, "no such inode");
  return it->second;
}

void MountFs::Learn(Node& n, const io::FileInfo& info) {
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
  n.attr_at = clock_.Now();
}

// The inode for path, made or refreshed from info; `counted` takes a kernel reference.
EntryReply MountFs::Enter(const std::string& path, const io::FileInfo& info, bool counted) {
  MutexLock lock(mu_);
  Ino ino;
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
  EntryReply e;
  e.ino = ino;
  e.attr = Attr(ino, n);
  e.attr_timeout = o_.attr_ttl_s;
  e.entry_timeout = o_.attr_ttl_s;
  return e;
}

struct stat MountFs::PlanAttr() const {
  struct stat st {};
  st.st_ino = kPlanIno;
  st.st_mode = S_IFREG | 0222;
  st.st_nlink = 1;
  st.st_uid = uid_;
  st.st_gid = gid_;
  st.st_blksize = 1 << 20;
  return st;
}

int MountFs::SendPlan(Handle& h, bool last) {
  std::string mountpoint = o_.mountpoint;
  while (mountpoint.size() > 1 && mountpoint.back() == '/') mountpoint.pop_back();
  std::vector<io::FileSystem::PlannedRead> reads;
  size_t at = 0;
  int err = 0;
  std::string& text = h.plan_partial;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) {
      if (!last) break;
      end = text.size();
    }
    std::string line = text.substr(at, end - at);
    at = std::min(text.size(), end + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    io::FileSystem::PlannedRead r;
    std::string path = line;
    if (const size_t tab = line.find('\t'); tab != std::string::npos) {
      path = line.substr(0, tab);
      const std::string rest = line.substr(tab + 1);
      const size_t tab2 = rest.find('\t');
      auto number = [](const std::string& t, uint64_t* v) {
        auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *v);
        return !t.empty() && ec == std::errc() && p == t.data() + t.size();
      };
      if (tab2 == std::string::npos || !number(rest.substr(0, tab2), &r.offset) ||
          !number(rest.substr(tab2 + 1), &r.length)) {
        log::warn("mount: plan line '{}': expected PATH or PATH<tab>OFFSET<tab>LENGTH", line);
        err = EINVAL;
        continue;
      }
    }
    if (!path.empty() && path[0] == '/') {
      if (mountpoint.empty() || path.compare(0, mountpoint.size() + 1, mountpoint + "/") != 0) {
        log::warn("mount: plan line '{}': not a file under {}", line, mountpoint.empty() ? "the mount" : mountpoint);
        err = EINVAL;
        continue;
      }
      path = path.substr(mountpoint.size() + 1);
    }
    bool named = !path.empty();
    for (size_t s = 0; named && s <= path.size();) {
      const size_t e = std::min(path.find('/', s), path.size());
      const std::string_view seg(path.data() + s, e - s);
      named = !seg.empty() && seg != "." && seg != "..";
      s = e + 1;
    }
    if (!named) {
      log::warn("mount: plan line '{}': not a file below the mount's root", line);
      err = EINVAL;
      continue;
    }
    r.path = Url(path);
    reads.push_back(std::move(r));
  }
  text.erase(0, at);
  if (!reads.empty()) {
    auto taken = store_.Plan(h.plan_stream, reads);
    if (!taken.ok()) return Fail(taken.status(), "send the read plan in");
    stats_.planned += reads.size();
    stats_.plan_staged += *taken;
  }
  return err;
}

struct stat MountFs::Attr(Ino ino, const Node& n) const {
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

// A name in a directory: from a fresh listing of it, from an inode that is
// being written, else asked of the store.
Result<io::FileInfo> MountFs::Find(const std::string& dir, const std::string& path, const std::string& name) {
  {
    MutexLock lock(mu_);
    const double now = clock_.Now();
    auto bp = by_path_.find(path);
    if (bp != by_path_.end()) {
      const Node& n = nodes_[bp->second];
      if (n.writers > 0 || (now - n.attr_at < o_.attr_ttl_s && n.attr_at > 0)) {
        return io::FileInfo{name, n.size, n.is_dir, n.mtime, n.version};
      }
    }
    auto l = listings_.find(dir);
    if (l != listings_.end() && now - l->second->at < o_.attr_ttl_s) {
      auto e = l->second->entries.find(name);
      if (e == l->second->entries.end()) return NotFound(Subject::kObject, path);
      return e->second;
    }
  }
  return store_.Stat(Url(path));
}

Result<std::shared_ptr<const MountFs::Listing>> MountFs::List(const std::string& dir) {
  {
    MutexLock lock(mu_);
    auto l = listings_.find(dir);
    if (l != listings_.end() && clock_.Now() - l->second->at < o_.attr_ttl_s) return l->second;
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
  l->at = clock_.Now();
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

void MountFs::DropListing(const std::string& dir) {
  MutexLock lock(mu_);
  listings_.erase(dir);
}

void MountFs::Forgotten(const std::string& dir, const std::string& path) {
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

// ---- handles ----

Status MountFs::PutEmpty(const std::string& url) {
  auto w = AQ_TRY(store_.OpenWrite(url));
  return w->Close();
}

int MountFs::StartWriter(Ino ino, const std::string& url, pid_t process, bool created, OpenReply* out) {
  bool busy = false;
  {
    MutexLock lock(mu_);
    Node& n = nodes_[ino];
    busy = n.readers > 0;
    if (!busy) n.writers++;
  }
  if (busy) {
    log::warn("mount: {}: not written while this mount reads it (EBUSY)", url);
    return EBUSY;
  }
  auto w = store_.OpenWrite(url);
  if (!w.ok()) {
    {
      MutexLock lock(mu_);
      nodes_[ino].writers--;
    }
    return Fail(w.status(), created ? "create" : "open for writing");
  }
  auto h = std::make_unique<Handle>();
  h->ino = ino;
  h->url = url;
  {
    MutexLock lock(h->mu);  // not shared yet: for the analysis
    h->writer = std::move(*w);
  }
  h->state = HandleState::kWriting;
  h->opener = process;
  {
    MutexLock lock(mu_);
    Node& n = nodes_[ino];
    n.size = 0;
    n.version.clear();
    n.mtime = ::time(nullptr);
  }
  DropListing(ParentOf(url));
  *out = OpenReply{};
  out->fh = reinterpret_cast<uint64_t>(h.release());
  return 0;
}

// A reader of the inode, unless this mount writes it now.
bool MountFs::AddReader(Ino ino) {
  MutexLock lock(mu_);
  Node& n = nodes_[ino];
  if (n.writers > 0) return false;
  n.readers++;
  return true;
}

void MountFs::DropReader(Ino ino) {
  MutexLock lock(mu_);
  auto it = nodes_.find(ino);
  if (it != nodes_.end() && it->second.readers > 0 && --it->second.readers == 0) it->second.pinned = false;
}

// A read: straight from the store for a random reader or a small file (its
// open brought it); for a sequential reader from chunks of kChunk bytes (a
// store block), the next read_ahead bytes fetched in parallel while the
// reader works.
Result<size_t> MountFs::ReadThrough(Handle& h, uint64_t off, size_t size, char* out) {
  const uint64_t file_size = h.reader->size();
  if (off >= file_size) return size_t{0};
  size = static_cast<size_t>(std::min<uint64_t>(size, file_size - off));
  if (o_.read_ahead == 0 || file_size <= (1u << 20) || !fetchers_) return h.reader->ReadAt(off, size, out);
  std::vector<std::pair<uint64_t, std::shared_ptr<Chunk>>> need;
  {
    MutexLock lock(h.chunks_mu);
    if (!h.sequential.Observe(off, size)) {
      h.chunks.clear();
    } else {
      const uint64_t first = off / kChunk, last = (off + size - 1) / kChunk;
      const uint64_t ahead = std::max<uint64_t>(1, o_.read_ahead / kChunk);
      for (uint64_t i = first; i <= last + ahead && i * kChunk < file_size; ++i) {
        auto& c = h.chunks[i];
        if (!c) {
          c = std::make_shared<Chunk>();
          const uint64_t at = i * kChunk, len = std::min(kChunk, file_size - at);
          fetchers_->Submit([c, at, len, r = h.reader, this] {
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
  for (auto& [i, chunk] : need) {
    Chunk* c = chunk.get();
    std::unique_lock<std::mutex> cl(c->mu);
    c->cv.wait(cl, [&] { return c->done; });
    if (!c->status.ok()) {
      Status st = c->status;
      cl.unlock();
      MutexLock lock(h.chunks_mu);
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
Status MountFs::OpenLazily(Handle& h) {
  MutexLock lock(h.chunks_mu);
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
    invalidate_(h.ino);
    return Conflict(fmt::format("{} changed since its pages were cached: open it again", h.url));
  }
  h.reader = std::move(r);
  return Status::Ok();
}

// A writer whose bytes were sent gets a new spool holding them again.
Status MountFs::Reopen(Handle& h) {
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
  h.state = HandleState::kWriting;
  return Status::Ok();
}

// A write failed: the spool goes (a full spool disk is freed at once),
// nothing of this file is ever sent, and every later write and close of it
// fails with the same errno. An existing object keeps its version.
// REQUIRES: h.mu held.
int MountFs::Break(Handle& h, const Status& s) {
  h.broken = Errno(s);
  if (h.broken == 0) h.broken = EIO;
  h.writer.reset();
  h.state = HandleState::kBroken;
  stats_.upload_errors++;
  log::error("mount: {}: a write failed, the file will not be stored: {}", h.url, s.message());
  MutexLock nl(mu_);
  auto it = nodes_.find(h.ino);
  if (it != nodes_.end()) {
    it->second.attr_at = 0;  // asked again: the previous version, or nothing
    it->second.size = 0;
  }
  return h.broken;
}

// Sends what a writer spooled; the first call's errno is every call's.
int MountFs::Finish(Handle& h) {
  MutexLock lock(h.mu);
  if (h.state == HandleState::kSent) return h.finish_errno;
  if (h.state != HandleState::kWriting) return h.state == HandleState::kBroken ? h.broken : 0;
  h.state = HandleState::kSent;
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
    it->second.attr_at = s.ok() ? clock_.Now() : 0;
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

int MountFs::Fail(const Status& s, const std::string& what) {
  const int err = Errno(s);
  if (err == ENOENT) {
    log::debug("mount: {}: {}", what, s.message());
  } else {
    log::warn("mount: {}: {}", what, s.message());
  }
  return err;
}

}  // namespace aq::mount
