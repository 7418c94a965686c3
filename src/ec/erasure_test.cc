#include "ec/erasure.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace aq::ec {
namespace {

std::string RandomBytes(size_t n, std::mt19937_64& rng) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(ErasureTest, ParsesSchemes) {
  auto s = ParseScheme("4+2");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->k, 4);
  EXPECT_EQ(s->m, 2);
  EXPECT_EQ(s->ToString(), "4+2");
  for (const char* bad : {"", "4", "4+", "+2", "4+2+1", "1+1", "33+1", "4+0", "4+17", "a+b", "4 + 2", "-4+2"}) {
    EXPECT_FALSE(ParseScheme(bad).ok()) << bad;
  }
}

TEST(ErasureTest, GfInverseAndMultiplication) {
  for (int a = 1; a < 256; ++a) EXPECT_EQ(GfMul(static_cast<uint8_t>(a), GfInv(static_cast<uint8_t>(a))), 1) << a;
  EXPECT_EQ(GfMul(0, 7), 0);
  EXPECT_EQ(GfMul(2, 0x80), 0x1d);  // x * x^7 = x^8 = x^4+x^3+x^2+1 mod 0x11d
}

// ISA-L and the table engine compute the same fragments: the matrix and
// the field agree, so either is an oracle for the other.
TEST(ErasureTest, IsalEqualsTheTableEngine) {
  std::mt19937_64 rng(1);
  for (Scheme s : {Scheme{4, 2}, Scheme{8, 2}, Scheme{8, 3}, Scheme{10, 4}, Scheme{2, 1}}) {
    auto isal = Codec::Make(s, Engine::kIsal);
    auto table = Codec::Make(s, Engine::kTable);
    ASSERT_TRUE(isal.ok() && table.ok());
    for (size_t n : {1ul, 7ul, 64ul, 1000ul, 65536ul + 13}) {
      const std::string data = RandomBytes(n, rng);
      auto a = (*isal)->Encode(data), b = (*table)->Encode(data);
      ASSERT_EQ(a.size(), static_cast<size_t>(s.k + s.m));
      EXPECT_EQ(a, b) << s.ToString() << " " << n;
      EXPECT_EQ(a[0].size(), FragmentSize(n, s.k));
      EXPECT_EQ((*isal)->Join(a, n), data);
    }
  }
}

// Any K of K+M fragments give the block back, for random erasures.
TEST(ErasureTest, AnyKFragmentsReconstruct) {
  std::mt19937_64 rng(2);
  for (Engine e : {Engine::kIsal, Engine::kTable}) {
    for (Scheme s : {Scheme{4, 2}, Scheme{8, 3}, Scheme{6, 3}, Scheme{3, 1}}) {
      auto codec = Codec::Make(s, e);
      ASSERT_TRUE(codec.ok());
      for (int trial = 0; trial < 40; ++trial) {
        const size_t n = 1 + rng() % 5000;
        const std::string data = RandomBytes(n, rng);
        const auto full = (*codec)->Encode(data);
        std::vector<int> idx(full.size());
        std::iota(idx.begin(), idx.end(), 0);
        std::shuffle(idx.begin(), idx.end(), rng);
        const int erase = 1 + static_cast<int>(rng() % s.m);
        std::vector<std::string> f = full;
        std::vector<bool> have(full.size(), true);
        for (int i = 0; i < erase; ++i) {
          have[idx[i]] = false;
          f[idx[i]] = "garbage";  // overwritten
        }
        ASSERT_TRUE((*codec)->Reconstruct(f, have).ok());
        EXPECT_EQ(f, full) << s.ToString() << " trial " << trial;
        EXPECT_EQ((*codec)->Join(f, n), data);
      }
    }
  }
}

TEST(ErasureTest, EveryErasurePatternOf4Plus2) {
  std::mt19937_64 rng(3);
  auto codec = Codec::Get({4, 2});
  ASSERT_TRUE(codec.ok());
  const std::string data = RandomBytes(4096 + 3, rng);
  const auto full = (*codec)->Encode(data);
  for (int a = 0; a < 6; ++a) {
    for (int b = a; b < 6; ++b) {
      auto f = full;
      std::vector<bool> have(6, true);
      have[a] = have[b] = false;
      f[a].clear();
      f[b].clear();
      ASSERT_TRUE((*codec)->Reconstruct(f, have).ok());
      EXPECT_EQ(f, full) << a << "," << b;
    }
  }
}

TEST(ErasureTest, TooFewFragmentsIsAnError) {
  auto codec = Codec::Get({4, 2});
  ASSERT_TRUE(codec.ok());
  auto f = (*codec)->Encode(std::string(100, 'x'));
  std::vector<bool> have = {true, false, true, false, false, true};
  Status s = (*codec)->Reconstruct(f, have);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("3 fragments left"), std::string::npos) << s.message();
  // Fragments of different sizes are refused, not read past their end.
  auto g = (*codec)->Encode(std::string(100, 'x'));
  g[1].resize(3);
  std::vector<bool> some = {true, true, true, true, false, false};
  EXPECT_EQ((*codec)->Reconstruct(g, some).code(), StatusCode::kInvalidArgument);
}

TEST(ErasureTest, GaussJordanInverts) {
  std::mt19937_64 rng(4);
  for (int n : {1, 2, 5, 8}) {
    std::vector<uint8_t> m(n * n), inv;
    do {
      for (auto& v : m) v = static_cast<uint8_t>(rng());
    } while (!GfInvert(m, inv, n));
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        uint8_t s = 0;
        for (int x = 0; x < n; ++x) s ^= GfMul(m[i * n + x], inv[x * n + j]);
        EXPECT_EQ(s, i == j ? 1 : 0);
      }
    }
  }
  std::vector<uint8_t> singular = {1, 2, 1, 2}, out;
  EXPECT_FALSE(GfInvert(singular, out, 2));
}

}  // namespace
}  // namespace aq::ec
