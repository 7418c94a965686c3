#include "common/mutex.h"
// A token bucket for a node's outgoing bytes (serve --net-limit): emulates a
// node's network link at a set rate, so a cluster on one machine shows how
// throughput grows with nodes when each node's link is the limit.
//
// Thread safety: Acquire may be called from any thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

namespace aq::server {

class RateLimiter {
 public:
  // bytes_per_second <= 0: unlimited. Bursts up to 1/20 s of traffic.
  explicit RateLimiter(double bytes_per_second)
      : rate_(bytes_per_second), burst_(std::max(bytes_per_second / 20, 64.0 * 1024)) {}

  // Waits until `bytes` may be sent.
  void Acquire(uint64_t bytes) {
    if (rate_ <= 0) return;
    double wait = 0;
    {
      MutexLock lock(mu_);
      const auto now = std::chrono::steady_clock::now();
      const double dt = std::chrono::duration<double>(now - last_).count();
      last_ = now;
      tokens_ = std::min(burst_, tokens_ + dt * rate_);
      tokens_ -= static_cast<double>(bytes);  // may go negative: the debt is slept off
      if (tokens_ < 0) wait = -tokens_ / rate_;
    }
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
  double rate() const { return rate_; }

 private:
  const double rate_, burst_;
  Mutex mu_;
  double tokens_ AQ_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace aq::server
