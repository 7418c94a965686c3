// The XML request bodies S3 clients send: CompleteMultipartUpload (the part
// list) and Delete (DeleteObjects' key list). Parsed with expat; a document
// type declaration is refused (no entity expansion from a request), and any
// malformed body is an error naming the line and column.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "store/meta_store.h"

namespace aq::server {

// <CompleteMultipartUpload><Part><PartNumber>N</PartNumber><ETag>"…"</ETag></Part>…
// Part numbers must be integers in 1..10000; order is kept as sent.
Result<std::vector<store::CompletedPart>> ParseCompleteMultipartUpload(std::string_view xml);

struct DeleteObjectsRequest {
  std::vector<std::string> keys;
  bool quiet = false;
};
// <Delete><Quiet>true</Quiet><Object><Key>…</Key></Object>…; at most 1000 keys.
Result<DeleteObjectsRequest> ParseDeleteObjects(std::string_view xml);

}  // namespace aq::server
