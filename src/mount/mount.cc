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
#include "common/service_notify.h"
#include "monitor/prometheus.h"
#include "mount/mount_fs.h"

namespace aq::mount {
namespace {

// The thread group (process) of a thread: FUSE names the calling thread.
pid_t ProcessOf(pid_t tid) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Tgid:", 0) == 0) return static_cast<pid_t>(std::atol(line.c_str() + 5));
  }
  return tid;  // gone already (an exiting process): its own id
}
pid_t Caller(fuse_req_t req) { return ProcessOf(fuse_req_ctx(req)->pid); }

// The kernel's side: each low-level request handed to MountFs, its answer
// turned into the fuse_reply_* the request needs. Attribute invalidations
// go through a thread of their own: the kernel must not be told from
// inside a request it is waiting on.
class Kernel {
 public:
  Kernel(io::FileSystem& store, const MountOptions& o) : o_(o), fs_(store, o, [this](Ino ino) { Invalidate(ino); }) {}

  MountFs& fs() { return fs_; }
  void set_session(fuse_session* se) { se_ = se; }

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

  static void Entry(fuse_req_t req, int err, const EntryReply& e) {
    if (err != 0) return (void)fuse_reply_err(req, err);
    const fuse_entry_param p = Param(e);
    fuse_reply_entry(req, &p);
  }
  static fuse_entry_param Param(const EntryReply& e) {
    fuse_entry_param p{};
    p.ino = e.ino;
    p.generation = e.ino == 0 ? 0 : 1;
    p.attr = e.attr;
    p.attr_timeout = e.attr_timeout;
    p.entry_timeout = e.entry_timeout;
    return p;
  }
  static void Opened(fuse_file_info* fi, const OpenReply& r) {
    fi->fh = r.fh;
    fi->keep_cache = r.keep_cache;
    fi->direct_io = r.direct_io;
    fi->noflush = r.noflush;
  }

