// Bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket,
// GetBucketLocation, GetBucketVersioning (never enabled), ListObjects V1 and
// V2, ListObjectVersions (every object is its one "null" version) and
// DeleteObjects.
#include <fmt/format.h>

#include <charconv>

#include "s3/sigv4.h"
#include "s3/xml.h"
#include "server/s3_handler.h"
#include "store/uploads.h"

namespace aq::server {
namespace {

constexpr const char* kOwner = "<Owner><ID>aquifer</ID><DisplayName>aquifer</DisplayName></Owner>";

// A listing's text: URL-encoded when the client asked (encoding-type=url),
// else escaped for XML.
struct Encoder {
  bool url = false;
  std::string operator()(std::string_view s) const { return url ? s3::UriEncode(s, false) : s3::XmlText(s); }
};

// Where a listing resumes after a marker the client sent back: a marker
// that is a common prefix (it holds the delimiter past the prefix and ends
// with it) skips everything under it; any other marker is a key.
std::string ResumeAfter(const std::string& marker, const std::string& prefix, const std::string& delimiter) {
  if (delimiter.empty() || marker.size() <= prefix.size() || marker.compare(0, prefix.size(), prefix) != 0) {
    return marker;
  }
  if (marker.size() < delimiter.size() ||
      marker.compare(marker.size() - delimiter.size(), delimiter.size(), delimiter) != 0) {
    return marker;
  }
  if (marker.find(delimiter, prefix.size()) + delimiter.size() != marker.size()) return marker;
  return marker + "\xff";  // after every key under the prefix (keys are UTF-8: 0xff never occurs)
}

bool ParseMaxKeys(S3Request& r, const char* name, uint32_t* out) {
  *out = 1000;
  if (!r.Has(name)) return true;
  const std::string v = r.Param(name);
  int64_t n = -1;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || n < 0) {
    SendError(r, {400, "InvalidArgument", fmt::format("{} '{}' must be a non-negative integer", name, v)});
    return false;
  }
  *out = static_cast<uint32_t>(std::min<int64_t>(n, 1000));
  return true;
}

bool ParseEncoding(S3Request& r, Encoder* enc) {
  if (!r.Has("encoding-type")) return true;
  if (r.Param("encoding-type") != "url") {
    SendError(r, {400, "InvalidArgument", "Invalid Encoding Method specified in Request (only 'url')"});
    return false;
  }
  enc->url = true;
  return true;
}

// Opaque V2 continuation tokens: the resume key, hex-encoded.
std::string Token(const std::string& resume) {
  return s3::HexEncode(reinterpret_cast<const unsigned char*>(resume.data()), resume.size());
}
bool FromToken(const std::string& token, std::string* resume) {
  if (token.size() % 2 != 0) return false;
  resume->clear();
  for (size_t i = 0; i < token.size(); i += 2) {
    unsigned v = 0;
    auto [end, ec] = std::from_chars(token.data() + i, token.data() + i + 2, v, 16);
    if (ec != std::errc() || end != token.data() + i + 2) return false;
    resume->push_back(static_cast<char>(v));
  }
  return true;
}

}  // namespace

void S3Handler::ListBuckets(S3Request& r) {
  auto buckets = objects_.meta().ListBuckets();
  if (!buckets.ok()) return SendStatus(r, buckets.status(), Subject::kBucket);
  std::string xml = fmt::format("<ListAllMyBucketsResult xmlns=\"{}\">{}<Buckets>", kXmlns, kOwner);
  for (const auto& b : *buckets) {
    // A user's key sees the buckets its grants name.
    if (r.who != nullptr && r.who->kind == KeyEntry::Kind::kStored && !s3::Touches(r.who->grants, b.name)) continue;
    xml += fmt::format("<Bucket><Name>{}</Name><CreationDate>{}</CreationDate></Bucket>", s3::XmlText(b.name),
                       IsoTime(b.created_ns));
  }
  SendXml(r, xml + "</Buckets></ListAllMyBucketsResult>");
}

void S3Handler::CreateBucket(S3Request& r) {
  if (Status s = store::CheckBucketName(r.bucket); !s.ok()) {
    return SendError(r, {400, "InvalidBucketName", s.message()});
  }
  std::string body;
  if (!ReadSmallBody(r, &body, 64 << 10)) return;
  if (!body.empty()) {
    bool root = false;
    Status s = s3::WalkXml(body, "CreateBucketConfiguration", [&](const std::string& path, const std::string&) {
      if (path == "CreateBucketConfiguration") root = true;
      return Status::Ok();
    });
    if (!s.ok() || !root) {
      return SendError(r, {400, "MalformedXML", s.ok() ? "the body is not a CreateBucketConfiguration" : s.message()});
    }
  }
  Status s = objects_.meta().CreateBucket(r.bucket);
  // Every key of this node owns every bucket: creating one's own bucket again
  // succeeds, as in S3's us-east-1.
  if (!s.ok() && !(s.code() == StatusCode::kAlreadyExists && s.subject() == Subject::kBucket)) {
    return SendStatus(r, s, Subject::kBucket);
  }
  http::Headers h;
  h.Add("Location", "/" + r.bucket);
  SendEmpty(r, 200, std::move(h));
}

