#include "ec/erasure.h"

#include <fmt/format.h>
#include <isa-l/erasure_code.h>

#include <array>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>

namespace aq::ec {
namespace {

struct Tables {
  std::array<uint8_t, 256> log{}, exp_{};
  std::array<uint8_t, 512> exp{};
  std::vector<uint8_t> mul = std::vector<uint8_t>(256 * 256);
  Tables() {
    unsigned x = 1;
    for (int i = 0; i < 255; ++i) {
      exp[i] = exp[i + 255] = static_cast<uint8_t>(x);
      log[x] = static_cast<uint8_t>(i);
      x <<= 1;
      if (x & 0x100) x ^= 0x11d;
    }
    for (int a = 0; a < 256; ++a) {
      for (int b = 0; b < 256; ++b) {
        mul[a * 256 + b] = (a == 0 || b == 0) ? 0 : exp[log[a] + log[b]];
      }
    }
  }
};

const Tables& T() {
  static const Tables t;
  return t;
}

}  // namespace

uint8_t GfMul(uint8_t a, uint8_t b) { return T().mul[a * 256 + b]; }
uint8_t GfInv(uint8_t a) { return T().exp[255 - T().log[a]]; }

bool GfInvert(std::vector<uint8_t> m, std::vector<uint8_t>& out, int n) {
  out.assign(static_cast<size_t>(n) * n, 0);
  for (int i = 0; i < n; ++i) out[i * n + i] = 1;
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    while (pivot < n && m[pivot * n + col] == 0) ++pivot;
    if (pivot == n) return false;
    if (pivot != col) {
      for (int j = 0; j < n; ++j) {
        std::swap(m[col * n + j], m[pivot * n + j]);
        std::swap(out[col * n + j], out[pivot * n + j]);
      }
    }
    const uint8_t inv = GfInv(m[col * n + col]);
    for (int j = 0; j < n; ++j) {
      m[col * n + j] = GfMul(m[col * n + j], inv);
      out[col * n + j] = GfMul(out[col * n + j], inv);
    }
    for (int r = 0; r < n; ++r) {
      const uint8_t f = m[r * n + col];
      if (r == col || f == 0) continue;
      for (int j = 0; j < n; ++j) {
        m[r * n + j] ^= GfMul(f, m[col * n + j]);
        out[r * n + j] ^= GfMul(f, out[col * n + j]);
      }
    }
  }
  return true;
}

std::string Scheme::ToString() const { return fmt::format("{}+{}", k, m); }

Status CheckScheme(const Scheme& s) {
  if (s.k < 2 || s.k > 32 || s.m < 1 || s.m > 16) {
    return InvalidArgument(fmt::format(
        "erasure code {}: K (data fragments) must be 2 to 32 and M (parity fragments) 1 to 16", s.ToString()));
  }
  return Status::Ok();
}

Result<Scheme> ParseScheme(std::string_view text) {
  const size_t plus = text.find('+');
  Scheme s;
  auto num = [](std::string_view t, int& v) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && p == t.data() + t.size() && !t.empty();
  };
  if (plus == std::string_view::npos || !num(text.substr(0, plus), s.k) || !num(text.substr(plus + 1), s.m)) {
    return InvalidArgument(fmt::format("erasure code '{}': expected K+M, e.g. 4+2 or 8+3", text));
  }
  AQ_TRY(CheckScheme(s));
  return s;
}

Codec::Codec(Scheme scheme, Engine engine) : scheme_(scheme), engine_(engine) {
  const int k = scheme.k, rows = scheme.k + scheme.m;
  matrix_.assign(static_cast<size_t>(rows) * k, 0);
  if (engine == Engine::kIsal) {
    gf_gen_cauchy1_matrix(matrix_.data(), rows, k);
    parity_tables_.resize(static_cast<size_t>(32) * k * scheme.m);
    ec_init_tables(k, scheme.m, matrix_.data() + static_cast<size_t>(k) * k, parity_tables_.data());
  } else {
    // The same matrix, computed here: identity, then 1 / (i ^ j).
    for (int i = 0; i < k; ++i) matrix_[i * k + i] = 1;
    for (int i = k; i < rows; ++i) {
      for (int j = 0; j < k; ++j) matrix_[i * k + j] = GfInv(static_cast<uint8_t>(i ^ j));
    }
  }
}

Result<std::shared_ptr<const Codec>> Codec::Make(Scheme scheme, Engine engine) {
  AQ_TRY(CheckScheme(scheme));
  return std::shared_ptr<const Codec>(new Codec(scheme, engine));
}

Result<std::shared_ptr<const Codec>> Codec::Get(Scheme scheme) {
  AQ_TRY(CheckScheme(scheme));
  static std::mutex mu;
  static std::map<std::pair<int, int>, std::shared_ptr<const Codec>> codecs;
  std::lock_guard<std::mutex> lock(mu);
  auto& c = codecs[{scheme.k, scheme.m}];
  if (!c) c = std::shared_ptr<const Codec>(new Codec(scheme, Engine::kIsal));
  return c;
}

