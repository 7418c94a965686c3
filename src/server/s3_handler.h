// The node's S3 API: every request an S3 client sends, from its head to its
// response, over an http::Exchange. What is implemented is listed, with the
// exact behaviour, in docs/s3.md; everything else — an unknown method, a
// sub-resource such as ?tagging or ?acl, a header that asks for a feature
// the node lacks (server-side encryption, object lock, tagging) — is refused
// with 501 NotImplemented before any byte of the request is stored.
//
// Parts, one file each: s3_handler.cc (authentication, routing, responses),
// object_ops.cc (GET, HEAD, PUT, copy, DELETE), bucket_ops.cc (buckets,
// listings, DeleteObjects), multipart_ops.cc; the node-to-node API under
// /_aquifer/ is its own handler (internal_api.h), reached after
// authentication.
//
// Thread safety: Handle() is called concurrently from the server's worker
// threads; the handler's state is the store's (thread-safe) and counters.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "http/server.h"
#include "s3/auth.h"
#include "s3/errors.h"
#include "s3/xml.h"
#include "server/internal_api.h"
#include "server/key_table.h"
#include "server/node_stats.h"
#include "server/same_host.h"
#include "store/object_store.h"

namespace aq::server {

struct S3HandlerOptions {
  std::vector<s3::Credential> credentials;  // the credentials file's keys: administrators
  // Users' keys with their grants (s3/policy.h) are read from here (null:
  // the credentials file's keys only). Must outlive the handler.
  store::MetaStore* keys_meta = nullptr;
  bool anonymous = false;                  // accept unsigned requests
  uint64_t max_object_bytes = 5ull << 30;  // S3's single-PUT limit
  int max_clock_skew_seconds = 15 * 60;
  uint64_t min_part_bytes = store::kMinPartSize;  // every multipart part but the last
  NodeStats* stats = nullptr;                     // requests recorded here when set (must outlive the handler)
  // The node-to-node API under /_aquifer/ (server/internal_api.h): the
  // node's own blocks, the cluster's node key, what it asks of the cluster.
  // Its ClusterSide also gives an aquifer:// client's open the object's
  // layout.
  InternalApiOptions internal;
  // In a cluster: an aquifer:// client's open of an object larger than it
  // asks for is answered with at most the object's first block.
  bool open_first_block = false;
  // A GET whose body fails part way is continued from other holders for
  // this long (a dead node's lease running out, etcd coming back) before
  // its connection is reset.
  int resume_deadline_s = 15;
  // Outgoing bytes per second (object and block bodies), 0 = unlimited:
  // emulates the node's link.
  double send_bytes_per_second = 0;
  // Same-host reads (server/same_host.h): an open from a loopback client
  // that asks is granted the blocks this node holds in RAM (null: off).
  SameHostReads* same_host = nullptr;
};

// One request as the operations see it.
struct S3Request {
  http::Exchange& ex;
  const http::Request& req;
  std::string bucket, key;                                 // decoded from the path
  std::vector<std::pair<std::string, std::string>> query;  // decoded parameters
  std::string request_id;
  s3::AuthResult auth;
  // The keys in force for this request, and the request's own (null:
  // unsigned, on an --anonymous node).
  std::shared_ptr<const KeySnapshot> keys;
  const KeyEntry* who = nullptr;
  bool Has(std::string_view name) const;
  std::string Param(std::string_view name) const;
  const std::string& resource() const { return req.path; }
};

class S3Handler {
 public:
  S3Handler(store::ObjectStore& objects, S3HandlerOptions options);
  void Handle(http::Exchange& ex);
  const S3HandlerOptions& options() const { return o_; }
  // Replaces the credentials file's keys (KeyTable::SetAdminKeys).
  void SetAdminKeys(std::vector<s3::Credential> keys) { keys_->SetAdminKeys(std::move(keys)); }

 private:
  // ---- s3_handler.cc ----
  void Route(S3Request& r);
  // 501 for a query parameter or header naming what the node does not do.
  bool RefuseUnsupported(S3Request& r);
  bool Authenticate(S3Request& r);
  // False (and 403 AccessDenied sent, counted) when the request's key may
  // not do what it asks; checked before anything is read or written.
  bool Authorize(S3Request& r);
  void Deny(S3Request& r, const std::string& why);

