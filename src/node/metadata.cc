#include "node/metadata.h"

#include <fmt/format.h>

#include "cluster/etcd_client.h"
#include "cluster/etcd_meta_store.h"

namespace aq::node {

Result<std::unique_ptr<store::MetaStore>> OpenMetaStore(io::FileSystem& fs, const std::string& data,
                                                        const std::string& etcd_url) {
  if (!etcd_url.empty()) {
    auto etcd = std::shared_ptr<cluster::EtcdClient>(AQ_TRY(cluster::EtcdClient::Connect(etcd_url)));
    return cluster::NewEtcdMetaStore(etcd, kClusterPrefix);
  }
  const std::string path = io::JoinPath(data, "meta.db");
  if (!fs.Exists(path)) {
    return NotFound(
        fmt::format("{}: no node's metadata here (give the --data of aquifer serve, or a cluster's --meta)", data));
  }
  return store::OpenSqliteMetaStore(path);
}

}  // namespace aq::node
