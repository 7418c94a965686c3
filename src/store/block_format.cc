#include "store/block_format.h"

#include <fmt/format.h>
#include <lz4.h>
#include <zstd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/cpu.h"
#include "common/crc32c.h"

namespace aq::store {
namespace {

constexpr char kPlainMagic[8] = {'A', 'Q', 'B', 'L', 'K', '0', '0', '1'};
constexpr char kCompressedMagic[8] = {'A', 'Q', 'B', 'L', 'K', 'Z', '0', '1'};
constexpr size_t kMinCompressBytes = 4096;
// Blocks at least this large are tried on a sample first.
constexpr size_t kSampleFrom = 256 << 10;
constexpr size_t kSampleBytes = 64 << 10;

void Put64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void Put32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint64_t Get64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint32_t Get32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

Status Damaged(const std::string& why) { return Status(StatusCode::kCorruption, why); }

// One compression and one decompression context per thread: zstd's cost
// a few hundred KiB each to set up, more than compressing a small block.
struct ZstdContexts {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_DCtx* d = ZSTD_createDCtx();
  ~ZstdContexts() {
    ZSTD_freeCCtx(c);
    ZSTD_freeDCtx(d);
  }
};
ZstdContexts& Zstd() {
  thread_local ZstdContexts z;
  return z;
}

// `data` compressed into at most `capacity` bytes, or nothing when it does
// not fit (both libraries stop early when the output outgrows it).
std::optional<std::string> CompressInto(std::string_view data, const Compression& policy, size_t capacity,
                                        Filter filter = Filter::kNone) {
  if (capacity == 0) return std::nullopt;
  std::string filtered;
  if (filter == Filter::kDelta) {
    filtered.assign(data);
    DeltaEncode(filtered.data(), filtered.size());
    data = filtered;
  }
  std::string out(capacity, '\0');
  size_t n = 0;
  if (policy.codec == Codec::kLz4) {
    const int got =
        LZ4_compress_default(data.data(), out.data(), static_cast<int>(data.size()), static_cast<int>(capacity));
    if (got <= 0) return std::nullopt;
    n = static_cast<size_t>(got);
  } else {
    auto& z = Zstd();
    if (z.c == nullptr) return std::nullopt;
    // Residuals gain nothing from a deeper match search: under the filter
    // the default level is 1 (on raw pixels: 0.482 of their bytes against
    // level 3's 0.498, encoded 2.7x as fast).
    const int level = policy.level > 0 ? policy.level : filter == Filter::kDelta ? 1 : ZSTD_CLEVEL_DEFAULT;
    const size_t got = ZSTD_compressCCtx(z.c, out.data(), capacity, data.data(), data.size(), level);
    if (ZSTD_isError(got)) return std::nullopt;
    n = got;
  }
  out.resize(n);
  return out;
}

size_t Allowed(size_t n, double min_saving) {
  const double keep = 1.0 - std::clamp(min_saving, 0.0, 0.99);
  return static_cast<size_t>(static_cast<double>(n) * keep);
}

Result<std::string> Decompress(const BlockHeader& h, std::string_view stored) {
  std::string out(h.logical_size, '\0');
  if (h.codec == Codec::kLz4) {
    const int got =
        LZ4_decompress_safe(stored.data(), out.data(), static_cast<int>(stored.size()), static_cast<int>(out.size()));
    if (got < 0) return Damaged("lz4 data does not decompress");
    if (static_cast<uint64_t>(got) != h.logical_size) {
      return Damaged(fmt::format("lz4 data decompresses to {} bytes, the header says {}", got, h.logical_size));
    }
  } else {
    auto& z = Zstd();
    if (z.d == nullptr) return Status(StatusCode::kIoError, "no memory for a zstd context");
    const size_t got = ZSTD_decompressDCtx(z.d, out.data(), out.size(), stored.data(), stored.size());
    if (ZSTD_isError(got)) return Damaged(fmt::format("zstd data does not decompress: {}", ZSTD_getErrorName(got)));
    if (got != h.logical_size) {
      return Damaged(fmt::format("zstd data decompresses to {} bytes, the header says {}", got, h.logical_size));
    }
  }
  if (h.filter == Filter::kDelta) DeltaDecode(out.data(), out.size());
  return out;
}

Result<std::string> CheckLogical(const BlockHeader& h, std::string logical) {
  // A decompressor that returned the right length of the wrong bytes
  // (damage the stored CRC missed cannot reach here, but a codec bug can).
  const uint32_t crc = crc32c::Value(logical);
  if (crc != h.logical_crc) {
    return Damaged(fmt::format("decompressed data checksum {:08x}, the header says {:08x}", crc, h.logical_crc));
  }
  return logical;
}

}  // namespace

Status CheckStored(const BlockHeader& h, std::string_view stored) {
  if (stored.size() != h.stored_size) {
    return Damaged(fmt::format("header says {} bytes, the file holds {}", h.stored_size, stored.size()));
  }
  const uint32_t crc = crc32c::Value(stored);
  if (crc != h.stored_crc) {
    return Damaged(fmt::format("{} checksum {:08x}, the header says {:08x}",
                               h.codec == Codec::kNone ? "data" : "stored data", crc, h.stored_crc));
  }
  return Status::Ok();
}

std::string_view CodecName(Codec c) {
  switch (c) {
    case Codec::kLz4: return "lz4";
    case Codec::kZstd: return "zstd";
    case Codec::kNone: break;
  }
  return "none";
}

std::string Compression::ToString() const {
  if (codec == Codec::kZstd && level > 0) return fmt::format("zstd:{}", level);
  return std::string(CodecName(codec));
}

Result<Compression> ParseCompression(std::string_view spec) {
  Compression c;
  const size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  if (name == "none" && colon == std::string_view::npos) return c;
  if (name == "lz4") {
    c.codec = Codec::kLz4;
  } else if (name == "zstd") {
    c.codec = Codec::kZstd;
  } else {
    return InvalidArgument(fmt::format("compression '{}': expected lz4, zstd, zstd:LEVEL or none", spec));
  }
  if (colon != std::string_view::npos) {
    const std::string level(spec.substr(colon + 1));
    char* end = nullptr;
    const long v = std::strtol(level.c_str(), &end, 10);
    if (c.codec != Codec::kZstd || level.empty() || end != level.c_str() + level.size() || v < 1 ||
        v > ZSTD_maxCLevel()) {
      return InvalidArgument(fmt::format("compression '{}': a level is zstd's, from 1 to {}", spec, ZSTD_maxCLevel()));
    }
    c.level = static_cast<int>(v);
  }
  return c;
}

Result<BlockHeader> ParseBlockHeader(std::string_view head) {
  if (head.size() < kPlainHeaderBytes) {
    return Damaged(fmt::format("{} bytes, shorter than the header", head.size()));
  }
  BlockHeader h;
  const char* p = head.data();
  if (std::memcmp(p, kPlainMagic, 8) == 0) {
    if (Get32(p + 20) != crc32c::Value(head.substr(0, 20))) return Damaged("header checksum mismatch");
    h.codec = Codec::kNone;
    h.header_bytes = kPlainHeaderBytes;
    h.logical_size = h.stored_size = Get64(p + 8);
    h.logical_crc = h.stored_crc = Get32(p + 16);
  } else if (std::memcmp(p, kCompressedMagic, 8) == 0) {
    if (head.size() < kCompressedHeaderBytes) {
      return Damaged(fmt::format("{} bytes, shorter than a compressed block's header", head.size()));
    }
    if (Get32(p + 36) != crc32c::Value(head.substr(0, 36))) return Damaged("header checksum mismatch");
    const uint8_t codec = static_cast<uint8_t>(p[20]);
    if (codec != static_cast<uint8_t>(Codec::kLz4) && codec != static_cast<uint8_t>(Codec::kZstd)) {
      return Damaged(fmt::format("unknown codec {}", codec));
    }
    if (static_cast<uint8_t>(p[21]) > static_cast<uint8_t>(Filter::kDelta)) {
      return Damaged(fmt::format("unknown filter {}", static_cast<uint8_t>(p[21])));
    }
    if (p[22] != 0 || p[23] != 0) return Damaged("reserved header bytes are not zero");
    h.codec = static_cast<Codec>(codec);
    h.filter = static_cast<Filter>(p[21]);
    h.header_bytes = kCompressedHeaderBytes;
    h.logical_size = Get64(p + 8);
    h.logical_crc = Get32(p + 16);
    h.stored_size = Get64(p + 24);
    h.stored_crc = Get32(p + 32);
    // lz4's sizes are ints; both stay far below.
    if (h.stored_size > kMaxBlockBytes) return Damaged(fmt::format("stored size {} out of range", h.stored_size));
  } else {
    return Damaged("bad magic");
  }
  if (h.logical_size > kMaxBlockBytes) return Damaged(fmt::format("size {} out of range", h.logical_size));
  return h;
}

Result<std::string> DecodeBlock(const BlockHeader& h, std::string stored) {
  AQ_TRY(CheckStored(h, stored));
  if (h.codec == Codec::kNone) return stored;
  return CheckLogical(h, AQ_TRY(Decompress(h, stored)));
}

Result<std::string> DecodeBlock(const BlockHeader& h, std::string_view stored) {
  AQ_TRY(CheckStored(h, stored));
  if (h.codec == Codec::kNone) return std::string(stored);
  return CheckLogical(h, AQ_TRY(Decompress(h, stored)));
}

void DeltaEncode(char* data, size_t n) {
  // e[i] = d[i] - d[i-1], d[i] = x[i] - x[i-3] (terms before the start: 0),
  // from the end backwards so that x is read before it is replaced.
  auto* x = reinterpret_cast<uint8_t*>(data);
  auto at = [x](size_t i, size_t back) -> uint8_t { return i >= back ? x[i - back] : 0; };
  for (size_t i = n; i-- > 0;) {
    x[i] = static_cast<uint8_t>(x[i] - at(i, 3) - at(i, 1) + at(i, 4));
  }
}

namespace {

// The inverse, one byte at a time: d[i] = e[i] + d[i-1], x[i] = d[i] + x[i-3].
void DeltaDecodeScalar(uint8_t* x, size_t from, size_t n, uint8_t d) {
  for (size_t i = from; i < n; ++i) {
    d = static_cast<uint8_t>(x[i] + d);
    x[i] = static_cast<uint8_t>(d + (i >= 3 ? x[i - 3] : 0));
  }
}

#if defined(__x86_64__)
// The same 16 bytes at a time: both running sums are prefix sums, done in a
// register by shifted adds (by 1, 2, 4, 8 bytes; by 3, 6, 12 for the
// stride-3 one), then the previous vector's carries added: its last d in
// every lane, and its last three x in the lanes of their residue.
__attribute__((target("ssse3"))) void DeltaDecodeSsse3(uint8_t* x, size_t n) {
  __m128i d_carry = _mm_setzero_si128();  // every lane: d of the previous vector's last byte
  __m128i x_last = _mm_setzero_si128();   // the previous vector's x (lanes 13..15 used)
  const __m128i last_d = _mm_set1_epi8(15);
  const __m128i residues = _mm_setr_epi8(13, 14, 15, 13, 14, 15, 13, 14, 15, 13, 14, 15, 13, 14, 15, 13);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    v = _mm_add_epi8(v, _mm_slli_si128(v, 1));
    v = _mm_add_epi8(v, _mm_slli_si128(v, 2));
    v = _mm_add_epi8(v, _mm_slli_si128(v, 4));
    v = _mm_add_epi8(v, _mm_slli_si128(v, 8));
    v = _mm_add_epi8(v, d_carry);  // d
    d_carry = _mm_shuffle_epi8(v, last_d);
    v = _mm_add_epi8(v, _mm_slli_si128(v, 3));
    v = _mm_add_epi8(v, _mm_slli_si128(v, 6));
    v = _mm_add_epi8(v, _mm_slli_si128(v, 12));
    v = _mm_add_epi8(v, _mm_shuffle_epi8(x_last, residues));  // x
    x_last = v;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(x + i), v);
  }
  DeltaDecodeScalar(x, i, n, i > 0 ? static_cast<uint8_t>(_mm_cvtsi128_si32(d_carry)) : 0);
}
#endif

}  // namespace

