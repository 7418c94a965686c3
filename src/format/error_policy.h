// What readers do with damaged input: stop with an error naming file, byte
// offset and record number (kFail, the default), or skip the damage, keep
// going and report every skip (kSkip). Never a crash, never a silent short read.
// The policy is about damaged bytes only: an outage (IsOutage) always stops.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace aq::format {

enum class ErrorPolicy { kFail, kSkip };

Result<ErrorPolicy> ParseErrorPolicy(std::string_view s);  // "fail" | "skip"

// A failure that says nothing about the input's bytes: the store could not
// answer (a node or service down past the client's retries, a timeout) or
// would not (permissions). The policy never skips these: skipping an
// outage would turn it into different training data.
inline bool IsOutage(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kTimedOut ||
         s.code() == StatusCode::kPermissionDenied;
}

struct SkippedRecord {
  std::string file;
  uint64_t offset = 0;  // where the damage starts
  uint64_t record = 0;  // number of the record that was being read (0-based)
  uint64_t bytes = 0;   // bytes passed over
  std::string reason;
};

}  // namespace aq::format
