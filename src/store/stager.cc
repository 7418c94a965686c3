#include "store/stager.h"

#include <algorithm>
#include <chrono>

#include "common/clock.h"

namespace aq::store {

struct Stager::Slot {
  uint64_t bytes = 0;
  bool done = false;  // guarded by the stager's mu_
  std::shared_ptr<const std::string> data;
  double ready_at = 0;
};

Stager::Stager(BlockService& inner, StagerOptions options, std::function<bool(const std::string&)> resident)
    : inner_(inner), options_(options), resident_(std::move(resident)) {
  const size_t n = std::max<size_t>(1, options_.threads);
  for (size_t i = 0; i < n; ++i) threads_.emplace_back([this] { Worker(); });
}

Stager::~Stager() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  work_cv_.SignalAll();
  done_cv_.SignalAll();
  for (auto& t : threads_) t.join();
}

double Stager::Now() { return Clock::Real().Now(); }

size_t Stager::Plan(const std::string& stream, const std::vector<BlockRef>& blocks) {
  size_t queued = 0;
  {
    MutexLock lock(mu_);
    if (stopping_) return 0;
    const double now = Now();
    auto& q = streams_[stream];
    for (const auto& b : blocks) {
      ++stats_.planned;
      if (queued_ >= options_.max_queued) {
        ++stats_.skipped;
        continue;
      }
      q.push_back({b, now});
      ++wanted_[b.id];
      ++queued_;
      ++queued;
    }
    if (q.empty()) streams_.erase(stream);
  }
  if (queued > 0) work_cv_.SignalAll();
  return queued;
}

void Stager::Cancel(const std::string& stream) {
  MutexLock lock(mu_);
  if (auto it = streams_.find(stream); it != streams_.end()) {  // not staged yet: dropped
    for (const auto& e : it->second) {
      Unwant(e.ref.id);
      ++stats_.skipped;
    }
    queued_ -= it->second.size();
    streams_.erase(it);
  }
  // Staged for it and not read yet: its wants go, and a block nobody else
  // wants is freed now rather than at its ttl.
  auto owed = owed_.find(stream);
  if (owed == owed_.end()) return;
  const auto debts = std::move(owed->second);
  owed_.erase(owed);
  for (const auto& [id, n] : debts) {
    auto& who = owers_[id];
    for (uint32_t k = 0; k < n; ++k) {
      if (auto w = std::find(who.begin(), who.end(), stream); w != who.end()) who.erase(w);
      Unwant(id);
    }
    if (who.empty()) owers_.erase(id);
  }
}

void Stager::Owe(const std::string& stream, const std::string& id) {
  ++owed_[stream][id];
  owers_[id].push_back(stream);
}

void Stager::Repaid(const std::string& id) {
  auto who = owers_.find(id);
  if (who == owers_.end() || who->second.empty()) return;
  const std::string stream = who->second.back();
  who->second.pop_back();
  if (who->second.empty()) owers_.erase(who);
  auto owed = owed_.find(stream);
  if (owed == owed_.end()) return;
  auto n = owed->second.find(id);
  if (n != owed->second.end() && --n->second == 0) owed->second.erase(n);
  if (owed->second.empty()) owed_.erase(owed);
}

void Stager::Forget(const std::string& id) {
  auto who = owers_.find(id);
  if (who == owers_.end()) return;
  for (const std::string& stream : who->second) {
    auto owed = owed_.find(stream);
    if (owed == owed_.end()) continue;
    owed->second.erase(id);
    if (owed->second.empty()) owed_.erase(owed);
  }
  owers_.erase(who);
}

void Stager::Unwant(const std::string& id) {
  auto w = wanted_.find(id);
  if (w == wanted_.end()) return;
  if (--w->second > 0) return;
  wanted_.erase(w);
  auto s = slots_.find(id);
  if (s == slots_.end() || !s->second->done) return;  // one being read is released when it ends
  held_ -= std::min(held_, s->second->bytes);
  slots_.erase(s);
  work_cv_.Signal();  // room for the next entry: one worker takes it
}

