// aquifer bench checkpoint: the checkpointing pattern of MLPerf Storage,
// scaled to this machine. N ranks (processes) each write S bytes at once,
// K saves, then K restores in which rank r reads rank r+1's file (a job
// restarted elsewhere) and checks every byte; a save or restore counts when
// its slowest rank is done. Each target is measured with the same pattern
// in the same run: a local disk, the store (aquifer://), and the mount.
//
// This header is one rank's part (the command spawns the ranks):
//   local  write, fsync, close, rename into place, fsync of the folder
//   store  the aquifer:// writer (parallel multipart); done when Close()
//          returns, i.e. the node acknowledged the whole file
//   mount  write, fsync, close through the POSIX mount (the close stores it)
// and restores read the whole file in `chunk` requests.
//
// Thread safety: reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "io/file_system.h"

namespace aq::bench {

enum class CheckpointTarget { kLocal, kStore, kMount };
std::string_view CheckpointTargetName(CheckpointTarget t);  // "local disk", "aquifer://", "mount"

struct CheckpointRankOptions {
  CheckpointTarget target = CheckpointTarget::kLocal;
  std::string path;  // the rank's file
  uint64_t bytes = 0;
  uint64_t seed = 0;          // the file's bytes (CheckpointPattern); a restore checks them
  bool save = true;           // false: restore
  size_t chunk = 8ull << 20;  // bytes per write or read call
};

// `chunk` bytes of xorshift64* output from `seed`: a rank's file is this
// chunk repeated (cheap to make, different for every rank and save).
std::string CheckpointPattern(uint64_t seed, size_t chunk);
uint64_t CheckpointSeed(uint32_t rank, uint32_t save);

// Runs one rank's save or restore of `o.path` (through `fs` for the store;
// POSIX calls for a local disk and the mount) with `pattern` as its bytes,
// and returns the seconds it took. A restore that reads other bytes, or
// fewer, is Corruption naming the offset.
Result<double> RunCheckpointRank(io::FileSystem& fs, const CheckpointRankOptions& o, const std::string& pattern);

}  // namespace aq::bench
