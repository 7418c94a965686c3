// How much of a set of files the page cache holds now (mincore over a
// read-only mapping; maps nothing into the cache itself). Used to show the
// "Linux cache" state before and after a bench, beside the cache model.
//
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace aq::monitor {

struct Residency {
  uint64_t bytes = 0, resident_bytes = 0;
  double fraction() const { return bytes ? static_cast<double>(resident_bytes) / static_cast<double>(bytes) : 0; }
};

// Files that cannot be mapped (not local, gone) count as not resident.
Residency PageCacheResidency(const std::vector<std::string>& files);

}  // namespace aq::monitor
