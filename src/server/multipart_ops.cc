// Multipart uploads: CreateMultipartUpload, UploadPart, UploadPartCopy,
// CompleteMultipartUpload (a repeat of a completed one answers as the first
// did, as S3 does), AbortMultipartUpload, ListParts, ListMultipartUploads.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "s3/checksum.h"
#include "s3/sigv4.h"
#include "s3/xml.h"
#include "server/s3_handler.h"

namespace aq::server {

void S3Handler::CreateUpload(S3Request& r) {
  if (Status s = store::CheckObjectKey(r.key); !s.ok()) {
    return SendError(r,
                     {400, s.code() == StatusCode::kUnsupported ? "KeyTooLongError" : "InvalidArgument", s.message()});
  }
  std::map<std::string, std::string> headers;
  if (!StoredHeaders(r, &headers)) return;
  // The object's checksum: x-amz-checksum-algorithm (CRC64NVME when none,
  // as S3 does) and x-amz-checksum-type: COMPOSITE (a checksum of the
  // parts' checksums; the default for the others) or FULL_OBJECT (of the
  // whole object, combined from the parts' CRCs: the CRCs only, and
  // CRC64NVME's only type).
  std::string algorithm = "crc64nvme";
  if (r.req.headers.Has("x-amz-checksum-algorithm")) {
    auto a = s3::ParseChecksumAlgorithm(r.req.headers.Get("x-amz-checksum-algorithm"));
    if (!a.ok()) return SendError(r, {400, "InvalidRequest", a.status().message()});
    algorithm = *a;
  }
  std::string type = algorithm == "crc64nvme" ? "FULL_OBJECT" : "COMPOSITE";
  if (r.req.headers.Has("x-amz-checksum-type")) {
    type = r.req.headers.Get("x-amz-checksum-type");
    for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (type != "COMPOSITE" && type != "FULL_OBJECT") {
      return SendError(r, {400, "InvalidRequest", "x-amz-checksum-type must be COMPOSITE or FULL_OBJECT"});
    }
    if (type == "FULL_OBJECT" && !s3::IsCrc(algorithm)) {
      return SendError(r, {400, "InvalidRequest",
                           fmt::format("The FULL_OBJECT checksum type cannot be used with the {} checksum algorithm "
                                       "(only CRC32, CRC32C and CRC64NVME combine)",
                                       algorithm)});
    }
    if (type == "COMPOSITE" && algorithm == "crc64nvme") {
      return SendError(r, {400, "InvalidRequest",
                           "The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm"});
    }
  }
  headers[store::ObjectStore::kUploadChecksumAlgorithm] = algorithm;
  headers[store::ObjectStore::kUploadChecksumType] = type;
  auto u = objects_.CreateUpload(r.bucket, r.key, std::move(headers));
  if (!u.ok()) return SendStatus(r, u.status(), Subject::kBucket);
  http::Headers h;
  std::string upper = algorithm;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  h.Add("x-amz-checksum-algorithm", upper);
  h.Add("x-amz-checksum-type", type);
  SendXml(r,
          fmt::format("<InitiateMultipartUploadResult xmlns=\"{}\"><Bucket>{}</Bucket><Key>{}</Key>"
                      "<UploadId>{}</UploadId></InitiateMultipartUploadResult>",
                      kXmlns, s3::XmlText(r.bucket), s3::XmlText(r.key), s3::XmlText(u->id)),
          200, std::move(h));
}

namespace {

// The checksum algorithm an upload's parts are summed in ("" for an upload
// begun before checksums were kept: its object gets none).
std::string UploadAlgorithm(const store::UploadInfo& u) {
  auto it = u.headers.find(store::ObjectStore::kUploadChecksumAlgorithm);
  return it == u.headers.end() ? std::string() : it->second;
}

// <ChecksumAlgorithm>CRC32</ChecksumAlgorithm><ChecksumType>COMPOSITE</ChecksumType>
std::string UploadChecksumXml(const store::UploadInfo& u) {
  std::string a = UploadAlgorithm(u);
  if (a.empty()) return "";
  for (char& c : a) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto t = u.headers.find(store::ObjectStore::kUploadChecksumType);
  return fmt::format("<ChecksumAlgorithm>{}</ChecksumAlgorithm><ChecksumType>{}</ChecksumType>", a,
                     t == u.headers.end() ? "COMPOSITE" : t->second);
}

}  // namespace

void S3Handler::UploadPart(S3Request& r) {
  if (!r.Has("uploadId") || !r.Has("partNumber")) {
    return SendError(r, {400, "InvalidRequest", "UploadPart needs both uploadId and partNumber"});
  }
  const std::string n = r.Param("partNumber");
  uint32_t number = 0;
  auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), number);
  if (ec != std::errc() || end != n.data() + n.size() || number < 1 || number > store::kMaxPartNumber) {
    return SendError(r, {400, "InvalidArgument",
                         fmt::format("Part number must be an integer between 1 and {}, inclusive ('{}')",
                                     store::kMaxPartNumber, n)});
  }
  const bool copy = r.req.headers.Has("x-amz-copy-source");
  store::ObjectMeta source;
  uint64_t from = 0, length = 0;
  if (copy) {
    if (!CopySource(r, &source)) return;
    length = source.size;
    if (r.req.headers.Has("x-amz-copy-source-range")) {
      // bytes=A-B, both required, inside the source.
      const std::string range = r.req.headers.Get("x-amz-copy-source-range");
      uint64_t a = 0, b = 0;
      const size_t dash = range.find('-');
      bool ok = range.rfind("bytes=", 0) == 0 && dash != std::string::npos;
      if (ok) {
        auto [e1, c1] = std::from_chars(range.data() + 6, range.data() + dash, a);
        auto [e2, c2] = std::from_chars(range.data() + dash + 1, range.data() + range.size(), b);
        ok = c1 == std::errc() && e1 == range.data() + dash && c2 == std::errc() && e2 == range.data() + range.size() &&
             a <= b;
      }
      if (!ok || b >= source.size) {
        return SendError(r, {400, "InvalidArgument",
                             fmt::format("Range specified is not valid for source object of size: {}", source.size)});
      }
      from = a;
      length = b - a + 1;
    }
  }
  store::UploadInfo upload;
  auto writer = objects_.PutPart(r.Param("uploadId"), r.bucket, r.key, number, &upload);
  if (!writer.ok()) return SendStatus(r, writer.status(), Subject::kUpload);
  const std::string algorithm = UploadAlgorithm(upload);
  if (copy) {
    std::shared_ptr<s3::Checksum> sum;
    if (!algorithm.empty()) {
      sum = s3::Checksum::Make(algorithm).value();
      (*writer)->set_tap([sum](std::string_view d) { sum->Update(d); });
    }
    if (Status s = objects_.CopyInto(source, from, length, **writer); !s.ok()) {
      return SendStatus(r, s, Subject::kObject);
    }
    if (sum) (*writer)->set_checksum({algorithm, sum->Base64(), "FULL_OBJECT", {}});
  } else {
    if (r.req.headers.Get(s3::kEtagHeader) == s3::kUniqueEtag) (*writer)->set_unique_etag();
    if (!ReceiveBody(r, **writer, algorithm.empty() ? "md5" : algorithm)) return;
  }
  if (algorithm.empty()) (*writer)->set_checksum({});
  auto meta = (*writer)->Commit();
  if (!meta.ok()) return SendStatus(r, meta.status(), Subject::kUpload);
  const store::ObjectChecksum& c = meta->attrs.checksum;
  if (copy) {
    std::string sum;
    if (!c.empty())
      sum = fmt::format("<{}>{}</{}>", s3::ChecksumElement(c.algorithm), c.value, s3::ChecksumElement(c.algorithm));
    return SendXml(r, fmt::format("<CopyPartResult xmlns=\"{}\"><LastModified>{}</LastModified><ETag>{}</ETag>"
                                  "{}</CopyPartResult>",
                                  kXmlns, IsoTime(meta->mtime_ns), s3::XmlText(meta->etag), sum));
  }
  http::Headers h;
  h.Add("ETag", meta->etag);
  if (!c.empty()) h.Add(s3::ChecksumHeader(c.algorithm), c.value);
  SendEmpty(r, 200, std::move(h));
}

