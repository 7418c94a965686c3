// The `aquifer` command: aquifer <group> <command> [options]. Run
// `aquifer --help` or `aquifer <group> <command> --help` for details.
// Exit status: 0 success, 1 failure or damaged data found, 2 usage error.
#include <cstdio>

#include "cli/cli.h"
#include "client/s3_file_system.h"
#include "common/log.h"

#ifndef AQ_VERSION
#define AQ_VERSION "0.1.0"
#endif

namespace aq::cli {

void Fail(Globals& g, const Status& s) {
  std::fprintf(stderr, "aquifer: %s\n", s.ToString().c_str());
  g.exit_code = 1;
}

void AddOutputFlags(CLI::App* cmd, Globals& g, bool threads) {
  cmd->add_flag("--json", g.json, "Print the result as JSON on stdout");
  cmd->add_flag("--no-progress", g.no_progress,
                "Never draw a progress line (it is off anyway when stdout is not a terminal)");
  if (threads) cmd->add_option("-j,--threads", g.threads, "Worker threads (default: one per core)");
}

}  // namespace aq::cli

int main(int argc, char** argv) {
  aq::cli::Globals g;
  // Local paths, and aquifer://HOST:PORT/BUCKET/KEY paths on a storage node.
  // Keys for aquifer:// are looked up at the first request, after the flags
  // below are parsed (client/credentials.h: flags, environment, files).
  g.fs = aq::client::NewRoutingFileSystem(aq::io::NewPosixFileSystem(), aq::client::NewStoreFileSystem([&g] {
                                            return aq::client::FindCredentials(g.credentials);
                                          }));
  g.argv.assign(argv, argv + argc);
  CLI::App app{"aquifer: keep GPU training fed from scale-out storage, and prove it with measurements."};
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option("--log-level", g.log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.set_version_flag("--version", std::string("aquifer ") + AQ_VERSION);
  app.add_option("--credentials", g.credentials.file,
                 "For aquifer:// paths: a credentials file ('ACCESS_KEY_ID SECRET' lines, the first used); "
                 "else --profile, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AQUIFER_CREDENTIALS, ~/.aws/credentials");
  app.add_option("--profile", g.credentials.profile, "For aquifer:// paths: a profile of ~/.aws/credentials");
  app.add_option_function<std::string>(
      "--ca",
      [](const std::string& file) {
        ::setenv("AQUIFER_CA", file.c_str(), 1);  // read at the first TLS request (and by a mount's children)
      },
      "For aquifers:// (TLS) paths and https:// addresses: the CA bundle (PEM) that signed the nodes' certificates; "
      "else AQUIFER_CA, AWS_CA_BUNDLE, the system's CAs");
  aq::cli::RegisterDatasetCommands(app, g);
  aq::cli::RegisterBenchCommands(app, g);
  aq::cli::RegisterServeCommands(app, g);
  aq::cli::RegisterClusterCommands(app, g);
  aq::cli::RegisterMountCommands(app, g);
  aq::cli::RegisterTierCommands(app, g);
  aq::cli::RegisterKeyCommands(app, g);
  app.parse_complete_callback([&g] { aq::log::Init(g.log_level); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return g.exit_code;
}