void DeltaDecode(char* data, size_t n) {
  auto* x = reinterpret_cast<uint8_t*>(data);
#if defined(__x86_64__)
  static const bool ssse3 = __builtin_cpu_supports("ssse3") && !SimdDisabled();
  if (ssse3) return DeltaDecodeSsse3(x, n);
#endif
  DeltaDecodeScalar(x, 0, n, 0);
}

EncodedBlock EncodeBlock(std::string_view data, uint32_t crc, const Compression& policy) {
  EncodedBlock e;
  std::optional<std::string> packed;
  if (policy.enabled() && data.size() >= kMinCompressBytes && data.size() <= kMaxBlockBytes) {
    // Whether it pays, and under zstd whether to filter: decided on a
    // sample of a large block, on the whole of a small one.
    const bool sampled = data.size() >= kSampleFrom;
    const std::string_view sample = sampled ? data.substr(data.size() / 2 - kSampleBytes / 2, kSampleBytes) : data;
    const size_t allowed = Allowed(sample.size(), policy.min_saving);
    auto plain = CompressInto(sample, policy, allowed);
    std::optional<std::string> delta;
    delta = CompressInto(sample, policy, allowed, Filter::kDelta);
    // The filter must win clearly: it costs a pass on every read.
    if (delta && (!plain || delta->size() < plain->size() - plain->size() / 16)) {
      e.filter = Filter::kDelta;
      if (!sampled) packed = std::move(delta);
    } else if (plain && !sampled) {
      packed = std::move(plain);
    }
    if (sampled && (plain || delta)) {
      packed = CompressInto(data, policy, Allowed(data.size(), policy.min_saving), e.filter);
    }
    if (!packed) e.filter = Filter::kNone;
  }
  if (!packed) {
    e.header.resize(kPlainHeaderBytes);
    char* p = e.header.data();
    std::memcpy(p, kPlainMagic, 8);
    Put64(p + 8, data.size());
    Put32(p + 16, crc);
    Put32(p + 20, crc32c::Value(std::string_view(p, 20)));
    return e;
  }
  e.compressed = std::move(*packed);
  e.header.assign(kCompressedHeaderBytes, '\0');
  char* p = e.header.data();
  std::memcpy(p, kCompressedMagic, 8);
  Put64(p + 8, data.size());
  Put32(p + 16, crc);
  p[20] = static_cast<char>(policy.codec);
  p[21] = static_cast<char>(e.filter);
  Put64(p + 24, e.compressed.size());
  Put32(p + 32, crc32c::Value(e.compressed));
  Put32(p + 36, crc32c::Value(std::string_view(p, 36)));
  return e;
}

}  // namespace aq::store
