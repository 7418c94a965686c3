// aquifer mount / umount: the store as a POSIX file system (mount/mount.h).
#include <fmt/format.h>

#include <cstdio>
#include <sstream>

#include "cli/cli.h"
#include "client/s3_file_system.h"
#include "common/units.h"
#include "mount/mount.h"
#include "s3/endpoint.h"

namespace aq::cli {
namespace {

struct MountFlags {
  std::string root, mountpoint;
  bool foreground = false, read_only = false, no_read_ahead = false;
  std::vector<std::string> options;
  double attr_ttl = 30, negative_ttl = 1;
  std::string max_read = "1MiB", read_ahead = "16MiB";
  unsigned threads = 16;
  std::string stats_file, metrics;
  double retry_deadline = -1;  // -1: AQUIFER_RETRY_DEADLINE or the client's default
};

struct UmountFlags {
  std::string mountpoint;
  bool lazy = false;
};

Status RunMount(Globals& g, const MountFlags& f) {
  if (!s3::IsStoreUrl(f.root)) {
    return InvalidArgument(fmt::format("mount {}: expected aquifer://HOST:PORT/BUCKET[/PREFIX]", f.root));
  }
  auto parsed = client::ParseStorePath(f.root);
  if (!parsed.ok()) return parsed.status().WithContext("mount");
  if (parsed->bucket.empty()) return InvalidArgument(fmt::format("mount {}: name a bucket to mount", f.root));
  mount::MountOptions o;
  o.root = f.root;
  o.mountpoint = f.mountpoint;
  o.foreground = f.foreground;
  o.read_only = f.read_only;
  o.attr_ttl_s = f.attr_ttl;
  o.negative_ttl_s = f.negative_ttl;
  o.threads = f.threads;
  o.stats_file = f.stats_file;
  if (!f.metrics.empty()) {
    auto at = s3::ParseHostPort(f.metrics);
    if (!at.ok()) return at.status().WithContext("--metrics");
    o.metrics_host = at->host;
    o.metrics_port = at->port;
  }
  const uint64_t max_read = AQ_TRY(units::ParseBytes(f.max_read));
  if (max_read < 4096 || max_read > (1u << 20)) {
    return InvalidArgument(fmt::format("--max-read {}: between 4KiB and 1MiB (the kernel's limit)", f.max_read));
  }
  o.max_read = static_cast<uint32_t>(max_read);
  for (const auto& opt : f.options) {  // -o a,b,c as mount(8) takes them
    std::stringstream ss(opt);
    std::string one;
    while (std::getline(ss, one, ',')) {
      if (one.empty()) continue;
      if (one == "allow_other") {
        o.allow_other = true;
      } else if (one == "ro") {
        o.read_only = true;
      } else if (one == "rw") {
        o.read_only = false;
      } else {
        o.fuse_options.push_back(one);
      }
    }
  }
  o.read_ahead = f.no_read_ahead ? 0 : AQ_TRY(units::ParseBytes(f.read_ahead));
  client::ClientOptions co = client::ClientOptionsFromEnvironment();
  co.read_ahead = false;  // the mount reads ahead itself, in parallel chunks
  if (f.retry_deadline >= 0) co.retry_deadline_s = f.retry_deadline;
  auto store = client::NewStoreFileSystem([&g] { return client::FindCredentials(g.credentials); }, co);
  return mount::Mount(*store, o, [&] {
    std::printf("aquifer mount: %s on %s (%s%s, attributes cached %.0f s)%s\n", o.root.c_str(), o.mountpoint.c_str(),
                o.read_only ? "read-only" : "read-write", o.allow_other ? ", allow_other" : "", o.attr_ttl_s,
                o.foreground ? "; Ctrl-C or aquifer umount to unmount" : "");
    std::fflush(stdout);
  });
}

}  // namespace

void RegisterMountCommands(CLI::App& app, Globals& g) {
  auto* f = g.Own<MountFlags>();
  auto* cmd = app.add_subcommand(
      "mount",
      "Mount a bucket (or a prefix of one) as a POSIX file system (FUSE): every tool reads the store unchanged");
  cmd->add_option("root", f->root, "aquifer://HOST:PORT/BUCKET[/PREFIX]")->required();
  cmd->add_option("mountpoint", f->mountpoint, "An existing directory")->required();
  cmd->add_flag("-f,--foreground", f->foreground, "Stay in the foreground (default: detach once mounted)");
  cmd->add_flag("--read-only", f->read_only, "Refuse every change (EROFS)");
  cmd->add_option("-o", f->options,
                  "Mount options, comma-separated: allow_other (let other users in), ro, and FUSE's own");
  cmd->add_option("--attr-ttl", f->attr_ttl, "Seconds names, sizes and listings are cached (kernel and mount)")
      ->capture_default_str();
  cmd->add_option("--negative-ttl", f->negative_ttl, "Seconds a missing name is remembered")->capture_default_str();
  cmd->add_option("--max-read", f->max_read, "Largest read or write request (4KiB..1MiB)")->capture_default_str();
  cmd->add_option("--read-ahead", f->read_ahead,
                  "Bytes a sequential reader's reads are fetched ahead (in parallel 4 MiB chunks)")
      ->capture_default_str();
  cmd->add_flag("--no-read-ahead", f->no_read_ahead, "Fetch only what each read asks for");
  cmd->add_option("--threads", f->threads, "Request threads at most")->capture_default_str();
  cmd->add_option("--retry-deadline", f->retry_deadline,
                  "Seconds a request fails over to the cluster's other nodes (and waits for one to come back) "
                  "before the call fails with EIO (default 60, or AQUIFER_RETRY_DEADLINE)");
  cmd->add_option("--stats-file", f->stats_file,
                  "Rewrite this file every second with the mount's counters and read latency (JSON)");
  cmd->add_option("--metrics", f->metrics,
                  "HOST:PORT: serve the mount's counters and read latency as Prometheus text on /metrics (port 0 "
                  "picks one, logged)");
  cmd->callback([f, &g] {
    if (Status s = RunMount(g, *f); !s.ok()) Fail(g, s);
  });

  auto* u = g.Own<UmountFlags>();
  auto* ucmd = app.add_subcommand("umount", "Unmount an aquifer mount (also: fusermount3 -u MOUNTPOINT)");
  ucmd->add_option("mountpoint", u->mountpoint, "Where it is mounted")->required();
  ucmd->add_flag("-z,--lazy", u->lazy, "Detach now; finish when the last open file is closed");
  ucmd->callback([u, &g] {
    if (Status s = mount::Unmount(u->mountpoint, u->lazy); !s.ok()) Fail(g, s);
  });
}

}  // namespace aq::cli
