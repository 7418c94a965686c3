// ParallelFor: run a function over [0, n) on a fixed number of threads, the
// way dataset commands spread files or images over cores. Work is handed out
// one index at a time (items are coarse: a file, an image).
//
// Thread safety: fn is called concurrently from `threads` threads; it must be
// safe for that. The first non-OK Status stops handing out new work and is
// returned; indices already running finish.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace aq {

// threads == 0 means one per hardware thread.
Status ParallelFor(size_t n, size_t threads, const std::function<Status(size_t index)>& fn);

size_t HardwareThreads();

// A fixed set of threads running submitted tasks in order of submission
// (the mount's read-ahead fetches). The destructor runs what is queued,
// then joins.
//
// Thread safety: Submit may be called from any thread, tasks included.
class ThreadPool {
 public:
  explicit ThreadPool(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  void Submit(std::function<void()> task);

 private:
  void Run();
  Mutex mu_;
  CondVar cv_{mu_};
  std::deque<std::function<void()>> queue_ AQ_GUARDED_BY(mu_);
  bool stop_ AQ_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace aq
