#include "common/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace aq {

size_t HardwareThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

Status ParallelFor(size_t n, size_t threads, const std::function<Status(size_t)>& fn) {
  if (threads == 0) threads = HardwareThreads();
  if (threads > n) threads = n;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  Mutex mu;
  Status first;  // under mu
  auto worker = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      size_t i = next.fetch_add(1);
      if (i >= n) return;
      Status s = fn(i);
      if (!s.ok()) {
        MutexLock lock(mu);
        if (first.ok()) first = std::move(s);
        failed = true;
      }
    }
  };
  if (threads <= 1) {
    worker();
    return first;
  }
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return first;
}

ThreadPool::ThreadPool(size_t threads) {
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i) threads_.emplace_back([this] { Run(); });
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  for (auto& t : threads_) t.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    MutexLock lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.Signal();
}

void ThreadPool::Run() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(mu_);
      cv_.Wait([&]() AQ_REQUIRES(mu_) { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace aq
