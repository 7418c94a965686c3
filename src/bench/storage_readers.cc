#include "bench/storage_readers.h"

#include <fmt/format.h>
#include <liburing.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <utility>

#include "common/random.h"

namespace aq::bench {
namespace {

using Clock = std::chrono::steady_clock;

// An aligned buffer for O_DIRECT (and harmless otherwise).
struct AlignedBuffer {
  explicit AlignedBuffer(size_t n) : p(static_cast<char*>(std::aligned_alloc(io::kDirectAlignment, n))) {}
  ~AlignedBuffer() { std::free(p); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  char* p;
};

uint64_t Nanos(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

// Chooses the next file to read: at random, or this reader's round-robin share.
class FilePicker {
 public:
  FilePicker(const ReaderContext& c, size_t index)
      : c_(c),
        rng_(Rng::Derive(c.options.seed, c.options.rank * c.options.readers + index)),
        rr_(c.options.rank * c.options.readers + index) {}
  const FileEntry& Next() {
    if (c_.options.selection == FileSelection::kRandom) return c_.files[rng_.Below(c_.files.size())];
    return c_.files[std::exchange(rr_, rr_ + c_.global_readers) % c_.files.size()];
  }

 private:
  const ReaderContext& c_;
  Rng rng_;
  uint64_t rr_;
};

// Spaces requests out to the per-reader rate cap (--rate-iops).
class RateCap {
 public:
  explicit RateCap(double per_second)
      : gap_(per_second > 0 ? std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1 / per_second))
                            : Clock::duration::zero()) {}
  void Wait() {
    if (gap_ == Clock::duration::zero()) return;
    next_ += gap_;
    std::this_thread::sleep_until(next_);
  }

 private:
  Clock::duration gap_;
  Clock::time_point next_ = Clock::now();
};

// A sync-mode step ends when the reader has read step_bytes: all meet.
void StepBarrier(const ReaderContext& c, ReaderResult& res) {
  const auto w0 = Clock::now();
  c.step_barrier.arrive_and_wait();
  res.sync_wait += std::chrono::duration<double>(Clock::now() - w0).count();
  ++res.steps;
}

// iodepth requests in flight through one io_uring: slots hold a request's
// buffer and the file it reads, refilled as completions come back.
class UringReader {
 public:
  UringReader(const ReaderContext& c, size_t index, io::FileSystem& fs, ReaderResult& res)
      : c_(c),
        o_(c.options),
        fs_(fs),
        res_(res),
        picker_(c, index),
        rate_(o_.rate_iops),
        bufs_(c.request * o_.iodepth),
        slots_(o_.iodepth) {
    for (uint32_t k = o_.iodepth; k > 0; --k) free_.push_back(k - 1);
  }

  void Run() {
    if (int rc = io_uring_queue_init(o_.iodepth, &ring_, 0); rc < 0) {
      return c_.shared.Fail(
          ErrnoStatus(-rc, fmt::format("set up io_uring (depth {}) for", o_.iodepth), "an io_uring queue"));
    }
    for (;;) {
      const bool stopping = c_.shared.stop.load(std::memory_order_relaxed) || failed_;
      if (!stopping) Refill();
      io_uring_submit(&ring_);
      if (free_.size() == o_.iodepth) {  // nothing in flight
        if (stopping || failed_) break;
        if (StepFull()) {
          StepBarrier(c_, res_);
          step_submitted_ = 0;
        }
        continue;
      }
      if (!Reap()) break;  // the ring is torn down below; in-flight reads are cancelled with it
    }
    io_uring_queue_exit(&ring_);
  }

 private:
  struct OpenFile {
    std::unique_ptr<io::RandomAccessFile> file;
    uint64_t next = 0;
    uint32_t outstanding = 0;
  };
  struct Slot {
    std::shared_ptr<OpenFile> file;
    uint64_t offset = 0;
    Clock::time_point t0;
  };

  bool StepFull() const { return o_.mode == StorageMode::kSync && step_submitted_ >= o_.step_bytes; }

  void Fail(Status s) {
    c_.shared.Fail(std::move(s));
    failed_ = true;
  }

