#include "server/s3_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/evp.h>

#include <charconv>
#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>

#include "server/node_stats.h"
#include "server/rate_limit.h"
#include "server/s3_xml.h"
#include "server/sigv4.h"

namespace aq::server {
namespace {

using httplib::Request;
using httplib::Response;

std::string Xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string IsoTime(int64_t ns) {
  std::time_t t = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
  return buf;
}

std::string HttpTime(int64_t ns) {
  std::time_t t = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

void SendError(Response& res, int status, const std::string& code, const std::string& message,
               const std::string& resource) {
  res.status = status;
  res.set_content(fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{}</Code><Message>{}</Message>"
                              "<Resource>{}</Resource></Error>",
                              code, Xml(message), Xml(resource)),
                  "application/xml");
}

// What an aq::Status means to an S3 client.
void SendStatus(Response& res, const Status& s, const std::string& resource, bool object) {
  const std::string msg = std::string(s.message());
  switch (s.code()) {
    case StatusCode::kNotFound:
      if (msg.rfind("no bucket", 0) == 0) return SendError(res, 404, "NoSuchBucket", msg, resource);
      return SendError(res, 404, object ? "NoSuchKey" : "NoSuchBucket", msg, resource);
    case StatusCode::kAlreadyExists: return SendError(res, 409, "BucketAlreadyOwnedByYou", msg, resource);
    case StatusCode::kInvalidArgument:
      if (msg.find("not empty") != std::string::npos) return SendError(res, 409, "BucketNotEmpty", msg, resource);
      if (msg.find("bucket name") != std::string::npos) {
        return SendError(res, 400, "InvalidBucketName", msg, resource);
      }
      if (msg.find("1 to 1024") != std::string::npos) return SendError(res, 400, "KeyTooLongError", msg, resource);
      return SendError(res, 400, "InvalidArgument", msg, resource);
    case StatusCode::kNoSpace: return SendError(res, 507, "InsufficientStorage", msg, resource);
    default: return SendError(res, 500, "InternalError", msg, resource);
  }
}

struct Target {
  std::string bucket, key;  // decoded
  std::string raw_path, raw_query;
};

Target ParseTarget(const Request& req) {
  Target t;
  size_t q = req.target.find('?');
  t.raw_path = req.target.substr(0, q);
  t.raw_query = q == std::string::npos ? "" : req.target.substr(q + 1);
  std::string path = UriDecode(t.raw_path);
  if (!path.empty() && path[0] == '/') path.erase(0, 1);
  size_t slash = path.find('/');
  t.bucket = path.substr(0, slash);
  if (slash != std::string::npos) t.key = path.substr(slash + 1);
  return t;
}

class Handler {
 public:
  Handler(store::ObjectStore& objects, S3ServerOptions options)
      : objects_(objects), o_(std::move(options)), link_(o_.send_bytes_per_second) {}

  // Returns false (and fills res) when the request is not authenticated.
  bool Authenticate(const Request& req, const Target& t, Response& res, std::string* payload_hash) {
    const std::string resource = t.raw_path;
    if (!req.has_header("Authorization")) {
      if (o_.anonymous) return true;
      SendError(res, 403, "AccessDenied", "this node requires AWS Signature Version 4 (no Authorization header)",
                resource);
      return false;
    }
    auto auth = ParseAuthorization(req.get_header_value("Authorization"));
    if (!auth.ok()) {
      SendError(res, 400, "AuthorizationHeaderMalformed", std::string(auth.status().message()), resource);
      return false;
    }
    const Credential* cred = nullptr;
    for (const auto& c : o_.credentials) {
      if (c.access_key == auth->access_key) cred = &c;
    }
    if (cred == nullptr) {
      SendError(res, 403, "InvalidAccessKeyId", "the access key id is not known to this node", resource);
      return false;
    }
    const std::string amz_date = req.get_header_value("x-amz-date");
    if (amz_date.size() != 16 || amz_date.compare(0, 8, auth->date) != 0) {
      SendError(res, 403, "AccessDenied", "x-amz-date is missing or does not match the credential's date", resource);
      return false;
    }
    std::tm tm{};
    if (strptime(amz_date.c_str(), "%Y%m%dT%H%M%SZ", &tm) == nullptr) {
      SendError(res, 403, "AccessDenied", "malformed x-amz-date", resource);
      return false;
    }
    const double skew = std::difftime(std::time(nullptr), timegm(&tm));
    if (skew > o_.max_clock_skew_seconds || skew < -o_.max_clock_skew_seconds) {
      SendError(res, 403, "RequestTimeTooSkewed", fmt::format("the request time is {:.0f} s off", skew), resource);
      return false;
    }
    *payload_hash = req.get_header_value("x-amz-content-sha256");
    if (payload_hash->empty()) {
      SendError(res, 400, "InvalidRequest", "x-amz-content-sha256 is required with Signature Version 4", resource);
      return false;
    }
    if (payload_hash->rfind("STREAMING-", 0) == 0) {
      SendError(res, 501, "NotImplemented", "aws-chunked streaming uploads are not supported; sign the payload",
                resource);
      return false;
    }
    SigV4Request sr;
    sr.method = req.method;
    sr.raw_path = t.raw_path;
    sr.raw_query = t.raw_query;
    for (const auto& name : auth->signed_headers) {
      size_t n = req.get_header_value_count(name);
      for (size_t i = 0; i < n; ++i) sr.headers.emplace(name, req.get_header_value(name, i));
    }
    sr.payload_hash = *payload_hash;
    const std::string scope = auth->date + "/" + auth->region + "/" + auth->service + "/aws4_request";
    const std::string sts = StringToSign(amz_date, scope, CanonicalRequest(sr, auth->signed_headers));
    if (!SameSignature(Signature(cred->secret, *auth, sts), auth->signature)) {
      SendError(res, 403, "SignatureDoesNotMatch",
                "the request signature we calculated does not match the signature you provided", resource);
      return false;
    }
    return true;
  }

