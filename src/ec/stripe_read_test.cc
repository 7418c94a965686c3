#include "ec/stripe_read.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

namespace aq::ec {
namespace {

// A 4+2 stripe on six pretend holders, each of which can be told to fail
// a fetch as damaged (Corruption), missing (NotFound) or out of reach
// (Unavailable); every fetch is counted by fragment.
class Stripe {
 public:
  explicit Stripe(uint64_t bytes, uint32_t seed = 7) {
    codec = *Codec::Make({4, 2});
    std::mt19937 rng(seed);
    block.resize(bytes);
    for (auto& c : block) c = static_cast<char>(rng());
    fragments = codec->Encode(block);
  }
  StripeIo Io() {
    return {.fetch = [this](int i, uint64_t offset, size_t len, char* into) -> Status {
              {
                std::lock_guard<std::mutex> lock(mu);
                fetches[i]++;
              }
              if (auto it = fail.find(i); it != fail.end()) return Status(it->second, "fragment " + std::to_string(i));
              if (offset + len > fragments[i].size()) return Corruption("past the end");
              std::memcpy(into, fragments[i].data() + offset, len);
              return Status::Ok();
            },
            .parallel = {}};
  }
  // The block's bytes [at, at + len) as slices of its data fragments.
  std::vector<Slice> Range(uint64_t at, size_t len, char* out) const {
    std::vector<Slice> s;
    const uint64_t frag = fragments[0].size();
    for (uint64_t x = at; x < at + len;) {
      const int i = static_cast<int>(x / frag);
      const uint64_t off = x - static_cast<uint64_t>(i) * frag;
      const size_t take = static_cast<size_t>(std::min<uint64_t>(frag - off, at + len - x));
      s.push_back({i, off, take, out + (x - at)});
      x += take;
    }
    return s;
  }
  int Fetches() const {
    int n = 0;
    for (const auto& [i, c] : fetches) n += c;
    return n;
  }

