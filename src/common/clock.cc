#include "common/clock.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace aq {
namespace {

class RealClock : public Clock {
 public:
  double Now() const override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  int64_t WallNanos() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  void SleepFor(double seconds) override {
    if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
};

void AddTo(std::atomic<double>& a, double d) {
  double v = a.load();
  while (!a.compare_exchange_weak(v, v + d)) {
  }
}

}  // namespace

Clock& Clock::Real() {
  static RealClock clock;
  return clock;
}

void ManualClock::SleepFor(double seconds) {
  if (seconds <= 0) return;
  AddTo(slept_, seconds);
  Advance(seconds);
}

void ManualClock::Advance(double seconds) {
  AddTo(now_, seconds);
  wall_.fetch_add(static_cast<int64_t>(seconds * 1e9));
}

RateLimiter::RateLimiter(double bytes_per_second, double burst_seconds, Clock& clock)
    : rate_(bytes_per_second),
      burst_(bytes_per_second > 0 ? std::max(bytes_per_second * burst_seconds, 64.0 * 1024) : 0),
      clock_(clock),
      last_(clock.Now()) {}

double RateLimiter::Reserve(uint64_t bytes) {
  if (rate_ <= 0) return 0;
  MutexLock lock(mu_);
  const double now = clock_.Now();
  tokens_ = std::min(burst_, tokens_ + (now - last_) * rate_);
  last_ = now;
  tokens_ -= static_cast<double>(bytes);  // may go negative: the debt is waited off
  return tokens_ < 0 ? -tokens_ / rate_ : 0;
}

}  // namespace aq