// The completed object's checksum, from its parts' (all in the upload's
// algorithm): COMPOSITE, the checksum of the parts' binary checksums with
// "-N"; FULL_OBJECT, the parts' CRCs combined into the whole's. A part's
// checksum the completion names, and the object's the client sends in
// x-amz-checksum-*, must match (400 InvalidPart / BadDigest otherwise).
bool S3Handler::CompletedChecksum(S3Request& r, const store::UploadInfo& upload,
                                  const std::vector<s3::CompletedPart>& named, store::ObjectChecksum* out) {
  const std::string algorithm = UploadAlgorithm(upload);
  auto type_it = upload.headers.find(store::ObjectStore::kUploadChecksumType);
  const std::string type = type_it == upload.headers.end() ? "COMPOSITE" : type_it->second;
  std::vector<const store::PartMeta*> parts;
  for (const auto& n : named) {
    const store::PartMeta* found = nullptr;
    for (const auto& p : upload.parts) {
      if (p.number == n.number) found = &p;
    }
    if (found == nullptr) continue;  // CheckCompletion has refused this already
    if (!n.checksum.empty() && (n.checksum_algorithm != algorithm || n.checksum != found->checksum)) {
      SendError(
          r, {400, "InvalidPart",
              fmt::format("part {}: the completion names checksum {} {}, the part has {} {}", n.number,
                          n.checksum_algorithm, n.checksum, algorithm.empty() ? "none" : algorithm, found->checksum)});
      return false;
    }
    parts.push_back(found);
  }
  std::string value;
  bool known = !algorithm.empty();
  for (const auto* p : parts) known = known && !p->checksum.empty();
  if (known && type == "FULL_OBJECT") {
    value = parts.front()->checksum;
    for (size_t i = 1; i < parts.size() && known; ++i) {
      auto combined = s3::CombineCrc(algorithm, value, parts[i]->checksum, parts[i]->size);
      known = combined.ok();
      if (known) value = *combined;
    }
  } else if (known) {
    std::string raw;
    for (const auto* p : parts) {
      auto bytes = s3::Base64Decode(p->checksum);
      known = known && bytes.ok();
      if (bytes.ok()) raw += *bytes;
    }
    auto sum = s3::Checksum::Make(algorithm).value();
    sum->Update(raw);
    value = fmt::format("{}-{}", sum->Base64(), parts.size());
  }
  // The whole object's checksum, sent by the client.
  for (const auto& [name, sent] : r.req.headers.fields()) {
    const std::string a = s3::ChecksumAlgorithmOfHeader(name);
    if (a.empty()) continue;
    if (!known || a != algorithm || (sent != value && sent + "-" + std::to_string(parts.size()) != value)) {
      SendError(r, {400, "BadDigest",
                    fmt::format("The {} you specified ({}) did not match the object's ({} {})", name, sent,
                                known ? algorithm : "none", value)});
      return false;
    }
  }
  if (known) {
    *out = {algorithm, value, type, {}};
    for (const auto* p : parts) out->parts.push_back(p->checksum);
  }
  return true;
}

