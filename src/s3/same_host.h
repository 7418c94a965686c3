// Same-host reads: an aquifer:// client on the node's own machine reads the
// blocks the node holds in RAM from memory the node shares with it, instead
// of having their bytes copied through a socket.
//
// The exchange, on top of the client's one GET per open:
//   1. The open's GET carries `x-aquifer-same-host: 1`. A node that serves
//      same-host reads, seeing the request come from a loopback address,
//      answers as always (the first bytes, the size, the ETag) and adds
//      `x-aquifer-same-host: GRANT`: which blocks of this very version past
//      the open's bytes it holds in RAM, a one-time token, and the name of
//      its Unix socket (abstract namespace, a SOCK_SEQPACKET listener):
//        {"socket": "aquifer-...", "token": "<32 hex>",
//         "blocks": [[OFFSET, SIZE], ...]}      (object offsets, ascending)
//   2. On its first read past the open's bytes, the client connects to the
//      socket and sends the token and a newline. The node answers one
//      message, "OK " and a '1' or '0' per granted block ('0': no longer
//      in RAM), with a sealed memfd per '1' attached (SCM_RIGHTS), or
//      "ERR reason". A token is good once, for a short time.
//   3. The client preads each granted block from its memfd: a page-cache
//      copy, as a local file read is. Blocks not granted are read over
//      HTTP as before, pinned to the open's ETag.
// The memfds are sealed (no write, no resize): a client cannot change what
// the node or other clients read, and a block's bytes, verified when the
// node read them, never change under a reader. A grant is made only for an
// object the request was authorised to read; the token is the capability.
//
// The grant document is parsed here, for both sides (fuzzed: fuzz_same_host).
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
// Per grant: SCM_RIGHTS carries at most 253 descriptors in one message, and
// the header stays a few KiB.
inline constexpr size_t kMaxSameHostBlocks = 200;
inline constexpr size_t kSameHostTokenChars = 32;

struct SameHostBlock {
  uint64_t offset = 0, size = 0;  // within the object
};

struct SameHostGrant {
  std::string socket;  // abstract Unix socket name, without the leading NUL
  std::string token;   // 32 lowercase hex digits
  std::vector<SameHostBlock> blocks;
};

std::string SameHostGrantToJson(const SameHostGrant& grant);
// The grant, or an error naming what is wrong: a socket name that is not
// 1..100 of [A-Za-z0-9._-], a token that is not 32 lowercase hex digits,
// no blocks or more than kMaxSameHostBlocks, a block that is empty, out of
// order, overlapping another or past `object_size`.
Result<SameHostGrant> SameHostGrantFromJson(std::string_view json, uint64_t object_size);

// Whether HOST (as in "HOST:PORT", brackets allowed) is this machine's
// loopback: 127.0.0.0/8, ::1, localhost.
bool IsLoopbackHost(std::string_view host);

}  // namespace aq::s3
