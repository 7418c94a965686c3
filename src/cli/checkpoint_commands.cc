// aquifer bench checkpoint: N rank processes save S bytes each at once, K
// times, then restore them (rank r reads rank r+1's file), on a local disk,
// through aquifer:// and through the mount, in the same run
// (bench/checkpoint_bench.h has what one rank does and the durability of
// each target).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "bench/checkpoint_bench.h"
#include "cli/cli.h"
#include "common/clock.h"
#include "common/units.h"
#include "s3/endpoint.h"

namespace aq::cli {
namespace {

constexpr double kLlama8b = 105e9, kLlama70b = 912e9;  // bytes per checkpoint (MLPerf Storage's table)

struct CheckpointFlags {
  uint32_t ranks = 4, saves = 3;
  std::string model = "8b", size, url, local, mount;
  double scale = 0;
  ResultFlags out;
  // A rank (spawned by the command itself).
  std::string worker_op, worker_target, worker_path, go;
  uint64_t worker_bytes = 0, worker_seed = 0;
};

Result<bench::CheckpointTarget> ParseTarget(const std::string& t) {
  if (t == "local") return bench::CheckpointTarget::kLocal;
  if (t == "store") return bench::CheckpointTarget::kStore;
  if (t == "mount") return bench::CheckpointTarget::kMount;
  return InvalidArgument(fmt::format("unknown checkpoint target '{}'", t));
}

// One rank: makes its bytes, says "ready", waits for the go file, runs.
int RunWorker(Globals& g, const CheckpointFlags& f) {
  auto target = ParseTarget(f.worker_target);
  if (!target.ok()) return Fail(g, target.status()), 1;
  bench::CheckpointRankOptions o;
  o.target = *target;
  o.path = f.worker_path;
  o.bytes = f.worker_bytes;
  o.seed = f.worker_seed;
  o.save = f.worker_op == "save";
  const std::string pattern = bench::CheckpointPattern(o.seed, o.chunk);
  std::printf("ready\n");
  std::fflush(stdout);
  Clock& clock = Clock::Real();
  const double give_up = clock.Now() + 300;
  while (::access(f.go.c_str(), F_OK) != 0) {
    if (clock.Now() > give_up) return Fail(g, Unavailable("checkpoint rank: no start signal in 300 s")), 1;
    clock.SleepFor(0.0005);
  }
  auto seconds = bench::RunCheckpointRank(*g.fs, o, pattern);
  if (!seconds.ok()) return Fail(g, seconds.status()), 1;
  std::printf("%.9f\n", *seconds);
  return 0;
}

// Reads one line from a child's stdout (its "ready").
Result<std::string> ReadLine(int fd) {
  std::string line;
  char c;
  while (true) {
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable("a checkpoint rank ended before it was ready");
    if (c == '\n') return line;
    line += c;
  }
}

bool DropCaches() {
  ::sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  if (!f) return false;
  f << "3\n";
  return static_cast<bool>(f.flush());
}

struct Run {
  double slowest = 0;
  std::vector<double> ranks;
  bool caches_dropped = false;
};

struct TargetResult {
  std::string name;
  std::vector<Run> save, restore;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// All ranks of one save or restore, started together; the slowest counts.
Result<Run> RunRanks(Globals& g, const CheckpointFlags& f, const std::string& target, const std::string& base,
                     uint32_t save, bool restore, uint64_t bytes, const std::string& go) {
  std::error_code ec;
  std::filesystem::remove(go, ec);
  std::vector<Child> children;
  for (uint32_t r = 0; r < f.ranks; ++r) {
    const uint32_t whose = restore ? (r + 1) % f.ranks : r;  // a restore reads another rank's file
    std::vector<std::string> args = {"/proc/self/exe"};
    // The store's keys as this command found them (--ca travels as AQUIFER_CA).
    if (!g.credentials.file.empty()) args.insert(args.end(), {"--credentials", g.credentials.file});
    if (!g.credentials.profile.empty()) args.insert(args.end(), {"--profile", g.credentials.profile});
    args.insert(args.end(), {"bench", "checkpoint", "--worker-op", restore ? "restore" : "save", "--worker-target",
                             target, "--worker-path", fmt::format("{}/save-{}/rank-{}.bin", base, save, whose),
                             "--worker-bytes", std::to_string(bytes), "--worker-seed",
                             std::to_string(bench::CheckpointSeed(whose, save)), "--go", go});
    children.push_back(AQ_TRY(Spawn(args, {}, fmt::format("checkpoint rank {}", r))));
  }
  Status ready;
  for (auto& c : children) {
    if (auto line = ReadLine(c.out); !line.ok() || *line != "ready")
      ready = line.ok() ? Internal("rank: " + *line) : line.status();
  }
  { std::ofstream(go) << "go\n"; }  // every rank starts now
  Run run;
  Status failed = ready;
  for (auto& c : children) {
    auto out = Collect(std::move(c));
    if (!out.ok()) {
      if (failed.ok()) failed = out.status();
      continue;
    }
    run.ranks.push_back(std::strtod(out->c_str(), nullptr));
  }
  std::filesystem::remove(go, ec);
  AQ_TRY(std::move(failed));
  run.slowest = *std::max_element(run.ranks.begin(), run.ranks.end());
  return run;
}

Result<TargetResult> RunTarget(Globals& g, const CheckpointFlags& f, const std::string& target, const std::string& name,
                               const std::string& base, uint64_t bytes, const std::string& go) {
  TargetResult t;
  t.name = name;
  const bool posix = target != "store";
  for (uint32_t k = 0; k < f.saves; ++k) {
    if (posix) AQ_TRY(g.fs->MakeDirs(fmt::format("{}/save-{}", base, k)));
    t.save.push_back(AQ_TRY(RunRanks(g, f, target, base, k, false, bytes, go)));
    if (!g.json)
      std::fprintf(stderr, "  %-12s save %u: %.2f s (slowest rank)\n", name.c_str(), k + 1, t.save.back().slowest);
  }
  for (uint32_t k = 0; k < f.saves; ++k) {
    const bool dropped = DropCaches();
    Run r = AQ_TRY(RunRanks(g, f, target, base, k, true, bytes, go));
    r.caches_dropped = dropped;
    t.restore.push_back(std::move(r));
    if (!g.json) std::fprintf(stderr, "  %-12s restore %u: %.2f s\n", name.c_str(), k + 1, t.restore.back().slowest);
  }
  // What was written goes again (the folder is this run's own).
  for (uint32_t k = 0; k < f.saves; ++k) {
    for (uint32_t r = 0; r < f.ranks; ++r) (void)g.fs->Remove(fmt::format("{}/save-{}/rank-{}.bin", base, k, r));
  }
  if (posix) {
    std::error_code ec;
    std::filesystem::remove_all(base, ec);
  }
  return t;
}

nlohmann::json OpJson(const std::vector<Run>& runs, double total_bytes, double bytes) {
  std::vector<double> total, slowest, per_rank;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : runs) {
    total.push_back(total_bytes / r.slowest / 1e6);
    slowest.push_back(r.slowest);
    for (double s : r.ranks) per_rank.push_back(bytes / s / 1e6);
    list.push_back({{"slowest_seconds", r.slowest}, {"rank_seconds", r.ranks}, {"caches_dropped", r.caches_dropped}});
  }
  return {{"median_total_mb_per_second", Median(total)},
          {"median_slowest_seconds", Median(slowest)},
          {"median_rank_mb_per_second", Median(per_rank)},
          {"runs", list}};
}

// Bytes each rank saves, and how they were chosen: --size, or the model's
// checkpoint times --scale split over the ranks.
Result<std::pair<uint64_t, std::string>> BytesPerRank(const CheckpointFlags& f) {
  uint64_t bytes = 0;
  std::string note;
  if (!f.size.empty()) {
    auto b = units::ParseBytes(f.size);
    if (!b.ok() || *b == 0) return InvalidArgument(fmt::format("--size '{}': a positive size", f.size));
    bytes = *b;
    note = fmt::format("{} per rank (--size)", units::Bytes(static_cast<double>(bytes)));
  } else {
    const double model = f.model == "70b" ? kLlama70b : kLlama8b;
    const double scale = f.scale > 0 ? f.scale : static_cast<double>(1ull << 30) / model;  // 1 GiB in all
    bytes = static_cast<uint64_t>(model * scale / f.ranks);
    note = fmt::format("Llama-3 {} checkpoint ({}) x {:.6f} over {} ranks", f.model == "70b" ? "70B" : "8B",
                       units::Bytes(model), scale, f.ranks);
  }
  if (bytes == 0) return InvalidArgument("checkpoint bench: 0 bytes per rank; raise --scale or --size");
  return std::make_pair(bytes, note);
}

// Each target takes a small file before the first save (written, closed,
// removed): a bucket that does not exist, a key that may not write or a
// mount that is not there fails the command at once, not after the local
// disk's part of the run.
Status ProbeTarget(io::FileSystem& fs, const std::string& name, const std::string& base) {
  const std::string probe = base + ".probe";
  auto written = [&]() -> Status {
    auto w = AQ_TRY(fs.OpenWrite(probe));
    AQ_TRY(w->Append("aquifer bench checkpoint: can this target be written?\n"));
    return w->Close();
  }();
  if (!written.ok()) return written.WithContext(fmt::format("{} ({})", name, probe));
  return fs.Remove(probe).WithContext(fmt::format("{}: removing {}", name, probe));
}

// Each target's saves and restores, and each against the local disk (the
// first target); *dropped: whether every restore started with the page
// cache dropped.
nlohmann::json CompareTargets(const std::vector<TargetResult>& results, uint64_t bytes, uint32_t ranks, bool* dropped) {
  const double total = static_cast<double>(bytes) * ranks, per = static_cast<double>(bytes);
  const double base_save = OpJson(results[0].save, total, per)["median_total_mb_per_second"].get<double>();
  const double base_restore = OpJson(results[0].restore, total, per)["median_total_mb_per_second"].get<double>();
  nlohmann::json targets = nlohmann::json::object();
  for (const auto& t : results) {
    nlohmann::json s = OpJson(t.save, total, per);
    nlohmann::json r = OpJson(t.restore, total, per);
    for (const auto& one : t.restore) *dropped = *dropped && one.caches_dropped;
    const double sv = s["median_total_mb_per_second"].get<double>() / base_save;
    const double rv = r["median_total_mb_per_second"].get<double>() / base_restore;
    targets[t.name] = {
        {"save", std::move(s)}, {"restore", std::move(r)}, {"save_vs_local", sv}, {"restore_vs_local", rv}};
  }
  return targets;
}

void Execute(Globals& g, CheckpointFlags& f) {
  if (!f.worker_op.empty()) {
    g.exit_code = RunWorker(g, f);
    return;
  }
  if (f.ranks < 1 || f.ranks > 256) return Fail(g, InvalidArgument("--ranks must be 1 to 256"));
  if (f.saves < 1) return Fail(g, InvalidArgument("--saves must be at least 1"));
  auto sized = BytesPerRank(f);
  if (!sized.ok()) return Fail(g, sized.status());
  const auto& [bytes, scale_note] = *sized;
  if (!f.url.empty() && !s3::IsStoreUrl(f.url)) {
    return Fail(g, InvalidArgument(fmt::format("--url '{}': an aquifer://HOST:PORT/BUCKET[/PREFIX] URL", f.url)));
  }
  const std::string tag = fmt::format("aquifer-ckpt-{}", ::getpid());
  std::string local = f.local.empty() ? std::filesystem::temp_directory_path().string() : f.local;
  const std::string go = fmt::format("{}/{}.go", local, tag);
  std::vector<TargetResult> results;
  auto run = [&](const std::string& target, const std::string& name, const std::string& base) -> Status {
    results.push_back(AQ_TRY(RunTarget(g, f, target, name, base, bytes, go)));
    return Status::Ok();
  };
  if (!g.json) {
    std::printf("bench checkpoint: %u ranks x %s (%s), %u saves then %u restores each\n", f.ranks,
                units::Bytes(static_cast<double>(bytes)).c_str(), scale_note.c_str(), f.saves, f.saves);
    std::fflush(stdout);
  }
  std::string url = f.url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  for (const auto& [name, base] : {std::pair{"local disk", fmt::format("{}/{}", local, tag)},
                                   std::pair{"aquifer://", url.empty() ? "" : url + "/" + tag},
                                   std::pair{"mount", f.mount.empty() ? "" : fmt::format("{}/{}", f.mount, tag)}}) {
    if (Status s = base.empty() ? Status::Ok() : ProbeTarget(*g.fs, name, base); !s.ok()) return Fail(g, s);
  }
  if (Status s = run("local", "local disk", fmt::format("{}/{}", local, tag)); !s.ok()) return Fail(g, s);
  if (!url.empty()) {
    if (Status s = run("store", "aquifer://", url + "/" + tag); !s.ok()) return Fail(g, s);
  }
  if (!f.mount.empty()) {
    if (Status s = run("mount", "mount", fmt::format("{}/{}", f.mount, tag)); !s.ok()) return Fail(g, s);
  }
  bool dropped = true;
  const nlohmann::json targets = CompareTargets(results, bytes, f.ranks, &dropped);
  const std::vector<std::string> semantics = {
      "local disk: write, fsync, close, rename into place, fsync of the folder",
      "aquifer://: the parallel multipart writer; done when its close returns (the node acknowledged the whole file)",
      "mount: write, fsync, close (the close stores the file)",
      "restores: rank r reads rank r+1's file of the same save and checks every byte",
      dropped ? "restores start with the page cache dropped (sync; drop_caches)"
              : "the page cache could not be dropped (not root): restores may read from memory"};
  nlohmann::json summary = {{"ranks", f.ranks},         {"bytes_per_rank", bytes}, {"saves", f.saves},
                            {"scale", scale_note},      {"targets", targets},      {"semantics", semantics},
                            {"caches_dropped", dropped}};
  nlohmann::json config = {{"ranks", f.ranks}, {"saves", f.saves}, {"bytes_per_rank", bytes}, {"model", f.model},
                           {"url", f.url},     {"local", local},   {"mount", f.mount}};
  EmitResult(g, f.out, "bench checkpoint", {}, config, summary, nullptr, [&](const nlohmann::json&) {
    std::printf("\n  %-12s %10s %8s %10s %13s %8s %10s\n", "target", "save MB/s", "x local", "slowest s",
                "restore MB/s", "x local", "slowest s");
    for (const auto& t : results) {
      const auto& j = targets[t.name];
      std::printf("  %-12s %10.1f %7.2fx %10.2f %13.1f %7.2fx %10.2f\n", t.name.c_str(),
                  j["save"]["median_total_mb_per_second"].get<double>(), j["save_vs_local"].get<double>(),
                  j["save"]["median_slowest_seconds"].get<double>(),
                  j["restore"]["median_total_mb_per_second"].get<double>(), j["restore_vs_local"].get<double>(),
                  j["restore"]["median_slowest_seconds"].get<double>());
    }
    std::printf("  (medians of %u; MB/s = ranks x bytes per rank / the slowest rank's seconds)\n", f.saves);
    for (const auto& s : semantics) std::printf("    - %s\n", s.c_str());
  });
}

}  // namespace

void RegisterCheckpointCommand(CLI::App& group, Globals& g) {
  auto* f = g.Own<CheckpointFlags>();
  auto* cmd = group.add_subcommand(
      "checkpoint",
      "Checkpoint saves and restores (MLPerf Storage's pattern, scaled): N rank processes write S bytes each at "
      "once, K times, then read another rank's file back; local disk, aquifer:// and the mount in one run, the "
      "slowest rank counting");
  cmd->add_option("-n,--ranks", f->ranks, "Rank processes writing at once")->capture_default_str();
  cmd->add_option("--saves", f->saves, "Saves, then as many restores")->capture_default_str();
  cmd->add_option("--model", f->model, "8b (105 GB a checkpoint) or 70b (912 GB), scaled by --scale")
      ->check(CLI::IsMember({"8b", "70b"}))
      ->capture_default_str();
  cmd->add_option("--scale", f->scale, "Fraction of the model's checkpoint (default: 1 GiB in all)");
  cmd->add_option("--size", f->size, "Bytes per rank instead (e.g. 256MiB)");
  cmd->add_option("--url", f->url, "The store: aquifer://HOST:PORT/BUCKET[/PREFIX] (aquifers://, s3://)");
  cmd->add_option("--local", f->local, "The local disk's folder (default: the temporary directory)");
  cmd->add_option("--mount", f->mount, "A folder of an aquifer mount to measure too");
  AddResultFlags(cmd, f->out, false);
  AddOutputFlags(cmd, g, false);
  // A rank of a run: spawned by the command itself.
  for (auto* o : {cmd->add_option("--worker-op", f->worker_op), cmd->add_option("--worker-target", f->worker_target),
                  cmd->add_option("--worker-path", f->worker_path), cmd->add_option("--worker-bytes", f->worker_bytes),
                  cmd->add_option("--worker-seed", f->worker_seed), cmd->add_option("--go", f->go)}) {
    o->group("");
  }
  cmd->callback([f, &g] { Execute(g, *f); });
}

}  // namespace aq::cli
