// What `isi get -D` shows for an object, from outside the node: where each
// of its blocks lives (pool, media, holders, files, erasure-coded
// fragments) and, when asked, whether the pieces this node holds read back
// with their checksums and, when it holds every block, whether the object's
// bytes give the S3 checksum its client stored (`aquifer stat-file`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "io/file_system.h"
#include "store/meta_store.h"

namespace aq::node {

struct ExamineOptions {
  std::string data = "aquifer-data";  // the node's --data directory
  std::vector<std::string> pools;     // its pools as serve's --pool (empty: those it last started with)
  std::string etcd_url;               // a cluster's metadata (the node's own pieces are in `data`)
  std::string object;                 // BUCKET/KEY
  bool verify = false;                // read back every piece held here
};

struct ObjectExamination {
  std::string bucket, key;
  store::ObjectMeta object;
  // One entry per block: offset, size, id, crc32c, pool, media, nodes,
  // path (here), state ("ok", the damage, "not checked", "elsewhere"), and
  // for an erasure-coded block "ec" and "fragments".
  nlohmann::json blocks = nlohmann::json::array();
  uint64_t damaged = 0;  // blocks whose pieces here failed to read back
  // The object's S3 checksum (docs/s3.md#checksums) and, with verify, whether
  // the bytes read back here give it: "ok", "mismatch: ...", "not checked"
  // (not every block is here whole, or no verify), "none stored".
  std::string checksum_state;
  bool checksum_mismatch = false;
  nlohmann::json ToJson() const;
};

// InvalidArgument for an object not named BUCKET/KEY; NotFound for no such object.
Result<ObjectExamination> ExamineObject(io::FileSystem& fs, const ExamineOptions& options);

}  // namespace aq::node