void S3Handler::CompleteUpload(S3Request& r, const std::string& body) {
  const std::string id = r.Param("uploadId");
  auto result = [&](const store::ObjectMeta& m) {
    std::string sum;
    const store::ObjectChecksum& c = m.attrs.checksum;
    if (!c.empty()) {
      sum = fmt::format("<{}>{}</{}><ChecksumType>{}</ChecksumType>", s3::ChecksumElement(c.algorithm), c.value,
                        s3::ChecksumElement(c.algorithm), c.type);
    }
    SendXml(r, fmt::format("<CompleteMultipartUploadResult xmlns=\"{}\"><Location>http://{}{}</Location>"
                           "<Bucket>{}</Bucket><Key>{}</Key><ETag>{}</ETag>{}</CompleteMultipartUploadResult>",
                           kXmlns, s3::XmlText(r.req.headers.Get("Host")), s3::XmlText(r.req.path),
                           s3::XmlText(r.bucket), s3::XmlText(r.key), s3::XmlText(m.etag), sum));
  };
  store::WriteCondition condition;
  if (!WriteConditionOf(r, &condition)) return;
  auto listed = s3::ParseCompleteMultipartUpload(body);
  if (!listed.ok()) return SendError(r, {400, "MalformedXML", listed.status().message()});
  std::vector<store::CompletedPart> parts;
  for (const auto& p : *listed) parts.push_back({p.number, p.etag});
  auto upload = objects_.GetUpload(id, r.bucket, r.key);
  if (!upload.ok()) {
    // Completed already (a client retrying after a lost answer): the object
    // it made is the answer, as S3 gives it.
    if (upload.status().code() == StatusCode::kNotFound && upload.status().subject() == Subject::kUpload) {
      auto meta = objects_.Head(r.bucket, r.key);
      if (meta.ok() && meta->attrs.upload_id == id) return result(*meta);
    }
    return SendStatus(r, upload.status(), Subject::kUpload);
  }
  std::string code, message;
  if (!store::CheckCompletion(*upload, parts, o_.min_part_bytes, &code, &message)) {
    return SendError(r, {400, code, message});
  }
  store::ObjectChecksum checksum;
  if (!CompletedChecksum(r, *upload, *listed, &checksum)) return;
  auto meta = objects_.CompleteUpload(id, r.bucket, r.key, parts, condition, std::move(checksum));
  if (!meta.ok()) {
    if (meta.status().code() == StatusCode::kInvalidArgument) {
      // A part was replaced between the check and the commit.
      return SendError(r, {400, "InvalidPart", meta.status().message()});
    }
    return SendWriteFailure(r, meta.status(), condition, Subject::kUpload);
  }
  result(*meta);
}

