// Last access times, recorded cheaply. Touch is a hash lookup under a
// mutex; an object's time is queued for the metadata at most once per
// `granularity` (default an hour) and Flush writes the queue in one batch
// (the node's tier thread, every few seconds). Ages measured from these
// times are exact to the granularity: a policy on "not read for 30 days"
// moves an object between 30 days and 30 days + an hour after its last read.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "store/meta_store.h"

namespace aq::store {

class AccessClock {
 public:
  explicit AccessClock(double granularity_seconds = 3600);
  // The object was read now.
  void Touch(const std::string& bucket, const std::string& key);
  // Writes the queued times; on failure they stay queued for the next call.
  Status Flush(MetaStore& meta);
  uint64_t recorded() const;  // times written so far
  size_t pending() const;

 private:
  const int64_t granularity_ns_;
  mutable Mutex mu_;
  std::unordered_map<std::string, int64_t> last_ AQ_GUARDED_BY(mu_);  // queued or written, by AccessKey
  std::vector<AccessTime> pending_ AQ_GUARDED_BY(mu_);
  uint64_t recorded_ AQ_GUARDED_BY(mu_) = 0;
};

}  // namespace aq::store
