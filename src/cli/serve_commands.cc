// aquifer serve: an embedded single storage node speaking S3 over HTTP.
#include <fmt/format.h>
#include <signal.h>

#include <cstdio>

#include "cli/cli.h"
#include "common/units.h"
#include "server/s3_server.h"
#include "store/block_store.h"
#include "store/object_store.h"

namespace aq::cli {
namespace {

struct ServeFlags {
  std::string data = "aquifer-data";
  std::string listen = "127.0.0.1:9000";
  std::vector<std::string> pools;
  std::string block_size = "4MiB";
  std::string credentials;
  bool anonymous = false;
  size_t threads = 16;
};

Status Serve(Globals& g, const ServeFlags& f) {
  server::S3ServerOptions so;
  size_t colon = f.listen.rfind(':');
  if (colon == std::string::npos) return InvalidArgument(fmt::format("--listen '{}': expected HOST:PORT", f.listen));
  so.host = f.listen.substr(0, colon);
  try {
    so.port = std::stoi(f.listen.substr(colon + 1));
  } catch (const std::exception&) {
    return InvalidArgument(fmt::format("--listen '{}': bad port", f.listen));
  }
  if (so.port < 0 || so.port > 65535) return InvalidArgument(fmt::format("--listen '{}': bad port", f.listen));
  so.anonymous = f.anonymous;
  so.threads = f.threads;
  if (!f.credentials.empty()) so.credentials = AQ_TRY(server::LoadCredentials(f.credentials));
  if (so.credentials.empty() && !so.anonymous) {
    return InvalidArgument("give --credentials FILE (AWS Signature V4) or --anonymous to accept unsigned requests");
  }
  store::ObjectStoreOptions oo;
  oo.block_size = AQ_TRY(units::ParseBytes(f.block_size));
  if (oo.block_size < 4096 || oo.block_size > (1ull << 30)) {
    return InvalidArgument("--block-size must be between 4KiB and 1GiB");
  }
  std::vector<store::PoolConfig> pools;
  for (const auto& p : f.pools) pools.push_back(AQ_TRY(store::ParsePool(p)));
  if (pools.empty()) pools.push_back({"default", io::JoinPath(f.data, "pool-default"), store::Media::kSsd});

  AQ_TRY(g.fs->MakeDirs(f.data));
  auto meta = AQ_TRY(store::OpenSqliteMetaStore(io::JoinPath(f.data, "meta.db")));
  auto blocks = AQ_TRY(store::BlockStore::Open(*g.fs, pools));
  // Before serving: blocks no object refers to are leftovers of interrupted writes.
  auto gc = AQ_TRY(blocks->CollectGarbage(AQ_TRY(meta->ReferencedBlocks())));
  store::ObjectStore objects(*meta, *blocks, oo);

  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto s3 = AQ_TRY(server::S3Server::Start(objects, so));
  std::printf("aquifer serve: S3 on http://%s:%d (data %s, %s blocks)\n", so.host.c_str(), s3->port(), f.data.c_str(),
              units::IecBytes(oo.block_size).c_str());
  for (const auto& p : blocks->pools()) {
    std::printf("  pool %-10s %s (%s)\n", p.name.c_str(), p.path.c_str(),
                p.media == store::Media::kSsd ? "ssd" : "hdd");
  }
  std::printf("  start-up: %llu blocks, %llu orphans and %llu temporaries removed\n",
              static_cast<unsigned long long>(gc.blocks_seen), static_cast<unsigned long long>(gc.orphans_removed),
              static_cast<unsigned long long>(gc.temporaries_removed));
  std::printf("  auth: %s\n", so.credentials.empty() ? "anonymous (unsigned requests accepted)"
                                                     : fmt::format("Signature V4, {} key(s){}", so.credentials.size(),
                                                                   so.anonymous ? ", anonymous also accepted" : "")
                                                           .c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  std::printf("aquifer serve: stopping (signal %d)\n", sig);
  s3->Stop();
  return Status::Ok();
}

}  // namespace

void RegisterServeCommands(CLI::App& app, Globals& g) {
  auto* f = g.Own<ServeFlags>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Run a storage node: one namespace over S3/HTTP, objects as checksummed blocks in pools, metadata in "
      "SQLite under --data");
  cmd->add_option("--data", f->data, "Directory for metadata (and the default pool)")->capture_default_str();
  cmd->add_option("--listen", f->listen, "HOST:PORT to serve on (port 0 picks a free one)")->capture_default_str();
  cmd->add_option("--pool", f->pools, "A pool NAME=PATH[,media=ssd|hdd] (repeatable; the first is the default)");
  cmd->add_option("--block-size", f->block_size, "Size of the blocks objects are cut into")->capture_default_str();
  cmd->add_option("--credentials", f->credentials, "File of 'ACCESS_KEY_ID SECRET_ACCESS_KEY' lines (SigV4)");
  cmd->add_flag("--anonymous", f->anonymous, "Accept unsigned requests");
  cmd->add_option("--threads", f->threads, "Connections served at once")->capture_default_str();
  cmd->callback([f, &g] {
    Status s = Serve(g, *f);
    if (!s.ok()) {
      Fail(g, s);
      if (s.code() == StatusCode::kInvalidArgument) g.exit_code = 2;
    }
  });
}

}  // namespace aq::cli