  void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
    EntryReply e;
    Entry(req, fs_.Lookup(parent, name, &e), e);
  }

  void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    struct stat st {};
    const int err = fs_.GetAttr(ino, fi != nullptr ? fi->fh : 0, &st);
    if (err != 0) return (void)fuse_reply_err(req, err);
    fuse_reply_attr(req, &st, o_.attr_ttl_s);
  }

  void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
    // A read-only mount is enforced here, not by the kernel's "ro" (which
    // would also close the plan file, mount_fs.h).
    if (o_.read_only && ino != kPlanIno) return (void)fuse_reply_err(req, EROFS);
    if (to_set & FUSE_SET_ATTR_SIZE) {
      const int err = fs_.Truncate(ino, fi != nullptr ? fi->fh : 0, static_cast<uint64_t>(attr->st_size));
      if (err != 0) return (void)fuse_reply_err(req, err);
    }
    // Mode, owner and times have nowhere to live in an object store: the
    // call succeeds (tar and cp -p set them) and the attributes stay.
    if (to_set & ~FUSE_SET_ATTR_SIZE) log::debug("mount: attributes other than the size are not kept (ino {})", ino);
    GetAttr(req, ino, nullptr);
  }

  void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    uint64_t dh = 0;
    if (int err = fs_.OpenDir(ino, &dh); err != 0) return (void)fuse_reply_err(req, err);
    fi->fh = dh;
    fi->cache_readdir = 0;
    fuse_reply_open(req, fi);
  }

  void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus) {
    if (!fs_.Known(ino)) return (void)fuse_reply_err(req, ENOENT);
    const size_t count = fs_.DirSize(fi->fh);
    std::string buf(size, '\0');
    size_t used = 0;
    for (size_t i = static_cast<size_t>(off); i < count + 2; ++i) {
      const bool dot = i < 2;
      const MountFs::DirEntry entry = dot ? MountFs::DirEntry{i == 0 ? "." : "..", true} : fs_.DirAt(fi->fh, i - 2);
      size_t need;
      if (!plus) {
        struct stat st {};
        st.st_ino = dot ? ino : 0;
        st.st_mode = entry.is_dir ? S_IFDIR : S_IFREG;
        need =
            fuse_add_direntry(req, buf.data() + used, size - used, entry.name.c_str(), &st, static_cast<off_t>(i + 1));
      } else if (dot) {
        fuse_entry_param e{};
        e.attr.st_ino = ino;
        e.attr.st_mode = S_IFDIR;
        need = fuse_add_direntry_plus(req, buf.data() + used, size - used, entry.name.c_str(), &e,
                                      static_cast<off_t>(i + 1));
      } else {
        // Counted as a lookup only when it fits: the kernel takes a
        // reference for each entry it receives.
        const fuse_entry_param e = Param(fs_.DirEntryPlus(ino, fi->fh, i - 2));
        need = fuse_add_direntry_plus(req, buf.data() + used, size - used, entry.name.c_str(), &e,
                                      static_cast<off_t>(i + 1));
        if (need <= size - used) fs_.CountLookup(e.ino);
      }
      if (need > size - used) break;
      used += need;
    }
    fuse_reply_buf(req, buf.data(), used);
  }

  void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    OpenReply r;
    if (int err = fs_.Open(ino, fi->flags, Caller(req), &r); err != 0) return (void)fuse_reply_err(req, err);
    Opened(fi, r);
    fuse_reply_open(req, fi);
  }

  void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
    EntryReply e;
    OpenReply r;
    if (int err = fs_.Create(parent, name, mode, Caller(req), &e, &r); err != 0) {
      return (void)fuse_reply_err(req, err);
    }
    Opened(fi, r);
    const fuse_entry_param p = Param(e);
    fuse_reply_create(req, &p, fi);
  }

  void Read(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi) {
    thread_local std::string buf;
    if (buf.size() < size) buf.resize(size);
    size_t got = 0;
    if (int err = fs_.Read(fi->fh, static_cast<uint64_t>(off), size, buf.data(), &got); err != 0) {
      return (void)fuse_reply_err(req, err);
    }
    fuse_reply_buf(req, buf.data(), got);
  }

  void Write(fuse_req_t req, const char* data, size_t size, off_t off, fuse_file_info* fi) {
    if (int err = fs_.Write(fi->fh, data, size, static_cast<uint64_t>(off)); err != 0) {
      return (void)fuse_reply_err(req, err);
    }
    fuse_reply_write(req, size);
  }

  // Attribute invalidations, queued by MountFs, told to the kernel here.
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
  void Invalidate(Ino ino) {
    std::lock_guard<std::mutex> lock(inval_mu_);
    inval_.push_back(ino);
    inval_cv_.notify_one();
  }

  const MountOptions o_;
  MountFs fs_;
  fuse_session* se_ = nullptr;
  std::mutex inval_mu_;
  std::condition_variable inval_cv_;
  std::deque<fuse_ino_t> inval_;
};

Kernel* Self(fuse_req_t req) { return static_cast<Kernel*>(fuse_req_userdata(req)); }
MountFs& Fs(fuse_req_t req) { return Self(req)->fs(); }
void Answer(fuse_req_t req, int err) { fuse_reply_err(req, err); }

