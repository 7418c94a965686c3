// The node-to-node API's paths (served by server/internal_ops.cc under the
// reserved bucket "_aquifer"), in one place for the handler and for every
// client of it: nodes joining and copying replicas, the cluster's repair,
// and the aquifer:// client (cluster maps, layouts, block reads, plans).
//
//   GET    /_aquifer/cluster                   the cluster map
//   GET    /_aquifer/layout/<bucket>/<key>     an object's blocks and holders (s3/layout.h)
//   GET|PUT|DELETE /_aquifer/blocks/<id>?...   a replica (or a slice of one)
//   GET    /_aquifer/inventory                 every block id a node holds
//   POST|DELETE /_aquifer/plan?stream=ID[&pieces=1]   read plans (s3/plan.h)
#pragma once

#include <string>
#include <string_view>

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

}  // namespace aq::s3::internal
