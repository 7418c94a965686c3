#include "server/s3_handler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <set>

#include "common/clock.h"
#include "common/log.h"
#include "s3/checksum.h"
#include "s3/internal_routes.h"
#include "s3/sigv4.h"
#include "s3/xml.h"

namespace aq::server {
namespace {

// Query parameters that select no operation of their own: presigned URLs'
// signature fields and the operation hint some SDKs add.
// (AWSAccessKeyId, Signature and Expires: Signature Version 2 URLs.)
const std::set<std::string, std::less<>> kNeutral = {
    "x-id",
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
    "AWSAccessKeyId",
    "Signature",
    "Expires",
};

// Headers a presigned URL may carry in its query (SDKs move the x-amz-*
// headers they sign there), which S3 then reads as headers: the payload
// hash (the signature's), the checksums of the body (checked on upload:
// ReceiveBody), the checksum algorithm's name, and x-amz-checksum-mode
// (asks for the stored checksum in the answer: ChecksumModeEnabled). Any
// other x-amz-* parameter is refused.
bool PresignedHeaderParam(std::string_view name) {
  if (http::EqualsIgnoreCase(name, "x-amz-content-sha256") || http::EqualsIgnoreCase(name, "x-amz-checksum-mode") ||
      http::EqualsIgnoreCase(name, "x-amz-sdk-checksum-algorithm") ||
      http::EqualsIgnoreCase(name, "x-amz-user-agent")) {
    return true;
  }
  return !s3::ChecksumAlgorithmOfHeader(name).empty();
}

const std::set<std::string, std::less<>> kResponseOverrides = {
    "response-content-type",  "response-content-language",    "response-expires",
    "response-cache-control", "response-content-disposition", "response-content-encoding",
};

// The parameters each operation understands; any other is refused.
std::set<std::string, std::less<>> Allowed(const S3Request& r) {
  const std::string& m = r.req.method;
  if (r.bucket.empty()) {
    if (m == "GET") return {"max-buckets", "continuation-token", "prefix", "bucket-region"};
    return {};
  }
  if (r.key.empty()) {
    if (m == "GET") {
      if (r.Has("location")) return {"location"};
      if (r.Has("versioning")) return {"versioning"};
      if (r.Has("acl")) return {"acl"};
      if (r.Has("lifecycle")) return {"lifecycle"};
      if (r.Has("uploads")) {
        return {"uploads", "prefix", "delimiter", "max-uploads", "key-marker", "upload-id-marker", "encoding-type"};
      }
      if (r.Has("versions")) {
        return {"versions", "prefix", "delimiter", "max-keys", "key-marker", "version-id-marker", "encoding-type"};
      }
      return {"list-type",          "prefix",      "delimiter",     "max-keys",   "marker",
              "continuation-token", "start-after", "encoding-type", "fetch-owner"};
    }
    if (m == "POST") return {"delete"};
    if ((m == "PUT" || m == "DELETE") && r.Has("lifecycle")) return {"lifecycle"};
    if (m == "PUT" && r.Has("acl")) return {"acl"};
    return {};
  }
  if (m == "GET" && r.Has("uploadId")) return {"uploadId", "max-parts", "part-number-marker", "encoding-type"};
  // Objects carry no tags and one access policy: these are answered truthfully (tools copy them).
  if (r.Has("tagging") && (m == "GET" || m == "PUT" || m == "DELETE")) return {"tagging", "versionId"};
  if (r.Has("acl") && (m == "GET" || m == "PUT")) return {"acl", "versionId"};
  if (r.Has("attributes") && m == "GET") return {"attributes", "versionId"};
  if (m == "GET" || m == "HEAD") {
    auto s = kResponseOverrides;
    s.insert({"partNumber", "versionId"});
    return s;
  }
  if (m == "PUT") return {"uploadId", "partNumber"};
  if (m == "POST")
    return r.Has("uploads") ? std::set<std::string, std::less<>>{"uploads"}
                            : std::set<std::string, std::less<>>{"uploadId"};
  if (m == "DELETE") return {"uploadId", "versionId"};
  return {};
}

bool StartsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && http::EqualsIgnoreCase(s.substr(0, p.size()), p);
}

// A header asking for a feature this node does not have ("" when none).
std::string UnsupportedHeader(const S3Request& r) {
  const std::string& m = r.req.method;
  for (const auto& [name, value] : r.req.headers.fields()) {
    if (StartsWith(name, "x-amz-server-side-encryption") ||
        StartsWith(name, "x-amz-copy-source-server-side-encryption")) {
      return name + " (server-side encryption)";
    }
    // Conditional deletes (If-Match and S3's size/time conditions) would
    // need the check and the delete in one metadata transaction; until they
    // have it, they are refused rather than ignored (ignoring one deletes an
    // object the client asked to keep).
    if (m == "DELETE" && !r.key.empty() &&
        (http::EqualsIgnoreCase(name, "If-Match") || http::EqualsIgnoreCase(name, "If-None-Match") ||
         http::EqualsIgnoreCase(name, "x-amz-if-match-size") ||
         http::EqualsIgnoreCase(name, "x-amz-if-match-last-modified-time"))) {
      return name + " (conditional deletes)";
    }
    if (m != "PUT" && m != "POST") continue;
    if (StartsWith(name, "x-amz-object-lock") || StartsWith(name, "x-amz-bucket-object-lock")) {
      if (!(StartsWith(name, "x-amz-bucket-object-lock-enabled") && http::EqualsIgnoreCase(value, "false"))) {
        return name + " (object lock)";
      }
    }
    if (http::EqualsIgnoreCase(name, "x-amz-tagging")) return name + " (object tagging)";
    if (http::EqualsIgnoreCase(name, "x-amz-tagging-directive") && !http::EqualsIgnoreCase(value, "COPY")) {
      return name + " (object tagging)";
    }
    if (http::EqualsIgnoreCase(name, "x-amz-website-redirect-location")) return name + " (website redirects)";
    if (StartsWith(name, "x-amz-grant-")) return name + " (access control lists)";
    if (http::EqualsIgnoreCase(name, "x-amz-acl") && !http::EqualsIgnoreCase(value, "private")) {
      return name + ": " + value + " (access control lists; only 'private' is the node's behaviour)";
    }
    if (http::EqualsIgnoreCase(name, "x-amz-storage-class") && !http::EqualsIgnoreCase(value, "STANDARD")) {
      return name + ": " + value + " (storage classes; objects are STANDARD)";
    }
    if (http::EqualsIgnoreCase(name, "x-amz-write-offset-bytes")) return name + " (appends)";
    // Conditional writes are PutObject's and CompleteMultipartUpload's
    // (WriteConditionOf); on a copy or a part they would be ignored.
    if (!r.key.empty() && m == "PUT" && (r.req.headers.Has("x-amz-copy-source") || r.Has("partNumber")) &&
        (http::EqualsIgnoreCase(name, "If-Match") || http::EqualsIgnoreCase(name, "If-None-Match"))) {
      return name + (r.Has("partNumber") ? " (conditional part uploads)" : " (conditional copies)");
    }
    if (!r.key.empty() && m == "POST" && !r.Has("uploadId") &&
        (http::EqualsIgnoreCase(name, "If-Match") || http::EqualsIgnoreCase(name, "If-None-Match"))) {
      return name + " (conditional writes other than PutObject and CompleteMultipartUpload)";
    }
  }
  return "";
}

Op Classify(const S3Request& r) {
  if (r.bucket.empty()) return r.req.method == "GET" ? Op::kList : Op::kOther;
  if (r.key.empty()) {
    if (r.req.method == "GET" && !r.Has("location") && !r.Has("versioning") && !r.Has("uploads") &&
        !r.Has("lifecycle") && !r.Has("acl")) {
      return Op::kList;
    }
    return Op::kBucket;
  }
  if (r.req.method == "GET") return Op::kGet;
  if (r.req.method == "HEAD") return Op::kHead;
  if (r.req.method == "PUT") return Op::kPut;
  if (r.req.method == "DELETE") return Op::kDelete;
  return Op::kOther;
}

}  // namespace