  void Get(const Request& req, Response& res) {
    Target t = ParseTarget(req);
    std::string hash;
    if (!Authenticate(req, t, res, &hash)) return;
    if (t.bucket == "_aquifer") return Internal(req, t, res, nullptr);
    if (t.bucket.empty()) return ListBuckets(res);
    if (t.key.empty()) {
      if (req.has_param("location")) {
        auto head = objects_.meta().ListObjects({t.bucket, "", "", 0});
        if (!head.ok()) return SendStatus(res, head.status(), t.raw_path, false);
        res.set_content(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint "
            "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"></LocationConstraint>",
            "application/xml");
        return;
      }
      if (req.has_param("uploads")) return ListUploads(t, res);
      return List(req, t, res);
    }
    if (req.has_param("uploadId")) return ListParts(req, t, res);
    auto meta = objects_.Head(t.bucket, t.key);
    if (!meta.ok()) return SendStatus(res, meta.status(), t.raw_path, true);
    res.set_header("ETag", meta->etag);
    res.set_header("Last-Modified", HttpTime(meta->mtime_ns));
    res.set_header("Accept-Ranges", "bytes");
    if (req.has_header("Range")) {
      // Ranges are served by the HTTP layer from the provider below; only
      // the unsatisfiable ones need S3's own error.
      const auto& ranges = req.ranges;
      if (ranges.empty()) {
        return SendError(res, 416, "InvalidRange", "malformed Range header", t.raw_path);
      }
      for (const auto& r : ranges) {
        if (r.first >= 0 && static_cast<uint64_t>(r.first) >= meta->size) {
          // The HTTP layer would apply the range to the error's XML too.
          const_cast<Request&>(req).ranges.clear();
          return SendError(res, 416, "InvalidRange",
                           fmt::format("range starts at {}, the object has {} bytes", r.first, meta->size), t.raw_path);
        }
        if (r.first < 0 && r.second == 0) return SendError(res, 416, "InvalidRange", "empty suffix range", t.raw_path);
      }
    }
    if (req.method == "HEAD") {
      res.set_header("Content-Length", std::to_string(meta->size));
      return;
    }
    if (meta->size == 0) {
      res.set_content("", "application/octet-stream");
      return;
    }
    auto object = std::make_shared<store::ObjectMeta>(std::move(*meta));
    // With stream prefetch, the request is one stream over the object (or the
    // continuation of the reader's previous request): while a block is on the
    // wire, the next ones are read.
    struct Streaming {
      std::shared_ptr<store::ReadStream> stream;
      uint64_t end = 0;  // the furthest byte sent
    };
    auto st = std::make_shared<Streaming>();
    store::Prefetcher* prefetch = objects_.prefetcher();
    if (prefetch != nullptr) {
      auto [start, length] = RequestedRange(req, object->size);
      st->stream = prefetch->Begin(object, start, length);
    }
    res.set_content_provider(
        object->size, "application/octet-stream",
        [this, object, st](size_t offset, size_t length, httplib::DataSink& sink) {
          // One block per call: the block holding `offset`, verified.
          uint64_t start = 0, take = 0;
          for (const auto& b : object->blocks) {
            if (offset < start + b.size) {
              take = std::min<uint64_t>(length, start + b.size - offset);
              break;
            }
            start += b.size;
          }
          Status s = objects_.Read(
              *object, offset, take,
              [&](std::string_view bytes) {
                link_.Acquire(bytes.size());
                return sink.write(bytes.data(), bytes.size()) ? Status::Ok() : IoError("client went away");
              },
              st->stream.get());
          if (s.ok()) st->end = offset + take;
          return s.ok();  // a corrupt block ends the response short, never with bad bytes
        },
        [prefetch, st](bool) {
          if (prefetch != nullptr && st->stream) prefetch->End(std::move(st->stream), st->end);
        });
  }

