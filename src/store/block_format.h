// The bytes of a block file, apart from where they are kept: the header
// that says what the file holds, and inline compression (lz4, zstd) of
// blocks that shrink enough to be worth it.
//
// A plain block file (every block before compression existed, and every
// block a compressing pool found not worth compressing, such as JPEGs):
//   magic "AQBLK001" (8) | data size u64 LE | data CRC32C u32 LE |
//   header CRC32C u32 LE (of the 20 bytes before it) | data
//
// A compressed block file:
//   magic "AQBLKZ01" (8) | logical size u64 LE | logical CRC32C u32 LE |
//   codec u8 (1 lz4, 2 zstd) | filter u8 (0 none, 1 delta) | 2 zero bytes | stored size u64 LE |
//   stored CRC32C u32 LE | header CRC32C u32 LE (of the 36 bytes before it) |
//   stored (compressed) bytes
//
// The logical size and CRC are the block's own (what a layout's BlockRef
// names), so a block has the same reference whatever form each of its
// copies takes: replicas in pools with different policies, a block moved
// by tiering, an erasure-code fragment. The stored CRC lets a reader (and
// the scrubber) tell a damaged file before decompressing it, and the
// logical CRC checks what the decompressor made of it.
//
// The delta filter runs before the codec: each byte minus the one three
// before it (the same channel of the previous pixel of 8-bit RGB), then
// minus the previous such difference (the neighbouring channel's). Pixels
// become small residuals that zstd's entropy coder packs, whatever the
// alignment of the pixels in the block; text and code do not gain from it.
// The block (or a sample of it) is tried both ways and the filter kept when
// it wins by more than a sixteenth: on raw pixels zstd stores 0.48 of the
// bytes with it (0.73 without), lz4 0.78 (0.86).
//
// Everything here is pure: the parsers take hostile bytes (fuzzed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace aq::store {

enum class Codec : uint8_t { kNone = 0, kLz4 = 1, kZstd = 2 };
std::string_view CodecName(Codec c);  // "none", "lz4", "zstd"
enum class Filter : uint8_t { kNone = 0, kDelta = 1 };

// The delta filter and its inverse, in place.
void DeltaEncode(char* data, size_t n);
void DeltaDecode(char* data, size_t n);

// A pool's compression policy.
struct Compression {
  Codec codec = Codec::kNone;
  int level = 0;  // zstd: 1..19 (0: its default, 3); lz4: ignored
  // A block is stored compressed only when that saves at least this
  // fraction of it; otherwise it is stored plain and reads cost nothing.
  double min_saving = 0.10;
  bool enabled() const { return codec != Codec::kNone; }
  std::string ToString() const;  // "lz4", "zstd:9", "none"
};
// "lz4", "zstd", "zstd:LEVEL", "none".
Result<Compression> ParseCompression(std::string_view spec);

inline constexpr size_t kPlainHeaderBytes = 24;
inline constexpr size_t kCompressedHeaderBytes = 40;
inline constexpr size_t kMaxBlockHeaderBytes = kCompressedHeaderBytes;
// No block is larger: a header claiming more is damage, not an allocation.
inline constexpr uint64_t kMaxBlockBytes = uint64_t{1} << 30;

struct BlockHeader {
  Codec codec = Codec::kNone;  // kNone: a plain file, stored == logical
  Filter filter = Filter::kNone;
  size_t header_bytes = kPlainHeaderBytes;
  uint64_t logical_size = 0;
  uint32_t logical_crc = 0;
  uint64_t stored_size = 0;
  uint32_t stored_crc = 0;
};

// The header at the start of a block file (`head`: the file's first
// kMaxBlockHeaderBytes bytes, or all of it if shorter). kCorruption with
// the reason (bad magic, header checksum, an unknown codec, sizes out of
// range) for anything else.
Result<BlockHeader> ParseBlockHeader(std::string_view head);

// The block's bytes from the stored bytes that follow the header: checks
// the stored size and CRC, decompresses, checks the logical size and CRC.
// A plain block's data is returned as is (moved, not copied).
Result<std::string> DecodeBlock(const BlockHeader& h, std::string stored);
// The same over a view (an aligned O_DIRECT buffer): one copy, or the
// decompressor's output.
Result<std::string> DecodeBlock(const BlockHeader& h, std::string_view stored);
// Only the stored bytes' size and CRC (all a plain block needs: its bytes
// are then the block's, to be copied where they are wanted).
Status CheckStored(const BlockHeader& h, std::string_view stored);

// What a block file of `data` would start with, and the bytes after it.
struct EncodedBlock {
  std::string header;
  // Empty with a plain header: the data itself follows.
  std::string compressed;
  Filter filter = Filter::kNone;
  bool is_compressed() const { return !compressed.empty(); }
};
// Encodes `data` (with its CRC32C `crc`, already computed) under `policy`:
// compressed when the policy is on and the result saves at least
// policy.min_saving, plain otherwise. Blocks under 4 KiB are stored plain.
// A sample from the middle of the block is tried first, so data that does
// not compress (JPEG, already-compressed shards) costs two small attempts;
// the sample also decides whether to filter.
EncodedBlock EncodeBlock(std::string_view data, uint32_t crc, const Compression& policy);

}  // namespace aq::store
