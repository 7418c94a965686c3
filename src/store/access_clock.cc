#include "store/access_clock.h"

#include <algorithm>

#include "common/clock.h"

namespace aq::store {
namespace {

// Objects remembered between flushes; past this the memory is dropped
// (costing at most one more write per object), so it stays bounded.
constexpr size_t kMaxRemembered = 1 << 20;
constexpr size_t kMaxPending = 1 << 18;

}  // namespace

AccessClock::AccessClock(double granularity_seconds)
    : granularity_ns_(static_cast<int64_t>(std::max(0.0, granularity_seconds) * 1e9)) {}

void AccessClock::Touch(const std::string& bucket, const std::string& key) {
  const int64_t now = Clock::Real().WallNanos();
  std::string k = AccessKey(bucket, key);
  MutexLock lock(mu_);
  auto it = last_.find(k);
  if (it != last_.end() && now - it->second < granularity_ns_) return;
  if (pending_.size() >= kMaxPending) return;  // the metadata is not keeping up: times are approximate anyway
  if (last_.size() >= kMaxRemembered) last_.clear();
  last_[std::move(k)] = now;
  pending_.push_back({bucket, key, now});
}

Status AccessClock::Flush(MetaStore& meta) {
  std::vector<AccessTime> batch;
  {
    MutexLock lock(mu_);
    batch.swap(pending_);
  }
  if (batch.empty()) return Status::Ok();
  Status s = meta.RecordAccess(batch);
  MutexLock lock(mu_);
  if (!s.ok()) {
    for (auto& t : batch) {
      if (pending_.size() < kMaxPending) pending_.push_back(std::move(t));
    }
    return s;
  }
  recorded_ += batch.size();
  return Status::Ok();
}

uint64_t AccessClock::recorded() const {
  MutexLock lock(mu_);
  return recorded_;
}

size_t AccessClock::pending() const {
  MutexLock lock(mu_);
  return pending_.size();
}

}  // namespace aq::store
