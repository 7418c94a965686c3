// S3's XML: the request bodies clients send (CompleteMultipartUpload's part
// list, Delete's key list), the answers a client reads (listings, errors),
// and text escaping for the answers the node writes. Parsed with expat; a
// document type declaration is refused (no entity expansion from a request),
// and any malformed body is an error naming the line and column.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace aq::s3 {

// <CompleteMultipartUpload><Part><PartNumber>N</PartNumber><ETag>"…"</ETag></Part>…
// Part numbers must be integers in 1..10000; order is kept as sent. A part
// may carry its checksum (<ChecksumCRC32>… and the other algorithms').
struct CompletedPart {
  uint32_t number = 0;
  std::string etag;
  std::string checksum_algorithm, checksum;  // "crc32" and its base64 value; "" when none
};
Result<std::vector<CompletedPart>> ParseCompleteMultipartUpload(std::string_view xml);

struct DeleteObjectsRequest {
  std::vector<std::string> keys;
  bool quiet = false;
  // The first condition an Object entry carries (ETag, LastModifiedTime or
  // Size: S3's conditional delete), as "ETag of 'key'"; "" when none.
  std::string condition;
};
// <Delete><Quiet>true</Quiet><Object><Key>…</Key></Object>…; at most 1000 keys.
Result<DeleteObjectsRequest> ParseDeleteObjects(std::string_view xml);

// <LifecycleConfiguration><Rule>…</Rule>…</LifecycleConfiguration>. Only
// AbortIncompleteMultipartUpload rules filtered by a key prefix are carried
// out by the node: any other action (Expiration, Transition, …) or filter
// (Tag, And, object sizes) is Unsupported, naming it, so nothing is stored
// that would not be done. Malformed rules are InvalidArgument. At most 1000
// rules; DaysAfterInitiation is a positive integer.
struct LifecycleRule {
  std::string id;
  std::string prefix;
  bool enabled = true;
  uint32_t abort_days = 0;
};
Result<std::vector<LifecycleRule>> ParseLifecycle(std::string_view xml);

// <AccessControlPolicy><Owner><ID>…</ID></Owner><AccessControlList>
// <Grant><Grantee>…</Grantee><Permission>…</Permission></Grant>…, as PUT
// ?acl sends it (tools copy the policy a GET ?acl answered). A grantee is
// named by ID (a canonical user), URI (a group) or EmailAddress; at most
// 100 grants. Malformed documents are InvalidArgument.
struct AclGrant {
  std::string id, uri, email, permission;
};
struct AccessControlPolicy {
  std::string owner_id;
  std::vector<AclGrant> grants;
};
Result<AccessControlPolicy> ParseAccessControlPolicy(std::string_view xml);
// Whether the policy only grants its owner (to itself): what 'private'
// means, and all this node's ACLs can be.
bool OwnerOnly(const AccessControlPolicy& policy);

// Calls on_end(path, text) for every element as it closes, with the path of
// element names from the root ("Delete/Object/Key", namespaces dropped) and
// the element's own text (at most max_text bytes). Depth is bounded (16).
Status WalkXml(std::string_view xml, const char* what,
               const std::function<Status(const std::string& path, const std::string& text)>& on_end,
               size_t max_text = 4096);

// Text for an XML element or attribute: &<>"' escaped, and TAB, LF and CR as
// character references so that they survive a parser's normalisation. The
// node only stores keys that are valid UTF-8 without other control
// characters (the store checks keys), so the result is always valid XML 1.0.
std::string XmlText(std::string_view s);

// ListBucketResult (V1 or V2), as a client reads it.
struct ListedObject {
  std::string key, etag, last_modified;
  uint64_t size = 0;
};
struct ListResult {
  std::vector<ListedObject> objects;
  std::vector<std::string> prefixes;
  bool truncated = false;
  std::string next_token;   // NextContinuationToken (V2)
  std::string next_marker;  // NextMarker (V1)
};
// Keys and prefixes are URL-decoded when the listing says EncodingType url.
Result<ListResult> ParseListResult(std::string_view xml);

// The Code and Message of an S3 <Error> document ("" when not one).
std::pair<std::string, std::string> ParseErrorXml(std::string_view xml);

}  // namespace aq::s3
