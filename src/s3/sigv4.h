// AWS Signature Version 4 as S3 servers verify it: the canonical request,
// the string to sign, the derived signing key and the signature, from the
// request as it arrived (method, raw path, raw query, headers). Pure
// functions, so tests check them against clients' own signers.
//
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace aq::s3 {

struct SigV4Authorization {
  std::string access_key, date, region, service;  // from Credential=KEY/DATE/REGION/SERVICE/aws4_request
  std::vector<std::string> signed_headers;        // lowercase, as listed
  std::string signature;                          // hex
};

// Parses "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...".
Result<SigV4Authorization> ParseAuthorization(std::string_view header);

struct SigV4Request {
  std::string method;
  std::string raw_path;                             // as sent, percent-encoded
  std::string raw_query;                            // after '?', as sent
  std::multimap<std::string, std::string> headers;  // names lowercase
  std::string payload_hash;                         // x-amz-content-sha256
};

// RFC 3986 encoding as SigV4 wants it: unreserved characters kept, '/' kept
// when encode_slash is false, everything else %XX (upper case).
std::string UriEncode(std::string_view s, bool encode_slash);
std::string UriDecode(std::string_view s);

std::string CanonicalRequest(const SigV4Request& request, const std::vector<std::string>& signed_headers);
std::string StringToSign(const std::string& amz_date, const std::string& scope, const std::string& canonical_request);
// hex(HMAC(signing key(secret, date, region, service), string to sign))
std::string Signature(const std::string& secret, const SigV4Authorization& auth, const std::string& string_to_sign);

// The SigV4 signing key: HMAC chain over date, region, service, "aws4_request".
std::string SigningKey(const std::string& secret, const std::string& date, const std::string& region,
                       const std::string& service);
// hex(HMAC-SHA256(key, data))
std::string HmacHex(std::string_view key, std::string_view data);

// The decoded name/value pairs of a raw query string, in order.
std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view raw_query);

std::string Sha256Hex(std::string_view data);
std::string HexEncode(const unsigned char* p, size_t n);
// Constant-time comparison of two signatures.
bool SameSignature(std::string_view a, std::string_view b);

// A presigned URL's query (X-Amz-Algorithm ... X-Amz-Signature) for a request
// signed now, valid for `expires_seconds`; `raw_query` holds the request's
// own parameters (may be empty). Only host is signed; the payload is
// UNSIGNED-PAYLOAD, as AWS SDKs presign.
std::string PresignQuery(const std::string& access_key, const std::string& secret, const std::string& host,
                         const std::string& method, const std::string& raw_path, const std::string& raw_query,
                         int64_t expires_seconds, int64_t now_unix = 0);

// The headers a client adds to sign a request now (x-amz-date,
// x-amz-content-sha256, Authorization), signing host, x-amz-content-sha256
// and x-amz-date for region us-east-1, service s3.
std::vector<std::pair<std::string, std::string>> SignRequest(const std::string& access_key, const std::string& secret,
                                                             const std::string& host, const std::string& method,
                                                             const std::string& raw_path, const std::string& raw_query,
                                                             const std::string& payload_hash);

}  // namespace aq::s3