void S3Handler::AbortUpload(S3Request& r) {
  Status s = objects_.AbortUpload(r.Param("uploadId"), r.bucket, r.key);
  if (!s.ok()) return SendStatus(r, s, Subject::kUpload);
  SendEmpty(r, 204);
}

void S3Handler::ListParts(S3Request& r) {
  auto upload = objects_.GetUpload(r.Param("uploadId"), r.bucket, r.key);
  if (!upload.ok()) return SendStatus(r, upload.status(), Subject::kUpload);
  uint32_t marker = 0, max_parts = 1000;
  for (auto [name, out] :
       {std::pair<const char*, uint32_t*>{"part-number-marker", &marker}, {"max-parts", &max_parts}}) {
    if (!r.Has(name)) continue;
    const std::string v = r.Param(name);
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
      return SendError(r, {400, "InvalidArgument", fmt::format("{} '{}' must be a non-negative integer", name, v)});
    }
  }
  max_parts = std::min<uint32_t>(max_parts, 1000);
  const std::string algorithm = UploadAlgorithm(*upload);
  std::string items;
  uint32_t count = 0, last = marker;
  bool truncated = false;
  for (const auto& p : upload->parts) {
    if (p.number <= marker) continue;
    if (count == max_parts) {
      truncated = true;
      break;
    }
    std::string sum;
    if (!p.checksum.empty() && !algorithm.empty()) {
      sum = fmt::format("<{}>{}</{}>", s3::ChecksumElement(algorithm), p.checksum, s3::ChecksumElement(algorithm));
    }
    items += fmt::format(
        "<Part><PartNumber>{}</PartNumber><LastModified>{}</LastModified><ETag>{}</ETag><Size>{}</Size>{}</Part>",
        p.number, IsoTime(p.mtime_ns), s3::XmlText(p.etag), p.size, sum);
    last = p.number;
    ++count;
  }
  SendXml(r, fmt::format("<ListPartsResult xmlns=\"{}\"><Bucket>{}</Bucket><Key>{}</Key><UploadId>{}</UploadId>"
                         "<StorageClass>STANDARD</StorageClass><PartNumberMarker>{}</PartNumberMarker>"
                         "<NextPartNumberMarker>{}</NextPartNumberMarker><MaxParts>{}</MaxParts>"
                         "<IsTruncated>{}</IsTruncated>{}{}</ListPartsResult>",
                         kXmlns, s3::XmlText(r.bucket), s3::XmlText(r.key), s3::XmlText(upload->id), marker, last,
                         max_parts, truncated ? "true" : "false", items, UploadChecksumXml(*upload)));
}

