// A latency histogram with bounded memory and bounded relative error:
// buckets are 16 per power of two of nanoseconds (HdrHistogram's idea), so a
// percentile is exact to within 1/16 of an octave (~4.4%) however many
// requests a long run records. Per-thread histograms are merged at the end.
//
// Thread safety: none; one histogram per thread, Merge() after joining.
#pragma once

#include <array>
#include <cstdint>

namespace aq {

class LatencyHistogram {
 public:
  void Record(uint64_t nanoseconds);
  void Merge(const LatencyHistogram& other);
  // The recordings made since `earlier`, a copy of this histogram taken
  // before (a cumulative histogram's last interval). The max becomes the top
  // of the highest bucket still holding a recording (capped at the max).
  LatencyHistogram Since(const LatencyHistogram& earlier) const;
  uint64_t count() const { return count_; }
  double mean_ns() const { return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0; }
  uint64_t max_ns() const { return max_; }
  // The value below which fraction q (0..1) of the recordings fall: the
  // midpoint of the bucket holding that rank (the max for q = 1).
  double Quantile(double q) const;
  uint64_t sum_ns() const { return sum_; }
  // How many recordings were at most `ns`, to the histogram's resolution
  // (1/16 of an octave): a bucket counts when all of it lies at or below.
  uint64_t CountAtMost(double ns) const;

 private:
  static constexpr int kSub = 16;
  static constexpr int kBuckets = 64 * kSub;
  static int BucketOf(uint64_t ns);
  static double BucketLow(int b);
  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0, sum_ = 0, max_ = 0;
};

}  // namespace aq
