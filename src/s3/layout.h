// An object's layout as the node tells clients (GET /_aquifer/layout/BUCKET/KEY,
// and the x-aquifer-layout header of a GET's answer when it is small): its
// size, version and ETag, and each block with the addresses of the nodes
// holding it, best first. Written by the node, read by the aquifer://
// client and the mount, so the one definition lives here.
//
//   {"size": N, "version": N, "etag": "\"...\"", "blocks": [
//     {"id": "...", "size": N, "crc32c": N, "pool": "...", "addresses": ["host:port", ...]}, ...]}
//
// An erasure-coded block has no addresses but its K+M fragments, data
// first ("k": K, "fragments": [{"id", "size", "crc32c", "addresses"}, ...]):
// its bytes are the K data fragments', concatenated, up to its size. A
// client reads the data fragments; a range it cannot read from one is
// reconstructed from the same range of K others (Reed-Solomon works byte
// by byte), and only when that fails too does it ask a node.
//
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace aq::s3 {

struct LayoutFragment {
  std::string id;
  uint64_t size = 0;
  uint32_t crc32c = 0;
  std::vector<std::string> addresses;  // its holder
};

struct LayoutBlock {
  std::string id, pool;
  uint64_t size = 0;
  uint32_t crc32c = 0;
  std::vector<std::string> addresses;     // holders, best first
  int k = 0;                              // erasure-coded: data fragments
  std::vector<LayoutFragment> fragments;  // ... then the K+M fragments, data first
};

struct Layout {
  uint64_t size = 0, version = 0;
  std::string etag;
  std::vector<LayoutBlock> blocks;
};

std::string LayoutToJson(const Layout& layout);
// Corruption when malformed or when the blocks do not add up to the size.
Result<Layout> LayoutFromJson(std::string_view json);

}  // namespace aq::s3
