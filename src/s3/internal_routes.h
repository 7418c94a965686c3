// The node-to-node API's paths (served by server/internal_api.h under the
// reserved bucket "_aquifer"), in one place for the handler and for every
// client of it: nodes joining and copying replicas, the cluster's repair,
// and the aquifer:// client (cluster maps, layouts, block reads, plans).
//
//   GET    /_aquifer/cluster                   the cluster map
//   GET    /_aquifer/layout/<bucket>/<key>     an object's blocks and holders (s3/layout.h)
//   GET|PUT|DELETE /_aquifer/blocks/<id>?...   a replica (or a slice of one)
//   GET    /_aquifer/inventory                 every block id a node holds
//   POST|DELETE /_aquifer/plan?stream=ID[&pieces=1]   read plans (s3/plan.h)
//
// The requests' parameters and the answers' documents are typed here too:
// a client builds them, the handler parses them, from one definition.
//
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace aq::s3::internal {

// The bucket name no user bucket can take, and the keys under it.
inline constexpr std::string_view kBucket = "_aquifer";
inline constexpr std::string_view kCluster = "cluster";
inline constexpr std::string_view kInventory = "inventory";
inline constexpr std::string_view kPlan = "plan";
inline constexpr std::string_view kLayoutPrefix = "layout/";
inline constexpr std::string_view kBlocksPrefix = "blocks/";

inline std::string Path(std::string_view key) { return "/" + std::string(kBucket) + "/" + std::string(key); }
inline std::string ClusterPath() { return Path(kCluster); }
inline std::string InventoryPath() { return Path(kInventory); }
inline std::string PlanPath() { return Path(kPlan); }
inline std::string BlockPath(std::string_view id) { return Path(std::string(kBlocksPrefix) + std::string(id)); }
// `resource`: the object's own path, "/BUCKET/KEY" as the client encodes it.
inline std::string LayoutPath(std::string_view resource) { return Path("layout") + std::string(resource); }

// A stored piece's id: 1 to 128 of [0-9A-Za-z._-] (what NewBlockId and
// FragmentId make; never a path).
bool IsBlockId(std::string_view id);

// A block request, GET (a replica, or a slice of one), PUT or DELETE:
//   /_aquifer/blocks/<id>?crc=N[&length=N&offset=N]&pool=NAME&size=N
// naming the piece as its record does, so its holder checks what it serves
// and stores against the record.
struct BlockTarget {
  std::string id, pool;
  uint32_t crc32c = 0;
  uint64_t size = 0;
  // GET only: bytes [offset, offset + length) of the piece.
  bool sliced = false;
  uint64_t offset = 0, length = 0;

  std::string Path() const { return BlockPath(id); }
  std::string Query() const;  // in SigV4's canonical order (sorted by name)
};
// From a request's key under the bucket ("blocks/<id>") and its decoded
// query parameters. InvalidArgument naming what is missing or malformed:
// an id that IsBlockId refuses, crc (below 2^32) or size not an unsigned
// integer, offset or length given without the other or not one.
Result<BlockTarget> ParseBlockTarget(std::string_view key,
                                     const std::vector<std::pair<std::string, std::string>>& query);

// POST|DELETE /_aquifer/plan's query: a reader's stream, or (pieces) a
// node's share of a plan.
std::string PlanQuery(std::string_view stream, bool pieces = false);

// GET /_aquifer/cluster's answer: the members as the node sees them.
//   {"replicas": N, "self": ID, "nodes": [{"id", "address", "state", "up"}, ...]}
// A single node answers {"nodes": []}: a cluster of one that names no
// other member. Reading: absent fields read as empty; a field of the wrong
// type is an error naming it.
struct ClusterMapDoc {
  struct Member {
    std::string id, address, state;  // state: NodeStateName ("active", "smartfailed", ...)
    bool up = false;
  };
  uint64_t replicas = 0;
  std::string self;  // empty on a single node
  std::vector<Member> nodes;
};
std::string ClusterMapToJson(const ClusterMapDoc& map);
Result<ClusterMapDoc> ClusterMapFromJson(std::string_view json);

// GET /_aquifer/inventory's answer: the ids of every piece the node holds,
// a JSON array of strings. Reading refuses anything else (an element that
// is not a string, an id IsBlockId refuses) rather than skipping it: an
// inventory decides what repair copies and drops.
std::string InventoryToJson(const std::vector<std::string>& ids);
Result<std::vector<std::string>> InventoryFromJson(std::string_view json);

}  // namespace aq::s3::internal
