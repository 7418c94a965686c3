// aquifer serve (a storage node), cp / ls / rm (files through aquifer://),
// stats (a node's counters) and stat-file (where an object's blocks live).
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "cli/cli.h"
#include "cluster/etcd_client.h"
#include "cluster/etcd_meta_store.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/progress.h"
#include "common/service_notify.h"
#include "common/units.h"
#include "http/client.h"
#include "http/tls.h"
#include "node/examine.h"
#include "node/node.h"
#include "s3/auth.h"
#include "s3/endpoint.h"
#include "server/s3_server.h"
#include "store/block_store.h"

namespace aq::cli {
namespace {

struct ServeFlags {
  node::NodeOptions o;
  std::string listen = "127.0.0.1:9000", metrics, credentials, cache_policy = "tinylfu";
  std::string tls_cert, tls_key, tls_ca;
  std::string block_size = "4MiB", cache_size = "1GiB", prefetch_memory = "256MiB", stage_memory = "512MiB",
              same_host_memory = "1GiB", l3_size;
  std::string upload_expiry = "7d", lifecycle_day = "1d", scrub_interval = "1d";
  std::vector<std::string> pools;
  double net_limit_mb = 0, repair_rate_mb = 200, tier_rate_mb = 100, scrub_rate_mb = 50;
};

// The flags as the node's options; a malformed value names its flag. Long by
// design: one assignment or parse per flag, in the order --help lists them.
Result<node::NodeOptions> NodeOptionsFrom(const ServeFlags& f) {
  node::NodeOptions o = f.o;
  auto flag = [](const char* name) { return [name](const Status& s) { return s.WithContext(name); }; };
  auto listen = s3::ParseHostPort(f.listen);
  if (!listen.ok()) return flag("--listen")(listen.status());
  if (f.tls_cert.empty() != f.tls_key.empty()) {
    return InvalidArgument("HTTPS needs both --tls-cert FILE and --tls-key FILE");
  }
  if (!f.tls_cert.empty()) {
    auto tls = http::TlsServer::Load(f.tls_cert, f.tls_key);
    if (!tls.ok()) return flag("--tls-cert/--tls-key")(tls.status());
    o.tls = *tls;
    // The CA other nodes' certificates are checked against (a cluster).
    o.tls_ca = f.tls_ca;
    if (o.tls_ca.empty()) o.tls_ca = http::DefaultCaBundle();
  }
  o.host = listen->host;
  o.port = listen->port;
  if (!f.metrics.empty()) {
    auto m = s3::ParseHostPort(f.metrics);
    if (!m.ok()) return flag("--metrics")(m.status());
    o.metrics_host = m->host;
    o.metrics_port = m->port;
  }
  if (!f.credentials.empty()) {
    bool created = false;
    auto c = s3::LoadOrCreateCredentials(f.credentials, &created);
    if (!c.ok()) return flag("--credentials")(c.status());
    o.credentials = std::move(*c);
    if (created) {
      std::fprintf(stderr,
                   "aquifer serve: created credentials file '%s' with a new key (%s); clients read it with "
                   "--credentials %s or AQUIFER_CREDENTIALS=%s\n",
                   f.credentials.c_str(), o.credentials.front().access_key.c_str(), f.credentials.c_str(),
                   f.credentials.c_str());
    }
  }
  if (o.credentials.empty() && !o.anonymous) {
    return InvalidArgument("give --credentials FILE (AWS Signature V4) or --anonymous to accept unsigned requests");
  }
  for (const auto& [text, out, name] : {std::tuple{&f.block_size, &o.block_size, "--block-size"},
                                        std::tuple{&f.cache_size, &o.cache_bytes, "--cache-size"},
                                        std::tuple{&f.prefetch_memory, &o.prefetch_memory, "--prefetch-memory"},
                                        std::tuple{&f.stage_memory, &o.stage_memory, "--stage-memory"},
                                        std::tuple{&f.same_host_memory, &o.same_host_memory, "--same-host-memory"}}) {
    auto v = units::ParseBytes(*text);
    if (!v.ok()) return flag(name)(v.status());
    *out = *v;
  }
  for (const auto& [text, out, name] : {std::tuple{&f.upload_expiry, &o.upload_expiry_s, "--upload-expiry"},
                                        std::tuple{&f.lifecycle_day, &o.lifecycle_day_s, "--lifecycle-day"},
                                        std::tuple{&f.scrub_interval, &o.scrub_interval_s, "--scrub-interval"}}) {
    auto v = units::ParseDuration(*text);
    if (!v.ok()) return flag(name)(v.status());
    *out = *v;
  }
  for (const auto& p : f.pools) {
    auto pool = store::ParsePool(p);
    if (!pool.ok()) return flag("--pool")(pool.status());
    o.pools.push_back(std::move(*pool));
  }
  if (!o.l3_dir.empty() || !f.l3_size.empty()) {
    if (o.l3_dir.empty() || f.l3_size.empty()) return InvalidArgument("--l3 DIR and --l3-size SIZE go together");
    auto v = units::ParseBytes(f.l3_size);
    if (!v.ok()) return flag("--l3-size")(v.status());
    if (*v == 0) return InvalidArgument("--l3-size: must be more than 0");
    o.l3_bytes = *v;
    bool slow = false;
    for (const auto& p : o.pools) slow |= p.media == store::Media::kHdd;
    if (!slow) return InvalidArgument("--l3: no pool has media=hdd (the L3 cache holds copies of hdd pools' blocks)");
  }
  if (f.cache_policy == "tinylfu" || f.cache_policy == "lru") {
    o.cache_policy = f.cache_policy == "lru" ? store::CachePolicy::kLru : store::CachePolicy::kTinyLfu;
  } else {
    return InvalidArgument(fmt::format("--cache-policy {}: expected tinylfu or lru", f.cache_policy));
  }
  if (f.net_limit_mb < 0) return InvalidArgument("--net-limit must be >= 0 (MB/s; 0 = unlimited)");
  o.send_bytes_per_second = f.net_limit_mb * 1e6;
  o.repair_bytes_per_second = f.repair_rate_mb * 1e6;
  if (f.scrub_rate_mb < 0) return InvalidArgument("--scrub-rate must be >= 0 (MB/s; 0 = no scrubbing)");
  if (o.scrub_interval_s <= 0) return InvalidArgument("--scrub-interval must be more than 0");
  o.scrub_bytes_per_second = f.scrub_rate_mb * 1e6;
  o.tier_bytes_per_second = f.tier_rate_mb * 1e6;
  return o;
}

Status Serve(const ServeFlags& f) {
  node::NodeOptions o = AQ_TRY(NodeOptionsFrom(f));
  // Every file the node creates (blocks, metadata, keys) is its own: 0600.
  ::umask(077);
  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto tls = o.tls;
  auto n = AQ_TRY(node::Node::Start(std::move(o)));
  std::fputs(n->Describe().c_str(), stdout);
  if (tls) std::printf("  tls: %s (SIGHUP reloads it)\n", tls->Describe().c_str());
  std::fflush(stdout);
  if (tls && !tls->DateWarning().empty()) log::warn("{}", tls->DateWarning());
  // Under systemd (Type=notify): ready once the ports answer.
  const std::string serving = fmt::format("STATUS=serving on {}", n->address());
  auto notify = [](const std::string& state) {
    if (Status s = NotifyServiceManager(state); !s.ok())
      log::warn("service manager not told '{}': {}", state, s.ToString());
  };
  notify("READY=1\n" + serving);
  int sig = 0;
  for (;;) {
    sigwait(&set, &sig);
    if (sig != SIGHUP) break;
    notify(ReloadingMessage());
    // A renewed certificate: new connections get it, open ones keep theirs.
    if (!tls) {
      log::info("SIGHUP: no TLS certificate to reload (no --tls-cert)");
    } else if (Status s = tls->Reload(); s.ok()) {
      log::info("SIGHUP: TLS certificate reloaded: {}", tls->Describe());
      if (!tls->DateWarning().empty()) log::warn("{}", tls->DateWarning());
    } else {
      log::error("SIGHUP: the TLS certificate was not reloaded, the current one stays: {}", s.ToString());
    }
    // The credentials file read again: a key added works at once, a key
    // removed is refused from now on. A file that does not load changes
    // nothing.
    if (!f.credentials.empty()) {
      if (auto keys = s3::LoadCredentials(f.credentials); !keys.ok()) {
        log::error("SIGHUP: the credentials file was not reloaded, the current keys stay: {}",
                   keys.status().ToString());
      } else {
        log::info("SIGHUP: credentials reloaded: {} key(s) from {}", keys->size(), f.credentials);
        n->s3().SetAdminKeys(std::move(*keys));
      }
    }
    notify("READY=1\n" + serving);
  }
  notify("STOPPING=1\nSTATUS=stopping");
  n->Stop();
  std::printf("aquifer serve: stopped (signal %d)\n", sig);
  std::fputs(n->Summary().c_str(), stdout);
  return Status::Ok();
}

struct CopyFlags {
  std::vector<std::string> paths;
  bool recursive = false;
  int jobs = 8;
};

// Copies one file through this process, streaming through `buf` (from a
// node, each piece arrives as parallel ranged GETs; to a node, a large
// file's parts leave as they fill).
Status CopyFile(io::FileSystem& fs, const std::string& from, const std::string& to, std::string& buf, uint64_t* bytes) {
  auto in = AQ_TRY(fs.OpenRead(from, io::AccessHint::kSequential));
  auto out = AQ_TRY(fs.OpenWrite(to));
  for (uint64_t off = 0; off < in->size();) {
    size_t n = AQ_TRY(in->ReadAt(off, buf.size(), buf.data()));
    if (n == 0) break;
    AQ_TRY(out->Append(std::string_view(buf.data(), n)));
    off += n;
    *bytes += n;
  }
  AQ_TRY(out->Sync());
  return out->Close();
}

// What a copy did: files and bytes copied; keys no file name can stand for.
struct CopyCount {
  std::atomic<uint64_t> files = 0, bytes = 0;
  std::vector<std::string> skipped;
  Progress* progress = nullptr;  // files and bytes as they are copied (a terminal's progress line)
};

// What a recursive copy will do, found by walking the source first: the
// files to copy and the empty directories to keep.
struct CopyPlan {
  std::vector<std::pair<std::string, std::string>> files, empty_dirs;
  std::vector<std::string> dirs;  // every destination directory (local destinations create them)
};

Status PlanCopy(io::FileSystem& fs, const std::string& from, const std::string& to, CopyPlan& plan,
                std::vector<std::string>& skipped) {
  plan.dirs.push_back(to);
  auto entries = AQ_TRY(fs.ListWithSkipped(from, &skipped));
  if (entries.empty()) plan.empty_dirs.emplace_back(from, to);
  for (const auto& e : entries) {
    const std::string f = io::JoinPath(from, e.name), t = io::JoinPath(to, e.name);
    if (e.is_dir) {
      AQ_TRY(PlanCopy(fs, f, t, plan, skipped));
    } else {
      plan.files.emplace_back(f, t);
    }
  }
  return Status::Ok();
}

// A directory with nothing in it: a "name/" marker object in the store (as
// the mount's mkdir makes), a directory on a local disk.
Status KeepEmptyDir(io::FileSystem& fs, const std::string& to) {
  if (!s3::IsStoreUrl(to)) return fs.MakeDirs(to);
  auto w = AQ_TRY(fs.OpenWrite(to + "/"));
  return w->Close();
}

// cp: one file, or (-r) a tree whose files are copied `jobs` at a time. The
// first failure stops the copy (files in flight finish) and is returned.
Status CopyTree(io::FileSystem& fs, const std::string& from, const std::string& to, bool recursive, int jobs,
                CopyCount& n) {
  auto st = AQ_TRY(fs.Stat(from));
  std::string buf;
  if (!st.is_dir) {
    AQ_TRY(fs.MakeDirs(std::string(io::DirName(to))));  // the destination's directory, or bucket
    buf.resize(std::clamp<uint64_t>(st.size, 1, 16 << 20));
    uint64_t bytes = 0;
    AQ_TRY(CopyFile(fs, from, to, buf, &bytes));
    n.files = 1;
    n.bytes = bytes;
    if (n.progress != nullptr) n.progress->Add(1, bytes);
    return Status::Ok();
  }
  if (!recursive) return InvalidArgument(fmt::format("'{}' is a directory (use -r)", from));
  CopyPlan plan;
  AQ_TRY(PlanCopy(fs, from, to, plan, n.skipped));
  if (s3::IsStoreUrl(to)) {
    AQ_TRY(fs.MakeDirs(to));  // the bucket, once; prefixes need no creating
  } else {
    for (const auto& d : plan.dirs) AQ_TRY(fs.MakeDirs(d));
  }
  for (const auto& [f, t] : plan.empty_dirs) AQ_TRY(KeepEmptyDir(fs, t));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  Mutex mu;
  Status first;
  auto worker = [&] {
    std::string piece(4 << 20, '\0');
    for (size_t i; !failed && (i = next.fetch_add(1)) < plan.files.size();) {
      const auto& [f, t] = plan.files[i];
      uint64_t bytes = 0;
      Status s = CopyFile(fs, f, t, piece, &bytes);
      if (!s.ok()) {
        MutexLock lock(mu);
        if (first.ok()) first = s;
        failed = true;
        return;
      }
      n.files += 1;
      n.bytes += bytes;
      if (n.progress != nullptr) n.progress->Add(1, bytes);
    }
  };
  std::vector<std::thread> threads;
  const size_t count = std::min<size_t>(std::max(jobs, 1), std::max<size_t>(plan.files.size(), 1));
  for (size_t i = 1; i < count; ++i) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  MutexLock lock(mu);
  return first;
}

// Keys a copy could not name are an error, after everything else is copied.
Status Skipped(const std::vector<std::string>& skipped, const char* verb) {
  if (skipped.empty()) return Status::Ok();
  for (const auto& s : skipped) {
    std::fprintf(stderr, "%s: skipped %s%s: an empty, '.' or '..' path segment cannot be a file name\n", verb,
                 s.c_str(), s.back() == '/' ? " (and every key below it)" : "");
  }
  return InvalidArgument(fmt::format("{} key(s) or prefix(es) not {} (listed above; first: {})", skipped.size(),
                                     std::string(verb) == "cp" ? "copied" : "removed", skipped.front()));
}

}  // namespace

void RegisterFileCommands(CLI::App& app, Globals& g) {
  auto* cp = g.Own<CopyFlags>();
  auto* c = app.add_subcommand("cp", "Copy files between local paths and aquifer://HOST:PORT/BUCKET/KEY (either way)");
  c->add_option("paths", cp->paths, "SOURCE DESTINATION")->required()->expected(2);
  c->add_flag("-r,--recursive", cp->recursive,
              "Copy directories (prefixes) and everything below them; empty ones are kept (in the store as "
              "'name/' markers)");
  c->add_option("-j,--jobs", cp->jobs, "Files copied at a time with -r")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  AddOutputFlags(c, g, false);
  c->callback([cp, &g] {
    CopyCount n;
    Progress progress({.label = "cp", .enabled = cp->recursive && !g.no_progress && !g.json});
    n.progress = &progress;
    Status s = CopyTree(*g.fs, cp->paths[0], cp->paths[1], cp->recursive, cp->jobs, n);
    progress.Finish();
    if (!s.ok()) return Fail(g, s);
    if (g.json) {
      std::printf("{\"files\": %llu, \"bytes\": %llu, \"skipped\": %zu}\n",
                  static_cast<unsigned long long>(n.files.load()), static_cast<unsigned long long>(n.bytes.load()),
                  n.skipped.size());
    } else {
      std::printf("copied %llu file(s), %s\n", static_cast<unsigned long long>(n.files.load()),
                  units::Bytes(static_cast<double>(n.bytes.load())).c_str());
    }
    if (Status k = Skipped(n.skipped, "cp"); !k.ok()) return Fail(g, k);
  });
  auto* ls = g.Own<std::string>();
  auto* l = app.add_subcommand("ls", "List a directory or prefix (local or aquifer://)");
  l->add_option("path", *ls, "Directory, bucket or prefix")->required();
  AddOutputFlags(l, g, false);
  l->callback([ls, &g] {
    auto list = g.fs->List(*ls);
    if (!list.ok()) return Fail(g, list.status());
    for (const auto& e : *list) {
      if (e.is_dir) {
        std::printf("%12s  %s/\n", "DIR", e.name.c_str());
      } else {
        std::printf("%12llu  %s\n", static_cast<unsigned long long>(e.size), e.name.c_str());
      }
    }
  });
  auto* rm = g.Own<CopyFlags>();
  auto* r = app.add_subcommand("rm", "Remove a file or object (with -r, everything below a prefix)");
  r->add_option("paths", rm->paths, "Paths to remove")->required();
  r->add_flag("-r,--recursive", rm->recursive, "Remove directories (prefixes) and everything below them");
  AddOutputFlags(r, g, false);
  r->callback([rm, &g] {
    std::vector<std::string> skipped;
    Progress progress({.label = "rm", .item_name = "removed", .enabled = rm->recursive && !g.no_progress && !g.json});
    std::function<Status(const std::string&)> remove = [&](const std::string& p) -> Status {
      auto st = AQ_TRY(g.fs->Stat(p));
      if (st.is_dir) {
        if (!rm->recursive) return InvalidArgument(fmt::format("'{}' is a directory (use -r)", p));
        for (const auto& e : AQ_TRY(g.fs->ListWithSkipped(p, &skipped))) AQ_TRY(remove(io::JoinPath(p, e.name)));
        if (!s3::IsStoreUrl(p)) return g.fs->Remove(p);
        // A prefix needs no removing, but its marker object ("dir/", what a
        // mkdir through the mount makes) does, or the bucket stays non-empty.
        std::string dir = p;
        while (!dir.empty() && dir.back() == '/') dir.pop_back();
        auto parsed = s3::ParseStoreUrl(dir);
        if (parsed.ok() && !parsed->key.empty()) return g.fs->Remove(dir + "/");
        return Status::Ok();
      }
      AQ_TRY(g.fs->Remove(p));
      progress.Add(1, 0);
      return Status::Ok();
    };
    for (const auto& p : rm->paths) {
      if (Status s = remove(p); !s.ok()) {
        progress.Finish();
        return Fail(g, s);
      }
    }
    progress.Finish();
    if (Status k = Skipped(skipped, "rm"); !k.ok()) return Fail(g, k);
  });
}

void RegisterBucketCommands(CLI::App& app, Globals& g) {
  auto* mb_path = g.Own<std::string>();
  auto* mb = app.add_subcommand("mb", "Make a bucket: aquifer mb aquifer://HOST:PORT/BUCKET");
  mb->add_option("bucket", *mb_path, "aquifer://HOST:PORT/BUCKET")->required();
  mb->callback([mb_path, &g] {
    auto p = s3::ParseStoreUrl(*mb_path);
    if (!p.ok()) return Fail(g, p.status().WithContext("mb"));
    if (!p->key.empty()) {
      return Fail(g, InvalidArgument(fmt::format("mb {}: a bucket is named by aquifer://HOST:PORT/BUCKET alone; "
                                                 "prefixes need no making",
                                                 *mb_path)));
    }
    if (g.fs->Stat(*mb_path).ok()) {
      return Fail(g, AlreadyExists(Subject::kBucket, fmt::format("mb {}: the bucket exists", *mb_path)));
    }
    if (Status s = g.fs->MakeDirs(*mb_path); !s.ok()) return Fail(g, s.WithContext("mb"));
    std::printf("make_bucket: %s\n", p->bucket.c_str());
  });
  struct RbFlags {
    std::string path;
    bool force = false;
  };
  auto* rb_flags = g.Own<RbFlags>();
  auto* rb = app.add_subcommand("rb", "Remove a bucket (with --force, every object in it first)");
  rb->add_option("bucket", rb_flags->path, "aquifer://HOST:PORT/BUCKET")->required();
  rb->add_flag("--force", rb_flags->force, "Remove every object of the bucket first");
  rb->callback([rb_flags, &g] {
    const std::string& path = rb_flags->path;
    auto p = s3::ParseStoreUrl(path);
    if (!p.ok()) return Fail(g, p.status().WithContext("rb"));
    if (!p->key.empty()) return Fail(g, InvalidArgument(fmt::format("rb {}: name a bucket, not a key", path)));
    if (rb_flags->force) {
      uint64_t removed = 0;
      std::vector<std::string> skipped;
      std::function<Status(const std::string&)> remove = [&](const std::string& dir) -> Status {
        for (const auto& e : AQ_TRY(g.fs->ListWithSkipped(dir, &skipped))) {
          const std::string child = io::JoinPath(dir, e.name);
          if (e.is_dir) {
            AQ_TRY(remove(child));
          } else {
            AQ_TRY(g.fs->Remove(child));
            ++removed;
          }
        }
        return Status::Ok();
      };
      if (Status s = remove(path); !s.ok()) return Fail(g, s.WithContext("rb --force"));
      if (removed > 0) std::printf("removed %llu object(s)\n", static_cast<unsigned long long>(removed));
      if (!skipped.empty()) {
        return Fail(g, NotEmpty(fmt::format("rb {}: {} key(s) that are no file names (first: {}) were left; remove "
                                            "them with an S3 client",
                                            path, skipped.size(), skipped.front())));
      }
    }
    Status s = g.fs->Remove(path);
    if (s.code() == StatusCode::kNotEmpty) {
      return Fail(g,
                  NotEmpty(fmt::format("rb {}: the bucket is not empty (remove its objects, or use --force)", path)));
    }
    if (!s.ok()) return Fail(g, s.WithContext("rb"));
    std::printf("remove_bucket: %s\n", p->bucket.c_str());
  });
}

struct StatsFlags {
  std::string node;
  double watch = 0;
};

// "HOST:PORT", "http://HOST:PORT" or "https://HOST:PORT" (TLS, verified
// with --ca, AQUIFER_CA, AWS_CA_BUNDLE or the system's CAs): the address
// and the client options to reach it.
Result<std::pair<s3::HostPort, http::ClientOptions>> HttpTarget(std::string text) {
  http::ClientOptions co;
  if (text.rfind("https://", 0) == 0) {
    text.erase(0, 8);
    co.tls = AQ_TRY(http::TlsClient::Create(http::DefaultCaBundle()));
  } else if (text.rfind("http://", 0) == 0) {
    text.erase(0, 7);
  }
  if (!text.empty() && text.back() == '/') text.pop_back();
  return std::make_pair(AQ_TRY(s3::ParseHostPort(text, false)), co);
}

Result<nlohmann::json> FetchStatsJson(const std::string& node) {
  auto target = HttpTarget(node);
  if (!target.ok()) return target.status().WithContext("stats");
  const s3::HostPort* at = &target->first;
  static std::map<std::string, std::unique_ptr<http::Pool>> pools;  // one per target (a --watch reuses it)
  auto& slot = pools[node];
  if (!slot) slot = std::make_unique<http::Pool>(target->second);
  http::Pool& pool = *slot;
  http::ClientRequest r;
  r.target = "/stats";
  auto res = pool.Send(at->ToString(), r);
  if (!res.ok()) return res.status().WithContext(fmt::format("stats from {}", node));
  if (res->status != 200) return IoError(fmt::format("stats from {}: HTTP {}", node, res->status));
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return IoError(fmt::format("stats from {}: not JSON", node));
  return j;
}

Result<s3::NodeStatsDoc> FetchStats(const std::string& node) {
  auto j = AQ_TRY(FetchStatsJson(node));
  auto doc = s3::ParseNodeStatsDoc(j);
  if (!doc.ok()) return doc.status().WithContext(fmt::format("stats from {}", node));
  return doc;
}

// Long by design: one printf per line of the report, in its order.
void PrintStats(const std::string& node, const s3::NodeStatsDoc& now, const s3::NodeStatsDoc* before, double dt) {
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  std::printf("node %s, up %s\n", node.c_str(), units::Duration(now.uptime_seconds).c_str());
  auto machine = [&now](const char* k) {
    auto it = now.machine.find(k);
    return it == now.machine.end() ? 0.0 : it->second;
  };
  std::printf("  CPU %.0f%% user %.0f%% system %.0f%% iowait", machine("cpu.user"), machine("cpu.system"),
              machine("cpu.iowait"));
  const auto io = now.MachineThroughput();
  std::printf("   NetIn %.1f MB/s  NetOut %.1f MB/s   DiskIn %.1f MB/s  DiskOut %.1f MB/s\n", io.net_in, io.net_out,
              io.disk_in, io.disk_out);
  std::printf("  client errors (4xx) %.0f (denied to their key %.0f), server errors (5xx) %.0f\n", d(now.client_errors),
              d(now.denied), d(now.server_errors));
  std::printf("  %-7s %10s %9s %8s %8s %10s %10s %10s %10s\n", "op", "requests", before ? "per s" : "", "4xx", "5xx",
              "MB in", "MB out", "p50 ms", "p99 ms");
  for (const auto& [name, o] : now.ops) {
    double rate = 0;
    if (before && dt > 0) {
      if (auto b = before->ops.find(name); b != before->ops.end()) rate = (d(o.requests) - d(b->second.requests)) / dt;
    }
    std::printf("  %-7s %10.0f %9s %8.0f %8.0f %10.1f %10.1f %10.2f %10.2f\n", name.c_str(), d(o.requests),
                before ? fmt::format("{:.1f}", rate).c_str() : "", d(o.client_errors), d(o.server_errors),
                d(o.bytes_in) / 1e6, d(o.bytes_out) / 1e6, o.latency.p50_us / 1e3, o.latency.p99_us / 1e3);
  }
  if (const auto& c = now.cache) {
    std::printf("  cache   %.1f%% hits (%s), %s of %s, %.0f evicted, %.0f not admitted\n", 100 * c->hit_ratio,
                c->policy.c_str(), units::Bytes(d(c->bytes)).c_str(), units::Bytes(d(c->capacity_bytes)).c_str(),
                d(c->evicted), d(c->rejected));
  }
  if (const auto& c = now.l3) {
    std::printf(
        "  l3      %.1f%% of RAM misses (%s), %s of %s, %.0f admitted, %.0f evicted, %.0f not admitted, "
        "%.0f damaged\n",
        100 * c->hit_ratio, c->path.c_str(), units::Bytes(d(c->bytes)).c_str(),
        units::Bytes(d(c->capacity_bytes)).c_str(), d(c->admitted), d(c->evicted), d(c->rejected), d(c->damaged));
  }
  if (const auto& p = now.prefetch) {
    std::printf(
        "  prefetch %.0f blocks read ahead, %.0f found by readers (%.0f in flight), %.0f unused; "
        "%.0f streams continued, %.0f started; %s held\n",
        d(p->issued), d(p->hits + p->late_hits), d(p->late_hits), d(p->wasted), d(p->continued_streams),
        d(p->new_streams), units::Bytes(d(p->bytes_held)).c_str());
  }
  if (const auto& p = now.staging) {
    std::printf(
        "  staging %.0f blocks planned, %.0f staged, %.0f found by readers (%.0f in flight), %.0f in RAM already, "
        "%.0f expired unread, %.0f skipped; %.0f queued, %s held\n",
        d(p->planned), d(p->staged), d(p->hits + p->late_hits), d(p->late_hits), d(p->resident), d(p->expired),
        d(p->skipped), d(p->queued), units::Bytes(d(p->bytes_held)).c_str());
  }
  if (const auto& p = now.same_host) {
    std::printf(
        "  same-host %.0f opens granted %.0f blocks, %.0f passed as shared memory, %.0f as block files (%.0f "
        "neither by then), %.0f refused; %.0f shared (%s)\n",
        d(p->grants), d(p->granted_blocks), d(p->blocks_sent), d(p->files_sent), d(p->blocks_gone), d(p->refused),
        d(p->shared), units::Bytes(d(p->shared_bytes)).c_str());
  }
  if (const auto& c = now.cluster) {
    const auto& b = c->blocks;
    const auto& r = c->repair;
    std::string policy = c->policy.empty() ? fmt::format("replicas:{}", c->replicas) : c->policy;
    for (const auto& [bucket, p] : c->bucket_policies) policy += fmt::format(", bucket {} {}", bucket, p);
    std::printf(
        "  cluster node %s, policy %s, %.0f nodes known; reads %.0f local, %.0f remote, %.0f failovers, "
        "%.0f repaired on read\n",
        c->node.c_str(), policy.c_str(), d(c->nodes_known), d(b.local_reads), d(b.remote_reads), d(b.failovers),
        d(b.repaired_on_read));
    std::printf("  repair  %s: %.0f blocks, %.0f under-protected, %.0f misplaced; copied %.0f (%s), dropped %.0f\n",
                r.fully_protected ? "fully protected" : "working", d(r.blocks), d(r.under_protected), d(r.misplaced),
                d(r.copied), units::Bytes(d(r.bytes_copied)).c_str(), d(r.dropped));
    if (r.tier_misplaced > 0 || r.tiered > 0) {
      std::printf("  tiering %.0f blocks to move (%.0f lack nodes with their pool); moved %.0f (%s)\n",
                  d(r.tier_misplaced), d(r.tier_blocked), d(r.tiered), units::Bytes(d(r.bytes_tiered)).c_str());
    }
  }
  if (const auto& c = now.connections) {
    std::printf(
        "  conns   %.0f open, %.0f accepted, %.0f requests; cut or refused: %.0f slow heads (408), %.0f bad heads, "
        "%.0f over the connection limit, %.0f TLS handshakes failed\n",
        d(c->open), d(c->accepted), d(c->requests), d(c->header_timeouts), d(c->bad_heads), d(c->refused_overload),
        d(c->tls_failures));
  }
  if (const auto& u = now.uploads) {
    std::printf(
        "  uploads %.0f in progress (%.0f parts, %s; oldest %s), %.0f abandoned ones aborted (%s), %s\n",
        d(u->in_progress), d(u->parts), units::Bytes(d(u->part_bytes)).c_str(),
        units::Duration(u->oldest_age_seconds).c_str(), d(u->expired), units::Bytes(d(u->expired_bytes)).c_str(),
        u->expiry_seconds > 0 ? ("after " + units::Duration(u->expiry_seconds)).c_str() : "only by lifecycle rules");
  }
  if (const auto& sc = now.scrub; sc && sc->enabled) {
    std::printf(
        "  scrub   %.0f passes (last %s), %.0f pieces verified (%s); %.0f corrupt, %.0f missing, %.0f rebuilt, "
        "%.0f still bad%s\n",
        d(sc->passes), units::Duration(sc->last_pass_seconds).c_str(), d(sc->pieces_verified),
        units::Bytes(d(sc->bytes_verified)).c_str(), d(sc->corrupt), d(sc->missing), d(sc->repaired), d(sc->unrepaired),
        sc->running
            ? fmt::format(" (a pass is at {} of {} pieces)", sc->pieces_done_in_pass, sc->pieces_in_pass).c_str()
            : "");
    for (const auto& o : sc->objects_at_risk) std::printf("          at risk: %s\n", o.c_str());
    for (const auto& q : sc->quarantine) {
      std::printf("          quarantined (damaged, kept for salvage): %s (%s)\n", q.path.c_str(),
                  units::Bytes(d(q.bytes)).c_str());
    }
  }
  for (const auto& p : now.pools) {
    const std::string codec = p.compression.empty() ? "none" : p.compression;
    const double ratio = p.logical_bytes > 0 ? d(p.bytes) / d(p.logical_bytes) : 1.0;
    std::printf("  pool    %-10s %8.0f blocks %12s on disk", p.name.c_str(), d(p.blocks),
                units::Bytes(d(p.bytes)).c_str());
    if (codec != "none" || p.compressed_blocks > 0) {
      // Physical against logical: what compression saves here.
      std::printf(", %s of data (%.2fx), %.0f blocks compressed, policy %s", units::Bytes(d(p.logical_bytes)).c_str(),
                  ratio, d(p.compressed_blocks), codec.c_str());
    }
    if (p.dedup || p.shared_blocks > 0) {
      // Shared blocks: stored once for every object that names them.
      std::printf(", dedup: %.0f shared blocks, %s saved", d(p.shared_blocks),
                  units::Bytes(d(p.dedup_saved_bytes)).c_str());
      if (codec == "none") std::printf(" (%s of data, %.2fx)", units::Bytes(d(p.logical_bytes)).c_str(), ratio);
    }
    std::printf("\n");
  }
}

void RegisterStats(CLI::App& app, Globals& g) {
  auto* f = g.Own<StatsFlags>();
  auto* cmd = app.add_subcommand("stats",
                                 "A node's statistics: requests, latency and bytes by operation, cache, pools, "
                                 "CPU, NetIn/NetOut, DiskIn/DiskOut (from serve --metrics HOST:PORT)");
  cmd->add_option("node", f->node, "The node's metrics address HOST:PORT (https://HOST:PORT for a node serving TLS)")
      ->required();
  cmd->add_option("-w,--watch", f->watch, "Refresh every SECONDS, top-style, with request rates (Ctrl-C stops)");
  AddOutputFlags(cmd, g, false);
  cmd->callback([f, &g] {
    if (g.json) {  // as the node wrote it (a newer node's fields too)
      auto j = FetchStatsJson(f->node);
      if (!j.ok()) return Fail(g, j.status());
      std::cout << j->dump(1) << std::endl;
      return;
    }
    auto first = FetchStats(f->node);
    if (!first.ok()) return Fail(g, first.status());
    if (f->watch <= 0) return PrintStats(f->node, *first, nullptr, 0);
    s3::NodeStatsDoc before = *first;
    while (true) {
      std::this_thread::sleep_for(std::chrono::duration<double>(f->watch));
      auto now = FetchStats(f->node);
      if (!now.ok()) return Fail(g, now.status());
      std::printf("\033[H\033[2J");
      PrintStats(f->node, *now, &before, f->watch);
      std::fflush(stdout);
      before = *now;
    }
  });
}

struct WaitFlags {
  std::string address;
  double timeout_s = 30;
};

// For scripts that start a node (or etcd) in the background: returns once
// something answers HTTP at the address, whatever the status.
void RegisterWait(CLI::App& app, Globals& g) {
  auto* f = g.Own<WaitFlags>();
  auto* cmd = app.add_subcommand(
      "wait", "Wait until a node (or any HTTP server, such as etcd) answers at HOST:PORT; for scripts that start one");
  cmd->add_option("address", f->address, "HOST:PORT, or https://HOST:PORT for a TLS port (verified with --ca)")
      ->required();
  cmd->add_option("-t,--timeout", f->timeout_s, "Seconds to wait at most (exit 1 after)")->capture_default_str();
  cmd->callback([f, &g] {
    auto target = HttpTarget(f->address);
    if (!target.ok()) return Fail(g, target.status().WithContext("wait"));
    const s3::HostPort* at = &target->first;
    http::ClientOptions co = target->second;
    co.connect_timeout_s = 1;
    co.io_timeout_s = 2;
    http::Pool pool(co);
    const double t0 = Clock::Real().Now();
    Status last;
    while (true) {
      http::ClientRequest r;
      auto res = pool.Send(at->ToString(), r);
      const double waited = Clock::Real().Now() - t0;
      if (res.ok()) {
        if (!g.json) std::printf("%s answers (HTTP %d) after %.1f s\n", at->ToString().c_str(), res->status, waited);
        return;
      }
      last = res.status();
      if (waited >= f->timeout_s) {
        return Fail(g, Status(StatusCode::kUnavailable, fmt::format("nothing answers at {} after {:.0f} s: {}",
                                                                    at->ToString(), waited, last.message())));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

struct StatFileFlags {
  std::string data = "aquifer-data";
  std::vector<std::string> pools;
  std::string object;
  bool verify = false;
  std::string meta;  // etcd://... for a cluster's node
};

// What `isi get -D` shows: where an object's blocks live, with their checksums.
Status StatFile(Globals& g, const StatFileFlags& f) {
  const auto x = AQ_TRY(node::ExamineObject(*g.fs, {f.data, f.pools, f.meta, f.object, f.verify}));
  const auto& o = x.object;
  const auto& list = x.blocks;
  if (g.json) {
    std::cout << x.ToJson().dump(1) << std::endl;
  } else {
    std::printf("%s/%s: %s, %zu blocks of %s, version %llu, ETag %s\n", x.bucket.c_str(), x.key.c_str(),
                units::Bytes(static_cast<double>(o.size)).c_str(), o.blocks.size(),
                units::IecBytes(o.block_size).c_str(), static_cast<unsigned long long>(o.version), o.etag.c_str());
    std::printf("  %12s %10s %-32s %-8s %-10s %-16s %-24s %s\n", "offset", "size", "block", "crc32c", "pool", "stored",
                f.meta.empty() ? "" : "replicas", f.verify ? "state" : "");
    for (const auto& b : list) {
      std::string holders;
      for (const auto& n : b["nodes"]) holders += (holders.empty() ? "" : ",") + n.get<std::string>();
      std::printf("  %12llu %10llu %-32s %-8s %-10s %-16s %-24s %s\n", b["offset"].get<unsigned long long>(),
                  b["size"].get<unsigned long long>(), b["id"].get<std::string>().c_str(),
                  b["crc32c"].get<std::string>().c_str(), b["pool"].get<std::string>().c_str(),
                  b.value("stored", "").c_str(), holders.c_str(),
                  f.verify ? b["state"].get<std::string>().c_str() : "");
    }
    const auto& c = o.attrs.checksum;
    if (!c.empty()) {
      std::printf("  checksum %s %s (%s)%s%s\n", c.algorithm.c_str(), c.value.c_str(), c.type.c_str(),
                  f.verify ? ": " : "", f.verify ? x.checksum_state.c_str() : "");
    }
  }
  if (x.damaged > 0) {
    return Status(StatusCode::kCorruption, fmt::format("{}/{}: {} damaged block(s)", x.bucket, x.key, x.damaged));
  }
  if (x.checksum_mismatch) {
    return Status(StatusCode::kCorruption,
                  fmt::format("{}/{}: its blocks read back whole but do not give the object's {} checksum ({})",
                              x.bucket, x.key, o.attrs.checksum.algorithm, x.checksum_state));
  }
  return Status::Ok();
}

void RegisterStatFile(CLI::App& app, Globals& g) {
  auto* f = g.Own<StatFileFlags>();
  auto* cmd = app.add_subcommand(
      "stat-file",
      "Where an object's blocks live on a node: offsets, block ids, checksums, pools, stored forms, files");
  cmd->add_option("object", f->object, "BUCKET/KEY")->required();
  cmd->add_option("--data", f->data, "The node's --data directory")->capture_default_str();
  cmd->add_option("--pool", f->pools, "The node's pools, as given to serve");
  cmd->add_flag("--verify", f->verify,
                "Read every block and check its checksum, and the object's S3 checksum when every block is here "
                "(exit 1 on damage)");
  cmd->add_option("--meta", f->meta,
                  "A cluster's etcd (etcd://HOST:PORT): the layout from there; --data names the node whose replicas "
                  "are verified");
  AddOutputFlags(cmd, g, false);
  cmd->callback([f, &g] {
    if (Status s = StatFile(g, *f); !s.ok()) Fail(g, s);
  });
}

// Long by design: flag declarations of serve, stats, cp/ls/rm, mb/rb and stat-file, each a line.
void RegisterServeCommands(CLI::App& app, Globals& g) {
  RegisterFileCommands(app, g);
  RegisterBucketCommands(app, g);
  RegisterStats(app, g);
  RegisterWait(app, g);
  RegisterStatFile(app, g);
  auto* f = g.Own<ServeFlags>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Run a storage node: one namespace over S3/HTTP, objects as checksummed blocks in pools, metadata in "
      "SQLite under --data");
  cmd->add_option("--data", f->o.data_dir, "Directory for metadata (and the default pool)")->capture_default_str();
  cmd->add_option("--listen", f->listen, "HOST:PORT to serve on (port 0 picks a free one)")->capture_default_str();
  cmd->add_option("--pool", f->pools,
                  "A pool NAME=PATH[,media=ssd|hdd][,direct][,latency=8ms[,spindles=N]][,compress=lz4|zstd[:LEVEL]]"
                  "[,min-saving=PERCENT][,dedup] (repeatable; the first is the default; direct: O_DIRECT reads; "
                  "latency: added per block read, to emulate a slower device; compress: blocks written here are "
                  "stored compressed when that saves min-saving (default 10%) or more, others (JPEGs) plain; dedup: "
                  "equal blocks stored once, a single node only; a tier policy places a bucket in such a pool)");
  cmd->add_option("--block-size", f->block_size, "Size of the blocks objects are cut into")->capture_default_str();
  cmd->add_option("--credentials", f->credentials,
                  "File of 'ACCESS_KEY_ID SECRET_ACCESS_KEY' lines (SigV4); created with a new key if missing");
  cmd->add_flag("--anonymous", f->o.anonymous, "Accept unsigned requests");
  cmd->add_option(
      "--tls-cert", f->tls_cert,
      "HTTPS: the certificate (PEM, then any intermediates) for the S3 and metrics ports; SIGHUP reloads it");
  cmd->add_option("--tls-key", f->tls_key, "HTTPS: the certificate's private key (PEM, mode 0600)");
  cmd->add_option("--tls-ca", f->tls_ca,
                  "In a TLS cluster: the CA bundle that signed the other nodes' certificates (default: --ca, "
                  "AQUIFER_CA, AWS_CA_BUNDLE, the system's CAs)");
  cmd->add_option("--threads", f->o.threads, "Requests served at once (idle connections hold no thread)")
      ->capture_default_str();
  cmd->add_option("--max-connections", f->o.max_connections, "Open connections at most; more are answered 503 SlowDown")
      ->capture_default_str();
  cmd->add_option("--header-timeout", f->o.header_timeout_s,
                  "Seconds a client has to send a whole request head (slow clients are cut off)")
      ->capture_default_str();
  cmd->add_option("--idle-timeout", f->o.idle_timeout_s, "Seconds a keep-alive connection may idle")
      ->capture_default_str();
  cmd->add_option("--io-timeout", f->o.io_timeout_s,
                  "Seconds each read of a request body or send of a response may wait")
      ->capture_default_str();
  cmd->add_option("--reclaim-delay", f->o.reclaim_delay_s,
                  "Seconds blocks freed by an overwrite or delete outlive it for readers (default 2, 60 in a cluster)");
  cmd->add_option("--upload-expiry", f->upload_expiry,
                  "Abort multipart uploads older than this (s, m, h, d; 0 = only by bucket lifecycle rules)")
      ->capture_default_str();
  cmd->add_option("--lifecycle-day", f->lifecycle_day,
                  "How long a day of a bucket lifecycle rule lasts (shorter only to test rules)")
      ->capture_default_str();
  cmd->add_option("--cache-size", f->cache_size, "RAM block cache (0 = off)")->capture_default_str();
  cmd->add_option("--l3", f->o.l3_dir,
                  "L3 cache: a directory on an SSD holding copies of hdd pools' blocks that RAM does not keep "
                  "(read RAM -> L3 -> pool; survives restarts; never authoritative)");
  cmd->add_option("--l3-size", f->l3_size, "Size of the L3 cache (with --l3)");
  cmd->add_option("--tier-interval", f->o.tier_interval_s,
                  "Seconds between tiering passes that move blocks to their policy's pool (0: only on `aquifer tier "
                  "run`; single node)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--tier-rate", f->tier_rate_mb, "MB/s the tiering mover copies at most")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--atime-granularity", f->o.atime_granularity_s,
                  "Seconds: an object's last read is recorded at most once per this long (tiering policies on "
                  "--not-accessed-for / --accessed-within are exact to it)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option(
      "--meta", f->o.etcd,
      "Metadata store: etcd://HOST:PORT[,HOST:PORT] joins a cluster (default: SQLite under --data, one node)");
  cmd->add_option("--meta-timeout", f->o.etcd_timeout_s,
                  "In a cluster: seconds an etcd request may take (an unanswered commit is then read back)")
      ->capture_default_str();
  cmd->add_option("--replicas", f->o.replicas, "In a cluster: replicas of every block, on distinct nodes")
      ->capture_default_str();
  cmd->add_option("--advertise", f->o.advertise,
                  "In a cluster: HOST:PORT others reach this node at (default: --listen)");
  cmd->add_option("--lease-ttl", f->o.lease_ttl_s, "In a cluster: seconds without a heartbeat before this node is down")
      ->capture_default_str();
  cmd->add_option("--net-limit", f->net_limit_mb,
                  "MB/s this node sends at most (object and block bodies; 0 = unlimited): emulates its network link")
      ->capture_default_str();
  cmd->add_option("--repair-rate", f->repair_rate_mb, "In a cluster: MB/s this node copies for repair and rebalancing")
      ->capture_default_str();
  cmd->add_option("--scrub-rate", f->scrub_rate_mb,
                  "MB/s the scrubber reads back this node's pieces to check their checksums (0 = off)")
      ->capture_default_str();
  cmd->add_option("--scrub-interval", f->scrub_interval,
                  "From the start of one scrub pass to the next (s, m, h, d); a bad piece is rebuilt from good ones")
      ->capture_default_str();
  cmd->add_option("--repair-interval", f->o.repair_interval_s, "In a cluster: seconds between repair passes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--node-id", f->o.node_id,
                  "In a cluster: this node's id (default: generated once, kept in DIR/node-id)");
  cmd->add_option("--prefetch-window", f->o.prefetch_window,
                  "Stream prefetch: most blocks read ahead per sequential stream (0 = off)")
      ->capture_default_str();
  cmd->add_option("--prefetch-memory", f->prefetch_memory, "Stream prefetch: memory for read-ahead blocks, all streams")
      ->capture_default_str();
  cmd->add_option("--stage-memory", f->stage_memory,
                  "Plan staging: memory for blocks read ahead of readers' plans (the loader's and the mount's "
                  "file order), all readers together (0 = off)")
      ->capture_default_str();
  cmd->add_option("--stage-threads", f->o.stage_threads,
                  "Plan staging: blocks read at once (an hdd pool's spindles, or more)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--same-host-memory", f->same_host_memory,
                  "Same-host reads: memory for sealed copies of RAM-cached blocks that aquifer:// clients on this "
                  "machine read without a socket copy (0 = off)")
      ->capture_default_str();
  cmd->add_option("--cache-policy", f->cache_policy,
                  "tinylfu (keeps a stable set under shuffled epochs: hits = cache/dataset) or lru")
      ->capture_default_str();
  cmd->add_option("--metrics", f->metrics,
                  "HOST:PORT serving /metrics (Prometheus) and /stats (JSON for aquifer stats); port 0 = any");
  cmd->callback([f, &g] {
    Status s = Serve(*f);
    if (!s.ok()) {
      Fail(g, s);
      if (s.code() == StatusCode::kInvalidArgument) g.exit_code = 2;
    }
  });
}

}  // namespace aq::cli
