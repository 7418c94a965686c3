#include "common/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace aq::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // reflected Castagnoli polynomial

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
  return t;
}

constexpr Tables kTables = MakeTables();

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian hosts only; aquifer targets x86-64 and aarch64 LE
}

// Appending n zero bytes to a CRC register is linear over GF(2): a 32x32
// matrix, here as four tables of 256 entries (one per byte of the
// register), so that the CRCs of adjacent pieces computed side by side can
// be joined: crc(A || B) = Shift(crc(A), |B|) ^ crc_from_zero(B).
struct ZeroShift {
  std::array<std::array<uint32_t, 256>, 4> t{};
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

// A matrix as its 32 columns: m[i] is the image of bit i.
using Matrix = std::array<uint32_t, 32>;

constexpr uint32_t Apply(const Matrix& m, uint32_t v) {
  uint32_t out = 0;
  for (int i = 0; v != 0; ++i, v >>= 1) {
    if (v & 1) out ^= m[i];
  }
  return out;
}

constexpr Matrix Compose(const Matrix& a, const Matrix& b) {  // a after b
  Matrix m{};
  for (int i = 0; i < 32; ++i) m[i] = Apply(a, b[i]);
  return m;
}

constexpr ZeroShift MakeZeroShift(size_t bytes) {
  Matrix bit{};  // one zero bit: c >> 1, and the polynomial when bit 0 falls out
  bit[0] = kPoly;
  for (int i = 1; i < 32; ++i) bit[i] = uint32_t{1} << (i - 1);
  Matrix byte = Compose(bit, bit);
  byte = Compose(byte, byte);
  byte = Compose(byte, byte);  // eight zero bits
  Matrix op{};
  for (int i = 0; i < 32; ++i) op[i] = uint32_t{1} << i;  // identity
  for (size_t n = bytes; n != 0; n >>= 1) {
    if (n & 1) op = Compose(byte, op);
    byte = Compose(byte, byte);
  }
  ZeroShift z;
  for (int k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) z.t[k][b] = Apply(op, b << (8 * k));
  }
  return z;
}

#if defined(__x86_64__)
// Three streams side by side: crc32q has a latency of three cycles and a
// throughput of one per cycle, so one stream runs at a third of what the
// unit can do. Long inputs go as three adjacent pieces of kLong bytes (then
// kShort) whose CRCs are joined by ZeroShift; the rest as one stream.
constexpr size_t kLong = 8192, kShort = 256;
constexpr ZeroShift kShiftLong = MakeZeroShift(kLong);
constexpr ZeroShift kShiftShort = MakeZeroShift(kShort);

template <size_t kPiece>
__attribute__((target("sse4.2"))) inline uint64_t ThreeWays(uint64_t c, const uint8_t*& p, size_t& n,
                                                            const ZeroShift& shift) {
  while (n >= 3 * kPiece) {
    uint64_t c1 = 0, c2 = 0;
    for (const uint8_t* end = p + kPiece; p < end; p += 8) {
      c = _mm_crc32_u64(c, Load64(p));
      c1 = _mm_crc32_u64(c1, Load64(p + kPiece));
      c2 = _mm_crc32_u64(c2, Load64(p + 2 * kPiece));
    }
    c = shift(static_cast<uint32_t>(c)) ^ c1;
    c = shift(static_cast<uint32_t>(c)) ^ c2;
    p += 2 * kPiece;
    n -= 3 * kPiece;
  }
  return c;
}

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = ~crc;
  // Align to 8 bytes so the 8-byte loads never straddle cache lines.
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  c = ThreeWays<kLong>(c, p, n, kShiftLong);
  c = ThreeWays<kShort>(c, p, n, kShiftShort);
  while (n >= 8) {
    c = _mm_crc32_u64(c, Load64(p));
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  return ~static_cast<uint32_t>(c);
}
#endif

bool DetectHardware() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

const bool kHaveHardware = DetectHardware();

}  // namespace

bool HaveHardware() { return kHaveHardware; }

uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (n >= 8) {
    uint64_t v = Load64(p) ^ c;
    c = kTables[7][v & 0xff] ^ kTables[6][(v >> 8) & 0xff] ^ kTables[5][(v >> 16) & 0xff] ^
        kTables[4][(v >> 24) & 0xff] ^ kTables[3][(v >> 32) & 0xff] ^ kTables[2][(v >> 40) & 0xff] ^
        kTables[1][(v >> 48) & 0xff] ^ kTables[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = kTables[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    --n;
  }
  return ~c;
}

uint32_t ExtendHardware(uint32_t crc, const void* data, size_t n) {
#if defined(__x86_64__)
  return ExtendSse42(crc, static_cast<const uint8_t*>(data), n);
#else
  return ExtendPortable(crc, data, n);
#endif
}

uint32_t Extend(uint32_t crc, const void* data, size_t n) {
  return kHaveHardware ? ExtendHardware(crc, data, n) : ExtendPortable(crc, data, n);
}

}  // namespace aq::crc32c