fuse_lowlevel_ops Operations() {
  fuse_lowlevel_ops ops{};
  ops.init = [](void* u, fuse_conn_info* c) { static_cast<Kernel*>(u)->Init(c); };
  ops.lookup = [](fuse_req_t r, fuse_ino_t p, const char* n) { Self(r)->Lookup(r, p, n); };
  ops.forget = [](fuse_req_t r, fuse_ino_t i, uint64_t n) {
    Fs(r).Forget(i, n);
    fuse_reply_none(r);
  };
  ops.forget_multi = [](fuse_req_t r, size_t count, fuse_forget_data* f) {
    for (size_t k = 0; k < count; ++k) Fs(r).Forget(f[k].ino, f[k].nlookup);
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
  ops.releasedir = [](fuse_req_t r, fuse_ino_t, fuse_file_info* f) {
    Fs(r).ReleaseDir(f->fh);
    Answer(r, 0);
  };
  ops.open = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) { Self(r)->Open(r, i, f); };
  ops.create = [](fuse_req_t r, fuse_ino_t p, const char* n, mode_t m, fuse_file_info* f) {
    Self(r)->Create(r, p, n, m, f);
  };
  ops.read = [](fuse_req_t r, fuse_ino_t, size_t s, off_t o, fuse_file_info* f) { Self(r)->Read(r, s, o, f); };
  ops.write = [](fuse_req_t r, fuse_ino_t, const char* b, size_t s, off_t o, fuse_file_info* f) {
    Self(r)->Write(r, b, s, o, f);
  };
  ops.flush = [](fuse_req_t r, fuse_ino_t, fuse_file_info* f) { Answer(r, Fs(r).Flush(f->fh, Caller(r))); };
  ops.release = [](fuse_req_t r, fuse_ino_t, fuse_file_info* f) {
    Fs(r).Release(f->fh);
    Answer(r, 0);
  };
  // Durability comes with close: the object is stored when the upload that
  // close (flush) makes is acknowledged, and close reports its failure.
  ops.fsync = [](fuse_req_t r, fuse_ino_t, int, fuse_file_info*) { Answer(r, 0); };
  ops.unlink = [](fuse_req_t r, fuse_ino_t p, const char* n) { Answer(r, Fs(r).Unlink(p, n)); };
  ops.mkdir = [](fuse_req_t r, fuse_ino_t p, const char* n, mode_t) {
    EntryReply e;
    Kernel::Entry(r, Fs(r).MkDir(p, n, &e), e);
  };
  ops.rmdir = [](fuse_req_t r, fuse_ino_t p, const char* n) { Answer(r, Fs(r).RmDir(p, n)); };
  ops.rename = [](fuse_req_t r, fuse_ino_t p, const char* n, fuse_ino_t np, const char* nn, unsigned fl) {
    Answer(r, Fs(r).Rename(p, n, np, nn, fl & RENAME_EXCHANGE, fl & RENAME_NOREPLACE));
  };
  ops.link = [](fuse_req_t r, fuse_ino_t, fuse_ino_t, const char* n) {
    Answer(r, Fs(r).Refuse(n, "make a hard link", EPERM));
  };
  ops.symlink = [](fuse_req_t r, const char*, fuse_ino_t, const char* n) {
    Answer(r, Fs(r).Refuse(n, "make a symbolic link", EPERM));
  };
  ops.mknod = [](fuse_req_t r, fuse_ino_t, const char* n, mode_t, dev_t) {
    Answer(r, Fs(r).Refuse(n, "make a device node or FIFO (mknod)", EPERM));
  };
  ops.statfs = [](fuse_req_t r, fuse_ino_t) {
    struct statvfs st {};
    st.f_bsize = 1 << 20;
    st.f_frsize = 4096;
    st.f_blocks = st.f_bfree = st.f_bavail = 1ull << 40;  // an object store's space is not counted here
    st.f_files = st.f_ffree = st.f_favail = 1ull << 32;
    st.f_namemax = 1024;
    fuse_reply_statfs(r, &st);
  };
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
  j["planned"] = s.planned.load();
  j["plan_staged"] = s.plan_staged.load();
  return j.dump(1);
}

