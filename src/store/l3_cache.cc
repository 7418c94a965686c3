#include "store/l3_cache.h"

#include <fmt/format.h>

#include <unordered_set>

#include "common/log.h"

namespace aq::store {
namespace {
const char* kPool = "l3";
}

Result<std::unique_ptr<L3Cache>> L3Cache::Open(io::FileSystem& fs, L3Options options, const BlockCache* popularity) {
  if (options.path.empty()) return InvalidArgument("the L3 cache needs a directory");
  if (options.capacity_bytes == 0) return InvalidArgument("the L3 cache needs a size > 0");
  AQ_TRY(fs.MakeDirs(options.path));
  auto store = AQ_TRY(BlockStore::Open(fs, {{kPool, options.path, Media::kSsd}}));
  // Leftovers of writes a stop interrupted go; every complete block stays.
  auto ids = AQ_TRY(store->List());
  (void)store->CollectGarbage(ids);
  std::unique_ptr<L3Cache> c(new L3Cache(std::move(options), std::move(store), popularity));
  {
    MutexLock lock(c->mu_);
    for (const auto& id : ids) {
      BlockRef ref;
      ref.id = id;
      ref.pool = kPool;
      auto info = fs.Stat(c->store_->PathOf(ref));
      if (!info.ok()) continue;
      if (c->stats_.bytes + info->size > c->options_.capacity_bytes) {
        (void)c->store_->Remove(ref);  // a smaller cache than before
        continue;
      }
      c->lru_.push_back({id, info->size});
      c->index_[id] = std::prev(c->lru_.end());
      c->stats_.bytes += info->size;
      c->stats_.restored++;
    }
  }
  return c;
}

L3Cache::L3Cache(L3Options options, std::unique_ptr<BlockStore> store, const BlockCache* popularity)
    : options_(std::move(options)), store_(std::move(store)), popularity_(popularity) {
  stats_.capacity = options_.capacity_bytes;
  thread_ = std::thread([this] { Run(); });
}

L3Cache::~L3Cache() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const std::string> L3Cache::Get(const BlockRef& ref) {
  {
    MutexLock lock(mu_);
    auto it = index_.find(ref.id);
    if (it == index_.end()) {
      ++stats_.misses;
      return nullptr;
    }
    lru_.splice(lru_.begin(), lru_, it->second);
  }
  BlockRef here = ref;
  here.pool = kPool;
  here.nodes.clear();
  auto bytes = store_->Read(here);
  MutexLock lock(mu_);
  if (!bytes.ok()) {
    // Damaged or gone (the directory was wiped): never served, dropped.
    ++stats_.damaged;
    ++stats_.misses;
    if (auto it = index_.find(ref.id); it != index_.end()) {
      stats_.bytes -= it->second->size;
      lru_.erase(it->second);
      index_.erase(it);
    }
    (void)store_->Remove(here);
    return nullptr;
  }
  ++stats_.hits;
  return std::make_shared<const std::string>(std::move(*bytes));
}

bool L3Cache::Admit(const std::string& id, uint64_t size, std::vector<std::string>* evict) {
  if (size > options_.capacity_bytes) return false;
  uint64_t room = options_.capacity_bytes - std::min(options_.capacity_bytes, stats_.bytes + reserved_);
  if (room >= size) return true;
  // As the RAM cache admits: more popular than every block it would push
  // out, its own request (just counted by RAM) left out.
  const uint32_t f = popularity_ != nullptr ? popularity_->Popularity(id) : 0;
  const uint32_t candidate = f > 0 ? f - 1 : 0;
  std::vector<std::string> victims;
  for (auto it = lru_.rbegin(); it != lru_.rend() && room < size; ++it) {
    if (popularity_ != nullptr && popularity_->Popularity(it->id) >= candidate) return false;
    victims.push_back(it->id);
    room += it->size;
  }
  if (room < size) return false;
  *evict = std::move(victims);
  return true;
}

void L3Cache::Offer(const std::string& id, std::shared_ptr<const std::string> data) {
  if (!data) return;
  MutexLock lock(mu_);
  if (index_.count(id)) return;
  for (const auto& q : queue_) {
    if (q.first == id) return;
  }
  if (queued_bytes_ + data->size() > options_.queue_bytes) {
    ++stats_.dropped;  // the SSD is behind: this one is not worth waiting for
    return;
  }
  std::vector<std::string> evict;
  if (!Admit(id, data->size(), &evict)) {
    ++stats_.rejected;
    return;
  }
  for (const auto& v : evict) {
    auto it = index_.find(v);
    if (it == index_.end()) continue;
    stats_.bytes -= it->second->size;
    lru_.erase(it->second);
    index_.erase(it);
    ++stats_.evicted;
    BlockRef ref;
    ref.id = v;
    ref.pool = kPool;
    (void)store_->Remove(ref);
  }
  reserved_ += data->size();
  queued_bytes_ += data->size();
  queue_.emplace_back(id, std::move(data));
  cv_.Signal();
}

void L3Cache::Run() {
  while (true) {
    std::pair<std::string, std::shared_ptr<const std::string>> job;
    {
      MutexLock lock(mu_);
      cv_.Wait([&]() AQ_REQUIRES(mu_) { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    auto written = store_->WriteWithId(job.first, kPool, *job.second);
    MutexLock lock(mu_);
    writing_ = false;
    const uint64_t size = job.second->size();
    reserved_ -= size;
    queued_bytes_ -= size;
    if (!written.ok()) {
      if (stats_.write_errors++ == 0) log::warn("L3 cache {}: {}", options_.path, written.status().message());
    } else if (!index_.count(job.first)) {
      lru_.push_front({job.first, size});
      index_[job.first] = lru_.begin();
      stats_.bytes += size;
      ++stats_.admitted;
    }
    cv_.SignalAll();
  }
}

void L3Cache::Erase(const std::string& id) {
  MutexLock lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return;
  stats_.bytes -= it->second->size;
  lru_.erase(it->second);
  index_.erase(it);
  BlockRef ref;
  ref.id = id;
  ref.pool = kPool;
  (void)store_->Remove(ref);
}

void L3Cache::Retain(const std::vector<std::string>& referenced) {
  const std::unordered_set<std::string> keep(referenced.begin(), referenced.end());
  std::vector<std::string> gone;
  {
    MutexLock lock(mu_);
    for (const auto& e : lru_) {
      if (!keep.count(e.id)) gone.push_back(e.id);
    }
  }
  for (const auto& id : gone) Erase(id);
}

bool L3Cache::Contains(const std::string& id) const {
  MutexLock lock(mu_);
  return index_.count(id) > 0;
}

void L3Cache::Flush() {
  MutexLock lock(mu_);
  cv_.Wait([&]() AQ_REQUIRES(mu_) { return stop_ || (queue_.empty() && !writing_); });
}

L3Stats L3Cache::Stats() const {
  MutexLock lock(mu_);
  L3Stats s = stats_;
  s.entries = index_.size();
  s.queued = queue_.size() + (writing_ ? 1 : 0);
  s.queued_bytes = queued_bytes_;
  return s;
}

}  // namespace aq::store