  // The byte range a GET asks for: [start, start + length) of an object of
  // `size` bytes (the whole object without a Range, or with several ranges).
  static std::pair<uint64_t, uint64_t> RequestedRange(const Request& req, uint64_t size) {
    if (req.ranges.size() != 1 || size == 0) return {0, size};
    auto [first, last] = req.ranges[0];
    if (first < 0) {  // the last `last` bytes
      const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(last), size);
      return {size - n, n};
    }
    const uint64_t start = std::min<uint64_t>(static_cast<uint64_t>(first), size);
    const uint64_t end = last < 0 ? size : std::min<uint64_t>(static_cast<uint64_t>(last) + 1, size);
    return {start, end > start ? end - start : 0};
  }

  // Returns the body bytes received.
  uint64_t Put(const Request& req, Response& res, const httplib::ContentReader& reader) {
    bool consumed = false;
    received_ = 0;
    PutImpl(req, res, reader, &consumed);
    if (!consumed) {
      // A refused upload's body is still on the connection: read it away
      // (up to a bound) so the client's next request parses cleanly.
      uint64_t left = 64ull << 20;
      bool drained = reader([&](const char*, size_t n) {
        if (n > left) return false;
        left -= n;
        return true;
      });
      if (!drained) res.set_header("Connection", "close");
    }
    return received_;
  }

  void PutImpl(const Request& req, Response& res, const httplib::ContentReader& reader, bool* consumed) {
    Target t = ParseTarget(req);
    std::string hash;
    if (!Authenticate(req, t, res, &hash)) return;
    if (t.bucket == "_aquifer") {
      *consumed = true;
      return Internal(req, t, res, &reader);
    }
    if (t.bucket.empty()) return SendError(res, 405, "MethodNotAllowed", "PUT needs a bucket", t.raw_path);
    const bool part = req.has_param("uploadId") || req.has_param("partNumber");
    if (part && (t.key.empty() || !req.has_param("uploadId") || !req.has_param("partNumber"))) {
      return SendError(res, 400, "InvalidRequest", "UploadPart needs a key, uploadId and partNumber", t.raw_path);
    }
    if (t.key.empty()) {
      std::string body;
      *consumed = true;
      reader([&](const char* d, size_t n) {
        if (body.size() + n > 1 << 20) return false;
        body.append(d, n);
        return true;
      });
      Status s = objects_.meta().CreateBucket(t.bucket);
      if (!s.ok()) return SendStatus(res, s, t.raw_path, false);
      res.set_header("Location", "/" + t.bucket);
      return;
    }
    if (req.has_header("x-amz-copy-source")) {
      return SendError(res, 501, "NotImplemented",
                       part ? "UploadPartCopy is not supported" : "CopyObject is not supported", t.raw_path);
    }
    Result<std::unique_ptr<store::ObjectWriter>> writer = InvalidArgument("");
    if (part) {
      const std::string n = req.get_param_value("partNumber");
      uint32_t number = 0;
      auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), number);
      if (ec != std::errc() || end != n.data() + n.size() || number < 1 || number > store::kMaxPartNumber) {
        return SendError(res, 400, "InvalidArgument",
                         fmt::format("partNumber '{}' is not an integer in 1..{}", n, store::kMaxPartNumber),
                         t.raw_path);
      }
      writer = objects_.PutPart(req.get_param_value("uploadId"), t.bucket, t.key, number);
      if (!writer.ok()) return SendUploadStatus(res, writer.status(), t.raw_path);
    } else {
      writer = objects_.Put(t.bucket, t.key);
      if (!writer.ok()) return SendStatus(res, writer.status(), t.raw_path, true);
    }
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> sha(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    EVP_DigestInit_ex(sha.get(), EVP_sha256(), nullptr);
    Status failed;
    uint64_t& received = received_;
    *consumed = true;
    bool complete = reader([&](const char* d, size_t n) {
      received += n;
      if (received > o_.max_object_bytes) {
        failed = InvalidArgument(fmt::format("object larger than {} bytes", o_.max_object_bytes));
        return false;
      }
      EVP_DigestUpdate(sha.get(), d, n);
      failed = (*writer)->Write(std::string_view(d, n));
      return failed.ok();
    });
    if (!failed.ok()) {
      res.set_header("Connection", "close");  // the rest of the body was not read
      if (failed.code() == StatusCode::kInvalidArgument) {
        return SendError(res, 400, "EntityTooLarge", std::string(failed.message()), t.raw_path);
      }
      return SendStatus(res, failed, t.raw_path, true);
    }
    if (!complete) {
      // The client went away mid-upload: nothing of it becomes visible.
      return SendError(res, 400, "IncompleteBody", "the request body ended early", t.raw_path);
    }
    if (req.has_header("Content-Length") && std::to_string(received) != req.get_header_value("Content-Length")) {
      return SendError(
          res, 400, "IncompleteBody",
          fmt::format("received {} bytes, Content-Length said {}", received, req.get_header_value("Content-Length")),
          t.raw_path);
    }
    if (!hash.empty() && hash != "UNSIGNED-PAYLOAD") {
      unsigned char d[EVP_MAX_MD_SIZE];
      unsigned len = 0;
      EVP_DigestFinal_ex(sha.get(), d, &len);
      if (HexEncode(d, len) != hash) {
        return SendError(res, 400, "XAmzContentSHA256Mismatch",
                         "the body's SHA-256 does not match x-amz-content-sha256", t.raw_path);
      }
    }
    auto meta = (*writer)->Commit();
    if (!meta.ok()) {
      return part ? SendUploadStatus(res, meta.status(), t.raw_path) : SendStatus(res, meta.status(), t.raw_path, true);
    }
    res.set_header("ETag", meta->etag);
  }

