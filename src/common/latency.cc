#include "common/latency.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace aq {

int LatencyHistogram::BucketOf(uint64_t ns) {
  if (ns < kSub) return static_cast<int>(ns);  // exact below 16 ns
  int octave = 63 - std::countl_zero(ns);      // ns in [2^octave, 2^(octave+1))
  int sub = static_cast<int>((ns >> (octave - 4)) & (kSub - 1));
  return std::min((octave - 3) * kSub + sub, kBuckets - 1);
}

double LatencyHistogram::BucketLow(int b) {
  if (b < kSub) return b;
  int octave = b / kSub + 3;
  int sub = b % kSub;
  return std::ldexp(1.0 + sub / static_cast<double>(kSub), octave);
}

void LatencyHistogram::Record(uint64_t ns) {
  ++buckets_[BucketOf(ns)];
  ++count_;
  sum_ += ns;
  max_ = std::max(max_, ns);
}

void LatencyHistogram::Merge(const LatencyHistogram& o) {
  for (int i = 0; i < kBuckets; ++i) buckets_[i] += o.buckets_[i];
  count_ += o.count_;
  sum_ += o.sum_;
  max_ = std::max(max_, o.max_);
}

LatencyHistogram LatencyHistogram::Since(const LatencyHistogram& earlier) const {
  LatencyHistogram d;
  int top = -1;
  for (int i = 0; i < kBuckets; ++i) {
    d.buckets_[i] = buckets_[i] >= earlier.buckets_[i] ? buckets_[i] - earlier.buckets_[i] : 0;
    d.count_ += d.buckets_[i];
    if (d.buckets_[i] > 0) top = i;
  }
  d.sum_ = sum_ >= earlier.sum_ ? sum_ - earlier.sum_ : 0;
  if (top >= 0) {
    const double hi = top < kSub ? top + 1.0 : BucketLow(top + 1);
    d.max_ = std::min(max_, static_cast<uint64_t>(hi));
  }
  return d;
}

uint64_t LatencyHistogram::CountAtMost(double ns) const {
  uint64_t n = 0;
  for (int b = 0; b < kBuckets; ++b) {
    if ((b < kSub ? b + 1.0 : BucketLow(b + 1)) > ns + 1)
      break;  // past the bound (a bucket ends just below the next's low)
    n += buckets_[b];
  }
  return n;
}

double LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  if (q >= 1) return static_cast<double>(max_);
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  rank = std::max<uint64_t>(rank, 1);
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[b];
    if (seen >= rank) {
      if (b < kSub) return b;
      double lo = BucketLow(b), hi = BucketLow(b + 1);
      return std::min((lo + hi) / 2, static_cast<double>(max_));
    }
  }
  return static_cast<double>(max_);
}

}  // namespace aq