  // ---- object_ops.cc ----
  void GetObject(S3Request& r);
  void PutObject(S3Request& r);
  void CopyObject(S3Request& r);
  void DeleteObject(S3Request& r);
  // Tags and ACLs are not kept: GET answers the truth (no tags; the owner
  // has full control), PUT accepts only what changes nothing (an empty tag
  // set, the "private" ACL) and refuses the rest with 501.
  void ObjectTagging(S3Request& r);
  void ObjectAttributes(S3Request& r);
  // ---- post_object.cc ----
  // POST Object (a browser form upload), authenticated by its own fields.
  void PostObject(S3Request& r);
  void Acl(S3Request& r);
  // The headers a PUT, copy (REPLACE) or CreateMultipartUpload stores with
  // an object; false (and a response sent) when they break S3's limits.
  bool StoredHeaders(S3Request& r, std::map<std::string, std::string>* out);
  // Streams the request body into `writer`, checking every digest the client
  // sent (payload SHA-256, Content-MD5, x-amz-checksum-*, aws-chunked
  // signatures). False (and a response sent) on any failure. The writer is
  // given the checksum to store: in `store_algorithm`, or ("") the one the
  // client names or sends, CRC64NVME when it sends none.
  bool ReceiveBody(S3Request& r, store::ObjectWriter& writer, std::string store_algorithm = "");
  // x-amz-copy-source: the source object, checked against the copy's
  // conditions. False (and a response sent) when it cannot be copied.
  bool CopySource(S3Request& r, store::ObjectMeta* source);
  // CompleteMultipartUpload's object checksum (multipart_ops.cc). False
  // (and a response sent) when the client's checksums do not match.
  bool CompletedChecksum(S3Request& r, const store::UploadInfo& upload, const std::vector<s3::CompletedPart>& named,
                         store::ObjectChecksum* out);

  // ---- bucket_ops.cc ----
  void ListBuckets(S3Request& r);
  void CreateBucket(S3Request& r);
  void DeleteBucket(S3Request& r);
  void HeadBucket(S3Request& r);
  void BucketLocation(S3Request& r);
  void BucketVersioning(S3Request& r);
  // ?lifecycle: only AbortIncompleteMultipartUpload rules (store/uploads.h).
  void GetLifecycle(S3Request& r);
  void PutLifecycle(S3Request& r, const std::string& body);
  void DeleteLifecycle(S3Request& r);
  void ListObjects(S3Request& r);
  void ListObjectVersions(S3Request& r);
  void DeleteObjects(S3Request& r, const std::string& body);

  // ---- multipart_ops.cc ----
  void CreateUpload(S3Request& r);
  void UploadPart(S3Request& r);
  void CompleteUpload(S3Request& r, const std::string& body);
  void AbortUpload(S3Request& r);
  void ListParts(S3Request& r);
  void ListUploads(S3Request& r);

  store::ObjectStore& objects_;
  S3HandlerOptions o_;
  aq::RateLimiter link_;  // emulates the node's network link (serve --net-limit)
  std::unique_ptr<KeyTable> keys_;
  InternalApi internal_;
};

// ---- responses (s3_handler.cc), for every operation ----

// Whether the request's key may do `action` on an object: for what
// authorization cannot see from the request line (the source of a copy,
// each key of a ?delete batch, each object of a read plan).
bool May(const S3Request& r, s3::Action action, const std::string& bucket, const std::string& key);

// An S3 error document with the request id (x-amz-request-id header too).
// 5xx details are logged, not sent.
void SendError(S3Request& r, const s3::Error& e);
// The S3 error a failed store operation means; `subject` says what a bare
// NotFound is about.
void SendStatus(S3Request& r, const Status& s, Subject subject);
// 200 (or `status`) with an XML body.
void SendXml(S3Request& r, std::string body, int status = 200, http::Headers headers = {});
// A response without a body (204, or 200 with headers only).
void SendEmpty(S3Request& r, int status, http::Headers headers = {});
// Reads a small request body (XML documents), at most `limit` bytes, and
// checks it against the signed payload hash and Content-MD5. False (and a
// response sent) when it cannot be read or does not match.
bool ReadSmallBody(S3Request& r, std::string* body, size_t limit = 1 << 20);

// S3's conditional writes on PutObject and CompleteMultipartUpload:
// If-None-Match: * (create, never replace) and If-Match: ETAG (replace that
// version only), into `c`. Other values (S3 has none) are refused with 501
// (false, response sent). The commit checks the condition in its
// transaction; this also checks it once before the body is read, so a
// write that cannot succeed is refused without receiving its bytes.
bool WriteConditionOf(S3Request& r, store::WriteCondition* c);
// A failed write as S3 answers it: a condition that did not hold is 412
// PreconditionFailed (404 NoSuchKey for If-Match on a missing key), a
// conditional write that raced another is 409 ConditionalRequestConflict.
void SendWriteFailure(S3Request& r, const Status& s, const store::WriteCondition& c, Subject subject);

// A POST to a bucket whose body is multipart/form-data: S3's POST Object.
bool IsFormUpload(const S3Request& r);

// Stored checksums (store::ObjectChecksum): whether the request asks for
// them (x-amz-checksum-mode: ENABLED, as a header or signed into a presigned
// URL), and the headers that carry one: x-amz-checksum-ALGORITHM: value and
// x-amz-checksum-type.
bool ChecksumModeEnabled(const S3Request& r);
void AddChecksumHeaders(const store::ObjectChecksum& c, const std::string& value, http::Headers* h);

// S3's ISO 8601 time for listings ("2024-01-31T12:00:00.000Z").
std::string IsoTime(int64_t ns);
inline constexpr const char* kXmlns = "http://s3.amazonaws.com/doc/2006-03-01/";

}  // namespace aq::server
