// aquifer mount: a bucket (or a prefix of one) as a POSIX file system, over
// libfuse3's low-level API, so an unmodified training script, tar, fio or a
// shell reads the store. It speaks to the store only through an
// io::FileSystem (the aquifer:// client), so on a cluster each block is read
// from its holders with fail-over, as every other client does.
//
// What maps to what:
//   - directories are key prefixes; a listing is one delimiter listing
//     (paged), whose sizes, mtimes and ETags answer lookups in that directory
//     for attr_ttl_s, so `ls -l` or a walk costs no request per file;
//   - open is the client's open: one GET that brings the first MiB, so a
//     small file is read whole by its open; the kernel keeps an object's
//     pages across opens while its ETag is unchanged (keep_cache), and drops
//     them when it changed;
//   - reads go to the store at up to max_read bytes; a sequential reader's
//     next read_ahead bytes are fetched ahead by the mount in 4 MiB chunks
//     (a store block) on its own threads; a random read fetches what is
//     asked;
//   - a new file written front to back is spooled and sent when the process
//     that opened it closes it (one PUT, or a multipart upload when large):
//     it appears whole or not at all, and close(2) returns the upload's
//     error; another process's close (a child that inherited the
//     descriptor) sends nothing; a failed write fails every later write and
//     close, and nothing is sent;
//   - unlink, mkdir (a "dir/" marker), rmdir (of an empty prefix), rename of
//     a file (a server-side copy, then a delete); a directory's rename is
//     EXDEV, so mv copies it;
//   - the plan file, .aquifer-plan in the root (mount_fs.h): lines written
//     to it are the files about to be read, sent to the store as a read
//     plan (io::FileSystem::Plan) so its nodes stage them.
// What a write-once object store cannot do is refused with an errno and a
// log line, never done halfway: writing into an existing object or anywhere
// but its end (EOPNOTSUPP), appending to one (EOPNOTSUPP), truncating to a
// size other than 0 or the size written (EOPNOTSUPP), hard and symbolic links
// and device nodes (EPERM / EOPNOTSUPP).
//
// The file system itself is MountFs (mount_fs.h), with no FUSE in it;
// Mount adapts the kernel's requests to it.
//
// Thread safety: one Mount serves the kernel from many threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "io/file_system.h"

namespace aq::mount {

struct MountOptions {
  std::string root;        // aquifer://HOST:PORT/BUCKET[/PREFIX]
  std::string mountpoint;  // an existing, empty directory
  bool read_only = false;
  bool allow_other = false;                // let users other than the mounter in (FUSE allow_other)
  bool foreground = true;                  // else detach once mounted (fuse_daemonize)
  double attr_ttl_s = 30;                  // the kernel's and the mount's cache of names and attributes
  double negative_ttl_s = 1;               // how long "no such file" is remembered
  uint32_t max_read = 1 << 20;             // largest read and write request
  uint64_t read_ahead = 16 << 20;          // a sequential reader's bytes fetched ahead, in 4 MiB chunks (0: off)
  unsigned threads = 16;                   // request threads at most
  std::string stats_file;                  // rewritten every second with the stats (JSON), when set
  std::string metrics_host = "127.0.0.1";  // with metrics_port >= 0: /metrics (Prometheus text) served there
  int metrics_port = -1;                   // 0 picks a free port (logged); -1: off
  std::vector<std::string> fuse_options;   // further -o options, passed to the kernel
};

// What the mount did; also the stats file's content.
struct MountStats {
  std::atomic<uint64_t> lookups{0}, listings{0}, listed_entries{0}, opens{0}, opens_kept_cache{0};
  std::atomic<uint64_t> reads{0}, read_bytes{0}, read_errors{0};
  std::atomic<uint64_t> read_ahead_bytes{0}, read_ahead_used_bytes{0};  // fetched ahead; of those, read
  std::atomic<uint64_t> writes{0}, written_bytes{0}, uploads{0}, upload_errors{0};
  std::atomic<uint64_t> refused{0};      // operations a write-once store cannot do
  std::atomic<uint64_t> unnameable{0};   // keys listed that no file name can stand for ("a//x"), not shown
  std::atomic<uint64_t> planned{0};      // reads named in the plan file (mount_fs.h), sent to the store
  std::atomic<uint64_t> plan_staged{0};  // ... that the store took up for staging
};

// Mounts and serves until unmounted (umount, fusermount3 -u) or signalled
// (SIGTERM, SIGINT, SIGHUP: unmounts cleanly). `ready` runs once the file
// system is mounted (before detaching, when not in the foreground). The root
// must exist (a bucket the keys can list).
Status Mount(io::FileSystem& store, const MountOptions& options, const std::function<void()>& ready = nullptr);

// Unmounts a FUSE mount: umount2 as root, else fusermount3 -u. `lazy`
// detaches now and finishes when the last file is closed.
Status Unmount(const std::string& mountpoint, bool lazy);

// Stats as JSON text.
std::string StatsJson(const MountStats& s, const MountOptions& o);

}  // namespace aq::mount