bool S3Request::Has(std::string_view name) const {
  return std::any_of(query.begin(), query.end(), [&](const auto& kv) { return kv.first == name; });
}

std::string S3Request::Param(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name) return v;
  }
  return "";
}

std::string IsoTime(int64_t ns) {
  std::time_t t = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
  return buf;
}

void SendError(S3Request& r, const s3::Error& e) {
  if (e.status >= 500 && e.status != 501) {
    const std::string& why = e.detail.empty() ? e.message : e.detail;
    if (e.status == 503) {
      log::warn("request {} {} {}: {} {}: {}", r.request_id, r.req.method, r.req.path, e.status, e.code, why);
    } else {
      log::error("request {} {} {}: {} {}: {}", r.request_id, r.req.method, r.req.path, e.status, e.code, why);
    }
  }
  http::Headers h;
  h.Add("Content-Type", "application/xml");
  h.Add("x-amz-request-id", r.request_id);
  h.Add("x-amz-id-2", r.request_id);
  if (e.status == 503) h.Add("Retry-After", "1");
  if (r.ex.responded()) return;  // the body is already on its way: the connection closes short
  // An error before the body was read: the client may still be sending it.
  if (r.ex.has_body() && !r.ex.body_done()) r.ex.CloseAfter();
  (void)r.ex.Respond(e.status, std::move(h), s3::ErrorXml(e, r.resource(), r.request_id));
}

