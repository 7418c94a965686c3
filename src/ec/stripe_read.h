// Reading an erasure-coded stripe whose fragments live elsewhere: the one
// degraded-read path. The node reads whole blocks through it
// (cluster/cluster_blocks.cc) and the aquifer:// client byte ranges of
// them (client/s3_file_system.cc); each says how to fetch a range of one
// fragment and how to run fetches at once, this decides what to fetch.
//
// The wanted slices (ranges of data fragments) are fetched at once. A slice
// that cannot be fetched is rebuilt from the same byte range of K other
// fragments (Reed-Solomon works byte by byte, so any range of K fragments
// gives the same range of the rest): ranges already in hand first (other
// slices of this read, ranges fetched or rebuilt for an earlier slice),
// then as many more as are missing, fetched at once, then more if some of
// those fail. A fragment that failed once is not asked again in this read.
//
// Thread safety: ReadStripeSlices runs on the calling thread; `fetch` is
// called from as many threads at once as `parallel` runs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "ec/erasure.h"

namespace aq::ec {

// Bytes [offset, offset + len) of fragment `index`, written to `out`.
struct Slice {
  int index = 0;
  uint64_t offset = 0;
  size_t len = 0;
  char* out = nullptr;
};

struct StripeIo {
  // Reads bytes [offset, offset + len) of fragment `index` into `into`
  // (exactly len bytes), or says why not.
  std::function<Status(int index, uint64_t offset, size_t len, char* into)> fetch;
  // Runs fn(0) .. fn(n - 1), at once where it can, and returns when all
  // have. Null: a thread for each beyond the first (the calling thread).
  std::function<void(size_t n, const std::function<void(size_t)>& fn)> parallel;
};

struct StripeReadReport {
  // Per fragment (K+M): why a fetch of it failed; Ok if it was read or
  // never asked for.
  std::vector<Status> why;
  // Fragments of failed fetches whose ranges were rebuilt: (fragment,
  // offset, bytes), so a caller that read whole fragments can write the
  // lost ones back.
  struct Rebuilt {
    int index = 0;
    uint64_t offset = 0;
    std::string bytes;
  };
  std::vector<Rebuilt> rebuilt;
  int wanted_lost = 0;    // wanted slices that could not be fetched (each rebuilt, or the read failed)
  int extra_fetches = 0;  // ranges of other fragments fetched to rebuild them
};

// Fills every wanted slice (of data or parity fragments of a K+M stripe;
// slices must not overlap). Ok, or the first slice that could not be
// rebuilt: Corruption when a fragment that failed was damaged or missing
// (waiting would not make it readable), Unavailable when only holders out
// of reach stood in the way, naming how many of the K+M were readable.
// `report` (may be null) says what happened either way.
Status ReadStripeSlices(const Codec& codec, const std::vector<Slice>& wanted, const StripeIo& io,
                        StripeReadReport* report = nullptr);

}  // namespace aq::ec
