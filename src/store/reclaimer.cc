#include "store/reclaimer.h"

#include <chrono>

namespace aq::store {

Reclaimer::Pin& Reclaimer::Pin::operator=(Pin&& o) noexcept {
  if (this != &o) {
    if (r_ != nullptr) r_->Unpin(ids_);
    r_ = o.r_;
    ids_ = std::move(o.ids_);
    o.r_ = nullptr;
  }
  return *this;
}

Reclaimer::Pin::~Pin() {
  if (r_ != nullptr) r_->Unpin(ids_);
}

Reclaimer::Reclaimer(BlockService& blocks, ReclaimerOptions options)
    : blocks_(blocks), options_(options), clock_(options_.clock != nullptr ? *options_.clock : Clock::Real()) {
  thread_ = std::thread([this] { Run(); });
}

Reclaimer::~Reclaimer() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  thread_.join();
}

Reclaimer::Pin Reclaimer::Hold(const std::vector<BlockRef>& blocks) {
  Pin pin;
  pin.r_ = this;
  pin.ids_.reserve(blocks.size());
  MutexLock lock(mu_);
  // A block whose removal was decided before this pin (it was held by
  // nobody then) is waited for: the caller reads its layout again after
  // pinning (ObjectStore::HeadHeld), and finds it gone or still named.
  removed_cv_.Wait([&]() AQ_REQUIRES(mu_) {
    for (const auto& b : blocks) {
      if (removing_.count(b.id) > 0) return false;
    }
    return true;
  });
  for (const auto& b : blocks) {
    ++pins_[b.id];
    pin.ids_.push_back(b.id);
  }
  ++pin_count_;
  return pin;
}

void Reclaimer::Unpin(const std::vector<std::string>& ids) {
  bool released = false;
  {
    MutexLock lock(mu_);
    for (const auto& id : ids) {
      auto it = pins_.find(id);
      if (it == pins_.end()) continue;
      if (--it->second == 0) {
        pins_.erase(it);
        released = released || !pending_.empty();
      }
    }
    --pin_count_;
  }
  // The last reader of a freed block removes it, when its delay is over.
  if (released) RemoveDue(false);
}

void Reclaimer::Release(const std::vector<BlockRef>& blocks) {
  std::vector<BlockRef> now;
  {
    MutexLock lock(mu_);
    const double t = clock_.Now();
    const double due = t + options_.min_delay_s, deadline = t + options_.max_hold_s;
    for (const auto& b : blocks) {
      ++stats_.freed;
      if (options_.min_delay_s <= 0 && pins_.count(b.id) == 0) {
        now.push_back(b);
      } else {
        ++stats_.deferred;
        pending_.push_back({b, due, deadline});
      }
    }
    stats_.removed += now.size();
    for (const auto& b : now) ++removing_[b.id];
  }
  RemoveMarked(now);
}

void Reclaimer::RemoveMarked(const std::vector<BlockRef>& blocks) {
  for (const auto& b : blocks) (void)blocks_.Remove(b);
  MutexLock lock(mu_);
  for (const auto& b : blocks) {
    auto it = removing_.find(b.id);
    if (it != removing_.end() && --it->second <= 0) removing_.erase(it);
  }
  removed_cv_.SignalAll();
}

uint64_t Reclaimer::RemoveDue(bool all, bool early) {
  std::vector<BlockRef> due;
  {
    MutexLock lock(mu_);
    const double t = clock_.Now();
    std::vector<Pending> keep;
    for (auto& p : pending_) {
      const bool pinned = pins_.count(p.ref.id) > 0;
      if (all || t >= p.deadline || (!pinned && (early || t >= p.due))) {
        if (pinned) ++stats_.forced;
        if (early && !pinned && t < p.due) ++stats_.early;
        due.push_back(std::move(p.ref));
      } else {
        keep.push_back(std::move(p));
      }
    }
    pending_.swap(keep);
    stats_.removed += due.size();
    for (const auto& b : due) ++removing_[b.id];
  }
  RemoveMarked(due);
  return due.size();
}

uint64_t Reclaimer::FreeEarly() { return options_.free_early_when_full ? RemoveDue(false, true) : 0; }

void Reclaimer::Run() {
  for (;;) {
    {
      MutexLock lock(mu_);
      if (stop_) return;
      cv_.WaitFor(std::chrono::duration<double>(options_.tick_s));
      if (stop_) return;
      if (pending_.empty()) continue;
    }
    RemoveDue(false);
  }
}

void Reclaimer::Drain() { RemoveDue(true); }

void Reclaimer::RemoveDueNow() { RemoveDue(false); }

ReclaimerStats Reclaimer::Stats() const {
  MutexLock lock(mu_);
  ReclaimerStats s = stats_;
  s.pending = pending_.size();
  s.pins = pin_count_;
  return s;
}

}  // namespace aq::store