  std::shared_ptr<const Codec> codec;
  std::string block;
  std::vector<std::string> fragments;
  std::map<int, StatusCode> fail;
  std::mutex mu;
  std::map<int, int> fetches;
};

TEST(StripeReadTest, AHealthyStripeIsReadFromItsDataFragmentsAlone) {
  Stripe st(4000);
  std::string out(4000, '\0');
  StripeReadReport report;
  ASSERT_TRUE(ReadStripeSlices(*st.codec, st.Range(0, 4000, out.data()), st.Io(), &report).ok());
  EXPECT_EQ(out, st.block);
  EXPECT_EQ(st.Fetches(), 4);
  EXPECT_EQ(report.wanted_lost, 0);
  EXPECT_EQ(report.extra_fetches, 0);
  EXPECT_TRUE(report.rebuilt.empty());
}

// Every pattern of up to M failed fragments, each kind of failure, for the
// whole block and for ranges that start and end inside fragments: the
// bytes come back, the failed fragments' ranges are reported rebuilt with
// their true bytes, and no fragment that failed is asked twice.
TEST(StripeReadTest, EveryPatternOfUpToMLostFragmentsReadsTheRightBytes) {
  const std::vector<std::pair<uint64_t, size_t>> ranges = {{0, 4001}, {10, 3}, {990, 40}, {1500, 2400}, {4000, 1}};
  for (const StatusCode code : {StatusCode::kCorruption, StatusCode::kNotFound, StatusCode::kUnavailable}) {
    for (int a = -1; a < 6; ++a) {
      for (int b = a + 1; b < 6; ++b) {
        for (const auto& [at, len] : ranges) {
          Stripe st(4001);
          if (a >= 0) st.fail[a] = code;
          st.fail[b] = code;
          std::string out(len, '\0');
          StripeReadReport report;
          const Status s = ReadStripeSlices(*st.codec, st.Range(at, len, out.data()), st.Io(), &report);
          const std::string what = "lost " + std::to_string(a) + "," + std::to_string(b) + " range " +
                                   std::to_string(at) + "+" + std::to_string(len);
          ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
          EXPECT_EQ(out, st.block.substr(at, len)) << what;
          for (const auto& [i, c] : st.fetches) {
            if (st.fail.count(i)) {
              EXPECT_EQ(c, 1) << what << ": fragment " << i << " asked again";
            }
          }
          for (const auto& r : report.rebuilt) {
            EXPECT_TRUE(st.fail.count(r.index)) << what;
            EXPECT_EQ(r.bytes, st.fragments[r.index].substr(r.offset, r.bytes.size())) << what;
          }
          for (const auto& [i, c] : st.fail) {
            if (st.fetches.count(i)) {
              EXPECT_EQ(report.why[i].code(), code) << what;
            }
          }
          for (const Slice& w : st.Range(at, len, out.data())) {
            if (!st.fail.count(w.index)) continue;
            bool reported = false;
            for (const auto& r : report.rebuilt) reported |= r.index == w.index && r.offset == w.offset;
            EXPECT_TRUE(reported) << what << ": lost slice of fragment " << w.index << " not reported rebuilt";
          }
        }
      }
    }
  }
}

TEST(StripeReadTest, WholeFragmentReadsReportEachLostFragmentRebuiltWhole) {
  Stripe st(4000);
  st.fail[1] = StatusCode::kCorruption;
  st.fail[4] = StatusCode::kNotFound;  // a parity fragment, asked for once a data one failed
  std::string out(4000, '\0');
  StripeReadReport report;
  ASSERT_TRUE(ReadStripeSlices(*st.codec, st.Range(0, 4000, out.data()), st.Io(), &report).ok());
  EXPECT_EQ(out, st.block);
  EXPECT_EQ(report.wanted_lost, 1);
  EXPECT_EQ(report.extra_fetches, 2);  // parity 4 fails, parity 5 answers
  ASSERT_EQ(report.rebuilt.size(), 2u);
  for (const auto& r : report.rebuilt) {
    EXPECT_EQ(r.offset, 0u);
    EXPECT_EQ(r.bytes, st.fragments[r.index]) << r.index;
  }
}

TEST(StripeReadTest, TwoLostSlicesOfOneRangeAreRebuiltOnce) {
  Stripe st(4000);  // fragments of 1000 bytes
  st.fail[0] = st.fail[2] = StatusCode::kUnavailable;
  std::string a(100, '\0'), b(100, '\0');
  const std::vector<Slice> wanted = {{0, 200, 100, a.data()}, {2, 200, 100, b.data()}};
  StripeReadReport report;
  ASSERT_TRUE(ReadStripeSlices(*st.codec, wanted, st.Io(), &report).ok());
  EXPECT_EQ(a, st.block.substr(200, 100));
  EXPECT_EQ(b, st.block.substr(2200, 100));
  EXPECT_EQ(report.wanted_lost, 2);
  EXPECT_EQ(report.extra_fetches, 4);  // 1, 3, 4, 5 once: the second slice was rebuilt with the first
}

TEST(StripeReadTest, SlicesInHandAreUsedBeforeAnythingIsFetched) {
  Stripe st(4000);
  st.fail[3] = StatusCode::kUnavailable;
  std::string out(4000, '\0');
  StripeReadReport report;
  ASSERT_TRUE(ReadStripeSlices(*st.codec, st.Range(0, 4000, out.data()), st.Io(), &report).ok());
  EXPECT_EQ(out, st.block);
  EXPECT_EQ(report.extra_fetches, 1);  // three data fragments in hand, one parity fetched
}

TEST(StripeReadTest, FewerThanKReadableIsAnErrorThatSaysWhy) {
  {
    Stripe st(4000);
    st.fail[0] = st.fail[4] = st.fail[5] = StatusCode::kUnavailable;
    std::string out(4000, '\0');
    StripeReadReport report;
    const Status s = ReadStripeSlices(*st.codec, st.Range(0, 4000, out.data()), st.Io(), &report);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();  // holders out of reach: worth a retry
    EXPECT_NE(s.message().find("3 of its 6 fragments readable"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("4 needed"), std::string::npos) << s.ToString();
  }
  {
    Stripe st(4000);
    st.fail[0] = st.fail[5] = StatusCode::kUnavailable;
    st.fail[1] = StatusCode::kCorruption;
    std::string out(4000, '\0');
    const Status s = ReadStripeSlices(*st.codec, st.Range(0, 4000, out.data()), st.Io());
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();  // a damaged fragment: waiting will not help
  }
}

TEST(StripeReadTest, FetchesRunThroughTheCallersParallel) {
  Stripe st(4000);
  st.fail[2] = StatusCode::kUnavailable;
  std::atomic<int> runs{0};
  StripeIo io = st.Io();
  io.parallel = [&](size_t n, const std::function<void(size_t)>& fn) {
    runs++;
    for (size_t i = 0; i < n; ++i) fn(i);
  };
  std::string out(4000, '\0');
  ASSERT_TRUE(ReadStripeSlices(*st.codec, st.Range(0, 4000, out.data()), io).ok());
  EXPECT_EQ(out, st.block);
  EXPECT_EQ(runs.load(), 2);  // the wanted slices, then one batch for the lost one
}

TEST(StripeReadTest, ASliceOfAFragmentTheStripeLacksIsRefused) {
  Stripe st(4000);
  char c;
  const Status s = ReadStripeSlices(*st.codec, {{6, 0, 1, &c}}, st.Io());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

}  // namespace
}  // namespace aq::ec
