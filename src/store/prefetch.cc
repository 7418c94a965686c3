#include "store/prefetch.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "common/clock.h"
#include "common/mutex.h"

namespace aq::store {

struct ReadStream::Slot {
  Slot(Prefetcher& o, uint64_t b, std::string block_id) : owner(o), bytes(b), id(std::move(block_id)) {}
  ~Slot() {
    if (!consumed) owner.Count(&PrefetchStats::wasted);
    owner.Unshare(id);
    if (!released) owner.Unreserve(bytes);
  }
  Prefetcher& owner;
  const uint64_t bytes;
  const std::string id;  // the block's
  std::atomic<bool> cancelled{false};
  Mutex mu;
  CondVar cv{mu};
  bool done AQ_GUARDED_BY(mu) = false;
  bool consumed AQ_GUARDED_BY(mu) = false;
  // Handed to another stream's reader: the bytes are theirs now, no longer
  // held (or charged) while the stream that read them ahead idles.
  bool released AQ_GUARDED_BY(mu) = false;
  Status status;
  std::shared_ptr<const std::string> data;
};

ReadStream::ReadStream(Prefetcher& owner, std::shared_ptr<const ObjectMeta> object)
    : owner_(owner), object_(std::move(object)) {
  uint64_t at = 0;
  starts_.reserve(object_->blocks.size());
  for (const auto& b : object_->blocks) {
    starts_.push_back(at);
    at += b.size;
  }
}

ReadStream::~ReadStream() { DropPending(); }

void ReadStream::DropPending() {
  for (auto& [index, slot] : pending_) slot->cancelled = true;
  pending_.clear();
}

Result<std::shared_ptr<const std::string>> ReadStream::Block(size_t i) {
  const auto& blocks = object_->blocks;
  if (i >= blocks.size()) {
    return InvalidArgument(fmt::format("block {} of '{}', which has {}", i, object_->key, blocks.size()));
  }
  constexpr size_t kNone = static_cast<size_t>(-1);
  if (last_ != kNone && i == last_ && last_data_) {  // the rest of the same block
    IssueAfter(i);
    return last_data_;
  }
  const bool in_order = last_ == kNone || i == last_ + 1;
  if (!in_order) {  // a jump: what was read ahead is not what this reader wants
    DropPending();
    window_ = 2;
    speculate_ = false;
  }
  while (!pending_.empty() && pending_.begin()->first < i) {
    pending_.begin()->second->cancelled = true;
    pending_.erase(pending_.begin());
  }
  std::shared_ptr<const std::string> data;
  // Read ahead by this stream, else by another one of the same pass (a
  // client that reads one object in parallel ranges makes a stream per
  // range in flight).
  std::shared_ptr<Slot> slot;
  bool theirs = false;
  if (auto it = pending_.find(i); it != pending_.end()) {
    slot = std::move(it->second);
    pending_.erase(it);
  } else {
    slot = owner_.Shared(blocks[i].id);
    theirs = slot != nullptr;
  }
  if (slot) {
    bool waited, first, release = false;
    {
      MutexLock lock(slot->mu);
      waited = !slot->done;
      slot->cv.Wait([&]() AQ_REQUIRES(slot->mu) { return slot->done; });
      first = !slot->consumed;
      slot->consumed = true;
      data = slot->data;
      if (theirs && !slot->released) {
        slot->released = release = true;
        slot->data.reset();  // the stream that read it ahead reads it again if it ever wants it
      }
    }
    if (release) owner_.Unreserve(slot->bytes);
    if (first) owner_.Count(waited ? &PrefetchStats::late_hits : &PrefetchStats::hits);
  }
  if (data == nullptr) {
    // Not read ahead, or read ahead and failed (a holder that died after
    // the read was issued): read now, with the cluster's current view.
    auto r = owner_.ReadBlock(blocks[i]);
    if (!r.ok()) {
      // A stream that fails reads nothing more ahead: whatever is pending
      // would be read for a reader that is about to stop.
      DropPending();
      window_ = 2;
      speculate_ = false;
      return r.status();
    }
    data = std::move(*r);
  }
  if (last_ != kNone && i == last_ + 1) window_ = std::min(owner_.options().max_window_blocks, window_ * 2);
  last_ = i;
  last_data_ = data;
  IssueAfter(i);
  return data;
}

void ReadStream::IssueAfter(size_t i) {
  const size_t n = object_->blocks.size();
  const size_t limit = speculate_ ? n - 1 : std::min(request_last_, n - 1);
  if (i < limit) Issue(i + 1, std::min<size_t>(limit, i + window_));
}

void ReadStream::Issue(size_t from, size_t to) {
  for (size_t j = from; j <= to; ++j) {
    if (pending_.count(j)) continue;
    const BlockRef& ref = object_->blocks[j];
    if (auto theirs = owner_.Shared(ref.id)) {  // another stream reads it already
      pending_.emplace(j, std::move(theirs));
      continue;
    }
    if (!owner_.Reserve(ref.size)) return;  // the budget is spent: read on demand
    auto slot = std::make_shared<Slot>(owner_, ref.size, ref.id);
    pending_.emplace(j, slot);
    owner_.Share(ref.id, slot);
    owner_.Count(&PrefetchStats::issued);
    owner_.Submit([slot, ref, owner = &owner_] {
      Status st;
      std::shared_ptr<const std::string> data;
      if (slot->cancelled) {
        st = Status(StatusCode::kInternal, "prefetch cancelled");
      } else {
        auto r = owner->ReadBlock(ref);
        if (r.ok()) {
          data = std::move(*r);
        } else {
          st = r.status();
        }
      }
      MutexLock lock(slot->mu);
      slot->status = std::move(st);
      slot->data = std::move(data);
      slot->done = true;
      slot->cv.SignalAll();
    });
  }
}

Prefetcher::Prefetcher(BlockService& blocks, PrefetchOptions options) : blocks_(blocks), options_(options) {
  const size_t n = std::max<size_t>(1, options_.threads);
  for (size_t i = 0; i < n; ++i) threads_.emplace_back([this] { Worker(); });
}

Prefetcher::~Prefetcher() {
  std::deque<std::function<void()>> dropped;
  std::multimap<std::string, std::shared_ptr<ReadStream>> idle;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    dropped.swap(tasks_);
  }
  cv_.SignalAll();
  for (auto& t : threads_) t.join();
  {
    MutexLock lock(mu_);
    idle.swap(idle_);
  }
  // `dropped` and `idle` release their slots here, outside the lock.
}

