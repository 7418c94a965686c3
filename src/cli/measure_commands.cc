// aquifer bench storage / bench sweep, aquifer size, aquifer model cache,
// aquifer report: the documents' measurement method as commands.
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bench/cache_model.h"
#include "bench/doctor.h"
#include "bench/result.h"
#include "bench/sizing.h"
#include "bench/storage_bench.h"
#include "cli/cli.h"
#include "common/units.h"
#include "dataset/dataset.h"
#include "format/json_text.h"
#include "monitor/page_cache.h"
#include "monitor/prometheus.h"
#include "pipeline/plan.h"
#include "report/report.h"
#include "s3/endpoint.h"

extern char** environ;

namespace aq::cli {

void AddResultFlags(CLI::App* cmd, ResultFlags& f, bool monitor) {
  cmd->add_option("-o,--out", f.out, "Also write the result to DIR as JSON and CSV (for aquifer report)");
  if (monitor) {
    cmd->add_option("--interval", f.interval, "Seconds between monitor samples")->capture_default_str();
    cmd->add_option("--prometheus", f.prometheus,
                    "Serve live metrics for Prometheus on 127.0.0.1:PORT/metrics while running (0 = any port)");
  }
}

void EmitResult(Globals& g, const ResultFlags& f, const std::string& command, const std::vector<std::string>& roots,
                nlohmann::json config, nlohmann::json summary, const monitor::Series* series,
                const std::function<void(const nlohmann::json&)>& print) {
  bench::ResultInfo info{command, g.argv, roots};
  auto result = bench::MakeResult(info, std::move(config), std::move(summary), series);
  if (g.json) {
    std::cout << format::DumpJson(result, 1) << std::endl;
  } else {
    print(result);
    // A figure from the page cache is a memory speed: said here as the
    // report's banner says it, not only in a residency percentage.
    if (command.rfind("bench ", 0) == 0) {
      const report::DataPath d = report::DescribeDataPath(result);
      if (d.memory_speed) std::printf("  WARNING    %s\n", d.note.c_str());
    }
  }
  if (!f.out.empty()) {
    auto path = bench::WriteResult(f.out, result);
    if (!path.ok()) return Fail(g, path.status());
    if (!g.json) std::printf("  result     %s\n", path->c_str());
  }
}

namespace {

Status UsageError(Globals& g, const Status& s) {
  Fail(g, s);
  g.exit_code = 2;
  return s;
}

}  // namespace

Result<Child> Spawn(std::vector<std::string> argv_in, const std::vector<std::string>& extra_env, std::string shown) {
  std::vector<char*> argv;
  for (auto& a : argv_in) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string v(*e);
    bool replaced = false;
    for (const auto& x : extra_env) replaced |= v.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0;
    if (!replaced) env_store.push_back(std::move(v));
  }
  env_store.insert(env_store.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return ErrnoStatus(errno, "create a pipe for", "a child run");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  Child c;
  // posix_spawnp: a bare program name is looked up on PATH.
  int rc = posix_spawnp(&c.pid, argv_in[0].c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    return ErrnoStatus(rc, "start", argv_in[0]);
  }
  c.out = pipefd[0];
  c.shown = std::move(shown);
  if (c.shown.empty()) {
    for (const auto& a : argv_in) c.shown += (c.shown.empty() ? "" : " ") + a;
  }
  return c;
}

Result<std::string> Collect(Child c) {
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::read(c.out, buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(c.out);
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status(StatusCode::kInternal,
                  fmt::format("'{}' failed (exit {})", c.shown, WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  return out;
}

namespace {

// A child: this executable with args plus --json, its stdout on a pipe.
Result<Child> SpawnSelf(const std::vector<std::string>& args) {
  std::vector<std::string> full = {"/proc/self/exe"};
  full.insert(full.end(), args.begin(), args.end());
  full.push_back("--json");
  std::string shown = "aquifer";
  for (const auto& a : args) shown += " " + a;
  return Spawn(std::move(full), {}, shown);
}

// Reads the child's output to the end, waits for it, parses its JSON.
Result<nlohmann::json> CollectSelf(Child c) {
  std::string shown = c.shown;
  std::string out = AQ_TRY(Collect(std::move(c)));
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded()) return Status(StatusCode::kInternal, fmt::format("'{}' printed no JSON", shown));
  return j;
}

Result<nlohmann::json> RunSelf(const std::vector<std::string>& args) { return CollectSelf(AQ_TRY(SpawnSelf(args))); }

// ---------------------------------------------------------------- storage

struct StorageFlags {
  bench::StorageBenchOptions o;
  ResultFlags out;
  size_t processes = 1;
  std::string mode = "async", selection = "random", request = "1MiB", step = "32MB", root_policy = "pinned";
  int64_t rank = -1, world = -1;
};

void PrintStorage(const bench::StorageBenchReport& r, const bench::StorageBenchOptions& o) {
  std::printf("bench storage: %zu readers, %s requests, %s, %s files%s%s, %s (%s ramp-up excluded)\n", o.readers,
              units::IecBytes(o.request_bytes).c_str(),
              o.mode == bench::StorageMode::kSync
                  ? fmt::format("sync every {} per reader", units::Bytes(static_cast<double>(o.step_bytes))).c_str()
                  : "async",
              o.selection == bench::FileSelection::kRandom ? "random" : "round-robin", o.direct ? ", O_DIRECT" : "",
              o.rate_iops > 0 ? fmt::format(", {:g} IOPS per reader", o.rate_iops).c_str() : "",
              units::Duration(o.duration_seconds).c_str(), units::Duration(o.ramp_seconds).c_str());
  std::printf("  data       %s: %llu files, %s\n", o.data.c_str(), static_cast<unsigned long long>(r.file_count),
              units::Bytes(static_cast<double>(r.dataset_bytes)).c_str());
  std::printf("  read       %.1f MB/s (%.1f MiB/s), %.2f files/s, %.0f requests/s over %.1fs\n", r.mb_per_second,
              r.mib_per_second, r.files_per_second, r.requests_per_second, r.seconds);
  const auto& l = r.latency;
  std::printf("  latency    p50 %.0f us, p90 %.0f us, p99 %.0f us, p99.9 %.0f us, max %.0f us\n", l.Quantile(0.5) / 1e3,
              l.Quantile(0.9) / 1e3, l.Quantile(0.99) / 1e3, l.Quantile(0.999) / 1e3,
              static_cast<double>(l.max_ns()) / 1e3);
  if (o.mode == bench::StorageMode::kSync) {
    std::printf("  sync       %llu steps; readers waited %.2fs in all at the barrier\n",
                static_cast<unsigned long long>(r.sync_steps), r.sync_wait_seconds);
  }
  if (s3::IsStoreUrl(o.data)) {
    // This machine's page cache says nothing about a remote store's files.
    std::printf("  page cache n/a: the files are on a storage node (its caches: aquifer stats)\n");
  } else {
    std::printf("  page cache %.0f%% of the files resident before, %.0f%% after; cache drop: %s\n",
                100 * r.page_cache_before, 100 * r.page_cache_after, r.cache_drop.c_str());
  }
}

// --processes P: P copies of this command, each a rank of its own with the
// same readers, started together; the machine is sampled here while they
// run. Rates add up; latency percentiles are the worst process's.
// The command line of child `i` of `procs` (bench storage --processes):
// this run's options, its own rank among procs x world.
std::vector<std::string> ChildArgs(const StorageFlags& f, uint32_t procs, uint32_t i, double interval) {
  const auto& o = f.o;
  std::vector<std::string> args = {"bench",
                                   "storage",
                                   o.data,
                                   "--readers",
                                   std::to_string(o.readers),
                                   "--request-size",
                                   std::to_string(o.request_bytes),
                                   "--iodepth",
                                   std::to_string(o.iodepth),
                                   "--mode",
                                   f.mode,
                                   "--step-size",
                                   std::to_string(o.step_bytes),
                                   "--selection",
                                   f.selection,
                                   "--root-policy",
                                   f.root_policy,
                                   "--duration",
                                   fmt::format("{}", o.duration_seconds),
                                   "--ramp",
                                   fmt::format("{}", o.ramp_seconds),
                                   "--seed",
                                   std::to_string(o.seed),
                                   "--rank",
                                   std::to_string(o.rank * procs + i),
                                   "--world",
                                   std::to_string(o.world * procs),
                                   "--interval",
                                   fmt::format("{}", interval),
                                   "--no-progress"};
  if (o.direct) args.push_back("--direct");
  if (o.rate_iops > 0) args.insert(args.end(), {"--rate-iops", fmt::format("{}", o.rate_iops)});
  return args;
}

void RunStorageProcesses(Globals& g, const StorageFlags& f) {
  const auto& o = f.o;
  const uint32_t procs = static_cast<uint32_t>(f.processes);
  std::string cache_drop = "none (page cache as found)";
  if (o.drop_caches) {
    auto d = bench::DropStorageCaches(*g.fs, o.data);
    if (!d.ok()) return Fail(g, d.status());
    cache_drop = *d;
  }
  monitor::SamplerOptions so = o.sampler;
  monitor::Sampler sampler(so);
  sampler.Start();
  auto exporter = monitor::ExportIfAsked(sampler, so);
  if (!exporter.ok()) return Fail(g, exporter.status());
  std::vector<Child> children;
  for (uint32_t i = 0; i < procs; ++i) {
    auto c = SpawnSelf(ChildArgs(f, procs, i, so.interval_seconds));
    if (!c.ok()) {
      for (auto& started : children) (void)CollectSelf(started);
      return Fail(g, c.status());
    }
    children.push_back(*c);
  }
  std::vector<nlohmann::json> results;
  Status failed;
  for (auto& c : children) {
    auto r = CollectSelf(c);
    if (r.ok()) {
      results.push_back(std::move(*r));
    } else if (failed.ok()) {
      failed = r.status();
    }
  }
  exporter->reset();
  sampler.Stop();
  if (!failed.ok()) return Fail(g, failed);

  monitor::Series series = sampler.Take();  // the machine as sampled here; the children's counters are added
  nlohmann::json sum = bench::MergeStorageResults(results, &series);
  sum["cache_drop"] = cache_drop;
  const auto& per = sum["processes"];
  const auto& latency = sum["latency"];
  nlohmann::json config = bench::ConfigJson(o);
  config["processes"] = procs;
  auto roots = io::SplitRoots(o.data);
  EmitResult(g, f.out, "bench storage", roots.ok() ? *roots : std::vector<std::string>{}, config, sum, &series,
             [&](const nlohmann::json&) {
               std::printf("bench storage: %u processes x %zu readers, %s requests, iodepth %u, %s%s, %s\n", procs,
                           o.readers, units::IecBytes(o.request_bytes).c_str(), o.iodepth, f.mode.c_str(),
                           o.direct ? ", O_DIRECT" : "", units::Duration(o.duration_seconds).c_str());
               std::printf("  read       %.1f MB/s (%.1f MiB/s), %.2f files/s, %.0f requests/s\n",
                           sum["mb_per_second"].get<double>(), sum["mib_per_second"].get<double>(),
                           sum["files_per_second"].get<double>(), sum["requests_per_second"].get<double>());
               std::printf("  latency    worst process: p50 %.0f us, p99 %.0f us, max %.0f us\n",
                           latency.value("p50_us", 0.0), latency.value("p99_us", 0.0), latency.value("max_us", 0.0));
               for (const auto& p : per) {
                 std::printf("    rank %-3d %.1f MB/s\n", p["rank"].get<int>(), p["mb_per_second"].get<double>());
               }
               std::printf("  cache drop %s\n", cache_drop.c_str());
             });
}

void RegisterStorage(CLI::App& group, Globals& g) {
  auto* f = g.Own<StorageFlags>();
  auto& o = f->o;
  auto* cmd = group.add_subcommand(
      "storage",
      "Storage-only reader: R readers each read whole files sequentially (random or round-robin), async or in "
      "synchronous steps; MB/s, files/s, latency percentiles, per-second series");
  cmd->add_option("data", o.data, "Directory of record files (or any files); several mounts as ROOT1:ROOT2:...")
      ->required();
  cmd->add_option("-r,--readers", o.readers, "Reader threads")->capture_default_str();
  cmd->add_option("--request-size", f->request, "Bytes per read request (fio's bs)")->capture_default_str();
  cmd->add_option("--iodepth", o.iodepth, "Requests in flight per reader (fio's iodepth; >1 uses io_uring)")
      ->capture_default_str();
  cmd->add_option("--mode", f->mode, "async (independent readers) or sync (barrier after every step)")
      ->capture_default_str();
  cmd->add_option("--step-size", f->step, "sync: bytes each reader reads per step (a batch)")->capture_default_str();
  cmd->add_option("--selection", f->selection, "random (each file at random) or round-robin (reader's share in turn)")
      ->capture_default_str();
  cmd->add_option("--root-policy", f->root_policy, "With several roots: pinned (reader i -> root i % roots) or spread")
      ->capture_default_str();
  cmd->add_flag("--direct", o.direct, "O_DIRECT: bypass the client's page cache");
  cmd->add_flag("--drop-caches", o.drop_caches,
                "Evict the files from the page cache first (fadvise; also drop_caches when permitted)");
  cmd->add_option("-d,--duration", o.duration_seconds, "Seconds to run, ramp-up included")->capture_default_str();
  cmd->add_option("--ramp", o.ramp_seconds, "Seconds excluded at the start")->capture_default_str();
  cmd->add_option("--rate-iops", o.rate_iops, "Limit each reader to this many requests/s (fio's rate_iops)");
  cmd->add_option("--seed", o.seed, "Seed of the random file choice")->capture_default_str();
  cmd->add_option("-p,--processes", f->processes,
                  "Reader processes, each with --readers threads and its own rank (sync barriers stay per process)")
      ->capture_default_str();
  cmd->add_option("--rank", f->rank, "This process's rank (default: RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID)");
  cmd->add_option("--world", f->world, "Ranks (default: WORLD_SIZE, OMPI_COMM_WORLD_SIZE, SLURM_NTASKS)");
  AddResultFlags(cmd, f->out, true);
  AddOutputFlags(cmd, g, false);
  cmd->callback([f, &g] {
    auto& o = f->o;
    auto parse = [&]() -> Status {
      o.request_bytes = AQ_TRY(units::ParseBytes(f->request));
      o.step_bytes = AQ_TRY(units::ParseBytes(f->step));
      if (f->mode == "async") {
        o.mode = bench::StorageMode::kAsync;
      } else if (f->mode == "sync") {
        o.mode = bench::StorageMode::kSync;
      } else {
        return InvalidArgument(fmt::format("--mode {}: expected async or sync", f->mode));
      }
      if (f->selection == "random") {
        o.selection = bench::FileSelection::kRandom;
      } else if (f->selection == "round-robin" || f->selection == "roundrobin") {
        o.selection = bench::FileSelection::kRoundRobin;
      } else {
        return InvalidArgument(fmt::format("--selection {}: expected random or round-robin", f->selection));
      }
      o.root_policy = AQ_TRY(io::ParseRootPolicy(f->root_policy));
      if (o.readers == 0) return InvalidArgument("--readers must be at least 1");
      if (!(o.duration_seconds > 0)) return InvalidArgument("--duration must be positive");
      if (o.ramp_seconds < 0 || o.ramp_seconds >= o.duration_seconds) {
        return InvalidArgument(
            fmt::format("--ramp {}s must be shorter than --duration {}s", o.ramp_seconds, o.duration_seconds));
      }
      auto rank = AQ_TRY(pipeline::ResolveRank(f->rank, f->world));
      o.rank = rank.rank;
      o.world = rank.world;
      return Status::Ok();
    };
    if (Status s = parse(); !s.ok()) return (void)UsageError(g, s);
    o.progress = !g.no_progress && !g.json;
    o.sampler.interval_seconds = f->out.interval;
    o.sampler.prometheus_port = f->out.prometheus;
    if (f->processes > 1) return RunStorageProcesses(g, *f);
    auto r = bench::RunStorageBench(*g.fs, o);
    if (!r.ok()) return Fail(g, r.status());
    auto roots = io::SplitRoots(o.data);
    EmitResult(g, f->out, "bench storage", roots.ok() ? *roots : std::vector<std::string>{}, bench::ConfigJson(o),
               bench::SummaryJson(*r), &r->series, [&](const nlohmann::json&) { PrintStorage(*r, o); });
  });
}

// ---------------------------------------------------------------- sweep

struct SweepFlags {
  std::string param;
  std::string values_text;
  std::vector<std::string> values;
  std::string metric;
  bool cache_pair = false;
  std::vector<std::string> command;
  ResultFlags out;
};

std::string DefaultMetric(const std::string& command) {
  if (command == "storage") return "mb_per_second";
  return "images_per_second";
}

// Reads every file of the dataset once, so the page cache holds what fits.
Status WarmCache(io::FileSystem& fs, const std::string& data) {
  auto roots = AQ_TRY(io::SplitRoots(data));
  auto ds = dataset::FindDataset(fs, roots[0]);
  if (!ds.ok()) return ds.status();
  std::vector<char> buf(1 << 20);
  for (const auto& path : ds->files) {
    auto f = AQ_TRY(fs.OpenRead(path, io::AccessHint::kSequential));
    for (uint64_t off = 0; off < f->size();) {
      size_t n = AQ_TRY(f->ReadAt(off, buf.size(), buf.data()));
      if (n == 0) break;
      off += n;
    }
  }
  return Status::Ok();
}

// Long by design: flag declarations, then the sweep's loop over values (one child run each).
void RegisterSweep(CLI::App& group, Globals& g) {
  auto* f = g.Own<SweepFlags>();
  auto* cmd =
      group.add_subcommand("sweep",
                           "Run a bench over a list of values and record the scaling curve, e.g.\n"
                           "  aquifer bench sweep --param readers --values 1,2,4 -- storage DATA -d 10\n"
                           "  aquifer bench sweep --param gpus --values 1,2 -- train DATA --steps 20\n"
                           "or the page-cache-vs-cold-storage pair:  aquifer bench sweep --cache-pair -- storage DATA");
  cmd->add_option("--param", f->param, "The bench flag to vary (readers, gpus, threads, batch, ...)");
  cmd->add_option("--values", f->values_text, "Values to run, comma-separated (1,2,4,8)");
  cmd->add_option("--metric", f->metric, "Summary field to plot (default: mb_per_second for storage, else images/s)");
  cmd->add_flag("--cache-pair", f->cache_pair,
                "Instead of values: run once from cold storage (--drop-caches; storage also --direct) and once "
                "from a warm page cache");
  cmd->add_option("command", f->command, "After --: the bench and its arguments (storage DATA ..., train DATA ...)")
      ->required();
  AddResultFlags(cmd, f->out, false);
  AddOutputFlags(cmd, g, false);
  cmd->callback([f, &g] {
    if (f->command.empty() || (f->command[0] != "storage" && f->command[0] != "train" && f->command[0] != "pipeline")) {
      return (void)UsageError(g, InvalidArgument("sweep: the command must be storage, train or pipeline"));
    }
    f->values.clear();
    for (size_t start = 0; start < f->values_text.size();) {
      size_t comma = f->values_text.find(',', start);
      if (comma == std::string::npos) comma = f->values_text.size();
      if (comma > start) f->values.push_back(f->values_text.substr(start, comma - start));
      start = comma + 1;
    }
    if (!f->cache_pair && (f->param.empty() || f->values.empty())) {
      return (void)UsageError(g, InvalidArgument("sweep: give --param and --values, or --cache-pair"));
    }
    const std::string metric = f->metric.empty() ? DefaultMetric(f->command[0]) : f->metric;
    std::vector<std::string> base = {"bench"};
    base.insert(base.end(), f->command.begin(), f->command.end());
    base.push_back("--no-progress");
    nlohmann::json points = nlohmann::json::array();
    std::vector<std::pair<std::string, std::vector<std::string>>> runs;
    if (f->cache_pair) {
      if (f->command[0] == "pipeline") {
        return (void)UsageError(g, InvalidArgument("sweep --cache-pair runs bench storage or bench train"));
      }
      // Cold: every read from storage. bench storage reads with O_DIRECT so
      // a dataset smaller than RAM does not turn warm after its first pass;
      // bench train starts with the dataset evicted (one epoch is one pass).
      auto cold = base;
      cold.push_back("--drop-caches");
      if (f->command[0] == "storage") cold.push_back("--direct");
      runs.push_back({"cold", cold});
      runs.push_back({"warm", base});
    } else {
      for (const auto& v : f->values) {
        auto args = base;
        args.push_back("--" + f->param);
        args.push_back(v);
        runs.push_back({v, args});
      }
    }
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto& [value, args] = runs[i];
      if (f->cache_pair && value == "warm" && f->command.size() > 1) {
        if (Status s = WarmCache(*g.fs, f->command[1]); !s.ok()) return Fail(g, s);
      }
      if (!g.json)
        std::fprintf(stderr, "sweep: run %zu of %zu (%s = %s)\n", i + 1, runs.size(),
                     f->cache_pair ? "cache" : f->param.c_str(), value.c_str());
      auto r = RunSelf(args);
      if (!r.ok()) return Fail(g, r.status());
      const nlohmann::json& sum = r->contains("schema") ? (*r)["summary"] : *r;
      nlohmann::json p = {{"label", value},
                          {"value", f->cache_pair ? static_cast<double>(i) : std::atof(value.c_str())},
                          {"metric_value", sum.value(metric, 0.0)},
                          {"summary", sum}};
      if (sum.contains("au")) p["au"] = sum["au"];
      points.push_back(p);
    }
    nlohmann::json config = {{"parameter", f->cache_pair ? "cache" : f->param},
                             {"values", f->values},
                             {"command", base},
                             {"metric", metric}};
    nlohmann::json summary = {
        {"parameter", f->cache_pair ? "cache (0 = cold, 1 = warm)" : f->param}, {"metric", metric}, {"points", points}};
    if (f->cache_pair && points.size() == 2) {
      double cold = points[0]["metric_value"].get<double>(), warm = points[1]["metric_value"].get<double>();
      summary["cold_over_warm"] = warm > 0 ? cold / warm : 0;
    }
    std::vector<std::string> roots;
    if (f->command.size() > 1) roots.push_back(f->command[1]);
    EmitResult(g, f->out, f->cache_pair ? "bench sweep cache" : "bench sweep", roots, config, summary, nullptr,
               [&](const nlohmann::json&) {
                 std::printf("bench sweep: %s over %s\n", metric.c_str(),
                             f->cache_pair ? "cold storage vs warm page cache" : f->param.c_str());
                 double first = points.empty() ? 0 : points[0]["metric_value"].get<double>();
                 for (const auto& p : points) {
                   double v = p["metric_value"].get<double>();
                   std::printf(
                       "  %-10s %12.1f  %5.2fx%s\n", p["label"].get<std::string>().c_str(), v,
                       first > 0 ? v / first : 0,
                       p.contains("au") ? fmt::format("  AU {:.1f}%", 100 * p["au"].get<double>()).c_str() : "");
                 }
                 if (summary.contains("cold_over_warm")) {
                   std::printf("  cold storage delivers %.2f of the warm page cache's %s\n",
                               summary["cold_over_warm"].get<double>(), metric.c_str());
                 }
               });
  });
}

// ---------------------------------------------------------------- size

struct SizeFlags {
  bench::SizeRequest r;
  double mbps = 0, node_mbps = 0;
  std::string from, form, node_from;
  std::string dataset, node_capacity, stored_from;
  double stored_ratio = 0;
  bool table = false;
  ResultFlags out;
};

void PrintTable() {
  std::printf("%-7s %-38s %18s", "demand", "workload", "MB/s per GPU");
  for (const auto& n : bench::NodeProfiles()) std::printf(" %15s", fmt::format("GPUs per {}", n.name).c_str());
  std::printf("\n");
  for (const auto& row : bench::SizingTable()) {
    std::printf("%-7s %-38s %18s", row.demand.c_str(), row.description.c_str(),
                row.mb_per_second_per_gpu ? fmt::format("{:g}", *row.mb_per_second_per_gpu).c_str() : "-");
    for (const auto& n : bench::NodeProfiles()) {
      auto it = row.gpus_per_node.find(n.name);
      std::printf(" %15s", it == row.gpus_per_node.end() ? "-" : fmt::format("{:g}", it->second).c_str());
    }
    std::printf("\n");
  }
  std::printf("\nworkloads: ");
  for (const auto& w : bench::WorkloadProfiles()) std::printf("%s  ", w.name.c_str());
  std::printf("\nnodes:     ");
  for (const auto& n : bench::NodeProfiles()) std::printf("%s (%s)  ", n.name.c_str(), n.description.c_str());
  std::printf("\n");
}

// The capacity flags into the request: sizes parsed, and the stored/logical
// ratio given or read from a node's pools (physical over logical bytes).
Status CapacityFlags(const SizeFlags& f, bench::SizeRequest& req) {
  if (!f.dataset.empty()) {
    auto b = units::ParseBytes(f.dataset);
    if (!b.ok()) return InvalidArgument(fmt::format("--dataset '{}': not a size (150TB, 2.5PiB)", f.dataset));
    req.dataset_bytes = static_cast<double>(*b);
  }
  if (!f.node_capacity.empty()) {
    auto b = units::ParseBytes(f.node_capacity);
    if (!b.ok()) return InvalidArgument(fmt::format("--node-capacity '{}': not a size (200TB)", f.node_capacity));
    req.node_capacity_bytes = static_cast<double>(*b);
  }
  if (f.stored_ratio > 0) req.stored_ratio = f.stored_ratio;
  if (!f.stored_from.empty()) {
    const s3::NodeStatsDoc stats = AQ_TRY(FetchStats(f.stored_from));
    double physical = 0, logical = 0;
    std::string policies;
    for (const auto& p : stats.pools) {
      physical += static_cast<double>(p.bytes);
      logical += static_cast<double>(p.logical_bytes);
      policies += (policies.empty() ? "" : ", ") + (p.name.empty() ? "?" : p.name) + " " +
                  (p.compression.empty() ? "none" : p.compression);
    }
    if (!(logical > 0)) {
      return InvalidArgument(fmt::format("--stored-from {}: the node's pools hold no data to measure", f.stored_from));
    }
    req.stored_ratio = physical / logical;
    req.stored_ratio_source = fmt::format("measured on {}: {} stored in {} ({})", f.stored_from, units::Bytes(logical),
                                          units::Bytes(physical), policies);
  }
  return Status::Ok();
}

// Long by design: flag declarations and the sizing report, line by line.
void RegisterSize(CLI::App& app, Globals& g) {
  auto* f = g.Own<SizeFlags>();
  auto* cmd = app.add_subcommand(
      "size",
      "Sizing: GPUs + workload -> storage MB/s and nodes, the documents' method with every assumption printed;\n"
      "  aquifer size --table   reproduces the documents' sizing table");
  cmd->add_option("-g,--gpus", f->r.gpus, "GPUs to feed");
  cmd->add_option("-w,--workload", f->r.workload, "Workload profile (see --table)")->capture_default_str();
  cmd->add_option("-n,--node", f->r.node, "Storage node profile: f800 or h500")->capture_default_str();
  cmd->add_option("--mbps-per-gpu", f->mbps, "MB/s one GPU demands (overrides the workload profile)");
  cmd->add_option("--from", f->from,
                  "Take the demand per GPU from a bench train result JSON: its GPUs' rate at full utilisation x the "
                  "bytes it read per image (an input-bound run's delivered MB/s would undersize)");
  cmd->add_option("--form", f->form,
                  "With --from a doctor result: the image form whose MB/s per GPU to size for (default: the one the "
                  "doctor picked)");
  cmd->add_option("--node-mbps", f->node_mbps, "MB/s one node delivers (overrides the node profile)");
  cmd->add_option("--node-from", f->node_from,
                  "Size aquifer nodes from a measured profile: a bench storage result read from an aquifer node "
                  "(aquifer://NODE/BUCKET/...); its MB/s is one node's")
      ->excludes("--node-mbps");
  cmd->add_option("--headroom", f->r.headroom, "Plan for this fraction more than the demand (0.2 = 20%)")
      ->capture_default_str();
  cmd->add_option("--spare-nodes", f->r.spare_nodes, "Nodes added for failure tolerance")->capture_default_str();
  cmd->add_option("--dataset", f->dataset, "Capacity too: the dataset's size (logical bytes, e.g. 150TB)");
  cmd->add_option("--node-capacity", f->node_capacity, "Capacity: one node's usable bytes, e.g. 200TB");
  cmd->add_option("--protection", f->r.protection, "Capacity: 3x (replicas) or K+M (erasure code, e.g. 8+2)")
      ->capture_default_str();
  cmd->add_option("--stored-ratio", f->stored_ratio,
                  "Capacity: physical / logical bytes after compression (1: none; --stored-from measures it)");
  cmd->add_option("--stored-from", f->stored_from,
                  "Capacity: take the stored/logical ratio from a node holding a sample of the data "
                  "(its metrics address HOST:PORT, as for aquifer stats)")
      ->excludes("--stored-ratio");
  cmd->add_flag("--table", f->table, "Print the sizing table from the profiles");
  AddResultFlags(cmd, f->out, false);
  AddOutputFlags(cmd, g, false);
  cmd->callback([f, &g] {
    if (f->table) {
      if (g.json) {
        nlohmann::json rows = nlohmann::json::array();
        for (const auto& row : bench::SizingTable()) {
          rows.push_back(
              {{"demand", row.demand},
               {"workload", row.description},
               {"mb_per_second_per_gpu",
                row.mb_per_second_per_gpu ? nlohmann::json(*row.mb_per_second_per_gpu) : nlohmann::json(nullptr)},
               {"gpus_per_node", row.gpus_per_node}});
        }
        std::cout << format::DumpJson(rows, 1) << std::endl;
      } else {
        PrintTable();
      }
      return;
    }
    auto req = f->r;
    if (f->mbps > 0) req.mb_per_second_per_gpu = f->mbps;
    if (f->node_mbps > 0) req.node_mb_per_second = f->node_mbps;
    std::vector<std::string> node_caveats;
    if (!f->node_from.empty()) {
      auto text = io::ReadFileToString(*g.fs, f->node_from);
      if (!text.ok()) return Fail(g, text.status());
      auto j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_discarded()) return (void)UsageError(g, InvalidArgument(f->node_from + ": not JSON"));
      auto m = bench::NodeFromStorageResult(j, f->node_from);
      if (!m.ok()) return (void)UsageError(g, m.status());
      req.node = "measured";
      req.node_mb_per_second = m->mb_per_second;
      req.node_mb_per_second_source = m->source;
      node_caveats = m->caveats;
    }
    if (!f->from.empty()) {
      auto text = io::ReadFileToString(*g.fs, f->from);
      if (!text.ok()) return Fail(g, text.status());
      auto j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_discarded()) return Fail(g, InvalidArgument(fmt::format("--from {}: not JSON", f->from)));
      if (Status s = bench::ValidateResult(j, f->from); !s.ok()) return Fail(g, s);
      if (j.value("command", "") == "doctor") {
        // The doctor's figure for one image form: its GPUs' rate x that form's bytes per image.
        auto d = bench::DemandFromDoctorResult(j, f->from, f->form);
        if (!d.ok()) return (void)UsageError(g, d.status());
        req.mb_per_second_per_gpu = d->demand_mb_per_second_per_gpu;
        req.mb_per_second_source = d->explanation;
      } else {
        if (!f->form.empty()) return (void)UsageError(g, InvalidArgument("--form goes with --from a doctor result"));
        auto demand = bench::DemandFromTrainResult(j, f->from);
        if (!demand.ok()) return Fail(g, demand.status());
        if (!demand->gpu_bound) {
          // Sizing from what an input-bound run delivered undersizes storage:
          // the demand at full utilisation is used, and both are printed.
          std::fprintf(stderr,
                       "aquifer size: WARNING: %s was not GPU-bound (AU %.1f%%): it delivered %.1f MB/s per GPU, but "
                       "the GPUs demand %.1f MB/s per GPU at full utilisation; sizing for the demand\n",
                       f->from.c_str(), 100 * demand->au, demand->delivered_mb_per_second_per_gpu,
                       demand->demand_mb_per_second_per_gpu);
        }
        req.mb_per_second_per_gpu = demand->demand_mb_per_second_per_gpu;
        req.mb_per_second_source = demand->explanation;
      }
      if (req.gpus == 0) req.gpus = j["config"].value("gpus", 0.0);
    }
    if (Status s = CapacityFlags(*f, req); !s.ok()) return (void)UsageError(g, s);
    auto a = bench::Size(req);
    if (!a.ok()) return (void)UsageError(g, a.status());
    for (const auto& c : node_caveats) a->assumptions.push_back("measured node: " + c);
    auto json = bench::ToJson(req, *a);
    nlohmann::json config = {{"gpus", req.gpus},
                             {"workload", req.workload},
                             {"node", req.node},
                             {"headroom", req.headroom},
                             {"spare_nodes", req.spare_nodes}};
    EmitResult(g, f->out, "size", {}, config, json, nullptr, [&](const nlohmann::json&) {
      auto w = bench::FindWorkload(req.workload);
      std::printf("aquifer size: %g GPUs, %s, on %s nodes\n", req.gpus,
                  w.ok() ? w->description.c_str() : req.workload.c_str(),
                  req.node == "measured" ? ("aquifer (measured: " + f->node_from + ")").c_str() : req.node.c_str());
      if (a->demand_mb_per_second > 0) {
        std::printf("  demand     %.0f MB/s (%g GPUs x %g MB/s)\n", a->demand_mb_per_second, req.gpus,
                    a->demand_mb_per_second / req.gpus);
      }
      if (a->node_mb_per_second > 0) std::printf("  one node   %.0f MB/s for this workload\n", a->node_mb_per_second);
      if (a->stored_bytes > 0) {
        std::printf("  capacity   %s on disk -> %.2f node(s)\n", units::Bytes(a->stored_bytes).c_str(),
                    a->capacity_nodes_exact);
      }
      std::printf("  nodes      %.2f -> %d %s node(s)%s\n", std::max(a->nodes_exact, a->capacity_nodes_exact), a->nodes,
                  req.node == "measured" ? "aquifer" : req.node.c_str(),
                  a->stored_bytes > 0 ? fmt::format(" (set by {})", a->bound).c_str() : "");
      std::printf("  assumptions:\n");
      for (const auto& s : a->assumptions) std::printf("    - %s\n", s.c_str());
    });
  });
}

// ---------------------------------------------------------------- doctor

struct DoctorFlags {
  bench::DoctorOptions o;
  ResultFlags out;
};

void PrintDoctor(const bench::DoctorReport& r, const bench::DoctorOptions& o) {
  std::printf("aquifer doctor: %s (%s, %llu images, %s)\n", r.data.c_str(), r.format.c_str(),
              static_cast<unsigned long long>(r.images), units::Bytes(static_cast<double>(r.dataset_bytes)).c_str());
  std::printf("  GPUs       %g x %s on %s %s: %.0f images/s\n", o.gpus, o.model.c_str(), o.gpu.c_str(),
              o.precision.c_str(), r.demand_images_per_second);
  std::printf("  cores      %.0f\n", r.cores);
  if (r.storage_mb_per_second > 0) {
    std::printf("  storage    %.0f MB/s\n", r.storage_mb_per_second);
  } else {
    std::printf("  storage    unknown\n");
  }
  std::printf("\n  %-10s %12s %16s %12s %14s %12s %7s %6s  %s\n", "form", "bytes/image", "images/s/core", "cores need",
              "MB/s per GPU", "MB/s total", "nodes", "GPU", "limit");
  for (size_t i = 0; i < r.forms.size(); ++i) {
    const auto& f = r.forms[i];
    std::printf("%s %-10s %12s %16.0f %12.1f %14.1f %12.0f %7d %5.0f%%  %s\n", i == r.pick ? "*" : " ", f.form.c_str(),
                units::Bytes(f.bytes_per_image).c_str(), f.images_per_second_per_core, f.cores_needed,
                f.mb_per_second_per_gpu, f.demand_mb_per_second, f.nodes, 100 * f.gpu_utilisation, f.limit.c_str());
  }
  std::printf("\n  verdict    %s\n", r.verdict.c_str());
  if (r.pick != 0 && r.format == "folder") {
    std::printf("  make it    aquifer dataset pack %s -o OUT %s\n", r.data.c_str(), r.forms[r.pick].pack_flags.c_str());
  } else if (r.pick != 0) {
    // dataset pack reads image folders, not records.
    std::printf("  make it    aquifer dataset pack FOLDER -o OUT %s   (FOLDER: the images %s was packed from)\n",
                r.forms[r.pick].pack_flags.c_str(), r.data.c_str());
  }
  for (const auto& w : r.warnings) std::printf("  WARNING    %s\n", w.c_str());
  std::printf("  assumptions:\n");
  for (const auto& a : r.assumptions) std::printf("    - %s\n", a.c_str());
}

void RegisterDoctor(CLI::App& app, Globals& g) {
  auto* f = g.Own<DoctorFlags>();
  auto* cmd = app.add_subcommand(
      "doctor",
      "What limits training on a dataset (CPU decode, storage or the GPUs), and which image form and node count "
      "remove it: decode per core and bytes per image measured for each form on a sample, storage MB/s measured, the "
      "GPUs' demand from the model table");
  cmd->add_option("data", f->o.data, "Dataset: record files or an image folder (path or URL)")->required();
  cmd->add_option("-g,--gpus", f->o.gpus, "GPUs to feed")->capture_default_str();
  cmd->add_option("-m,--model", f->o.model, "resnet50, resnet152, inception3, inception4, vgg16, googlenet, alexnet")
      ->capture_default_str();
  cmd->add_option("--gpu", f->o.gpu, "v100, a100 or h100")->capture_default_str();
  cmd->add_option("--precision", f->o.precision, "fp16 (mixed) or fp32")->capture_default_str();
  cmd->add_option("--cores", f->o.cores, "CPU cores that decode for those GPUs (default: this machine's)");
  cmd->add_option("--storage", f->o.storage, "Where to measure storage MB/s (default: the dataset itself)");
  cmd->add_option("--storage-mbps", f->o.storage_mb_per_second, "Storage MB/s to assume instead of measuring");
  cmd->add_option("--storage-seconds", f->o.storage_seconds, "How long to measure storage")->capture_default_str();
  cmd->add_option("-n,--node", f->o.node, "Storage node profile for node counts: f800 or h500")->capture_default_str();
  cmd->add_option("--sample", f->o.sample, "Images sampled into each form")->capture_default_str();
  cmd->add_option("--max-side", f->o.max_side, "The forms' longer side")->capture_default_str();
  cmd->add_option("--quality", f->o.quality, "JPEG quality of the reencode and auto forms")->capture_default_str();
  cmd->add_option("--raw-max-pixels", f->o.raw_max_pixels, "auto: raw up to this many pixels")->capture_default_str();
  cmd->add_option("--rounds", f->o.rounds,
                  "Decode runs per form: the median counts, and a spread over 25% is reported as noise")
      ->capture_default_str()
      ->check(CLI::Range(1, 15));
  AddResultFlags(cmd, f->out, false);
  AddOutputFlags(cmd, g);
  cmd->callback([f, &g] {
    f->o.progress = !g.no_progress;
    auto r = bench::RunDoctor(*g.fs, f->o);
    if (!r.ok()) return Fail(g, r.status());
    nlohmann::json config = {{"gpus", f->o.gpus},           {"model", f->o.model},    {"gpu", f->o.gpu},
                             {"precision", f->o.precision}, {"node", f->o.node},      {"sample", f->o.sample},
                             {"max_side", f->o.max_side},   {"quality", f->o.quality}};
    EmitResult(g, f->out, "doctor", {}, config, bench::ToJson(*r), nullptr,
               [&](const nlohmann::json&) { PrintDoctor(*r, f->o); });
  });
}

// ---------------------------------------------------------------- model cache

struct CacheFlags {
  std::string dataset, client = "0", storage = "0", l3 = "0", data, result;
  double staging = 0, demand = 0;
  ResultFlags out;
};

// Long by design: flag declarations and the model's printed table, line by line.
void RegisterModel(CLI::App& app, Globals& g) {
  auto* model = app.add_subcommand("model", "Models of the documents: the cache model");
  model->require_subcommand(1);
  auto* f = g.Own<CacheFlags>();
  auto* cmd = model->add_subcommand(
      "cache",
      "Expected cache hit fractions (cache / dataset) for client RAM and the storage cache, beside what was "
      "measured: page-cache residency of a dataset (--data) and a bench result's reads vs disk reads (--result)");
  cmd->add_option("--dataset", f->dataset, "Dataset size, e.g. 22.2TB (default: the size of --data)");
  cmd->add_option("--client-cache", f->client, "Page cache of one client, e.g. 512GB")->capture_default_str();
  cmd->add_option("--storage-cache", f->storage, "RAM cache of all storage nodes together, e.g. 2TB")
      ->capture_default_str();
  cmd->add_option("--storage-l3", f->l3, "L3 (SSD) cache of all storage nodes together, in front of HDD pools")
      ->capture_default_str();
  cmd->add_option("--staging", f->staging,
                  "Blocks/s the nodes' plan staging reads from media (stage threads x nodes / media latency, e.g. "
                  "2000 for 16 threads at 8 ms): the media reads read ahead of need")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--demand", f->demand, "Blocks/s the readers ask of storage (with --staging; default: it keeps up)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--data", f->data, "A dataset directory: measure how much of it the page cache holds now");
  cmd->add_option("--result", f->result, "A bench storage/train result JSON: measured client cache hits");
  AddResultFlags(cmd, f->out, false);
  AddOutputFlags(cmd, g, false);
  cmd->callback([f, &g] {
    bench::CacheModelInput in;
    std::optional<monitor::Residency> residency;
    if (!f->data.empty()) {
      auto ds = dataset::FindDataset(*g.fs, f->data);
      if (!ds.ok()) return Fail(g, ds.status());
      residency = monitor::PageCacheResidency(ds->files);
      in.dataset_bytes = static_cast<double>(ds->total_bytes);
    }
    auto parse = [&]() -> Status {
      if (!f->dataset.empty()) in.dataset_bytes = static_cast<double>(AQ_TRY(units::ParseBytes(f->dataset)));
      in.client_cache_bytes = static_cast<double>(AQ_TRY(units::ParseBytes(f->client)));
      in.storage_cache_bytes = static_cast<double>(AQ_TRY(units::ParseBytes(f->storage)));
      in.storage_l3_bytes = static_cast<double>(AQ_TRY(units::ParseBytes(f->l3)));
      in.staging_reads_per_second = f->staging;
      in.demand_reads_per_second = f->demand;
      return Status::Ok();
    };
    if (Status s = parse(); !s.ok()) return (void)UsageError(g, s);
    auto m = bench::ModelCache(in);
    if (!m.ok()) return (void)UsageError(g, m.status());
    nlohmann::json summary = bench::ToJson(in, *m);
    std::optional<bench::CacheMeasurement> meas;
    if (!f->result.empty()) {
      auto text = io::ReadFileToString(*g.fs, f->result);
      if (!text.ok()) return Fail(g, text.status());
      auto j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_discarded()) return Fail(g, InvalidArgument(fmt::format("--result {}: not JSON", f->result)));
      if (Status s = bench::ValidateResult(j, f->result); !s.ok()) return Fail(g, s);
      auto mm = bench::MeasureCacheFromResult(j, f->result);
      if (!mm.ok()) return Fail(g, mm.status());
      meas = *mm;
      summary["measured"] = {{"source", meas->source},
                             {"bench_bytes", meas->bench_bytes},
                             {"disk_bytes", meas->disk_bytes},
                             {"client_hit", meas->client_hit}};
      if (meas->residency_before) summary["measured"]["page_cache_before"] = *meas->residency_before;
      if (meas->residency_after) summary["measured"]["page_cache_after"] = *meas->residency_after;
    }
    if (residency) summary["page_cache_residency_now"] = residency->fraction();
    nlohmann::json config = {{"dataset_bytes", in.dataset_bytes},
                             {"client_cache_bytes", in.client_cache_bytes},
                             {"storage_cache_bytes", in.storage_cache_bytes},
                             {"storage_l3_bytes", in.storage_l3_bytes},
                             {"data", f->data},
                             {"result", f->result}};
    EmitResult(
        g, f->out, "model cache", f->data.empty() ? std::vector<std::string>{} : std::vector<std::string>{f->data},
        config, summary, nullptr, [&](const nlohmann::json&) {
          std::printf("cache model: dataset %s, client cache %s, storage cache %s\n",
                      units::Bytes(in.dataset_bytes).c_str(), units::Bytes(in.client_cache_bytes).c_str(),
                      units::Bytes(in.storage_cache_bytes).c_str());
          std::printf("  client page cache serves   %5.1f%% of the application's reads\n", 100 * m->client_hit);
          std::printf("  storage cache serves       %5.1f%% of the reads reaching storage\n", 100 * m->storage_hit);
          if (in.storage_l3_bytes > 0) {
            std::printf("  storage L3 (SSD) serves    %5.1f%% of the reads reaching storage (%s)\n",
                        100 * m->storage_l3, units::Bytes(in.storage_l3_bytes).c_str());
          }
          std::printf("  storage media serve        %5.1f%% of the reads reaching storage (%.1f%% of all reads)\n",
                      100 * m->storage_media, 100 * m->media_of_all);
          if (in.staging_reads_per_second > 0) {
            std::printf(
                "  plan staging reads ahead   %5.1f%% of the reads reaching storage; readers wait for media "
                "on %.1f%%\n",
                100 * m->storage_staged, 100 * m->storage_waited);
          }
          if (residency) {
            std::printf("  measured: the page cache holds %.1f%% of %s now\n", 100 * residency->fraction(),
                        f->data.c_str());
          }
          if (meas) {
            std::printf("  measured: %s read %s, the disks %s -> %.1f%% served from the client cache\n",
                        meas->source.c_str(), units::Bytes(meas->bench_bytes).c_str(),
                        units::Bytes(meas->disk_bytes).c_str(), 100 * meas->client_hit);
          }
        });
  });
}