// As S3: a bucket without objects is deleted even while multipart uploads
// are in progress in it; they are aborted first (their parts freed). A
// bucket with objects is refused before any upload is touched.
void S3Handler::DeleteBucket(S3Request& r) {
  store::MetaStore& meta = objects_.meta();
  Status s;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto page = meta.ListObjects({r.bucket, "", "", 1});
    if (!page.ok()) return SendStatus(r, page.status(), Subject::kBucket);
    if (!page->objects.empty()) {
      return SendStatus(r, NotEmpty(fmt::format("bucket '{}' is not empty", r.bucket)), Subject::kBucket);
    }
    auto uploads = meta.ListUploads(r.bucket);
    if (!uploads.ok()) return SendStatus(r, uploads.status(), Subject::kBucket);
    for (const auto& u : *uploads) {
      Status a = objects_.AbortUpload(u.id, u.bucket, u.key);
      if (!a.ok() && a.code() != StatusCode::kNotFound) return SendStatus(r, a, Subject::kUpload);
    }
    s = meta.DeleteBucket(r.bucket);
    if (s.code() != StatusCode::kNotEmpty) break;  // an upload or object arrived meanwhile: look again
  }
  if (!s.ok()) return SendStatus(r, s, Subject::kBucket);
  (void)store::SaveUploadRules(meta, r.bucket, {});  // a new bucket of that name starts without rules
  SendEmpty(r, 204);
}

void S3Handler::GetLifecycle(S3Request& r) {
  auto page = objects_.meta().ListObjects({r.bucket, "", "", 0});
  if (!page.ok()) return SendStatus(r, page.status(), Subject::kBucket);
  auto rules = store::LoadUploadRules(objects_.meta(), r.bucket);
  if (!rules.ok()) return SendStatus(r, rules.status(), Subject::kBucket);
  if (rules->empty()) {
    return SendError(r, {404, "NoSuchLifecycleConfiguration", "The lifecycle configuration does not exist"});
  }
  std::string xml = fmt::format("<LifecycleConfiguration xmlns=\"{}\">", kXmlns);
  for (const auto& rule : *rules) {
    xml += "<Rule>";
    if (!rule.id.empty()) xml += "<ID>" + s3::XmlText(rule.id) + "</ID>";
    xml += "<Filter><Prefix>" + s3::XmlText(rule.prefix) + "</Prefix></Filter>";
    xml += fmt::format(
        "<Status>{}</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>{}</DaysAfterInitiation>"
        "</AbortIncompleteMultipartUpload></Rule>",
        rule.enabled ? "Enabled" : "Disabled", rule.days);
  }
  SendXml(r, xml + "</LifecycleConfiguration>");
}

void S3Handler::PutLifecycle(S3Request& r, const std::string& body) {
  auto parsed = s3::ParseLifecycle(body);
  if (!parsed.ok()) {
    if (parsed.status().code() == StatusCode::kUnsupported) {
      return SendError(r, {501, "NotImplemented", std::string(parsed.status().message()) + "; nothing was stored"});
    }
    return SendError(r, {400, "MalformedXML", parsed.status().message()});
  }
  auto page = objects_.meta().ListObjects({r.bucket, "", "", 0});
  if (!page.ok()) return SendStatus(r, page.status(), Subject::kBucket);
  std::vector<store::UploadRule> rules;
  for (const auto& p : *parsed) rules.push_back({p.id, p.prefix, p.enabled, p.abort_days});
  Status s = store::SaveUploadRules(objects_.meta(), r.bucket, rules);
  if (!s.ok()) return SendStatus(r, s, Subject::kBucket);
  SendEmpty(r, 200);
}

void S3Handler::DeleteLifecycle(S3Request& r) {
  auto page = objects_.meta().ListObjects({r.bucket, "", "", 0});
  if (!page.ok()) return SendStatus(r, page.status(), Subject::kBucket);
  Status s = store::SaveUploadRules(objects_.meta(), r.bucket, {});
  if (!s.ok()) return SendStatus(r, s, Subject::kBucket);
  SendEmpty(r, 204);
}