  void Delete(const Request& req, Response& res) {
    Target t = ParseTarget(req);
    std::string hash;
    if (!Authenticate(req, t, res, &hash)) return;
    if (t.bucket == "_aquifer") return Internal(req, t, res, nullptr);
    if (t.bucket.empty()) return SendError(res, 405, "MethodNotAllowed", "DELETE needs a bucket", t.raw_path);
    if (req.has_param("uploadId")) {
      if (t.key.empty()) return SendError(res, 400, "InvalidRequest", "AbortMultipartUpload needs a key", t.raw_path);
      Status s = objects_.AbortUpload(req.get_param_value("uploadId"), t.bucket, t.key);
      if (!s.ok()) return SendUploadStatus(res, s, t.raw_path);
      res.status = 204;
      return;
    }
    if (t.key.empty()) {
      Status s = objects_.meta().DeleteBucket(t.bucket);
      if (!s.ok()) return SendStatus(res, s, t.raw_path, false);
      res.status = 204;
      return;
    }
    Status s = objects_.Delete(t.bucket, t.key);
    // S3 answers 204 whether or not the key existed; a missing bucket is an error.
    if (!s.ok() && !(s.code() == StatusCode::kNotFound && s.message().rfind("no bucket", 0) != 0)) {
      return SendStatus(res, s, t.raw_path, true);
    }
    res.status = 204;
  }

