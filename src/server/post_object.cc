// POST Object: browser-based uploads (an HTML form, or a presigned POST from
// boto3's generate_presigned_post or the AWS SDKs' createPresignedPost). The
// form authenticates itself: a policy document signed with the key's secret
// (Signature Version 2, AWSAccessKeyId and signature; or Version 4,
// x-amz-credential, x-amz-date and x-amz-signature), checked with the key's
// grants before any of the file is read; unsigned forms only on an
// --anonymous node.
#include <fmt/format.h>
#include <openssl/hmac.h>

#include <chrono>
#include <memory>

#include "common/clock.h"
#include "s3/checksum.h"
#include "s3/metadata.h"
#include "s3/post_form.h"
#include "s3/sigv4.h"
#include "s3/xml.h"
#include "server/s3_handler.h"

namespace aq::server {
namespace {

constexpr const char* kStoredFields[] = {"content-type",     "content-encoding", "content-disposition",
                                         "content-language", "cache-control",    "expires"};

std::string HmacSha1Base64(const std::string& key, const std::string& data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  HMAC(EVP_sha1(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), mac, &len);
  return s3::Base64Encode(std::string_view(reinterpret_cast<const char*>(mac), len));
}

std::string Field(const std::map<std::string, std::string>& f, const std::string& name) {
  auto it = f.find(name);
  return it == f.end() ? std::string() : it->second;
}

// A field asking for what the node does not do ("" when none).
std::string UnsupportedField(const std::map<std::string, std::string>& f) {
  for (const auto& [name, value] : f) {
    if (name == "acl" && value != "private") return "acl: " + value + " (access control lists)";
    if (name == "tagging") return "tagging (object tags)";
    if (name.rfind("x-amz-server-side-encryption", 0) == 0) return name + " (server-side encryption)";
    if (name == "x-amz-storage-class" && value != "STANDARD") return name + ": " + value + " (storage classes)";
    if (name == "x-amz-website-redirect-location") return name + " (website redirects)";
    if (name.rfind("x-amz-object-lock", 0) == 0) return name + " (object lock)";
    if (name == "x-amz-security-token") return name + " (temporary credentials)";
  }
  return "";
}

}  // namespace

bool IsFormUpload(const S3Request& r) {
  return r.req.method == "POST" && !r.bucket.empty() && r.key.empty() && r.query.empty() &&
         s3::FormBoundary(r.req.headers.Get("Content-Type")).ok();
}

// Long by design: S3's POST Object in its order (form fields, signature,
// policy, grants, then the file streamed into the store), each a refusal
// point before anything is stored.
void S3Handler::PostObject(S3Request& r) {
  auto boundary = s3::FormBoundary(r.req.headers.Get("Content-Type"));
  if (!r.req.content_length && !r.req.chunked) {
    return SendError(r, {411, "MissingContentLength", "You must provide the Content-Length HTTP header."});
  }
  s3::FormReader form(*boundary);
  std::string file, chunk(1 << 20, '\0');
  auto malformed = [&](const Status& s) {
    if (s.code() == StatusCode::kUnsupported) {
      return SendError(r, {400, "MaxPostPreDataLengthExceeded", s.message()});
    }
    SendError(r, {400, "MalformedPOSTRequest",
                  "The body of your POST request is not well-formed multipart/form-data: " + s.message()});
  };
  // The fields (20 KB at most) before anything else, read in small pieces:
  // at most 20 KB + 64 KiB of an unauthenticated body is ever held.
  while (!form.in_file() && !form.done()) {
    auto n = r.ex.ReadBody(chunk.data(), 64 << 10);
    if (!n.ok()) return SendError(r, {400, "IncompleteBody", n.status().message()});
    if (*n == 0) break;
    if (Status s = form.Feed(std::string_view(chunk.data(), *n), &file); !s.ok()) return malformed(s);
  }
  if (!form.in_file() && !form.done()) {
    return SendError(r, {400, "MalformedPOSTRequest",
                         "The body of your POST request is not well-formed multipart/form-data: it ended inside "
                         "the form"});
  }
  if (!form.in_file()) {
    return SendError(r, {400, "InvalidArgument", "POST requires exactly one file upload per request (a 'file' field)"});
  }
  const auto& f = form.fields();
  std::string key = Field(f, "key");
  if (!f.count("key")) {
    return SendError(r, {400, "InvalidArgument", "Bucket POST must contain a field named 'key'."});
  }
  for (size_t at; (at = key.find("${filename}")) != std::string::npos;) key.replace(at, 11, form.filename());
  r.key = key;
  if (Status s = store::CheckObjectKey(key); !s.ok()) return SendError(r, {400, "InvalidArgument", s.message()});

  // Who signed it.
  const std::string policy = Field(f, "policy");
  const bool v4 = f.count("x-amz-signature") > 0;
  const bool v2 = f.count("signature") > 0 || f.count("awsaccesskeyid") > 0;
  s3::PostLimits limits;
  if (v2 || v4 || f.count("policy")) {
    if (policy.empty() || (!v4 && (Field(f, "signature").empty() || Field(f, "awsaccesskeyid").empty()))) {
      return SendError(r, {400, "InvalidArgument",
                           "Bucket POST must contain a policy, and its signature (signature and AWSAccessKeyId, or "
                           "x-amz-signature and x-amz-credential)"});
    }
    std::string access_key, expected;
    const std::string credential = Field(f, "x-amz-credential");
    if (v4) {
      // AKID/YYYYMMDD/region/s3/aws4_request
      std::vector<std::string> parts;
      for (size_t i = 0; i <= credential.size();) {
        const size_t slash = credential.find('/', i);
        parts.push_back(credential.substr(i, slash == std::string::npos ? std::string::npos : slash - i));
        if (slash == std::string::npos) break;
        i = slash + 1;
      }
      if (Field(f, "x-amz-algorithm") != "AWS4-HMAC-SHA256" || parts.size() != 5 || parts[4] != "aws4_request") {
        return SendError(r, {400, "InvalidArgument",
                             "x-amz-algorithm must be AWS4-HMAC-SHA256 and x-amz-credential "
                             "KEY/DATE/REGION/SERVICE/aws4_request"});
      }
      access_key = parts[0];
      r.keys = keys_->ForKey(access_key);
      if (const KeyEntry* e = r.keys->Find(access_key); e != nullptr) {
        expected = s3::HmacHex(s3::SigningKey(e->credential.secret, parts[1], parts[2], parts[3]), policy);
      }
    } else {
      access_key = Field(f, "awsaccesskeyid");
      r.keys = keys_->ForKey(access_key);
      if (const KeyEntry* e = r.keys->Find(access_key); e != nullptr) {
        expected = HmacSha1Base64(e->credential.secret, policy);
      }
    }
    r.auth.access_key = access_key;
    if (expected.empty()) {
      return SendError(r, {403, "InvalidAccessKeyId",
                           "The AWS Access Key Id you provided does not exist in our "
                           "records."});
    }
    if (!s3::SameSignature(expected, v4 ? Field(f, "x-amz-signature") : Field(f, "signature"))) {
      return SendError(r, {403, "SignatureDoesNotMatch",
                           "The request signature we calculated does not match the signature you provided."});
    }
    r.who = r.keys->Find(access_key);
    auto json = s3::Base64Decode(policy);
    if (!json.ok()) return SendError(r, {400, "InvalidPolicyDocument", "Invalid Policy: the policy is not base64"});
    const int64_t now = Clock::Real().WallNanos() / 1'000'000'000;
    if (auto e = s3::CheckPostPolicy(*json, f, r.bucket, now, &limits)) return SendError(r, *e);
  } else if (!o_.anonymous) {
    return Deny(r, "an unsigned form upload (no policy and signature) on a node that requires signatures");
  }
  if (r.who != nullptr && r.who->kind == KeyEntry::Kind::kNode) return Deny(r, "the node key uploads no objects");
  if (!May(r, s3::kWrite, r.bucket, key)) return Deny(r, "the key may not write " + r.bucket + "/" + key);
  if (std::string u = UnsupportedField(f); !u.empty()) {
    return SendError(r, {501, "NotImplemented",
                         fmt::format("the form field {} asks for what this node does not implement; nothing was "
                                     "stored",
                                     u)});
  }

  // What is stored with the object, and the checksums to check.
  store::ObjectAttrs attrs;
  for (const char* name : kStoredFields) {
    if (f.count(name)) attrs.headers[name] = Field(f, name);
  }
  for (const auto& [name, value] : f) {
    if (name.rfind("x-amz-meta-", 0) != 0) continue;
    auto v = s3::MetadataValueIn(value);
    if (!v.ok()) return SendError(r, {400, "InvalidArgument", v.status().message()});
    attrs.headers[name] = *v;
  }
  std::vector<std::pair<std::string, std::unique_ptr<s3::Checksum>>> sums;
  for (const auto& [name, value] : f) {
    const std::string a = s3::ChecksumAlgorithmOfHeader(name);
    if (!a.empty()) sums.emplace_back(value, s3::Checksum::Make(a).value());
  }
  if (sums.empty()) sums.emplace_back("", s3::Checksum::Make("crc64nvme").value());

  auto writer = objects_.Put(r.bucket, key, std::move(attrs), store::ObjectStore::kUnknownSize);
  if (!writer.ok()) return SendStatus(r, writer.status(), Subject::kBucket);
  uint64_t size = 0;
  for (;;) {
    if (!file.empty()) {
      size += file.size();
      if (size > limits.max_size || size > o_.max_object_bytes) {
        return SendError(r, {400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size"});
      }
      for (auto& [v, c] : sums) c->Update(file);
      if (Status s = (*writer)->Write(file); !s.ok()) return SendStatus(r, s, Subject::kObject);
      file.clear();
    }
    if (form.done()) break;
    auto n = r.ex.ReadBody(chunk.data(), chunk.size());
    if (!n.ok()) return SendError(r, {400, "IncompleteBody", n.status().message()});
    if (*n == 0) {
      return SendError(r, {400, "IncompleteBody", "the form ended before its closing boundary"});
    }
    if (Status s = form.Feed(std::string_view(chunk.data(), *n), &file); !s.ok()) return malformed(s);
  }
  // Drain what follows the closing boundary (a client may send an epilogue).
  for (;;) {
    auto n = r.ex.ReadBody(chunk.data(), chunk.size());
    if (!n.ok() || *n == 0) break;
  }
  if (size < limits.min_size) {
    return SendError(r, {400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size"});
  }
  for (auto& [v, c] : sums) {
    const std::string got = c->Base64();
    if (!v.empty() && got != v) {
      return SendError(r, {400, "BadDigest", "The checksum you specified did not match what we received."});
    }
    v = got;
  }
  (*writer)->set_checksum({sums.front().second->algorithm(), sums.front().first, "FULL_OBJECT", {}});
  auto meta = (*writer)->Commit();
  if (!meta.ok()) return SendStatus(r, meta.status(), Subject::kObject);

  const std::string location =
      fmt::format("http://{}/{}/{}", r.req.headers.Get("Host"), r.bucket, s3::UriEncode(key, false));
  http::Headers h;
  h.Add("ETag", meta->etag);
  h.Add("Location", location);
  std::string redirect = Field(f, "success_action_redirect");
  if (redirect.empty()) redirect = Field(f, "redirect");
  if (!redirect.empty()) {
    redirect += redirect.find('?') == std::string::npos ? "?" : "&";
    redirect += fmt::format("bucket={}&key={}&etag={}", s3::UriEncode(r.bucket, true), s3::UriEncode(key, true),
                            s3::UriEncode(meta->etag, true));
    h.Set("Location", redirect);
    return SendEmpty(r, 303, std::move(h));
  }
  const std::string status = Field(f, "success_action_status");
  if (status == "201") {
    return SendXml(r,
                   fmt::format("<PostResponse><Location>{}</Location><Bucket>{}</Bucket><Key>{}</Key>"
                               "<ETag>{}</ETag></PostResponse>",
                               s3::XmlText(location), s3::XmlText(r.bucket), s3::XmlText(key), s3::XmlText(meta->etag)),
                   201, std::move(h));
  }
  SendEmpty(r, status == "200" ? 200 : 204, std::move(h));
}

}  // namespace aq::server
