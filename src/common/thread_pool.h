// ParallelFor: run a function over [0, n) on a fixed number of threads, the
// way dataset commands spread files or images over cores. Work is handed out
// one index at a time (items are coarse: a file, an image).
//
// Thread safety: fn is called concurrently from `threads` threads; it must be
// safe for that. The first non-OK Status stops handing out new work and is
// returned; indices already running finish.
#pragma once

#include <cstddef>
#include <functional>

#include "common/status.h"

namespace aq {

// threads == 0 means one per hardware thread.
Status ParallelFor(size_t n, size_t threads, const std::function<Status(size_t index)>& fn);

size_t HardwareThreads();

}  // namespace aq