// ListMultipartUploads: uploads ordered by key, then by when they began (as
// S3 orders them), from after (key-marker, upload-id-marker), at most
// max-uploads (1000) a page, with the markers for the next page; with a
// delimiter, keys holding it past the prefix roll up into CommonPrefixes.
void S3Handler::ListUploads(S3Request& r) {
  auto uploads = objects_.meta().ListUploads(r.bucket);
  if (!uploads.ok()) return SendStatus(r, uploads.status(), Subject::kBucket);
  const std::string prefix = r.Param("prefix"), delimiter = r.Param("delimiter");
  const std::string key_marker = r.Param("key-marker"), id_marker = r.Param("upload-id-marker");
  const bool url = r.Param("encoding-type") == "url";
  if (r.Has("encoding-type") && !url) {
    return SendError(r, {400, "InvalidArgument", "encoding-type must be 'url'"});
  }
  uint32_t max_uploads = 1000;
  if (r.Has("max-uploads")) {
    const std::string v = r.Param("max-uploads");
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), max_uploads);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
      return SendError(r, {400, "InvalidArgument", fmt::format("max-uploads '{}' must be a non-negative integer", v)});
    }
    max_uploads = std::min<uint32_t>(max_uploads, 1000);
  }
  auto text = [&](const std::string& s) { return url ? s3::UriEncode(s, false) : s3::XmlText(s); };
  std::vector<store::UploadInfo> sorted = std::move(*uploads);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  // Past the markers: keys after key-marker; with upload-id-marker, that
  // key's uploads after the one named too.
  size_t i = 0;
  if (!key_marker.empty()) {
    bool past_id = id_marker.empty();
    while (i < sorted.size() && (sorted[i].key < key_marker || (sorted[i].key == key_marker && !past_id))) {
      if (sorted[i].key == key_marker && sorted[i].id == id_marker) past_id = true;
      ++i;
    }
    if (id_marker.empty()) {
      while (i < sorted.size() && sorted[i].key == key_marker) ++i;
    }
  }
  std::string items, prefixes, next_key, next_id, last_prefix;
  // A key-marker that is a common prefix (the previous page ended on it):
  // the keys below it were rolled up there already.
  if (!delimiter.empty() && key_marker.size() > prefix.size() && key_marker.compare(0, prefix.size(), prefix) == 0 &&
      key_marker.size() >= delimiter.size() &&
      key_marker.compare(key_marker.size() - delimiter.size(), delimiter.size(), delimiter) == 0) {
    last_prefix = key_marker;
  }
  uint32_t count = 0;
  bool truncated = false;
  for (; i < sorted.size(); ++i) {
    const auto& u = sorted[i];
    if (u.key.compare(0, prefix.size(), prefix) != 0) continue;
    if (!delimiter.empty()) {
      const size_t d = u.key.find(delimiter, prefix.size());
      if (d != std::string::npos) {
        const std::string common = u.key.substr(0, d + delimiter.size());
        if (common == last_prefix) continue;
        if (count == max_uploads) {
          truncated = true;
          break;
        }
        last_prefix = common;
        prefixes += "<CommonPrefixes><Prefix>" + text(common) + "</Prefix></CommonPrefixes>";
        next_key = common;
        next_id.clear();
        ++count;
        continue;
      }
    }
    if (count == max_uploads) {
      truncated = true;
      break;
    }
    items += fmt::format(
        "<Upload><Key>{}</Key><UploadId>{}</UploadId><StorageClass>STANDARD</StorageClass>"
        "<Initiated>{}</Initiated></Upload>",
        text(u.key), s3::XmlText(u.id), IsoTime(u.created_ns));
    next_key = u.key;
    next_id = u.id;
    ++count;
  }
  std::string xml = fmt::format(
      "<ListMultipartUploadsResult xmlns=\"{}\"><Bucket>{}</Bucket><KeyMarker>{}</KeyMarker>"
      "<UploadIdMarker>{}</UploadIdMarker>",
      kXmlns, s3::XmlText(r.bucket), text(key_marker), s3::XmlText(id_marker));
  if (truncated) {
    xml += fmt::format("<NextKeyMarker>{}</NextKeyMarker><NextUploadIdMarker>{}</NextUploadIdMarker>", text(next_key),
                       s3::XmlText(next_id));
  }
  xml += fmt::format("<Prefix>{}</Prefix>", text(prefix));
  if (!delimiter.empty()) xml += "<Delimiter>" + text(delimiter) + "</Delimiter>";
  if (url) xml += "<EncodingType>url</EncodingType>";
  xml += fmt::format("<MaxUploads>{}</MaxUploads><IsTruncated>{}</IsTruncated>", max_uploads,
                     truncated ? "true" : "false");
  SendXml(r, xml + items + prefixes + "</ListMultipartUploadsResult>");
}

}  // namespace aq::server