double Prefetcher::Now() { return Clock::Real().Now(); }

void Prefetcher::Count(uint64_t PrefetchStats::*field) {
  MutexLock lock(mu_);
  ++(stats_.*field);
}

bool Prefetcher::Reserve(uint64_t bytes) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::vector<std::shared_ptr<ReadStream>> victims;
    {
      MutexLock lock(mu_);
      if (held_ + bytes <= options_.memory_bytes) {
        held_ += bytes;
        stats_.bytes_held = held_;
        return true;
      }
      if (attempt == 1 || idle_.empty()) return false;
      victims = Evict(idle_.size() / 2);  // the older half of the idle streams give back their blocks
    }
    victims.clear();  // their slots unreserve (those still being read, when the read ends)
  }
  return false;
}

void Prefetcher::Unreserve(uint64_t bytes) {
  MutexLock lock(mu_);
  held_ -= std::min(held_, bytes);
  stats_.bytes_held = held_;
  held_cv_.SignalAll();
}

bool Prefetcher::WaitUntilHeldAtMost(uint64_t bytes, std::chrono::milliseconds timeout) const {
  MutexLock lock(mu_);
  return held_cv_.WaitFor(timeout, [&] { return held_ <= bytes; });
}

std::vector<std::shared_ptr<ReadStream>> Prefetcher::Evict(size_t keep) {
  std::vector<std::shared_ptr<ReadStream>> out;
  const double now = Now();
  for (auto it = idle_.begin(); it != idle_.end();) {
    if (now - it->second->idle_since_ > options_.idle_seconds) {
      out.push_back(std::move(it->second));
      it = idle_.erase(it);
    } else {
      ++it;
    }
  }
  while (idle_.size() > keep) {
    auto oldest = idle_.begin();
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if (it->second->idle_since_ < oldest->second->idle_since_) oldest = it;
    }
    out.push_back(std::move(oldest->second));
    idle_.erase(oldest);
  }
  return out;
}

