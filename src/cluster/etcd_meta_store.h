// The node's MetaStore in etcd: buckets, object layouts and multipart
// uploads as keys under a prefix, every change one etcd transaction, so any
// node of a cluster sees the same namespace and a layout switch is atomic
// cluster-wide (concurrent writers to one key: the last commit wins whole).
//
// Keys (PREFIX defaults to kClusterPrefix, "/aquifer/"):
//   PREFIX buckets/<bucket>                 {"created_ns"}
//   PREFIX objects/<bucket>/<key>           {"size","mtime_ns","etag","block_size","blocks":[...]}
//   PREFIX uploads/<id>                     {"bucket","key","created_ns"}
//   PREFIX parts/<id>/<number, 5 digits>    {"size","etag","mtime_ns","blocks":[...]}
// An object's version is its key's etcd mod_revision (increasing, never
// reused).
#pragma once

#include <memory>
#include <string>

#include "cluster/etcd_client.h"
#include "store/meta_store.h"

namespace aq::cluster {

std::unique_ptr<store::MetaStore> NewEtcdMetaStore(std::shared_ptr<EtcdClient> etcd,
                                                   std::string prefix = kClusterPrefix);

}  // namespace aq::cluster
