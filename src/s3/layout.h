// An object's layout as the node tells clients (GET /_aquifer/layout/BUCKET/KEY,
// and the x-aquifer-layout header of a GET's answer when it is small): its
// size, version and ETag, and each block with the addresses of the nodes
// holding it, best first. Written by the node, read by the aquifer://
// client and the mount, so the one definition lives here.
//
//   {"size": N, "version": N, "etag": "\"...\"", "blocks": [
//     {"id": "...", "size": N, "crc32c": N, "pool": "...", "addresses": ["host:port", ...]}, ...]}
//
// An erasure-coded block has no addresses but its K data fragments, in
// order ("fragments": [{"id", "size", "crc32c", "addresses"}, ...]): its
// bytes are theirs, concatenated, up to its size. Parity fragments are not
// listed: a client reads the data fragments, and when one cannot be read
// it asks a node, which reconstructs the block.
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
  std::vector<LayoutFragment> fragments;  // an erasure-coded block's data fragments
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
