// Deterministic random numbers. Everything seeded in aquifer (synthetic data,
// shard order, shuffles) uses this generator so a seed gives the same result
// on every platform and standard library (std::uniform_*_distribution does
// not promise that).
//
// Thread safety: a Rng is not thread-safe; give each thread its own, derived
// with Derive() so results do not depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace aq {

// SplitMix64: tiny, fast, passes BigCrush; good for data generation, not crypto.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n). REQUIRES: n > 0. (Lemire's multiply-shift; the tiny
  // bias is irrelevant for data generation.)
  uint64_t Below(uint64_t n) { return static_cast<uint64_t>((static_cast<__uint128_t>(Next()) * n) >> 64); }
  // Uniform in [lo, hi].
  int64_t Between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Below(static_cast<uint64_t>(hi - lo + 1)));
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

  // A generator for sub-stream `id`, independent of how many numbers this one
  // has produced.
  static Rng Derive(uint64_t seed, uint64_t id) {
    Rng r(seed ^ (id * 0xd1342543de82ef95ull + 0x2545f4914f6cdd1dull));
    r.Next();
    return r;
  }

  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Below(i)]);
  }

 private:
  uint64_t state_;
};

}  // namespace aq
