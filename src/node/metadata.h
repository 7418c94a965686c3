// Opening a node's or a cluster's metadata from outside the node (tools:
// keys, tiering, stat).
#pragma once

#include <memory>
#include <string>

#include "cluster/etcd_client.h"
#include "common/status.h"
#include "io/file_system.h"
#include "store/meta_store.h"

namespace aq::node {

using cluster::kClusterPrefix;  // where a cluster's metadata lives in etcd

// The metadata of a node (`data`: its --data directory, SQLite) or of a
// cluster (`etcd_url`: etcd://HOST:PORT, wins when given). NotFound, with
// what to give instead, when `data` holds no node's metadata.
Result<std::unique_ptr<store::MetaStore>> OpenMetaStore(io::FileSystem& fs, const std::string& data,
                                                        const std::string& etcd_url);

}  // namespace aq::node