  // Queues reads into every free slot (until the step is full).
  void Refill() {
    while (!failed_ && !StepFull() && !free_.empty()) {
      if (!cur_ || cur_->next >= cur_->file->size()) {
        const FileEntry& f = picker_.Next();
        auto opened = fs_.OpenRead(f.path, o_.direct ? io::AccessHint::kDirect : io::AccessHint::kSequential);
        if (!opened.ok()) return Fail(opened.status());
        if ((*opened)->native_fd() < 0) {
          return Fail(InvalidArgument(fmt::format(
              "an io_uring queue (iodepth {}) needs a local file ('{}' has no file descriptor)", o_.iodepth, f.path)));
        }
        cur_ = std::make_shared<OpenFile>();
        cur_->file = std::move(*opened);
      }
      rate_.Wait();
      const uint32_t k = free_.back();
      free_.pop_back();
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      io_uring_prep_read(sqe, cur_->file->native_fd(), bufs_.p + k * c_.request, static_cast<unsigned>(c_.request),
                         cur_->next);
      io_uring_sqe_set_data(sqe, reinterpret_cast<void*>(static_cast<uintptr_t>(k)));
      slots_[k] = {cur_, cur_->next, Clock::now()};
      cur_->next += c_.request;
      ++cur_->outstanding;
      step_submitted_ += c_.request;
    }
  }

  // Takes the completions that are there (waiting for one); false on a ring error.
  bool Reap() {
    io_uring_cqe* cqe = nullptr;
    int rc = io_uring_wait_cqe(&ring_, &cqe);
    if (rc == -EINTR) return true;
    if (rc < 0) {
      Fail(ErrnoStatus(-rc, "wait for io_uring completions in", "an io_uring queue"));
      return false;
    }
    do {
      const uint32_t k = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(io_uring_cqe_get_data(cqe)));
      const int n = cqe->res;
      const auto t1 = Clock::now();
      Slot& s = slots_[k];
      if (n < 0) {
        Fail(ErrnoStatus(-n, fmt::format("read at offset {} of", s.offset), s.file->file->path()));
      } else if (n > 0) {
        if (c_.shared.measuring.load(std::memory_order_relaxed)) res_.latency.Record(Nanos(t1 - s.t0));
        c_.shared.bytes.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
        c_.shared.requests.fetch_add(1, std::memory_order_relaxed);
      }
      if (--s.file->outstanding == 0 && s.file->next >= s.file->file->size() && n >= 0) {
        c_.shared.files.fetch_add(1, std::memory_order_relaxed);
      }
      s.file.reset();
      free_.push_back(k);
      io_uring_cqe_seen(&ring_, cqe);
    } while (io_uring_peek_cqe(&ring_, &cqe) == 0);
    return true;
  }

  const ReaderContext& c_;
  const StorageBenchOptions& o_;
  io::FileSystem& fs_;
  ReaderResult& res_;
  FilePicker picker_;
  RateCap rate_;
  AlignedBuffer bufs_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  std::shared_ptr<OpenFile> cur_;
  uint64_t step_submitted_ = 0;
  bool failed_ = false;
  io_uring ring_{};
};

}  // namespace

void ReaderShared::Fail(Status s) {
  MutexLock lock(mu);
  if (error.ok()) error = std::move(s);
  stop = true;
}

void RunBlockingReader(const ReaderContext& c, size_t index, io::FileSystem& fs, ReaderResult& res) {
  const StorageBenchOptions& o = c.options;
  FilePicker picker(c, index);
  RateCap rate(o.rate_iops);
  AlignedBuffer buf(c.request);
  uint64_t step_read = 0;
  while (!c.shared.stop.load(std::memory_order_relaxed)) {
    const FileEntry& f = picker.Next();
    auto file = fs.OpenRead(f.path, o.direct ? io::AccessHint::kDirect : io::AccessHint::kSequential);
    if (!file.ok()) return c.shared.Fail(file.status());
    uint64_t off = 0;
    bool complete = false;
    while (!c.shared.stop.load(std::memory_order_relaxed)) {
      rate.Wait();
      const auto t0 = Clock::now();
      auto n = (*file)->ReadAt(off, c.request, buf.p);
      const auto t1 = Clock::now();
      if (!n.ok()) return c.shared.Fail(n.status());
      if (*n > 0) {
        if (c.shared.measuring.load(std::memory_order_relaxed)) res.latency.Record(Nanos(t1 - t0));
        c.shared.bytes.fetch_add(*n, std::memory_order_relaxed);
        c.shared.requests.fetch_add(1, std::memory_order_relaxed);
        off += *n;
        step_read += *n;
      }
      if (o.mode == StorageMode::kSync && step_read >= o.step_bytes) {
        StepBarrier(c, res);
        step_read = 0;
      }
      if (*n < c.request || off >= (*file)->size()) {
        complete = true;
        break;
      }
    }
    if (complete) c.shared.files.fetch_add(1, std::memory_order_relaxed);
  }
}

void RunUringReader(const ReaderContext& c, size_t index, io::FileSystem& fs, ReaderResult& res) {
  UringReader(c, index, fs, res).Run();
}

}  // namespace aq::bench
