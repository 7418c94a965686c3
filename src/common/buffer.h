// Large buffers that a read fills: a block read into fresh memory pays a
// page fault for every 4 KiB it touches first, and on a node filling its
// RAM cache every block read is fresh memory (the cache keeps it). Measured
// on a cold read of a 64 MiB object: the zeroing of new block buffers and
// its page faults were half of the node's CPU. Asking for transparent huge
// pages over such a buffer (where the kernel leaves that to the program,
// THP "madvise") makes it a fault per 2 MiB.
//
// Thread safety: a pure function.
#pragma once

#include <cstddef>
#include <string>

namespace aq {

// A string of `n` bytes (zeros) for a read to overwrite, its memory asked
// to be backed by huge pages when it spans at least one aligned 2 MiB page.
std::string ReadBuffer(size_t n);

}  // namespace aq