  // POST: CreateMultipartUpload (?uploads), CompleteMultipartUpload
  // (?uploadId=), DeleteObjects (?delete). Bodies are small XML documents,
  // read up to 1 MiB and checked against the signed payload hash.
  void Post(const Request& req, Response& res, const httplib::ContentReader& reader) {
    Target t = ParseTarget(req);
    std::string hash;
    bool read_all = true;
    std::string body;
    reader([&](const char* d, size_t n) {
      if (body.size() + n > (1u << 20)) {
        read_all = false;
        return false;
      }
      body.append(d, n);
      return true;
    });
    if (!read_all) {
      res.set_header("Connection", "close");
      return SendError(res, 400, "MaxMessageLengthExceeded", "the request body is over 1 MiB", t.raw_path);
    }
    if (!Authenticate(req, t, res, &hash)) return;
    if (!hash.empty() && hash != "UNSIGNED-PAYLOAD") {
      unsigned char d[EVP_MAX_MD_SIZE];
      unsigned len = 0;
      EVP_Digest(body.data(), body.size(), d, &len, EVP_sha256(), nullptr);
      if (HexEncode(d, len) != hash) {
        return SendError(res, 400, "XAmzContentSHA256Mismatch",
                         "the body's SHA-256 does not match x-amz-content-sha256", t.raw_path);
      }
    }
    if (t.bucket.empty()) return SendError(res, 405, "MethodNotAllowed", "POST needs a bucket", t.raw_path);
    if (t.key.empty() && req.has_param("delete")) return DeleteObjects(t, body, res);
    if (!t.key.empty() && req.has_param("uploads")) {
      auto u = objects_.CreateUpload(t.bucket, t.key);
      if (!u.ok()) return SendStatus(res, u.status(), t.raw_path, true);
      res.set_content(fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUploadResult "
                                  "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>{}</Bucket><Key>{}</Key>"
                                  "<UploadId>{}</UploadId></InitiateMultipartUploadResult>",
                                  Xml(t.bucket), Xml(t.key), Xml(u->id)),
                      "application/xml");
      return;
    }
    if (!t.key.empty() && req.has_param("uploadId")) return Complete(req, t, body, res);
    SendError(res, 501, "NotImplemented", "this POST operation is not supported", t.raw_path);
  }

 private:
  // The cluster's node-to-node API: /_aquifer/blocks/<id>?crc=&pool=&size=
  // (this node's replicas) and /_aquifer/cluster (the map).
  void Internal(const Request& req, const Target& t, Response& res, const httplib::ContentReader* reader) {
    if (t.key == "cluster" && req.method == "GET") {
      if (!o_.cluster_json) return SendError(res, 404, "NoSuchKey", "this node is not in a cluster", t.raw_path);
      res.set_content(o_.cluster_json(), "application/json");
      return;
    }
    if (t.key.rfind("layout/", 0) == 0 && req.method == "GET") {
      if (!o_.layout_json) return SendError(res, 404, "NoSuchKey", "this node is not in a cluster", t.raw_path);
      const std::string path = t.key.substr(7);
      const size_t slash = path.find('/');
      if (slash == std::string::npos) return SendError(res, 400, "InvalidArgument", "layout/BUCKET/KEY", t.raw_path);
      auto meta = objects_.Head(path.substr(0, slash), path.substr(slash + 1));
      if (!meta.ok()) return SendStatus(res, meta.status(), t.raw_path, true);
      res.set_content(o_.layout_json(*meta), "application/json");
      return;
    }
    if (o_.node_blocks == nullptr || t.key.rfind("blocks/", 0) != 0) {
      return SendError(res, 404, "NoSuchKey", "no such internal resource", t.raw_path);
    }
    store::BlockRef ref;
    ref.id = t.key.substr(7);
    ref.pool = req.get_param_value("pool");
    try {
      ref.crc32c = static_cast<uint32_t>(std::stoul(req.get_param_value("crc")));
      ref.size = std::stoull(req.get_param_value("size"));
    } catch (const std::exception&) {
      return SendError(res, 400, "InvalidArgument", "a block request needs crc, pool and size", t.raw_path);
    }
    auto fail = [&](const Status& s) {
      if (s.code() == StatusCode::kCorruption)
        return SendError(res, 500, "BlockCorrupt", std::string(s.message()), t.raw_path);
      if (s.code() == StatusCode::kNotFound)
        return SendError(res, 404, "NoSuchBlock", std::string(s.message()), t.raw_path);
      if (s.code() == StatusCode::kInvalidArgument) {
        return SendError(res, 400, "InvalidArgument", std::string(s.message()), t.raw_path);
      }
      SendStatus(res, s, t.raw_path, true);
    };
    if (req.method == "GET") {
      auto block = o_.node_blocks->Read(ref);
      if (!block.ok()) return fail(block.status());
      std::shared_ptr<const std::string> bytes = *block;
      // A slice of the block (offset, length) for clients reading ranges.
      uint64_t from = 0, len = bytes->size();
      if (req.has_param("offset") || req.has_param("length")) {
        try {
          from = std::stoull(req.get_param_value("offset"));
          len = std::stoull(req.get_param_value("length"));
        } catch (const std::exception&) {
          return SendError(res, 400, "InvalidArgument", "offset and length must be integers", t.raw_path);
        }
        if (from > bytes->size() || len > bytes->size() - from) {
          return SendError(res, 416, "InvalidRange", "the slice is outside the block", t.raw_path);
        }
      }
      res.set_content_provider(len, "application/octet-stream",
                               [this, bytes, from, len](size_t offset, size_t length, httplib::DataSink& sink) {
                                 const size_t n = std::min(length, len - offset);
                                 link_.Acquire(n);
                                 return sink.write(bytes->data() + from + offset, n);
                               });
      return;
    }
    if (req.method == "DELETE") {
      Status s = o_.node_blocks->Remove(ref);
      if (!s.ok()) return fail(s);
      res.status = 204;
      return;
    }
    if (req.method == "PUT" && reader != nullptr) {
      if (ref.size > o_.max_block_bytes) {
        return SendError(res, 400, "EntityTooLarge", "a block larger than the node accepts", t.raw_path);
      }
      std::string body;
      body.reserve(ref.size);
      bool ok = (*reader)([&](const char* d, size_t n) {
        if (body.size() + n > ref.size) return false;
        body.append(d, n);
        return true;
      });
      received_ = body.size();
      if (!ok || body.size() != ref.size) {
        res.set_header("Connection", "close");
        return SendError(res, 400, "IncompleteBody", fmt::format("{} of {} block bytes", body.size(), ref.size),
                         t.raw_path);
      }
      auto written = o_.node_blocks->store().WriteWithId(ref.id, ref.pool, body);
      if (!written.ok()) return fail(written.status());
      if (written->crc32c != ref.crc32c) {
        (void)o_.node_blocks->Remove(*written);
        return SendError(res, 400, "BadDigest", "the block's bytes do not match its checksum", t.raw_path);
      }
      return;
    }
    SendError(res, 405, "MethodNotAllowed", "not a block operation", t.raw_path);
  }

  // Errors of requests that name an upload: a missing one is NoSuchUpload.
  static void SendUploadStatus(Response& res, const Status& s, const std::string& resource) {
    const std::string msg(s.message());
    if (s.code() == StatusCode::kNotFound && msg.find("no multipart upload") != std::string::npos) {
      return SendError(res, 404, "NoSuchUpload", msg, resource);
    }
    SendStatus(res, s, resource, true);
  }

  void Complete(const Request& req, const Target& t, const std::string& body, Response& res) {
    const std::string id = req.get_param_value("uploadId");
    auto parts = ParseCompleteMultipartUpload(body);
    if (!parts.ok()) return SendError(res, 400, "MalformedXML", std::string(parts.status().message()), t.raw_path);
    auto upload = objects_.GetUpload(id, t.bucket, t.key);
    if (!upload.ok()) return SendUploadStatus(res, upload.status(), t.raw_path);
    std::string code, message;
    if (!store::CheckCompletion(*upload, *parts, o_.min_part_bytes, &code, &message)) {
      return SendError(res, 400, code, message, t.raw_path);
    }
    auto meta = objects_.CompleteUpload(id, t.bucket, t.key, *parts);
    if (!meta.ok()) {
      if (meta.status().code() == StatusCode::kInvalidArgument) {
        // A part was replaced between the check and the commit.
        return SendError(res, 400, "InvalidPart", std::string(meta.status().message()), t.raw_path);
      }
      return SendUploadStatus(res, meta.status(), t.raw_path);
    }
    const std::string host = req.get_header_value("Host");
    res.set_content(fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUploadResult "
                                "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Location>http://{}{}</Location>"
                                "<Bucket>{}</Bucket><Key>{}</Key><ETag>{}</ETag></CompleteMultipartUploadResult>",
                                Xml(host), Xml(t.raw_path), Xml(t.bucket), Xml(t.key), Xml(meta->etag)),
                    "application/xml");
  }

  void ListParts(const Request& req, const Target& t, Response& res) {
    auto upload = objects_.GetUpload(req.get_param_value("uploadId"), t.bucket, t.key);
    if (!upload.ok()) return SendUploadStatus(res, upload.status(), t.raw_path);
    uint32_t marker = 0, max_parts = 1000;
    try {
      if (req.has_param("part-number-marker")) marker = std::stoul(req.get_param_value("part-number-marker"));
      if (req.has_param("max-parts"))
        max_parts = std::min<uint32_t>(1000, std::stoul(req.get_param_value("max-parts")));
    } catch (const std::exception&) {
      return SendError(res, 400, "InvalidArgument", "part-number-marker and max-parts must be integers", t.raw_path);
    }
    std::string items;
    uint32_t count = 0, last = marker;
    bool truncated = false;
    for (const auto& p : upload->parts) {
      if (p.number <= marker) continue;
      if (count == max_parts) {
        truncated = true;
        break;
      }
      items += fmt::format(
          "<Part><PartNumber>{}</PartNumber><LastModified>{}</LastModified><ETag>{}</ETag>"
          "<Size>{}</Size></Part>",
          p.number, IsoTime(p.mtime_ns), Xml(p.etag), p.size);
      last = p.number;
      ++count;
    }
    res.set_content(
        fmt::format(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListPartsResult "
            "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>{}</Bucket><Key>{}</Key>"
            "<UploadId>{}</UploadId><StorageClass>STANDARD</StorageClass><PartNumberMarker>{}</PartNumberMarker>"
            "<NextPartNumberMarker>{}</NextPartNumberMarker><MaxParts>{}</MaxParts>"
            "<IsTruncated>{}</IsTruncated>{}</ListPartsResult>",
            Xml(t.bucket), Xml(t.key), Xml(upload->id), marker, last, max_parts, truncated ? "true" : "false", items),
        "application/xml");
  }

  void ListUploads(const Target& t, Response& res) {
    auto uploads = objects_.meta().ListUploads(t.bucket);
    if (!uploads.ok()) return SendStatus(res, uploads.status(), t.raw_path, false);
    std::string xml = fmt::format(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListMultipartUploadsResult "
        "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>{}</Bucket><KeyMarker></KeyMarker>"
        "<UploadIdMarker></UploadIdMarker><MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>",
        Xml(t.bucket));
    for (const auto& u : *uploads) {
      xml += fmt::format(
          "<Upload><Key>{}</Key><UploadId>{}</UploadId><StorageClass>STANDARD</StorageClass>"
          "<Initiated>{}</Initiated></Upload>",
          Xml(u.key), Xml(u.id), IsoTime(u.created_ns));
    }
    res.set_content(xml + "</ListMultipartUploadsResult>", "application/xml");
  }

  void DeleteObjects(const Target& t, const std::string& body, Response& res) {
    auto request = ParseDeleteObjects(body);
    if (!request.ok()) return SendError(res, 400, "MalformedXML", std::string(request.status().message()), t.raw_path);
    std::string xml =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DeleteResult "
        "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
    for (const auto& key : request->keys) {
      Status s = store::CheckObjectKey(key);
      if (s.ok()) s = objects_.Delete(t.bucket, key);
      if (!s.ok() && s.code() == StatusCode::kNotFound && std::string(s.message()).rfind("no bucket", 0) == 0) {
        return SendStatus(res, s, t.raw_path, false);
      }
      // As S3: a key that did not exist counts as deleted.
      if (s.ok() || s.code() == StatusCode::kNotFound) {
        if (!request->quiet) xml += "<Deleted><Key>" + Xml(key) + "</Key></Deleted>";
      } else {
        xml += fmt::format("<Error><Key>{}</Key><Code>{}</Code><Message>{}</Message></Error>", Xml(key),
                           s.code() == StatusCode::kInvalidArgument ? "InvalidArgument" : "InternalError",
                           Xml(std::string(s.message())));
      }
    }
    res.set_content(xml + "</DeleteResult>", "application/xml");
  }

  void ListBuckets(Response& res) {
    auto buckets = objects_.meta().ListBuckets();
    if (!buckets.ok()) return SendStatus(res, buckets.status(), "/", false);
    std::string xml =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListAllMyBucketsResult "
        "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Owner><ID>aquifer</ID><DisplayName>aquifer</DisplayName>"
        "</Owner><Buckets>";
    for (const auto& b : *buckets) {
      xml += fmt::format("<Bucket><Name>{}</Name><CreationDate>{}</CreationDate></Bucket>", Xml(b.name),
                         IsoTime(b.created_ns));
    }
    res.set_content(xml + "</Buckets></ListAllMyBucketsResult>", "application/xml");
  }

  void List(const Request& req, const Target& t, Response& res) {
    const bool v2 = req.get_param_value("list-type") == "2";
    store::ListV2Request r;
    r.bucket = t.bucket;
    r.prefix = req.get_param_value("prefix");
    r.delimiter = req.get_param_value("delimiter");
    r.max_keys = 1000;
    if (req.has_param("max-keys")) {
      try {
        long v = std::stol(req.get_param_value("max-keys"));
        if (v < 0) throw std::out_of_range("negative");
        r.max_keys = static_cast<uint32_t>(std::min(v, 1000L));
      } catch (const std::exception&) {
        return SendError(res, 400, "InvalidArgument", "max-keys must be a non-negative integer", t.raw_path);
      }
    }
    if (v2) {
      // Continuation tokens are the resume key itself, hex-encoded (opaque to clients).
      const std::string token = req.get_param_value("continuation-token");
      if (!token.empty()) {
        r.start_after = UnHex(token);
      } else {
        r.start_after = req.get_param_value("start-after");
      }
    } else {
      r.start_after = req.get_param_value("marker");
    }
    auto page = objects_.List(r);
    if (!page.ok()) return SendStatus(res, page.status(), t.raw_path, false);
    std::string xml = fmt::format(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
        "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>{}</Name><Prefix>{}</Prefix><MaxKeys>{}</MaxKeys>"
        "<IsTruncated>{}</IsTruncated>",
        Xml(t.bucket), Xml(r.prefix), r.max_keys, page->truncated ? "true" : "false");
    if (!r.delimiter.empty()) xml += "<Delimiter>" + Xml(r.delimiter) + "</Delimiter>";
    if (v2) {
      xml += fmt::format("<KeyCount>{}</KeyCount>", page->objects.size() + page->common_prefixes.size());
      if (req.has_param("continuation-token")) {
        xml += "<ContinuationToken>" + Xml(req.get_param_value("continuation-token")) + "</ContinuationToken>";
      }
      if (req.has_param("start-after"))
        xml += "<StartAfter>" + Xml(req.get_param_value("start-after")) + "</StartAfter>";
      if (page->truncated) {
        xml += "<NextContinuationToken>" +
               HexEncode(reinterpret_cast<const unsigned char*>(page->next_start_after.data()),
                         page->next_start_after.size()) +
               "</NextContinuationToken>";
      }
    } else {
      xml += "<Marker>" + Xml(r.start_after) + "</Marker>";
      if (page->truncated) xml += "<NextMarker>" + Xml(page->next_start_after) + "</NextMarker>";
    }
    for (const auto& o : page->objects) {
      xml += fmt::format(
          "<Contents><Key>{}</Key><LastModified>{}</LastModified><ETag>{}</ETag><Size>{}</Size>"
          "<StorageClass>STANDARD</StorageClass></Contents>",
          Xml(o.key), IsoTime(o.mtime_ns), Xml(o.etag), o.size);
    }
    for (const auto& p : page->common_prefixes)
      xml += "<CommonPrefixes><Prefix>" + Xml(p) + "</Prefix></CommonPrefixes>";
    res.set_content(xml + "</ListBucketResult>", "application/xml");
  }

  static std::string UnHex(const std::string& h) {
    std::string out;
    for (size_t i = 0; i + 1 < h.size(); i += 2) {
      out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
    }
    return out;
  }

  store::ObjectStore& objects_;
  S3ServerOptions o_;
  RateLimiter link_;
  static thread_local uint64_t received_;  // body bytes of the current PUT on this thread
};

