// Time behind one seam (LevelDB's Env::NowMicros): code that measures,
// paces or waits takes a Clock, the real one by default; tests pass a
// ManualClock and move time forward themselves instead of sleeping.
// RateLimiter is the one byte-rate pacer (a node's link, repair and tier
// copies, scrub reads), on a Clock.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/mutex.h"

namespace aq {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic seconds (an arbitrary origin): for intervals and deadlines.
  virtual double Now() const = 0;
  // Nanoseconds since the Unix epoch: for times stored or compared with stored ones.
  virtual int64_t WallNanos() const = 0;
  // Waits `seconds` (<= 0: returns at once).
  virtual void SleepFor(double seconds) = 0;
  // The process's clock (steady_clock, system_clock, sleeping threads).
  static Clock& Real();
};

// Time that moves only when a test moves it: SleepFor advances it at once
// (a paced loop runs at full speed and its pacing is still measured).
class ManualClock : public Clock {
 public:
  explicit ManualClock(double start = 1000, int64_t wall_ns = 1'700'000'000'000'000'000)
      : now_(start), wall_(wall_ns) {}
  double Now() const override { return now_.load(); }
  int64_t WallNanos() const override { return wall_.load(); }
  void SleepFor(double seconds) override;
  void Advance(double seconds);
  // Total seconds callers asked SleepFor to wait.
  double slept() const { return slept_.load(); }

 private:
  std::atomic<double> now_;
  std::atomic<int64_t> wall_;
  std::atomic<double> slept_{0};
};

// A token bucket of bytes per second, bursting up to `burst_seconds` of
// traffic. Reserve spends now and says how long to wait the debt off (a
// caller that must stay responsive waits on its own condition); Acquire
// waits it off on the clock.
class RateLimiter {
 public:
  // bytes_per_second <= 0: unlimited.
  explicit RateLimiter(double bytes_per_second, double burst_seconds = 0.05, Clock& clock = Clock::Real());
  // Seconds to wait before the `bytes` are within the rate (0: none).
  double Reserve(uint64_t bytes);
  void Acquire(uint64_t bytes) { clock_.SleepFor(Reserve(bytes)); }
  double rate() const { return rate_; }

 private:
  const double rate_, burst_;
  Clock& clock_;
  Mutex mu_;
  double tokens_ AQ_GUARDED_BY(mu_) = 0;
  double last_ AQ_GUARDED_BY(mu_);
};

}  // namespace aq