void Stager::Sweep(double now) {
  last_sweep_ = now;
  for (auto it = slots_.begin(); it != slots_.end();) {
    const Slot& s = *it->second;
    if (s.done && now - s.ready_at > options_.ttl_s) {
      ++stats_.expired;
      held_ -= std::min(held_, s.bytes);
      wanted_.erase(it->first);
      Forget(it->first);
      it = slots_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = streams_.begin(); it != streams_.end();) {
    auto& q = it->second;
    while (!q.empty() && now - q.front().queued_at > options_.ttl_s) {
      Unwant(q.front().ref.id);
      ++stats_.skipped;
      --queued_;
      q.pop_front();
    }
    it = q.empty() ? streams_.erase(it) : std::next(it);
  }
}

bool Stager::Next(Entry* out, std::string* stream) {
  while (!streams_.empty()) {
    auto it = streams_.upper_bound(cursor_);
    if (it == streams_.end()) it = streams_.begin();
    auto& q = it->second;
    // Entries that need no read: read already by their reader, or shared
    // with a block staged (or being staged) for an earlier entry.
    while (!q.empty()) {
      const BlockRef& ref = q.front().ref;
      if (wanted_.count(ref.id) == 0) {
        ++stats_.skipped;
      } else if (slots_.count(ref.id) == 0) {
        break;
      } else {
        ++stats_.shared;
        Owe(it->first, ref.id);
      }
      --queued_;
      q.pop_front();
    }
    if (q.empty()) {
      cursor_ = it->first;
      streams_.erase(it);
      continue;
    }
    *out = q.front();
    if (held_ + out->ref.size > options_.memory_bytes && held_ > 0) return false;  // wait for room
    cursor_ = it->first;
    *stream = it->first;
    Owe(it->first, out->ref.id);
    --queued_;
    q.pop_front();
    if (q.empty()) streams_.erase(it);
    return true;
  }
  return false;
}

void Stager::Worker() {
  mu_.Lock();
  uint64_t settled = 0;  // entries settled without a read, as this worker last told waiters
  while (!stopping_) {
    const double now = Now();
    if (now - last_sweep_ > std::min(1.0, options_.ttl_s / 2)) Sweep(now);
    Entry e;
    std::string stream;
    if (!Next(&e, &stream)) {
      // Entries settled without a read wake those waiting on the stats.
      if (const uint64_t n = stats_.skipped + stats_.resident + stats_.expired + stats_.shared; n != settled) {
        settled = n;
        if (waiters_ > 0) done_cv_.SignalAll();
      }
      work_cv_.WaitFor(std::chrono::milliseconds(500));
      continue;
    }
    const std::string id = e.ref.id;
    if (resident_ && resident_(id)) {
      // In RAM already: its reader finds it there. Not wanted from here.
      ++stats_.resident;
      Repaid(id);
      Unwant(id);
      continue;
    }
    auto slot = std::make_shared<Slot>();
    slot->bytes = e.ref.size;
    slots_[id] = slot;
    held_ += slot->bytes;
    ++stats_.staged;
    ++reading_;
    mu_.Unlock();
    auto r = inner_.Read(e.ref);
    mu_.Lock();
    --reading_;
    slot->done = true;
    slot->ready_at = Now();
    if (r.ok()) {
      slot->data = std::move(*r);
    } else {
      ++stats_.failed;
    }
    auto current = slots_.find(id);
    const bool mine = current != slots_.end() && current->second == slot;
    if (mine && (!r.ok() || wanted_.count(id) == 0)) {
      // Failed (its readers read for themselves), or every planned read
      // of it came and went while it was being read.
      held_ -= std::min(held_, slot->bytes);
      slots_.erase(current);
      Forget(id);
    } else if (!mine) {
      held_ -= std::min(held_, slot->bytes);  // removed meanwhile
    }
    if (!mine || !r.ok() || wanted_.count(id) == 0) work_cv_.Signal();  // room freed
    // Readers waiting on this slot (late hits) and stats waiters; most
    // blocks are staged before anyone asks, so usually nobody is woken.
    if (waiters_ > 0) done_cv_.SignalAll();
  }
  mu_.Unlock();
}

Result<std::shared_ptr<const std::string>> Stager::Read(const BlockRef& ref) {
  {
    MutexLock lock(mu_);
    auto it = slots_.find(ref.id);
    if (it != slots_.end()) {
      std::shared_ptr<Slot> slot = it->second;
      const bool waited = !slot->done;
      ++waiters_;
      done_cv_.Wait([&]() AQ_REQUIRES(mu_) { return slot->done || stopping_; });
      --waiters_;
      if (slot->done && slot->data) {
        ++(waited ? stats_.late_hits : stats_.hits);
        auto data = slot->data;
        Repaid(ref.id);
        Unwant(ref.id);
        return data;
      }
    }
    Repaid(ref.id);
    Unwant(ref.id);  // read by its reader before (or without) staging
  }
  return inner_.Read(ref);
}

Status Stager::Remove(const BlockRef& ref) {
  {
    MutexLock lock(mu_);
    auto it = slots_.find(ref.id);
    if (it != slots_.end()) {
      if (it->second->done) held_ -= std::min(held_, it->second->bytes);
      slots_.erase(it);
    }
    wanted_.erase(ref.id);
    Forget(ref.id);
  }
  return inner_.Remove(ref);
}

bool Stager::Available(const BlockRef& ref) {
  {
    MutexLock lock(mu_);
    auto it = slots_.find(ref.id);
    if (it != slots_.end() && it->second->done && it->second->data) return true;
  }
  return inner_.Available(ref);
}

bool Stager::Busy() const {
  MutexLock lock(mu_);
  return queued_ > 0 || reading_ > 0;
}

StagerStats Stager::Stats() const {
  MutexLock lock(mu_);
  return StatsLocked();
}

bool Stager::WaitUntil(const std::function<bool(const StagerStats&)>& done, std::chrono::milliseconds timeout) const {
  MutexLock lock(mu_);
  ++waiters_;
  const bool met = done_cv_.WaitFor(timeout, [&]() AQ_REQUIRES(mu_) { return done(StatsLocked()); });
  --waiters_;
  return met;
}

StagerStats Stager::StatsLocked() const {
  StagerStats s = stats_;
  s.bytes_held = held_;
  s.queued = queued_;
  s.reading = reading_;
  s.streams = streams_.size();
  return s;
}

}  // namespace aq::store
