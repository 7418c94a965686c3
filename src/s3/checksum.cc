#include "s3/checksum.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <zlib.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <array>
#include <cctype>

#include "common/crc32c.h"
#include "http/message.h"

namespace aq::s3 {
namespace {

class Digest final : public Checksum {
 public:
  explicit Digest(const EVP_MD* md) : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    EVP_DigestInit_ex(ctx_.get(), md, nullptr);
  }
  void Update(std::string_view d) override { EVP_DigestUpdate(ctx_.get(), d.data(), d.size()); }
  std::string Base64() override {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(ctx_.get(), out, &len);
    return Base64Encode(std::string_view(reinterpret_cast<char*>(out), len));
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

std::string BigEndian32(uint32_t v) {
  std::string s(4, '\0');
  s[0] = static_cast<char>(v >> 24);
  s[1] = static_cast<char>(v >> 16);
  s[2] = static_cast<char>(v >> 8);
  s[3] = static_cast<char>(v);
  return s;
}

class Crc32 final : public Checksum {
 public:
  void Update(std::string_view d) override {
    crc_ = static_cast<uint32_t>(::crc32(crc_, reinterpret_cast<const Bytef*>(d.data()), static_cast<uInt>(d.size())));
  }
  std::string Base64() override { return Base64Encode(BigEndian32(crc_)); }

 private:
  uint32_t crc_ = 0;
};

std::string BigEndian64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>(v >> (56 - 8 * i));
  return s;
}

constexpr uint64_t kCrc64NvmePoly = 0x9a6c9329ac4bc9b5ULL;  // reflected

// Slicing-by-8 tables: kTables[k][b] is the CRC of byte b followed by k zero bytes.
struct Crc64Tables {
  uint64_t t[8][256];
  Crc64Tables() {
    for (uint64_t b = 0; b < 256; ++b) {
      uint64_t c = b;
      for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kCrc64NvmePoly : c >> 1;
      t[0][b] = c;
    }
    for (int k = 1; k < 8; ++k) {
      for (int b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
    }
  }
};
const Crc64Tables& Tables64() {
  static const Crc64Tables tables;
  return tables;
}

class Crc64 final : public Checksum {
 public:
  void Update(std::string_view d) override { crc_ = Crc64Nvme(crc_, d.data(), d.size()); }
  std::string Base64() override { return Base64Encode(BigEndian64(crc_)); }

 private:
  uint64_t crc_ = 0;
};

class Crc32c final : public Checksum {
 public:
  void Update(std::string_view d) override { crc_ = crc32c::Extend(crc_, d.data(), d.size()); }
  std::string Base64() override { return Base64Encode(BigEndian32(crc_)); }