void Codec::Multiply(const std::vector<uint8_t>& matrix, int rows, const std::vector<const uint8_t*>& in,
                     const std::vector<uint8_t*>& out, size_t len) const {
  const int k = scheme_.k;
  if (len == 0 || rows == 0) return;
  if (engine_ == Engine::kIsal) {
    std::vector<uint8_t> tables;
    const uint8_t* t = nullptr;
    if (&matrix == &matrix_) {  // the parity rows: tables made once
      t = parity_tables_.data();
    } else {
      tables.resize(static_cast<size_t>(32) * k * rows);
      ec_init_tables(k, rows, const_cast<uint8_t*>(matrix.data()), tables.data());
      t = tables.data();
    }
    ec_encode_data(static_cast<int>(len), k, rows, const_cast<uint8_t*>(t), const_cast<uint8_t**>(in.data()),
                   const_cast<uint8_t**>(out.data()));
    return;
  }
  const auto& mul = T().mul;
  for (int r = 0; r < rows; ++r) {
    uint8_t* o = out[r];
    std::memset(o, 0, len);
    for (int j = 0; j < k; ++j) {
      const uint8_t c = matrix[static_cast<size_t>(r) * k + j];
      if (c == 0) continue;
      const uint8_t* row = &mul[c * 256];
      const uint8_t* src = in[j];
      for (size_t b = 0; b < len; ++b) o[b] ^= row[src[b]];
    }
  }
}

std::vector<std::string> Codec::Encode(std::string_view data) const {
  const int k = scheme_.k, m = scheme_.m;
  const size_t frag = FragmentSize(data.size(), k);
  std::vector<std::string> f(static_cast<size_t>(k + m), std::string(frag, '\0'));
  std::vector<const uint8_t*> in(k);
  for (int i = 0; i < k; ++i) {
    const size_t at = std::min(data.size(), i * frag);
    std::memcpy(f[i].data(), data.data() + at, std::min(frag, data.size() - at));
    in[i] = reinterpret_cast<const uint8_t*>(f[i].data());
  }
  std::vector<uint8_t*> out(m);
  for (int p = 0; p < m; ++p) out[p] = reinterpret_cast<uint8_t*>(f[k + p].data());
  EncodeInto(in, out, frag);
  return f;
}

void Codec::EncodeInto(const std::vector<const uint8_t*>& data, const std::vector<uint8_t*>& parity, size_t len) const {
  const int k = scheme_.k, m = scheme_.m;
  if (engine_ == Engine::kIsal) {
    Multiply(matrix_, m, data, parity, len);  // the parity rows' tables are made once
  } else {
    const std::vector<uint8_t> rows(matrix_.begin() + static_cast<std::ptrdiff_t>(k) * k, matrix_.end());
    Multiply(rows, m, data, parity, len);
  }
}

Status Codec::Reconstruct(std::vector<std::string>& f, const std::vector<bool>& have) const {
  const int k = scheme_.k, n = scheme_.k + scheme_.m;
  if (f.size() != static_cast<size_t>(n) || have.size() != static_cast<size_t>(n)) {
    return InvalidArgument(
        fmt::format("erasure code {}: {} fragments given, {} expected", scheme_.ToString(), f.size(), n));
  }
  std::vector<int> src, lost;
  size_t len = 0;
  for (int i = 0; i < n; ++i) {
    if (have[i] && static_cast<int>(src.size()) < k) {
      if (!src.empty() && f[i].size() != len) {
        return InvalidArgument(fmt::format("erasure code {}: fragment {} has {} bytes, fragment {} has {}",
                                           scheme_.ToString(), i, f[i].size(), src[0], len));
      }
      len = f[i].size();
      src.push_back(i);
    } else if (!have[i]) {
      lost.push_back(i);
    }
  }
  if (static_cast<int>(src.size()) < k) {
    return InvalidArgument(
        fmt::format("erasure code {}: {} fragments left, at least {} are needed", scheme_.ToString(), src.size(), k));
  }
  if (lost.empty()) return Status::Ok();
  // Rows of the surviving fragments, inverted: data = inv x survivors.
  std::vector<uint8_t> b(static_cast<size_t>(k) * k), inv;
  for (int i = 0; i < k; ++i) std::memcpy(&b[i * k], &matrix_[static_cast<size_t>(src[i]) * k], k);
  bool ok = false;
  if (engine_ == Engine::kIsal) {
    inv.resize(b.size());
    std::vector<uint8_t> copy = b;
    ok = gf_invert_matrix(copy.data(), inv.data(), k) == 0;
  } else {
    ok = GfInvert(b, inv, k);
  }
  if (!ok) return Internal(fmt::format("erasure code {}: decoding matrix is singular", scheme_.ToString()));
  std::vector<uint8_t> rows(lost.size() * k, 0);
  for (size_t e = 0; e < lost.size(); ++e) {
    const int idx = lost[e];
    for (int j = 0; j < k; ++j) {
      if (idx < k) {
        rows[e * k + j] = inv[static_cast<size_t>(idx) * k + j];
      } else {
        uint8_t s = 0;
        for (int i = 0; i < k; ++i) s ^= GfMul(inv[static_cast<size_t>(i) * k + j], matrix_[idx * k + i]);
        rows[e * k + j] = s;
      }
    }
  }
  std::vector<const uint8_t*> in(k);
  for (int i = 0; i < k; ++i) in[i] = reinterpret_cast<const uint8_t*>(f[src[i]].data());
  std::vector<uint8_t*> out;
  for (int idx : lost) {
    f[idx].assign(len, '\0');
    out.push_back(reinterpret_cast<uint8_t*>(f[idx].data()));
  }
  Multiply(rows, static_cast<int>(lost.size()), in, out, len);
  return Status::Ok();
}

std::string Codec::Join(const std::vector<std::string>& f, uint64_t bytes) const {
  std::string out;
  out.reserve(bytes);
  for (int i = 0; i < scheme_.k && out.size() < bytes; ++i) {
    out.append(f[i], 0, std::min<uint64_t>(f[i].size(), bytes - out.size()));
  }
  return out;
}

}  // namespace aq::ec
