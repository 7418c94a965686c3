#include "pipeline/plan.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/random.h"

namespace aq::pipeline {
namespace {

bool EnvInt(const char* name, int64_t* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return false;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (*end != '\0') return false;
  *out = x;
  return true;
}

}  // namespace

Result<RankInfo> ResolveRank(int64_t rank_flag, int64_t world_flag) {
  RankInfo info;
  int64_t r = 0, w = 1;
  if (rank_flag >= 0 || world_flag >= 0) {
    r = rank_flag >= 0 ? rank_flag : 0;
    w = world_flag >= 0 ? world_flag : 1;
    info.source = "flags";
  } else {
    static const char* kVars[][2] = {
        {"RANK", "WORLD_SIZE"}, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"SLURM_PROCID", "SLURM_NTASKS"}};
    for (const auto& v : kVars) {
      if (EnvInt(v[0], &r) && EnvInt(v[1], &w)) {
        info.source = fmt::format("{}/{}", v[0], v[1]);
        break;
      }
      r = 0;
      w = 1;
    }
  }
  if (w < 1 || r < 0 || r >= w) {
    return InvalidArgument(
        fmt::format("rank {} of world size {} (from {}): need 0 <= rank < world", r, w, info.source));
  }
  info.rank = static_cast<uint32_t>(r);
  info.world = static_cast<uint32_t>(w);
  return info;
}

// Long by design: one algorithm in four numbered steps (permutation, rank
// share, equal steps, simulated shuffle buffer) over shared arrays.
Result<EpochPlan> MakeEpochPlan(const std::vector<uint32_t>& files_of_sample, uint32_t num_files,
                                const PlanOptions& o) {
  if (o.world == 0 || o.rank >= o.world) return InvalidArgument("plan: rank must be below world size");
  if (o.batch_size == 0) return InvalidArgument("plan: batch size must be positive");
  const uint64_t n = files_of_sample.size();
  if (n < o.world) return InvalidArgument(fmt::format("plan: {} samples cannot be shared by {} ranks", n, o.world));

  // 1. File permutation, the same on every rank.
  std::vector<uint32_t> file_order(num_files);
  for (uint32_t i = 0; i < num_files; ++i) file_order[i] = i;
  if (o.shuffle_files) {
    Rng rng = Rng::Derive(o.seed, 0x5eed0000ull + o.epoch);
    rng.Shuffle(file_order);
  }
  std::vector<uint64_t> first(num_files + 1, 0);  // samples of file f: [first[f], first[f+1])
  for (uint32_t f : files_of_sample) ++first[f + 1];
  for (uint32_t f = 0; f < num_files; ++f) first[f + 1] += first[f];

  // 2. This rank's contiguous share of the global sequence.
  const uint64_t lo = o.rank * n / o.world, hi = (o.rank + 1) * n / o.world;
  EpochPlan plan;
  plan.read_order.reserve(hi - lo + 1);
  uint64_t pos = 0;
  for (uint32_t f : file_order) {
    uint64_t cnt = first[f + 1] - first[f];
    if (pos + cnt > lo && pos < hi) {
      uint64_t a = std::max(pos, lo) - pos, b = std::min(pos + cnt, hi) - pos;
      for (uint64_t k = a; k < b; ++k) plan.read_order.push_back(static_cast<uint32_t>(first[f] + k));
    }
    pos += cnt;
    if (pos >= hi) break;
  }

  // 3. Equal shares and equal steps on every rank.
  const uint64_t share = o.remainder == Remainder::kDrop ? n / o.world : (n + o.world - 1) / o.world;
  const uint64_t own = plan.read_order.size();
  plan.steps = o.remainder == Remainder::kDrop ? share / o.batch_size : (share + o.batch_size - 1) / o.batch_size;
  if (plan.steps == 0) {
    return InvalidArgument(
        fmt::format("plan: {} samples per rank make no full batch of {} (use a smaller batch, or pad the remainder)",
                    share, o.batch_size));
  }
  const uint64_t out_n = plan.steps * o.batch_size;
  if (o.remainder == Remainder::kDrop) {
    // The samples beyond full batches are dropped. When the epoch is
    // shuffled they are chosen at random per epoch (and rank), so which
    // samples sit out changes every epoch and all are trained on over
    // epochs; dropping the tail of the read order would leave out the same
    // records every epoch whenever the file order cannot change (one file).
    // Unshuffled, the tail is dropped, as a sequential sampler does.
    const uint64_t drop = own - out_n;
    if (drop > 0 && (o.shuffle_files || o.shuffle_buffer > 1)) {
      std::vector<bool> dropped(own, false);
      Rng rng = Rng::Derive(o.seed, (static_cast<uint64_t>(o.epoch) << 32) | (0x40000000u + o.rank));
      for (uint64_t j = own - drop; j < own; ++j) {  // Floyd's sampling: `drop` distinct positions
        const uint64_t t = rng.Below(j + 1);
        dropped[dropped[t] ? j : t] = true;
      }
      uint64_t kept = 0;
      for (uint64_t k = 0; k < own; ++k) {
        if (!dropped[k]) plan.read_order[kept++] = plan.read_order[k];
      }
    }
    plan.read_order.resize(out_n);
  } else {
    // A padded share, then a padded last batch, repeat the rank's first samples.
    for (uint64_t k = 0; plan.read_order.size() < share; ++k) plan.read_order.push_back(plan.read_order[k % own]);
    for (uint64_t k = 0; plan.read_order.size() < out_n; ++k) plan.read_order.push_back(plan.read_order[k]);
  }
  // Read order == output count.

  // 4. Shuffle buffer simulated on positions.
  plan.emit.reserve(out_n);
  const uint64_t K = std::max<uint64_t>(1, o.shuffle_buffer);
  Rng rng = Rng::Derive(o.seed, (static_cast<uint64_t>(o.epoch) << 32) | (0x80000000u + o.rank));
  std::vector<uint32_t> buf;
  buf.reserve(std::min<uint64_t>(K, plan.read_order.size()));
  uint64_t next = 0;
  const uint64_t total = plan.read_order.size();
  while (next < total && buf.size() < K) buf.push_back(static_cast<uint32_t>(next++));
  while (plan.emit.size() < out_n && !buf.empty()) {
    uint64_t r = K > 1 ? rng.Below(buf.size()) : 0;
    plan.emit.push_back(buf[r]);
    if (next < total) {
      buf[r] = static_cast<uint32_t>(next++);
    } else {
      buf[r] = buf.back();
      buf.pop_back();
    }
  }
  // With K == 1 the loop keeps read order (buf holds one element).
  return plan;
}

}  // namespace aq::pipeline