// ---------------------------------------------------------------- report

struct ReportFlags {
  std::vector<std::string> inputs;
  std::string output = "aquifer-report.html";
  std::string title = "aquifer report";
};

void RegisterReport(CLI::App& app, Globals& g) {
  auto* f = g.Own<ReportFlags>();
  auto* cmd = app.add_subcommand(
      "report", "One self-contained HTML file with charts from result JSON files (bench ... --out DIR)");
  cmd->add_option("results", f->inputs, "Result JSON files (or directories of them)")->required();
  cmd->add_option("-o,--output", f->output, "HTML file to write")->capture_default_str();
  cmd->add_option("--title", f->title, "Title of the report")->capture_default_str();
  AddOutputFlags(cmd, g, false);
  cmd->callback([f, &g] {
    std::vector<std::string> files;
    for (const auto& p : f->inputs) {
      auto st = g.fs->Stat(p);
      if (!st.ok()) return Fail(g, st.status());
      if (st->is_dir) {
        auto list = g.fs->List(p);
        if (!list.ok()) return Fail(g, list.status());
        for (const auto& e : *list) {
          if (!e.is_dir && e.name.size() > 5 && e.name.compare(e.name.size() - 5, 5, ".json") == 0) {
            files.push_back(io::JoinPath(p, e.name));
          }
        }
      } else {
        files.push_back(p);
      }
    }
    std::vector<report::Input> inputs;
    for (const auto& path : files) {
      auto text = io::ReadFileToString(*g.fs, path);
      if (!text.ok()) return Fail(g, text.status());
      auto j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_discarded()) return Fail(g, InvalidArgument(fmt::format("{}: not valid JSON", path)));
      if (Status s = bench::ValidateResult(j, path); !s.ok()) return Fail(g, s);
      inputs.push_back({path, std::move(j)});
    }
    if (inputs.empty()) return Fail(g, NotFound("report: no result files given"));
    std::string html = report::RenderHtml(inputs, f->title);
    if (Status s = io::WriteFileAtomic(*g.fs, f->output, html); !s.ok()) return Fail(g, s);
    if (g.json) {
      std::cout << nlohmann::json{{"output", f->output},
                                  {"results", files.size()},
                                  {"charts", report::CountCharts(html)},
                                  {"bytes", html.size()}}
                       .dump(1)
                << std::endl;
    } else {
      std::printf("%s", report::TextSummary(inputs).c_str());
      std::printf("report: %s (%zu results, %zu charts, %s)\n", f->output.c_str(), files.size(),
                  report::CountCharts(html), units::Bytes(static_cast<double>(html.size())).c_str());
    }
  });
}

}  // namespace

void RegisterMeasureCommands(CLI::App& app, CLI::App& bench_group, Globals& g) {
  RegisterStorage(bench_group, g);
  RegisterSweep(bench_group, g);
  RegisterSize(app, g);
  RegisterDoctor(app, g);
  RegisterModel(app, g);
  RegisterReport(app, g);
}

}  // namespace aq::cli
