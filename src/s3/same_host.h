// Same-host reads: an aquifer:// client on the node's own machine reads the
// blocks the node holds in RAM from memory the node shares with it, and the
// blocks it keeps plain on a local pool from the node's block files
// themselves, instead of having their bytes copied through a socket.
//
// The exchange, on top of the client's one GET per open:
//   1. The open's GET carries `x-aquifer-same-host: 1` (memfds only) or `2`
//      (memfds and block files). A node that serves same-host reads, seeing
//      the request come from a loopback address, answers as always (the
//      first bytes, the size, the ETag) and adds `x-aquifer-same-host:
//      GRANT`: which blocks of this very version past the open's bytes it
//      can pass (in RAM; with `2`, also in a block file of its own), a
//      one-time token, and the name of its Unix socket (abstract namespace,
//      a SOCK_SEQPACKET listener):
//        {"socket": "aquifer-...", "token": "<32 hex>",
//         "blocks": [[OFFSET, SIZE], ...]}      (object offsets, ascending)
//   2. On its first read past the open's bytes, the client connects to the
//      socket and sends the token and a newline. The node answers one
//      message: "OK ", a character per granted block, then a line per 'f'
//      (SameHostAnswer below), with a descriptor per '1' and 'f' attached
//      in block order (SCM_RIGHTS); or "ERR reason". A token is good once,
//      for a short time.
//        '1'  a sealed memfd holding the block's bytes, verified by the node
//        'f'  the node's block file, open read-only: the block's bytes start
//             at the line's OFFSET, and the client checks them against the
//             line's CRC32C before it uses them
//        '0'  neither (no longer in RAM, compressed, not held here)
//   3. The client preads each granted block from its descriptor: a
//      page-cache copy, as a local file read is. Blocks not granted are read
//      over HTTP as before, pinned to the open's ETag.
// The memfds are sealed (no write, no resize) and the block files are
// passed read-only and never change (a block is written once under a new
// name; repair, tiering and reclaim replace or unlink the name, not the
// file a reader holds): a client cannot change what the node or other
// clients read, and the bytes of a version never change under a reader. A
// grant is made only for an object the request was authorised to read; the
// token is the capability.
//
// The grant document and the socket's answer are parsed here, for both
// sides (fuzzed: fuzz_same_host).
//
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace aq::s3 {

inline constexpr const char* kSameHostHeader = "x-aquifer-same-host";
// The header's values in a request: what the client can take.
inline constexpr const char* kSameHostMemfds = "1";
inline constexpr const char* kSameHostFiles = "2";
// Per grant: SCM_RIGHTS carries at most 253 descriptors in one message, and
// the header stays a few KiB.
inline constexpr size_t kMaxSameHostBlocks = 200;
inline constexpr size_t kSameHostTokenChars = 32;
// The longest answer: "OK ", a character per block, a line per block file.
// No block file's header is longer (store/block_format.h's are 24 and 40).
inline constexpr uint64_t kMaxSameHostDataOffset = 4096;
inline constexpr size_t kMaxSameHostAnswer = 3 + kMaxSameHostBlocks * (1 + 1 + 20 + 1 + 8);

struct SameHostBlock {
  uint64_t offset = 0, size = 0;  // within the object
};

struct SameHostGrant {
  std::string socket;  // abstract Unix socket name, without the leading NUL
  std::string token;   // 32 lowercase hex digits
  std::vector<SameHostBlock> blocks;
};

// How the node passes one granted block (the answer's characters).
enum class SameHostForm : char { kNone = '0', kMemfd = '1', kFile = 'f' };
struct SameHostPiece {
  SameHostForm form = SameHostForm::kNone;
  uint64_t data_offset = 0;  // kFile: where the block's bytes start in the file
  uint32_t crc32c = 0;       // kFile: what they must hash to
  bool operator==(const SameHostPiece&) const = default;
};

std::string SameHostGrantToJson(const SameHostGrant& grant);
// The grant, or an error naming what is wrong: a socket name that is not
// 1..100 of [A-Za-z0-9._-], a token that is not 32 lowercase hex digits,
// no blocks or more than kMaxSameHostBlocks, a block that is empty, out of
// order, overlapping another or past `object_size`.
Result<SameHostGrant> SameHostGrantFromJson(std::string_view json, uint64_t object_size);

// The socket's answer to a presented token, one piece per granted block:
//   "OK " FORMS ("\n" OFFSET " " CRC)*     FORMS: one of 0, 1, f per block;
//                                         a line per f, in order: the data
//                                         offset in decimal, the CRC32C as
//                                         8 lowercase hex digits
std::string SameHostAnswerToText(const std::vector<SameHostPiece>& pieces);
// The pieces, or an error: "ERR reason" as the node's reason, anything else
// naming what is wrong (a count other than `blocks`, an unknown form, 'f'
// when `files` is false, a line missing, extra or malformed, a data offset
// over kMaxSameHostDataOffset).
Result<std::vector<SameHostPiece>> SameHostAnswerFromText(std::string_view text, size_t blocks, bool files);
// The descriptors an answer carries: one per '1' and 'f'.
size_t SameHostDescriptors(const std::vector<SameHostPiece>& pieces);

// Whether HOST (as in "HOST:PORT", brackets allowed) is this machine's
// loopback: 127.0.0.0/8, ::1, localhost.
bool IsLoopbackHost(std::string_view host);

}  // namespace aq::s3
