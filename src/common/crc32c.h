// CRC32C (Castagnoli), as used by TFRecord framing and by the store's block
// checksums. Uses the SSE4.2 crc32 instruction when the CPU has it (checked
// once at startup) and a slicing-by-8 table otherwise.
//
// Thread safety: all functions are pure and safe to call concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace aq::crc32c {

// Extends `crc` (the CRC of some earlier bytes, 0 for none) over data[0, n).
uint32_t Extend(uint32_t crc, const void* data, size_t n);

inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }
inline uint32_t Value(std::string_view s) { return Extend(0, s.data(), s.size()); }

// The portable and the hardware paths, exposed for tests and benchmarks.
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n);
uint32_t ExtendHardware(uint32_t crc, const void* data, size_t n);  // REQUIRES: HaveHardware()
bool HaveHardware();

// TFRecord stores CRCs masked, because computing the CRC of a string that
// contains embedded CRCs is weak: rotate right by 15 bits and add a constant.
constexpr uint32_t kMaskDelta = 0xa282ead8u;
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
inline uint32_t Unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace aq::crc32c
