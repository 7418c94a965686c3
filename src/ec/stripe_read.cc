#include "ec/stripe_read.h"

#include <fmt/format.h>

#include <cstring>
#include <deque>
#include <future>
#include <string_view>

namespace aq::ec {
namespace {

void OneThreadEach(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::future<void>> helpers;
  helpers.reserve(n > 0 ? n - 1 : 0);
  for (size_t i = 1; i < n; ++i) helpers.push_back(std::async(std::launch::async, [&fn, i] { fn(i); }));
  if (n > 0) fn(0);
  for (auto& h : helpers) h.wait();
}

// A byte range of a fragment in hand: in a caller's slice or owned here.
struct Known {
  int index;
  uint64_t offset;
  std::string_view bytes;
};

const char* Find(const std::vector<Known>& known, int index, uint64_t offset, size_t len) {
  for (const auto& r : known) {
    if (r.index == index && r.offset <= offset && r.offset + r.bytes.size() >= offset + len) {
      return r.bytes.data() + (offset - r.offset);
    }
  }
  return nullptr;
}

Status Unreadable(const std::vector<Status>& why, int present, int k, int n, const Slice& s) {
  Status last;
  bool damaged = false;
  for (const auto& w : why) {
    if (w.ok()) continue;
    last = w;
    damaged = damaged || w.code() == StatusCode::kCorruption || w.code() == StatusCode::kNotFound;
  }
  return Status(damaged ? StatusCode::kCorruption : StatusCode::kUnavailable,
                fmt::format("{} of its {} fragments readable at bytes {}-{} of fragment {}, {} needed (last: {})",
                            present, n, s.offset, s.offset + s.len, s.index, k, last.message()));
}

}  // namespace

Status ReadStripeSlices(const Codec& codec, const std::vector<Slice>& wanted, const StripeIo& io,
                        StripeReadReport* report) {
  const int k = codec.scheme().k, n = codec.scheme().k + codec.scheme().m;
  StripeReadReport local;
  StripeReadReport& r = report != nullptr ? *report : local;
  r = StripeReadReport{};
  r.why.assign(static_cast<size_t>(n), Status::Ok());
  for (const auto& s : wanted) {
    if (s.index < 0 || s.index >= n) {
      return InvalidArgument(fmt::format("fragment {} of a {} stripe", s.index, codec.scheme().ToString()));
    }
  }
  const auto& parallel = io.parallel ? io.parallel : OneThreadEach;

  std::vector<Status> got(wanted.size());
  parallel(wanted.size(), [&](size_t i) {
    const Slice& s = wanted[i];
    got[i] = io.fetch(s.index, s.offset, s.len, s.out);
  });
  std::vector<bool> bad(static_cast<size_t>(n), false);
  std::vector<Known> known;
  std::deque<std::string> owned;  // fetched or rebuilt here (a deque: views into it stay valid)
  for (size_t i = 0; i < wanted.size(); ++i) {
    const Slice& s = wanted[i];
    if (got[i].ok()) {
      known.push_back({s.index, s.offset, std::string_view(s.out, s.len)});
    } else {
      bad[s.index] = true;
      r.why[s.index] = got[i];
      r.wanted_lost++;
    }
  }

  for (size_t i = 0; i < wanted.size(); ++i) {
    if (got[i].ok()) continue;
    const Slice& s = wanted[i];
    if (const char* p = Find(known, s.index, s.offset, s.len)) {  // rebuilt with an earlier slice
      std::memcpy(s.out, p, s.len);
      continue;
    }
    std::vector<std::string> f(static_cast<size_t>(n));
    std::vector<bool> have(static_cast<size_t>(n), false);
    int present = 0;
    for (int j = 0; j < n && present < k; ++j) {
      if (j == s.index) continue;
      if (const char* p = Find(known, j, s.offset, s.len)) {
        f[j].assign(p, s.len);
        have[j] = true;
        ++present;
      }
    }
    std::vector<int> candidates;
    for (int j = 0; j < n; ++j) {
      if (j != s.index && !have[j] && !bad[j]) candidates.push_back(j);
    }
    size_t next = 0;
    while (present < k && next < candidates.size()) {
      // As many more as are missing, at once; then more if some fail.
      std::vector<int> batch;
      while (static_cast<int>(batch.size()) < k - present && next < candidates.size()) {
        batch.push_back(candidates[next++]);
      }
      std::vector<Status> ok(batch.size());
      for (int j : batch) f[j].assign(s.len, '\0');
      parallel(batch.size(), [&](size_t x) { ok[x] = io.fetch(batch[x], s.offset, s.len, f[batch[x]].data()); });
      for (size_t x = 0; x < batch.size(); ++x) {
        const int j = batch[x];
        r.extra_fetches++;
        if (ok[x].ok()) {
          have[j] = true;
          ++present;
          owned.push_back(f[j]);
          known.push_back({j, s.offset, owned.back()});
        } else {
          bad[j] = true;
          r.why[j] = ok[x];
          f[j].clear();
        }
      }
    }
    if (present < k) return Unreadable(r.why, present, k, n, s);
    for (int j = 0; j < n; ++j) {
      if (!have[j]) f[j].clear();
    }
    AQ_TRY(codec.Reconstruct(f, have));
    std::memcpy(s.out, f[s.index].data(), s.len);
    // Every fragment rebuilt here may serve a later slice; the ones that
    // failed are reported for writing back.
    for (int j = 0; j < n; ++j) {
      if (have[j]) continue;
      owned.push_back(std::move(f[j]));
      known.push_back({j, s.offset, owned.back()});
      if (bad[j]) r.rebuilt.push_back({j, s.offset, owned.back()});
    }
  }
  return Status::Ok();
}

}  // namespace aq::ec