thread_local uint64_t Handler::received_ = 0;

// What a request was, for the statistics.
Op Classify(const Request& req) {
  Target t = ParseTarget(req);
  if (t.bucket.empty()) return req.method == "GET" ? Op::kList : Op::kOther;
  if (t.key.empty()) return req.method == "GET" && !req.has_param("location") ? Op::kList : Op::kBucket;
  if (req.method == "GET") return Op::kGet;
  if (req.method == "HEAD") return Op::kHead;
  if (req.method == "PUT") return Op::kPut;
  if (req.method == "DELETE") return Op::kDelete;
  return Op::kOther;
}

uint64_t BytesOut(const Request& req, const Response& res) {
  if (req.method == "HEAD") return 0;
  if (!res.body.empty()) return res.body.size();
  if (res.content_length_ == 0) return 0;
  if (req.ranges.size() == 1) {  // the part of the object the range selects
    auto [first, last] = req.ranges[0];
    const auto n = static_cast<int64_t>(res.content_length_);
    if (first < 0) return static_cast<uint64_t>(std::min<int64_t>(last, n));
    return static_cast<uint64_t>(std::min<int64_t>(last < 0 ? n - 1 : last, n - 1) - first + 1);
  }
  return res.content_length_;
}

}  // namespace

Result<std::vector<Credential>> LoadCredentials(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("credentials file '{}' cannot be read", path));
  std::vector<Credential> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    std::istringstream f(line);
    Credential c;
    std::string extra;
    if (!(f >> c.access_key)) continue;
    if (!(f >> c.secret) || (f >> extra)) {
      return InvalidArgument(fmt::format("{}:{}: expected ACCESS_KEY_ID SECRET_ACCESS_KEY", path, n));
    }
    out.push_back(std::move(c));
  }
  if (out.empty()) return InvalidArgument(fmt::format("credentials file '{}' holds no key", path));
  return out;
}

