// The order in which one rank sees samples in one epoch, decided before any
// data is read, so it is reproducible (same seed: same order on every run and
// every thread count) and consistent across ranks (every sample exactly once
// per epoch, equal step counts per rank).
//
//   1. Files are permuted per epoch (seeded by seed and epoch); samples keep
//      their order within a file, giving the global read sequence.
//   2. Rank r takes the contiguous share [r*N/W, (r+1)*N/W) of that
//      sequence, so each rank reads whole runs of files sequentially.
//   3. Shares are equalised: kDrop trims every rank to floor(N/W) samples,
//      kPad repeats a rank's first samples up to ceil(N/W), and the step
//      count per rank is the same for all (synchronous training would hang
//      otherwise). A last partial batch is dropped (kDrop) or padded (kPad).
//      Dropped samples are chosen at random per epoch and rank when the
//      epoch is shuffled (so every sample is trained on over epochs), the
//      tail of the read order when it is not.
//   4. A shuffle buffer of K samples is simulated over the rank's read
//      sequence: the output order is a permutation in which sample j is
//      emitted no earlier than K positions before it is read.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace aq::pipeline {

enum class Remainder { kDrop, kPad };

struct RankInfo {
  uint32_t rank = 0;
  uint32_t world = 1;
  std::string source = "default";  // where rank/world came from
};

// From flags when given (rank >= 0), else RANK/WORLD_SIZE,
// OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, SLURM_PROCID/SLURM_NTASKS.
Result<RankInfo> ResolveRank(int64_t rank_flag, int64_t world_flag);

struct PlanOptions {
  uint64_t seed = 1;
  uint32_t epoch = 0;
  uint32_t rank = 0;
  uint32_t world = 1;
  uint32_t batch_size = 256;
  uint64_t shuffle_buffer = 10000;  // 0 or 1: no sample shuffling
  bool shuffle_files = true;
  Remainder remainder = Remainder::kDrop;
};

struct EpochPlan {
  // Catalog sample ids in read order (the rank's share of the sequence).
  std::vector<uint32_t> read_order;
  // Output order: output j takes read_order[emit[j]]. Size = steps * batch.
  std::vector<uint32_t> emit;
  uint64_t steps = 0;
};

// files_of_sample[i] is the file of catalog sample i (samples are grouped by file, in order).
Result<EpochPlan> MakeEpochPlan(const std::vector<uint32_t>& files_of_sample, uint32_t num_files,
                                const PlanOptions& options);

}  // namespace aq::pipeline