namespace {
std::string StreamKey(const ObjectMeta& o) { return fmt::format("{}/{}#{}", o.bucket, o.key, o.version); }
}  // namespace

std::shared_ptr<ReadStream> Prefetcher::Begin(std::shared_ptr<const ObjectMeta> object, uint64_t offset, uint64_t n) {
  std::shared_ptr<ReadStream> stream;
  std::vector<std::shared_ptr<ReadStream>> victims;
  {
    MutexLock lock(mu_);
    victims = Evict(options_.max_idle_streams);
    auto [first, last] = idle_.equal_range(StreamKey(*object));
    for (auto it = first; it != last; ++it) {
      if (it->second->next_offset_ == offset) {
        stream = std::move(it->second);
        idle_.erase(it);
        break;
      }
    }
    ++(stream ? stats_.continued : stats_.new_streams);
  }
  victims.clear();
  if (stream) {
    stream->speculate_ = true;  // a reader that continues where it stopped is streaming
  } else {
    stream.reset(new ReadStream(*this, std::move(object)));
    // A read from the start of an object begins a pass over it (training
    // reads whole shards), as the kernel's readahead assumes: read past the
    // request's end from the first request on. A read elsewhere has to
    // prove itself sequential first.
    stream->speculate_ = offset == 0;
  }
  const auto& starts = stream->starts_;
  const uint64_t last_byte = n == 0 ? offset : offset + n - 1;
  auto after = std::upper_bound(starts.begin(), starts.end(), last_byte);
  stream->request_last_ = after == starts.begin() ? 0 : static_cast<size_t>(after - starts.begin() - 1);
  return stream;
}

void Prefetcher::End(std::shared_ptr<ReadStream> stream, uint64_t end) {
  std::shared_ptr<ReadStream> keep = stream;            // outlives the lock below
  if (!stream || end >= stream->object_->size) return;  // read to the end: nothing to continue
  stream->next_offset_ = end;
  stream->idle_since_ = Now();
  MutexLock lock(mu_);
  if (!stopping_) idle_.emplace(StreamKey(*stream->object_), std::move(stream));
  // (when stopping, the stream is released by the caller's reference, after the lock)
}

std::shared_ptr<ReadStream::Slot> Prefetcher::Shared(const std::string& id) {
  MutexLock lock(shared_mu_);
  auto it = shared_.find(id);
  return it == shared_.end() ? nullptr : it->second.lock();
}

void Prefetcher::Share(const std::string& id, const std::shared_ptr<ReadStream::Slot>& slot) {
  MutexLock lock(shared_mu_);
  shared_[id] = slot;
}

void Prefetcher::Unshare(const std::string& id) {
  MutexLock lock(shared_mu_);
  // A slot being destroyed has expired; a newer one for the block stays.
  if (auto it = shared_.find(id); it != shared_.end() && it->second.expired()) shared_.erase(it);
}

PrefetchStats Prefetcher::Stats() const {
  MutexLock lock(mu_);
  return stats_;
}

void Prefetcher::Submit(std::function<void()> task) {
  {
    MutexLock lock(mu_);
    if (!stopping_) {
      tasks_.push_back(std::move(task));
      task = nullptr;
    }
  }
  if (task) {
    task();  // shutting down: no worker will run it, and a reader may wait on it
    return;
  }
  cv_.Signal();
}

void Prefetcher::Worker() {
  while (true) {
    std::function<void()> task;
    {
      MutexLock lock(mu_);
      cv_.Wait([&] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace aq::store