void S3Handler::HeadBucket(S3Request& r) {
  auto page = objects_.meta().ListObjects({r.bucket, "", "", 0});
  if (!page.ok()) return SendStatus(r, page.status(), Subject::kBucket);
  http::Headers h;
  h.Add("x-amz-bucket-region", "us-east-1");
  SendEmpty(r, 200, std::move(h));
}

void S3Handler::BucketLocation(S3Request& r) {
  auto page = objects_.meta().ListObjects({r.bucket, "", "", 0});
  if (!page.ok()) return SendStatus(r, page.status(), Subject::kBucket);
  SendXml(r, fmt::format("<LocationConstraint xmlns=\"{}\"></LocationConstraint>", kXmlns));
}

void S3Handler::BucketVersioning(S3Request& r) {
  auto page = objects_.meta().ListObjects({r.bucket, "", "", 0});
  if (!page.ok()) return SendStatus(r, page.status(), Subject::kBucket);
  SendXml(r, fmt::format("<VersioningConfiguration xmlns=\"{}\"/>", kXmlns));
}

void S3Handler::ListObjects(S3Request& r) {
  const bool v2 = r.Param("list-type") == "2";
  if (r.Has("list-type") && !v2) return SendError(r, {400, "InvalidArgument", "list-type must be 2"});
  Encoder enc;
  if (!ParseEncoding(r, &enc)) return;
  store::ListV2Request q;
  q.bucket = r.bucket;
  q.prefix = r.Param("prefix");
  q.delimiter = r.Param("delimiter");
  if (!ParseMaxKeys(r, "max-keys", &q.max_keys)) return;
  if (v2) {
    if (r.Has("continuation-token")) {
      if (!FromToken(r.Param("continuation-token"), &q.start_after)) {
        return SendError(r, {400, "InvalidArgument", "The continuation token provided is incorrect"});
      }
    } else {
      q.start_after = r.Param("start-after");
    }
  } else {
    q.start_after = ResumeAfter(r.Param("marker"), q.prefix, q.delimiter);
  }
  auto page = objects_.List(q);
  if (!page.ok()) return SendStatus(r, page.status(), Subject::kBucket);
  std::string xml = fmt::format(
      "<ListBucketResult xmlns=\"{}\"><Name>{}</Name><Prefix>{}</Prefix><MaxKeys>{}</MaxKeys>"
      "<IsTruncated>{}</IsTruncated>",
      kXmlns, s3::XmlText(r.bucket),
      // ListObjects (V1) sends its own Prefix back as given even with
      // encoding-type=url, as S3 does (and botocore expects: it decodes the
      // V2 Prefix but not the V1 one).
      v2 ? enc(q.prefix) : s3::XmlText(q.prefix), q.max_keys, page->truncated ? "true" : "false");
  if (!q.delimiter.empty()) xml += "<Delimiter>" + enc(q.delimiter) + "</Delimiter>";
  if (enc.url) xml += "<EncodingType>url</EncodingType>";
  const bool owner = !v2 || r.Param("fetch-owner") == "true";
  if (v2) {
    xml += fmt::format("<KeyCount>{}</KeyCount>", page->objects.size() + page->common_prefixes.size());
    if (r.Has("continuation-token")) {
      xml += "<ContinuationToken>" + s3::XmlText(r.Param("continuation-token")) + "</ContinuationToken>";
    }
    if (r.Has("start-after")) xml += "<StartAfter>" + enc(r.Param("start-after")) + "</StartAfter>";
    if (page->truncated) xml += "<NextContinuationToken>" + Token(page->next_start_after) + "</NextContinuationToken>";
  } else {
    xml += "<Marker>" + enc(r.Param("marker")) + "</Marker>";
    if (page->truncated && !q.delimiter.empty()) {
      // The last key or common prefix on the page (never the internal resume key).
      std::string last = page->objects.empty() ? "" : page->objects.back().key;
      if (!page->common_prefixes.empty() && page->common_prefixes.back() > last) last = page->common_prefixes.back();
      xml += "<NextMarker>" + enc(last) + "</NextMarker>";
    }
  }
  for (const auto& o : page->objects) {
    xml += fmt::format(
        "<Contents><Key>{}</Key><LastModified>{}</LastModified><ETag>{}</ETag><Size>{}</Size>{}"
        "<StorageClass>STANDARD</StorageClass></Contents>",
        enc(o.key), IsoTime(o.mtime_ns), s3::XmlText(o.etag), o.size, owner ? kOwner : "");
  }
  for (const auto& p : page->common_prefixes) xml += "<CommonPrefixes><Prefix>" + enc(p) + "</Prefix></CommonPrefixes>";
  SendXml(r, xml + "</ListBucketResult>");
}