 private:
  uint32_t crc_ = 0;
};

}  // namespace

Result<std::unique_ptr<Checksum>> Checksum::Make(std::string_view a) {
  std::unique_ptr<Checksum> c;
  if (a == "md5") {
    c = std::make_unique<Digest>(EVP_md5());
  } else if (a == "sha1") {
    c = std::make_unique<Digest>(EVP_sha1());
  } else if (a == "sha256") {
    c = std::make_unique<Digest>(EVP_sha256());
  } else if (a == "crc32") {
    c = std::make_unique<Crc32>();
  } else if (a == "crc32c") {
    c = std::make_unique<Crc32c>();
  } else if (a == "crc64nvme") {
    c = std::make_unique<Crc64>();
  } else {
    return InvalidArgument(
        fmt::format("checksum algorithm '{}' is not one of crc32, crc32c, crc64nvme, sha1, sha256", a));
  }
  c->algorithm_ = std::string(a);
  return c;
}

namespace {

// The table CRC over bytes, on the raw register (no inversions).
uint64_t Crc64Raw(uint64_t c, const unsigned char* p, size_t n) {
  const auto& t = Tables64().t;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w = 0;
    for (int i = 0; i < 8; ++i) w |= static_cast<uint64_t>(p[i]) << (8 * i);  // little-endian load
    c ^= w;
    c = t[7][c & 0xff] ^ t[6][(c >> 8) & 0xff] ^ t[5][(c >> 16) & 0xff] ^ t[4][(c >> 24) & 0xff] ^
        t[3][(c >> 32) & 0xff] ^ t[2][(c >> 40) & 0xff] ^ t[1][(c >> 48) & 0xff] ^ t[0][c >> 56];
  }
  for (; n > 0; --n, ++p) c = t[0][(c ^ *p) & 0xff] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
// Carry-less multiplication folding (Intel's "Fast CRC Computation Using
// PCLMULQDQ"), reflected: four 128-bit lanes, each folded 512 bits forward
// per 64 bytes, then into one, whose 16 bytes the table finishes. Folding
// lane A (first 8 bytes H, next 8 L) d bits forward is H * x^(d+64) + L * x^d
// mod P; in the reflected domain a product comes out shifted one bit, so
// the constants are x^(d+63) and x^(d-1) mod P, bit-reversed:
//   d = 512: 0x0c32cdb31e18a84a, 0x62242240ace5045a
//   d = 384: 0xbdd7ac0ee1a4a0f0, 0xa3ffdc1fe8e82a8b
//   d = 256: 0xb0bc2e589204f500, 0xe1e0bb9d45d7a44c
//   d = 128: 0xeadc41fd2ba3d420, 0x21e9761e252621ac
// (derived with CombineCrc's GF(2) arithmetic; the unit test checks this
// path against the table on every length and alignment it tries).
__attribute__((target("pclmul,sse2"))) inline __m128i Fold(__m128i a, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11));
}

__attribute__((target("pclmul,sse2"))) inline __m128i Load(const unsigned char* at) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
}

__attribute__((target("pclmul,sse2"))) uint64_t Crc64Clmul(uint64_t c, const unsigned char*& p, size_t& n) {
  const __m128i k512 = _mm_set_epi64x(0x62242240ace5045aLL, 0x0c32cdb31e18a84aLL);
  __m128i a0 = _mm_xor_si128(Load(p), _mm_cvtsi64_si128(static_cast<long long>(c)));
  __m128i a1 = Load(p + 16), a2 = Load(p + 32), a3 = Load(p + 48);
  p += 64;
  n -= 64;
  for (; n >= 64; p += 64, n -= 64) {
    a0 = _mm_xor_si128(Fold(a0, k512), Load(p));
    a1 = _mm_xor_si128(Fold(a1, k512), Load(p + 16));
    a2 = _mm_xor_si128(Fold(a2, k512), Load(p + 32));
    a3 = _mm_xor_si128(Fold(a3, k512), Load(p + 48));
  }
  const __m128i k384 =
      _mm_set_epi64x(static_cast<long long>(0xa3ffdc1fe8e82a8bULL), static_cast<long long>(0xbdd7ac0ee1a4a0f0ULL));
  const __m128i k256 =
      _mm_set_epi64x(static_cast<long long>(0xe1e0bb9d45d7a44cULL), static_cast<long long>(0xb0bc2e589204f500ULL));
  const __m128i k128 = _mm_set_epi64x(0x21e9761e252621acLL, static_cast<long long>(0xeadc41fd2ba3d420ULL));
  __m128i x = _mm_xor_si128(_mm_xor_si128(a3, Fold(a0, k384)), _mm_xor_si128(Fold(a1, k256), Fold(a2, k128)));
  alignas(16) unsigned char last[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(last), x);
  return Crc64Raw(0, last, 16);
}

bool HaveClmul() {
  static const bool have = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
  return have;
}
#endif

}  // namespace

uint64_t Crc64NvmePortable(uint64_t crc, const void* data, size_t n) {
  return ~Crc64Raw(~crc, static_cast<const unsigned char*>(data), n);
}

uint64_t Crc64Nvme(uint64_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
#if defined(__x86_64__)
  if (n >= 128 && HaveClmul()) c = Crc64Clmul(c, p, n);
#endif
  return ~Crc64Raw(c, p, n);
}