namespace {

// Absolute paths (a detached mount runs in /, and unmounting needs the
// real path), and a root that answers and a mountpoint that is a directory,
// before anything is mounted over it.
Status Prepare(io::FileSystem& store, MountOptions* options) {
  MountOptions& o = *options;
  // Absolute: a detached mount runs in /, and unmounting needs the real path.
  char resolved[PATH_MAX];
  if (::realpath(o.mountpoint.c_str(), resolved) == nullptr) {
    return ErrnoStatus(errno, "mount on", o.mountpoint);
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
  return Status::Ok();
}

// A value inside FUSE's -o list: libfuse splits the list at commas and reads
// a backslash as "take the next character as it is", so a root naming
// several nodes (aquifer://h1:p1,h2:p2/...) keeps its commas.
std::string FuseOptionValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == ',' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// The kernel's mount options (-o).
std::string FuseOptions(const MountOptions& o) {
  std::string opts = "fsname=" + FuseOptionValue(o.root) + ",subtype=aquifer,default_permissions";
  if (o.allow_other) opts += ",allow_other";
  // --read-only is enforced by MountFs (EROFS for every change), so that
  // the plan file stays writable on a read-only mount.
  opts += fmt::format(",max_read={}", o.max_read);
  for (const auto& extra : o.fuse_options) opts += "," + extra;
  return opts;
}

// The mount's counters in a file, rewritten whole (temporary name, then
// rename) every second while the mount runs and once at its end.
class StatsFileWriter {
 public:
  StatsFileWriter(MountFs& fs, std::string path) : fs_(fs), path_(std::move(path)) {
    if (!path_.empty()) thread_ = std::thread([this] { Loop(); });
  }
  ~StatsFileWriter() {
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    cv_.SignalAll();
    if (thread_.joinable()) thread_.join();
    Write();
  }

 private:
  void Loop() {
    for (;;) {
      Write();
      MutexLock lock(mu_);
      if (cv_.WaitFor(std::chrono::seconds(1), [this]() AQ_NO_THREAD_SAFETY_ANALYSIS { return stop_; })) return;
    }
  }
  void Write() {
    if (path_.empty()) return;
    const std::string tmp = path_ + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      const std::string text = fs_.StatsText();
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
      std::rename(tmp.c_str(), path_.c_str());
    }
  }

  MountFs& fs_;
  const std::string path_;
  Mutex mu_;
  CondVar cv_{mu_};
  bool stop_ AQ_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// A FUSE session on the mount point with the signal handlers installed;
// on failure, nothing is left behind and the error says what to try.
Result<fuse_session*> OpenSession(fuse_args* fa, const fuse_lowlevel_ops& ops, Kernel& kernel, const MountOptions& o,
                                  const std::string& opts) {
  fuse_session* se = fuse_session_new(fa, &ops, sizeof(ops), &kernel);
  if (se == nullptr) return InvalidArgument(fmt::format("mount {}: FUSE refused the options '{}'", o.root, opts));
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
  return se;
}

// Serves requests until the mount ends (unmounted, or a signal); the
// invalidation thread and the stats file run beside the loop.
int Serve(fuse_session* se, Kernel& kernel, const MountOptions& o) {
  RaiseKernelReadAhead(o.mountpoint);
  kernel.fs().StartFetchers(std::max(4u, o.threads));
  std::atomic<bool> stop{false};
  std::thread invalidator([&] { kernel.RunInvalidator(stop); });
  StatsFileWriter stats(kernel.fs(), o.stats_file);
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(cfg, std::max(2u, o.threads));
  fuse_loop_cfg_set_idle_threads(cfg, std::max(1u, o.threads / 2));
  const int rc = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  stop = true;
  invalidator.join();
  return rc;
}

}  // namespace

Status Mount(io::FileSystem& store, const MountOptions& options, const std::function<void()>& ready) {
  MountOptions o = options;
  AQ_TRY(Prepare(store, &o));
  const std::string opts = FuseOptions(o);
  std::vector<std::string> args = {"aquifer", "-o", opts};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  fuse_args fa = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  // Parsing may leave libfuse's own copy of the arguments in fa.
  struct FreeArgs {
    fuse_args* a;
    ~FreeArgs() { fuse_opt_free_args(a); }
  } free_args{&fa};

  Kernel kernel(store, o);
  const fuse_lowlevel_ops ops = Operations();
  fuse_session* se = AQ_TRY(OpenSession(&fa, ops, kernel, o, opts));
  kernel.set_session(se);
  if (ready) ready();
  fuse_daemonize(o.foreground ? 1 : 0);  // threads start after this: they do not survive a fork
  // Under systemd (Type=notify, with -f): ready once the kernel has the mount.
  if (Status s = NotifyServiceManager("READY=1\nSTATUS=mounted on " + o.mountpoint); !s.ok()) {
    log::warn("service manager not told the mount is ready: {}", s.ToString());
  }
  // After detaching: the exporter's thread must be this process's.
  std::unique_ptr<monitor::PrometheusExporter> metrics;
  if (o.metrics_port >= 0) {
    auto e = monitor::PrometheusExporter::Serve([&kernel] { return kernel.fs().PrometheusText(); }, o.metrics_host,
                                                o.metrics_port);
    if (e.ok()) {
      metrics = std::move(*e);
      log::info("mount: metrics on http://{}:{}/metrics", o.metrics_host, metrics->port());
    } else {
      log::error("mount: --metrics: {} (the mount goes on without it)", e.status().ToString());
    }
  }
  const int rc = Serve(se, kernel, o);
  metrics.reset();
  (void)NotifyServiceManager("STOPPING=1\nSTATUS=unmounting");
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  const MountStats& s = kernel.fs().stats();
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