void SendStatus(S3Request& r, const Status& s, Subject subject) { SendError(r, s3::ErrorFor(s, subject)); }

void SendXml(S3Request& r, std::string body, int status, http::Headers headers) {
  headers.Add("Content-Type", "application/xml");
  headers.Add("x-amz-request-id", r.request_id);
  headers.Add("x-amz-id-2", r.request_id);
  (void)r.ex.Respond(status, std::move(headers), "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + body);
}

void SendEmpty(S3Request& r, int status, http::Headers headers) {
  headers.Add("x-amz-request-id", r.request_id);
  headers.Add("x-amz-id-2", r.request_id);
  (void)r.ex.Respond(status, std::move(headers), "");
}

bool ReadSmallBody(S3Request& r, std::string* body, size_t limit) {
  // The body's own size up front: grown by doubling, an 8 MiB body would
  // hold 12 MiB while its last copy is made.
  if (r.req.content_length && *r.req.content_length <= limit) body->reserve(*r.req.content_length);
  char buf[64 << 10];
  for (;;) {
    auto n = r.ex.ReadBody(buf, sizeof buf);
    if (!n.ok()) {
      SendError(r, n.status().code() == StatusCode::kTimedOut ? s3::Error{400, "RequestTimeout", n.status().message()}
                                                              : s3::Error{400, "IncompleteBody", n.status().message()});
      return false;
    }
    if (*n == 0) break;
    if (body->size() + *n > limit) {
      SendError(r, {400, "MaxMessageLengthExceeded", fmt::format("the request body is over {} bytes", limit)});
      return false;
    }
    body->append(buf, *n);
  }
  const std::string& hash = r.auth.payload_hash;
  if (!hash.empty() && hash != "UNSIGNED-PAYLOAD" && s3::Sha256Hex(*body) != hash) {
    SendError(r, {400, "XAmzContentSHA256Mismatch", "the body's SHA-256 does not match x-amz-content-sha256"});
    return false;
  }
  if (r.req.headers.Has("Content-MD5")) {
    auto md5 = s3::Checksum::Make("md5");
    (*md5)->Update(*body);
    if ((*md5)->Base64() != r.req.headers.Get("Content-MD5")) {
      SendError(r, {400, "BadDigest", "the Content-MD5 you specified did not match what we received"});
      return false;
    }
  }
  return true;
}

S3Handler::S3Handler(store::ObjectStore& objects, S3HandlerOptions options)
    : objects_(objects),
      o_(std::move(options)),
      link_(o_.send_bytes_per_second),
      keys_(std::make_unique<KeyTable>(o_.credentials, o_.internal.node_credential, o_.keys_meta)),
      internal_(objects, o_.internal, link_) {}

bool S3Handler::Authenticate(S3Request& r) {
  s3::AuthOptions ao;
  ao.anonymous = o_.anonymous;
  ao.max_clock_skew_seconds = o_.max_clock_skew_seconds;
  ao.lookup = [this, &r](const std::string& key) -> const s3::Credential* {
    r.keys = keys_->ForKey(key);
    const KeyEntry* e = r.keys->Find(key);
    return e == nullptr ? nullptr : &e->credential;
  };
  s3::AuthOutcome a = s3::Authenticate(r.req, ao);
  if (!a.ok) {
    SendError(r, a.error);
    return false;
  }
  r.auth = std::move(a.result);
  if (!r.auth.access_key.empty() && r.keys) r.who = r.keys->Find(r.auth.access_key);
  return true;
}

void S3Handler::Deny(S3Request& r, const std::string& why) {
  if (o_.stats != nullptr) o_.stats->Denied();
  log::info("request {} {} {}: denied to key {}: {}", r.request_id, r.req.method, r.req.path,
            r.auth.access_key.empty() ? "(unsigned)" : r.auth.access_key, why);
  SendError(r, {403, "AccessDenied", "Access Denied: " + why});
}

bool May(const S3Request& r, s3::Action action, const std::string& bucket, const std::string& key) {
  if (r.who == nullptr) return true;  // unsigned on an --anonymous node: everyone may do everything
  switch (r.who->kind) {
    case KeyEntry::Kind::kAdmin: return true;
    case KeyEntry::Kind::kNode: return false;
    case KeyEntry::Kind::kStored: return s3::Allows(r.who->grants, action, bucket, key);
  }
  return false;
}

bool S3Handler::Authorize(S3Request& r) {
  if (r.who == nullptr) return true;
  const std::string& m = r.req.method;
  const bool node = r.who->kind == KeyEntry::Kind::kNode;
  const bool admin = r.who->kind == KeyEntry::Kind::kAdmin;
  const auto& g = r.who->grants;
  auto deny = [&](const std::string& why) {
    Deny(r, why);
    return false;
  };
  const std::string object = r.bucket + "/" + r.key;
  if (r.bucket == s3::internal::kBucket) {  // the node-to-node API decides
    if (auto why = internal_.Authorize(r)) return deny(*why);
    return true;
  }
  if (admin) return true;
  if (node) return deny("the cluster's node key is for node-to-node traffic, not for S3 requests");
  if (r.bucket.empty()) return true;  // ListBuckets shows the buckets the key's grants name
  if (r.key.empty()) {
    const bool lifecycle = r.Has("lifecycle");
    if (m == "GET" && (r.Has("location") || r.Has("versioning") || r.Has("acl") || lifecycle)) {
      return s3::Touches(g, r.bucket) || deny("the key has no access to bucket " + r.bucket);
    }
    if (m == "GET") {
      const std::string prefix = r.Param("prefix");
      return s3::AllowsList(g, r.bucket, prefix) ||
             deny(fmt::format("the key may not list {}/{}", r.bucket, prefix.empty() ? "" : prefix + "..."));
    }
    if (m == "HEAD") return s3::Touches(g, r.bucket) || deny("the key has no access to bucket " + r.bucket);
    if (m == "POST") {
      return s3::AllowsSome(g, s3::kDelete, r.bucket) || deny("the key may delete nothing in bucket " + r.bucket);
    }
    // Create and delete the bucket, its lifecycle rules.
    return s3::AllowsBucket(g, s3::kAdmin, r.bucket) || deny("the key may not administer bucket " + r.bucket);
  }
  if (m == "GET" && r.Has("uploadId"))
    return s3::Allows(g, s3::kWrite, r.bucket, r.key) || deny("the key may not write " + object);
  const bool read_only = m == "GET" || m == "HEAD";
  if (read_only) return s3::Allows(g, s3::kRead, r.bucket, r.key) || deny("the key may not read " + object);
  if (m == "DELETE" && !r.Has("uploadId") && !r.Has("tagging")) {
    return s3::Allows(g, s3::kDelete, r.bucket, r.key) || deny("the key may not delete " + object);
  }
  // PUT (objects, copies, parts, tags, ACLs), POST (uploads), DELETE of an
  // upload or tags. A copy's source is checked when it is parsed.
  return s3::Allows(g, s3::kWrite, r.bucket, r.key) || deny("the key may not write " + object);
}

bool S3Handler::RefuseUnsupported(S3Request& r) {
  // A response-* override becomes a response header: a CR or LF in it
  // would end that header and start the sender's own (response splitting).
  for (const auto& [name, value] : r.query) {
    if (kResponseOverrides.count(name) && !http::ValidFieldValue(value)) {
      SendError(r, {400, "InvalidArgument",
                    fmt::format("{}: a header value cannot hold control characters (CR, LF, NUL, ...)", name)});
      return true;
    }
  }
  const auto allowed = Allowed(r);
  for (const auto& [name, value] : r.query) {
    if (kNeutral.count(name) || allowed.count(name)) continue;
    if (r.auth.presigned && PresignedHeaderParam(name)) continue;
    SendError(
        r, {501, "NotImplemented",
            fmt::format("'?{}' on {} {} is not implemented by this node; nothing was read or changed", name,
                        r.req.method, r.key.empty() ? (r.bucket.empty() ? "the service" : "a bucket") : "an object")});
    return true;
  }
  if (std::string h = UnsupportedHeader(r); !h.empty()) {
    SendError(r, {501, "NotImplemented",
                  fmt::format("the header {} asks for what this node does not implement; nothing was stored", h)});
    return true;
  }
  return false;
}

void S3Handler::Handle(http::Exchange& ex) {
  const double t0 = Clock::Real().Now();
  S3Request r{ex, ex.request(), {}, {}, {}, s3::NewRequestId(), {}};
  const std::string path = s3::UriDecode(r.req.path);
  const size_t start = path.empty() || path[0] != '/' ? 0 : 1;
  const size_t slash = path.find('/', start);
  r.bucket = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
  if (slash != std::string::npos) r.key = path.substr(slash + 1);
  r.query = s3::ParseQuery(r.req.query);
  const Op op = Classify(r);
  if (o_.stats != nullptr) o_.stats->Begin(op);
  Route(r);
  if (o_.stats != nullptr) {
    const double seconds = Clock::Real().Now() - t0;
    o_.stats->Finish(op, seconds, ex.body_received(), ex.bytes_sent(), ex.status());
  }
}

void S3Handler::Route(S3Request& r) {
  const std::string& m = r.req.method;
  if (m != "GET" && m != "HEAD" && m != "PUT" && m != "POST" && m != "DELETE") {
    return SendError(r, {501, "NotImplemented", fmt::format("the method {} is not implemented by this node", m)});
  }
  // A browser form upload carries its signature in its body.
  if (IsFormUpload(r)) return PostObject(r);
  if (!Authenticate(r)) return;
  if (!Authorize(r)) return;
  if (r.bucket == s3::internal::kBucket) return internal_.Handle(r);
  if (RefuseUnsupported(r)) return;
  if (r.bucket.empty()) {
    if (m == "GET") return ListBuckets(r);
    return SendError(r, {405, "MethodNotAllowed", fmt::format("{} / is not an S3 operation", m)});
  }
  if (r.key.empty()) {
    if (m == "GET") {
      if (r.Has("location")) return BucketLocation(r);
      if (r.Has("versioning")) return BucketVersioning(r);
      if (r.Has("acl")) return Acl(r);
      if (r.Has("lifecycle")) return GetLifecycle(r);
      if (r.Has("uploads")) return ListUploads(r);
      if (r.Has("versions")) return ListObjectVersions(r);
      return ListObjects(r);
    }
    if (m == "HEAD") return HeadBucket(r);
    if (m == "PUT" && r.Has("lifecycle")) {
      std::string body;
      if (!ReadSmallBody(r, &body, 256 << 10)) return;
      return PutLifecycle(r, body);
    }
    if (m == "DELETE" && r.Has("lifecycle")) return DeleteLifecycle(r);
    if (m == "PUT" && r.Has("acl")) return Acl(r);
    if (m == "PUT") return CreateBucket(r);
    if (m == "DELETE") return DeleteBucket(r);
    if (r.Has("delete")) {
      std::string body;
      if (!ReadSmallBody(r, &body)) return;
      return DeleteObjects(r, body);
    }
    return SendError(r, {405, "MethodNotAllowed", "POST on a bucket needs ?delete"});
  }
  if (m == "GET" && r.Has("uploadId")) return ListParts(r);
  if (r.Has("tagging")) return ObjectTagging(r);
  if (r.Has("acl")) return Acl(r);
  if (m == "GET" && r.Has("attributes")) return ObjectAttributes(r);
  if (m == "GET" || m == "HEAD") return GetObject(r);
  if (m == "PUT") {
    if (r.Has("uploadId") || r.Has("partNumber")) return UploadPart(r);
    if (r.req.headers.Has("x-amz-copy-source")) return CopyObject(r);
    return PutObject(r);
  }
  if (m == "POST") {
    if (r.Has("uploads")) return CreateUpload(r);
    std::string body;
    if (!ReadSmallBody(r, &body)) return;
    return CompleteUpload(r, body);
  }
  if (r.Has("uploadId")) return AbortUpload(r);
  return DeleteObject(r);
}

}  // namespace aq::server