Result<std::string> ParseChecksumAlgorithm(std::string_view name) {
  const std::string a = http::ToLower(name);
  if (a == "crc32" || a == "crc32c" || a == "crc64nvme" || a == "sha1" || a == "sha256") return a;
  return InvalidArgument(
      fmt::format("checksum algorithm '{}' is not one of CRC32, CRC32C, CRC64NVME, SHA1, SHA256", name));
}

std::string ChecksumHeader(std::string_view algorithm) { return "x-amz-checksum-" + std::string(algorithm); }

std::string ChecksumElement(std::string_view algorithm) {
  std::string upper(algorithm);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return "Checksum" + upper;
}

bool IsCrc(std::string_view a) { return a == "crc32" || a == "crc32c" || a == "crc64nvme"; }

namespace {

// GF(2) matrices over CRC registers (zlib's crc32_combine, any width up to
// 64): column i is where register bit i goes.
using Matrix = std::array<uint64_t, 64>;

uint64_t Times(const Matrix& m, uint64_t v) {
  uint64_t sum = 0;
  for (size_t i = 0; v != 0; v >>= 1, ++i) {
    if (v & 1) sum ^= m[i];
  }
  return sum;
}

Matrix Square(const Matrix& m, int width) {
  Matrix out{};
  for (int i = 0; i < width; ++i) out[static_cast<size_t>(i)] = Times(m, m[static_cast<size_t>(i)]);
  return out;
}

}  // namespace

Result<std::string> CombineCrc(std::string_view algorithm, std::string_view a, std::string_view b, uint64_t b_length) {
  uint64_t poly = 0;
  int width = 32;
  if (algorithm == "crc32") {
    poly = 0xedb88320ULL;
  } else if (algorithm == "crc32c") {
    poly = 0x82f63b78ULL;
  } else if (algorithm == "crc64nvme") {
    poly = kCrc64NvmePoly;
    width = 64;
  } else {
    return InvalidArgument(fmt::format("'{}' is not a CRC: its parts' values do not combine", algorithm));
  }
  auto value = [&](std::string_view b64) -> Result<uint64_t> {
    auto raw = Base64Decode(b64);
    if (!raw.ok() || raw->size() != static_cast<size_t>(width / 8)) {
      return InvalidArgument(fmt::format("'{}' is not a base64 {}", b64.substr(0, 32), algorithm));
    }
    uint64_t v = 0;
    for (unsigned char c : *raw) v = (v << 8) | c;
    return v;
  };
  uint64_t crc_a = AQ_TRY(value(a));
  const uint64_t crc_b = AQ_TRY(value(b));
  // The operator for one zero bit, squared to one zero byte.
  Matrix op{};
  op[0] = poly;
  for (int i = 1; i < width; ++i) op[static_cast<size_t>(i)] = uint64_t{1} << (i - 1);
  for (int i = 0; i < 3; ++i) op = Square(op, width);
  for (uint64_t n = b_length; n != 0; n >>= 1) {
    if (n & 1) crc_a = Times(op, crc_a);
    if (n > 1) op = Square(op, width);
  }
  const uint64_t crc = crc_a ^ crc_b;
  return Base64Encode(width == 64 ? BigEndian64(crc) : BigEndian32(static_cast<uint32_t>(crc)));
}

std::string ChecksumAlgorithmOfHeader(std::string_view name) {
  constexpr std::string_view kPrefix = "x-amz-checksum-";
  if (name.size() <= kPrefix.size() || !http::EqualsIgnoreCase(name.substr(0, kPrefix.size()), kPrefix)) return "";
  std::string a = http::ToLower(name.substr(kPrefix.size()));
  if (a == "crc32" || a == "crc32c" || a == "crc64nvme" || a == "sha1" || a == "sha256") return a;
  return "";
}

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) {
    return InvalidArgument(fmt::format("'{}' is not base64", text.substr(0, 64)));
  }
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/' && c != '=') {
      return InvalidArgument(fmt::format("'{}' is not base64", text.substr(0, 64)));
    }
  }
  std::string out(3 * text.size() / 4, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return InvalidArgument(fmt::format("'{}' is not base64", text.substr(0, 64)));
  size_t pad = 0;
  if (text.back() == '=') ++pad;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

}  // namespace aq::s3
