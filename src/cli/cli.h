// Shared pieces of the `aquifer` command line: global flags every command
// sees, and how a command reports its outcome. Commands are thin: parse
// flags into a library options struct, call the library, print the report.
#pragma once

#include <sys/types.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/credentials.h"
#include "common/status.h"
#include "io/file_system.h"
#include "monitor/sampler.h"
#include "s3/node_stats_doc.h"
#include "store/meta_store.h"

namespace aq::cli {

struct Globals {
  bool json = false;         // print results as JSON on stdout
  bool no_progress = false;  // never draw progress
  size_t threads = 0;        // 0 = one per core
  std::string log_level = "info";
  int exit_code = 0;                      // set by commands
  std::vector<std::string> argv;          // the command line as typed, for results
  client::CredentialOptions credentials;  // --credentials / --profile, for aquifer:// paths
  std::unique_ptr<io::FileSystem> fs;

  // Storage for a command's options: CLI11 binds flags to it at
  // registration and the command's callback reads it after parsing.
  template <typename T>
  T* Own() {
    auto p = std::make_shared<T>();
    owned_.push_back(p);
    return p.get();
  }

 private:
  std::vector<std::shared_ptr<void>> owned_;
};

// Flags every result-producing command shares: --out DIR and the monitor's
// --interval / --prometheus.
struct ResultFlags {
  std::string out;
  double interval = 1.0;
  int prometheus = -1;
};
void AddResultFlags(CLI::App* cmd, ResultFlags& f, bool monitor);

// Wraps a command's config and summary in the common result format, writes
// it under --out, and prints it as JSON (--json) or through `print`.
void EmitResult(Globals& g, const ResultFlags& f, const std::string& command, const std::vector<std::string>& roots,
                nlohmann::json config, nlohmann::json summary, const monitor::Series* series,
                const std::function<void(const nlohmann::json& result)>& print);

// A child process whose stdout is on a pipe (stderr stays the terminal's).
// Spawn looks a bare program name up on PATH and adds extra_env
// ("NAME=value", replacing any NAME inherited); `shown` names it in errors
// (default: the command line). Collect reads the output to the end and
// waits: an error unless the child exited 0.
struct Child {
  pid_t pid = -1;
  int out = -1;
  std::string shown;
};
Result<Child> Spawn(std::vector<std::string> argv, const std::vector<std::string>& extra_env = {},
                    std::string shown = "");
Result<std::string> Collect(Child child);

// A node's /stats from its metrics address (HOST:PORT or a URL): as sent,
// and read into the document's struct (s3/node_stats_doc.h).
Result<nlohmann::json> FetchStatsJson(const std::string& node);
Result<s3::NodeStatsDoc> FetchStats(const std::string& node);

// Prints a failed Status to stderr as "aquifer: <message>" and sets exit 1.
void Fail(Globals& g, const Status& s);

// Adds --json, --no-progress and --threads to a command.
void AddOutputFlags(CLI::App* cmd, Globals& g, bool threads = true);

void RegisterDatasetCommands(CLI::App& app, Globals& g);
void RegisterBenchCommands(CLI::App& app, Globals& g);
void RegisterServeCommands(CLI::App& app, Globals& g);
void RegisterClusterCommands(CLI::App& app, Globals& g);
void RegisterMountCommands(CLI::App& app, Globals& g);
void RegisterTierCommands(CLI::App& app, Globals& g);
void RegisterKeyCommands(CLI::App& app, Globals& g);
// bench storage / train / sweep under the bench group; size, model, report.
void RegisterMeasureCommands(CLI::App& app, CLI::App& bench_group, Globals& g);
// bench checkpoint (checkpoint_commands.cc).
void RegisterCheckpointCommand(CLI::App& group, Globals& g);

}  // namespace aq::cli
