// Any bytes as a block file read from a pool (a damaged disk, a file put
// there by hand), and any data through the codecs: parsed and decoded or
// refused as corruption, never a crash, never other bytes than written.
//
// Input: mode (1) | codec (1) | flip position u16 LE | flip mask (1) | payload.
//   mode even: the payload is a block file.
//   mode odd:  the payload, repeated to a compressible block, is encoded
//              under the codec, must decode to itself, and with the byte at
//              the flip position changed must not decode at all.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/crc32c.h"
#include "store/block_format.h"

namespace {

aq::Result<std::string> Decode(std::string_view file) {
  auto h = AQ_TRY(aq::store::ParseBlockHeader(file.substr(0, aq::store::kMaxBlockHeaderBytes)));
  if (h.logical_size > (1u << 20)) return aq::Status(aq::StatusCode::kCorruption, "larger than this target reads");
  return aq::store::DecodeBlock(h, file.substr(std::min(file.size(), h.header_bytes)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const uint8_t mode = data[0], codec = data[1];
  const size_t flip_at = data[2] | (static_cast<size_t>(data[3]) << 8);
  const uint8_t mask = data[4];
  const std::string_view payload(reinterpret_cast<const char*>(data + 5), size - 5);
  if (mode % 2 == 0) {
    auto r = Decode(payload);
    if (r.ok() && r->size() > (1u << 20)) __builtin_trap();
    return 0;
  }
  if (payload.empty()) return 0;
  std::string block;
  while (block.size() < 4096 + payload.size() % 5000) block += payload;
  aq::store::Compression policy;
  policy.codec = codec % 2 ? aq::store::Codec::kZstd : aq::store::Codec::kLz4;
  policy.level = codec % 2 ? 1 + codec / 2 % 5 : 0;
  policy.min_saving = (codec % 16) / 20.0;
  const auto e = aq::store::EncodeBlock(block, aq::crc32c::Value(block), policy);
  const std::string file = e.header + (e.is_compressed() ? e.compressed : block);
  auto back = Decode(file);
  if (!back.ok() || *back != block) __builtin_trap();
  if (mask != 0) {
    std::string bad = file;
    bad[flip_at % bad.size()] = static_cast<char>(bad[flip_at % bad.size()] ^ mask);
    if (Decode(bad).ok()) __builtin_trap();  // CRC32C catches every burst up to 32 bits
  }
  return 0;
}
