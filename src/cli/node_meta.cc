#include <fmt/format.h>

#include "cli/cli.h"
#include "cluster/etcd_client.h"
#include "cluster/etcd_meta_store.h"

namespace aq::cli {

Result<std::unique_ptr<store::MetaStore>> OpenNodeMeta(Globals& g, const std::string& data, const std::string& meta) {
  if (!meta.empty()) {
    auto etcd = std::shared_ptr<cluster::EtcdClient>(AQ_TRY(cluster::EtcdClient::Connect(meta)));
    return cluster::NewEtcdMetaStore(etcd, "/aquifer/");
  }
  const std::string path = io::JoinPath(data, "meta.db");
  if (!g.fs->Exists(path)) {
    return NotFound(
        fmt::format("{}: no node's metadata here (give the --data of aquifer serve, or a cluster's --meta)", data));
  }
  return store::OpenSqliteMetaStore(path);
}

}  // namespace aq::cli
