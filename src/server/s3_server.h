// The node's S3-compatible HTTP API over an ObjectStore, for clients used
// unchanged (boto3, s3cmd, the AWS CLI): ListBuckets, CreateBucket,
// HeadBucket, DeleteBucket, GetBucketLocation, ListObjects (V1 and V2:
// prefix, delimiter, pagination), PutObject (streamed into blocks, never held
// whole), GetObject (Range), HeadObject, DeleteObject, DeleteObjects,
// multipart upload (CreateMultipartUpload, UploadPart, CompleteMultipartUpload,
// AbortMultipartUpload, ListParts, ListMultipartUploads), with S3's XML errors.
// Requests are authenticated with AWS Signature Version 4 when credentials
// are configured (a wrong or missing signature is 403); anonymous access only
// when explicitly enabled. CopyObject and UploadPartCopy are refused (501).
//
// Thread safety: the server runs its own threads (one per connection from a
// bounded pool); Start/Stop from one thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "store/object_store.h"

namespace httplib {
class Server;
}

namespace aq::server {

class NodeStats;

struct Credential {
  std::string access_key, secret;
};

// One "ACCESS_KEY_ID SECRET_ACCESS_KEY" pair per line; '#' starts a comment.
Result<std::vector<Credential>> LoadCredentials(const std::string& path);

struct S3ServerOptions {
  std::string host = "127.0.0.1";
  int port = 9000;  // 0 = any free port
  std::vector<Credential> credentials;
  bool anonymous = false;                  // accept unsigned requests
  size_t threads = 64;                     // one per open connection: more keep-alive clients than threads wait
  uint64_t max_object_bytes = 5ull << 30;  // S3's single-PUT limit
  int max_clock_skew_seconds = 15 * 60;
  uint64_t min_part_bytes = store::kMinPartSize;  // every multipart part but the last
  NodeStats* stats = nullptr;                     // requests recorded here when set (must outlive the server)
  // In a cluster: this node's own blocks, served to other nodes at
  // /_aquifer/blocks/<id> (GET, PUT, DELETE), and the cluster map as JSON at
  // /_aquifer/cluster. Both must outlive the server.
  store::LocalBlockService* node_blocks = nullptr;
  std::function<std::string()> cluster_json;
  // /_aquifer/layout/<bucket>/<key>: an object's blocks with their holders'
  // addresses, so clients read blocks from the nodes that hold them.
  std::function<std::string(const store::ObjectMeta&)> layout_json;
  uint64_t max_block_bytes = 1ull << 30;
  // Outgoing bytes per second (object and block bodies), 0 = unlimited:
  // emulates the node's link (serve --net-limit).
  double send_bytes_per_second = 0;
};

class S3Server {
 public:
  // Binds and starts serving in background threads.
  static Result<std::unique_ptr<S3Server>> Start(store::ObjectStore& objects, S3ServerOptions options);
  ~S3Server();  // stops
  int port() const { return port_; }
  void Stop();

 private:
  S3Server() = default;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace aq::server