Result<std::unique_ptr<S3Server>> S3Server::Start(store::ObjectStore& objects, S3ServerOptions options) {
  if (options.credentials.empty() && !options.anonymous) {
    return InvalidArgument("give credentials (--credentials FILE) or allow anonymous access (--anonymous)");
  }
  std::unique_ptr<S3Server> s(new S3Server());
  s->http_ = std::make_unique<httplib::Server>();
  auto& http = *s->http_;
  const size_t threads = std::max<size_t>(1, options.threads);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_keep_alive_max_count(1000);
  // A thread serves one connection until it idles this long: keep it short
  // so that clients holding more keep-alive connections than there are
  // threads are not left waiting.
  http.set_keep_alive_timeout(1);
  http.set_tcp_nodelay(true);  // small responses must not wait for a delayed ACK
  http.set_read_timeout(30);
  http.set_payload_max_length(options.max_object_bytes);
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  auto h = std::make_shared<Handler>(objects, options);
  NodeStats* stats = options.stats;
  using Clock = std::chrono::steady_clock;
  auto record = [stats](const Request& req, const Response& res, Clock::time_point t0, uint64_t in) {
    if (stats == nullptr) return;
    stats->Record(Classify(req), std::chrono::duration<double>(Clock::now() - t0).count(), in, BytesOut(req, res),
                  res.status >= 400);
  };
  http.Get(".*", [h, record](const Request& req, Response& res) {
    auto t0 = Clock::now();
    h->Get(req, res);
    record(req, res, t0, 0);
  });
  http.Put(".*", [h, record](const Request& req, Response& res, const httplib::ContentReader& reader) {
    auto t0 = Clock::now();
    uint64_t in = h->Put(req, res, reader);
    record(req, res, t0, in);
  });
  http.Delete(".*", [h, record](const Request& req, Response& res) {
    auto t0 = Clock::now();
    h->Delete(req, res);
    record(req, res, t0, 0);
  });
  http.Post(".*", [h, record](const Request& req, Response& res, const httplib::ContentReader& reader) {
    auto t0 = Clock::now();
    h->Post(req, res, reader);
    record(req, res, t0, 0);
  });
  // Requests the HTTP layer refuses before routing (malformed, a path that
  // climbs out of the root, a body over the limit).
  http.set_error_handler([](const Request& req, Response& res) {
    if (!res.body.empty()) return;
    const char* code = res.status == 413   ? "EntityTooLarge"
                       : res.status == 404 ? "NoSuchKey"
                       : res.status >= 500 ? "InternalError"
                                           : "InvalidRequest";
    SendError(res, res.status, code, fmt::format("HTTP {}", res.status), req.path);
  });
  if (options.port == 0) {
    s->port_ = http.bind_to_any_port(options.host);
    if (s->port_ <= 0) return IoError(fmt::format("cannot listen on {}", options.host));
  } else {
    if (!http.bind_to_port(options.host, options.port)) {
      return IoError(fmt::format("cannot listen on {}:{} (in use?)", options.host, options.port));
    }
    s->port_ = options.port;
  }
  s->thread_ = std::thread([srv = s->http_.get()] { srv->listen_after_bind(); });
  return s;
}

void S3Server::Stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

S3Server::~S3Server() { Stop(); }

}  // namespace aq::server