void S3Handler::ListObjectVersions(S3Request& r) {
  Encoder enc;
  if (!ParseEncoding(r, &enc)) return;
  store::ListV2Request q;
  q.bucket = r.bucket;
  q.prefix = r.Param("prefix");
  q.delimiter = r.Param("delimiter");
  if (!ParseMaxKeys(r, "max-keys", &q.max_keys)) return;
  const std::string key_marker = r.Param("key-marker"), version_marker = r.Param("version-id-marker");
  if (!version_marker.empty() && version_marker != "null") {
    return SendError(r, {400, "InvalidArgument", "Invalid version id specified (every version here is 'null')"});
  }
  if (!version_marker.empty() && key_marker.empty()) {
    return SendError(r, {400, "InvalidArgument", "A version-id marker cannot be specified without a key marker."});
  }
  q.start_after = ResumeAfter(key_marker, q.prefix, q.delimiter);
  auto page = objects_.List(q);
  if (!page.ok()) return SendStatus(r, page.status(), Subject::kBucket);
  std::string xml = fmt::format(
      "<ListVersionsResult xmlns=\"{}\"><Name>{}</Name><Prefix>{}</Prefix><KeyMarker>{}</KeyMarker>"
      "<VersionIdMarker>{}</VersionIdMarker><MaxKeys>{}</MaxKeys><IsTruncated>{}</IsTruncated>",
      kXmlns, s3::XmlText(r.bucket), enc(q.prefix), enc(key_marker), s3::XmlText(version_marker), q.max_keys,
      page->truncated ? "true" : "false");
  if (!q.delimiter.empty()) xml += "<Delimiter>" + enc(q.delimiter) + "</Delimiter>";
  if (enc.url) xml += "<EncodingType>url</EncodingType>";
  if (page->truncated) {
    std::string last = page->objects.empty() ? "" : page->objects.back().key;
    if (!page->common_prefixes.empty() && page->common_prefixes.back() > last) last = page->common_prefixes.back();
    xml += "<NextKeyMarker>" + enc(last) + "</NextKeyMarker><NextVersionIdMarker>null</NextVersionIdMarker>";
  }
  for (const auto& o : page->objects) {
    xml += fmt::format(
        "<Version><Key>{}</Key><VersionId>null</VersionId><IsLatest>true</IsLatest><LastModified>{}</LastModified>"
        "<ETag>{}</ETag><Size>{}</Size>{}<StorageClass>STANDARD</StorageClass></Version>",
        enc(o.key), IsoTime(o.mtime_ns), s3::XmlText(o.etag), o.size, kOwner);
  }
  for (const auto& p : page->common_prefixes) xml += "<CommonPrefixes><Prefix>" + enc(p) + "</Prefix></CommonPrefixes>";
  SendXml(r, xml + "</ListVersionsResult>");
}

void S3Handler::DeleteObjects(S3Request& r, const std::string& body) {
  auto request = s3::ParseDeleteObjects(body);
  if (!request.ok()) return SendError(r, {400, "MalformedXML", request.status().message()});
  if (!request->condition.empty()) {
    return SendError(r, {501, "NotImplemented",
                         "conditional deletes are not implemented (" + request->condition + "); nothing was deleted"});
  }
  // The bucket first: a missing bucket fails the whole request.
  auto page = objects_.meta().ListObjects({r.bucket, "", "", 0});
  if (!page.ok()) return SendStatus(r, page.status(), Subject::kBucket);
  std::string xml = fmt::format("<DeleteResult xmlns=\"{}\">", kXmlns);
  for (const auto& key : request->keys) {
    if (!May(r, s3::kDelete, r.bucket, key)) {
      if (o_.stats != nullptr) o_.stats->Denied();
      xml += fmt::format(
          "<Error><Key>{}</Key><Code>AccessDenied</Code><Message>Access Denied: the key may not "
          "delete this object</Message></Error>",
          s3::XmlText(key));
      continue;
    }
    Status s = store::CheckObjectKey(key);
    if (s.ok()) s = objects_.Delete(r.bucket, key);
    // As S3: a key that did not exist counts as deleted.
    if (s.ok() || (s.code() == StatusCode::kNotFound && s.subject() != Subject::kBucket)) {
      if (!request->quiet) xml += "<Deleted><Key>" + s3::XmlText(key) + "</Key></Deleted>";
      continue;
    }
    const s3::Error e = s3::ErrorFor(s, Subject::kObject);
    xml += fmt::format("<Error><Key>{}</Key><Code>{}</Code><Message>{}</Message></Error>", s3::XmlText(key), e.code,
                       s3::XmlText(s3::ShowsMessage(e) ? e.message : "internal error; see the node's log"));
  }
  SendXml(r, xml + "</DeleteResult>");
}

}  // namespace aq::server
