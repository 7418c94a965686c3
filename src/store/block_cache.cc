#include "store/block_cache.h"

#include <algorithm>
#include <functional>

#include "common/mutex.h"

namespace aq::store {
namespace {

uint64_t Mix(uint64_t h, uint64_t seed) {
  h ^= seed;
  h *= 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}

}  // namespace

BlockCache::BlockCache(uint64_t capacity_bytes, CachePolicy policy, uint64_t expected_block_bytes)
    : capacity_(capacity_bytes), policy_(policy) {
  // Sketch width: 32 counters per block the cache can hold, at least 1024,
  // a power of two.
  uint64_t width = 1024;
  while (width < 32 * (capacity_bytes / std::max<uint64_t>(1, expected_block_bytes))) width <<= 1;
  sketch_.assign(4 * width, 0);
  sketch_mask_ = width - 1;
  sample_ = 10 * width;  // halve all counters after this many accesses
  stats_.capacity = capacity_bytes;
}

uint32_t BlockCache::Frequency(const std::string& id) const {
  const uint64_t h = std::hash<std::string>{}(id);
  uint32_t f = 255;
  for (uint64_t row = 0; row < 4; ++row) {
    f = std::min<uint32_t>(f, sketch_[row * (sketch_mask_ + 1) + (Mix(h, row + 1) & sketch_mask_)]);
  }
  return f;
}

void BlockCache::Touch(const std::string& id) {
  const uint64_t h = std::hash<std::string>{}(id);
  for (uint64_t row = 0; row < 4; ++row) {
    uint8_t& c = sketch_[row * (sketch_mask_ + 1) + (Mix(h, row + 1) & sketch_mask_)];
    if (c < 15) ++c;
  }
  if (++accesses_ >= sample_) {
    for (auto& c : sketch_) c >>= 1;  // ageing: old popularity fades
    accesses_ = 0;
  }
}

std::shared_ptr<const std::string> BlockCache::Get(const std::string& id) {
  MutexLock lock(mu_);
  if (policy_ == CachePolicy::kTinyLfu) Touch(id);
  auto it = index_.find(id);
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->data;
}

bool BlockCache::Contains(const std::string& id) const {
  MutexLock lock(mu_);
  return index_.count(id) > 0;
}

uint32_t BlockCache::Popularity(const std::string& id) const {
  MutexLock lock(mu_);
  return policy_ == CachePolicy::kTinyLfu ? Frequency(id) : 0;
}

bool BlockCache::Put(const std::string& id, std::shared_ptr<const std::string> data, bool spill, Evicted* evicted) {
  const uint64_t size = data->size();
  MutexLock lock(mu_);
  if (index_.count(id)) return true;
  if (size > capacity_) return false;
  if (policy_ == CachePolicy::kTinyLfu && stats_.bytes + size > capacity_) {
    // Admission: the candidate must have been asked for more often than
    // every block it would push out. Its own request (counted in Get just
    // now) is left out: under shuffled epochs every block is read once per
    // epoch, and counting it would let each newcomer evict a cached block
    // that simply has not come up yet this epoch.
    const uint32_t candidate = Frequency(id) > 0 ? Frequency(id) - 1 : 0;
    uint64_t freed = 0;
    for (auto it = lru_.rbegin(); it != lru_.rend() && stats_.bytes - freed + size > capacity_; ++it) {
      if (Frequency(it->id) >= candidate) {
        ++stats_.rejected;
        return false;
      }
      freed += it->data->size();
    }
  }
  while (stats_.bytes + size > capacity_ && !lru_.empty()) {
    stats_.bytes -= lru_.back().data->size();
    index_.erase(lru_.back().id);
    if (evicted != nullptr && lru_.back().spill) evicted->emplace_back(lru_.back().id, std::move(lru_.back().data));
    lru_.pop_back();
    ++stats_.evicted;
  }
  lru_.push_front({id, std::move(data), spill});
  index_[id] = lru_.begin();
  stats_.bytes += size;
  ++stats_.admitted;
  return true;
}

void BlockCache::Erase(const std::string& id) {
  MutexLock lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return;
  stats_.bytes -= it->second->data->size();
  lru_.erase(it->second);
  index_.erase(it);
}

CacheStats BlockCache::Stats() const {
  MutexLock lock(mu_);
  CacheStats s = stats_;
  s.entries = index_.size();
  return s;
}

}  // namespace aq::store
