// A mutex and lock that Clang's -Wthread-safety can check, as LevelDB's
// port::Mutex: members declared AQ_GUARDED_BY(mu_) may only be touched with
// mu_ held, functions declared AQ_REQUIRES(mu_) only called with it held.
// GCC ignores the annotations; Clang builds (fuzz, TSan) check them.
//
// Thread safety: a Mutex is the synchronisation itself.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define AQ_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define AQ_THREAD_ANNOTATION(x)
#endif

#define AQ_CAPABILITY(x) AQ_THREAD_ANNOTATION(capability(x))
#define AQ_SCOPED_CAPABILITY AQ_THREAD_ANNOTATION(scoped_lockable)
#define AQ_GUARDED_BY(x) AQ_THREAD_ANNOTATION(guarded_by(x))
#define AQ_PT_GUARDED_BY(x) AQ_THREAD_ANNOTATION(pt_guarded_by(x))
#define AQ_REQUIRES(...) AQ_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define AQ_EXCLUDES(...) AQ_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define AQ_ACQUIRE(...) AQ_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define AQ_RELEASE(...) AQ_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define AQ_NO_THREAD_SAFETY_ANALYSIS AQ_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace aq {

class AQ_CAPABILITY("mutex") Mutex {
 public:
  void Lock() AQ_ACQUIRE() { mu_.lock(); }
  void Unlock() AQ_RELEASE() { mu_.unlock(); }
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

class AQ_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) AQ_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() AQ_RELEASE() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// A condition variable over a Mutex. REQUIRES: the mutex is held by the caller.
class CondVar {
 public:
  explicit CondVar(Mutex& mu) : mu_(mu) {}
  void Wait() AQ_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu_.native(), std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Returns false on timeout.
  template <typename Rep, typename Period>
  bool WaitFor(std::chrono::duration<Rep, Period> d) AQ_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu_.native(), std::adopt_lock);
    const bool woke = cv_.wait_for(lock, d) == std::cv_status::no_timeout;
    lock.release();
    return woke;
  }
  // Waits until pred() holds (checked with the mutex held).
  template <typename Pred>
  void Wait(Pred pred) AQ_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu_.native(), std::adopt_lock);
    cv_.wait(lock, pred);
    lock.release();
  }
  // Returns pred() at the end: false when the time ran out first.
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(std::chrono::duration<Rep, Period> d, Pred pred) AQ_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu_.native(), std::adopt_lock);
    const bool r = cv_.wait_for(lock, d, pred);
    lock.release();
    return r;
  }
  template <typename Clock, typename Duration, typename Pred>
  bool WaitUntil(std::chrono::time_point<Clock, Duration> t, Pred pred) AQ_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu_.native(), std::adopt_lock);
    const bool r = cv_.wait_until(lock, t, pred);
    lock.release();
    return r;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  Mutex& mu_;
  std::condition_variable cv_;
};

}  // namespace aq
