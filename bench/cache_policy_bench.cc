// The node cache's policies under the training access pattern: every block
// read once per epoch in a new shuffled order (whole files, shuffled), for
// datasets 2x, 4x and 8x the cache. Prints the hit ratio of LRU and of
// TinyLFU admission beside the bound (cache / dataset), median of 3 seeds,
// epochs 2..6 (the first epoch fills the cache). Then a scan: does a one-off
// read of 10x the cache flush a hot set?
//
// usage: build/cache_policy_bench
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "store/block_cache.h"
#include "store/block_store.h"

using aq::store::BlockCache;
using aq::store::CachePolicy;

double Shuffled(CachePolicy policy, size_t blocks, size_t cached, uint64_t seed) {
  BlockCache c(cached * 4096, policy, 4096);
  std::vector<std::string> ids;
  for (size_t i = 0; i < blocks; ++i) ids.push_back(aq::store::NewBlockId());
  auto data = std::make_shared<const std::string>(4096, 'x');
  std::mt19937_64 rng(seed);
  uint64_t hits = 0, reads = 0;
  for (int e = 0; e < 6; ++e) {
    std::shuffle(ids.begin(), ids.end(), rng);
    for (const auto& id : ids) {
      bool hit = c.Get(id) != nullptr;
      if (!hit) c.Put(id, data);
      if (e > 0) hits += hit, ++reads;
    }
  }
  return static_cast<double>(hits) / static_cast<double>(reads);
}

double Median3(CachePolicy p, size_t blocks, size_t cached) {
  double v[3] = {Shuffled(p, blocks, cached, 1), Shuffled(p, blocks, cached, 2), Shuffled(p, blocks, cached, 3)};
  std::sort(v, v + 3);
  return v[1];
}

double ScanSurvival(CachePolicy p) {
  BlockCache c(1000 * 4096, p, 4096);
  auto data = std::make_shared<const std::string>(4096, 'x');
  std::vector<std::string> hot;
  for (int i = 0; i < 1000; ++i) hot.push_back(aq::store::NewBlockId());
  for (int r = 0; r < 3; ++r) {
    for (const auto& id : hot) {
      if (!c.Get(id)) c.Put(id, data);
    }
  }
  for (int i = 0; i < 10000; ++i) {
    auto id = aq::store::NewBlockId();
    if (!c.Get(id)) c.Put(id, data);
  }
  int still = 0;
  for (const auto& id : hot) still += c.Get(id) != nullptr;
  return still / 1000.0;
}

int main() {
  const size_t cached = 2000;
  std::printf("shuffled epochs, %zu-block cache, hit ratio (median of 3 seeds, epochs 2-6)\n", cached);
  std::printf("  %-16s %8s %8s %8s %14s\n", "dataset/cache", "bound", "LRU", "TinyLFU", "TinyLFU/bound");
  for (size_t ratio : {2, 4, 8}) {
    double bound = 1.0 / static_cast<double>(ratio);
    double lru = Median3(CachePolicy::kLru, cached * ratio, cached);
    double tiny = Median3(CachePolicy::kTinyLfu, cached * ratio, cached);
    std::printf("  %-16zu %7.1f%% %7.1f%% %7.1f%% %13.2f\n", ratio, 100 * bound, 100 * lru, 100 * tiny, tiny / bound);
  }
  std::printf("hot set kept after a scan of 10x the cache: LRU %.0f%%, TinyLFU %.0f%%\n",
              100 * ScanSurvival(CachePolicy::kLru), 100 * ScanSurvival(CachePolicy::kTinyLfu));
  return 0;
}
