// Who sent an S3 request: AWS Signature Version 4 (or 2) verified the way
// S3 does, from the request as it arrived. These forms are accepted:
//   - the Authorization header, with the time in x-amz-date or (when a
//     client sends only that) the Date header, which must then be signed;
//   - a presigned URL (X-Amz-Algorithm ... X-Amz-Signature in the query),
//     valid until X-Amz-Date + X-Amz-Expires (at most 7 days);
//   - Signature Version 2 (HMAC-SHA1), which boto3's default presigned URLs
//     and older clients still use: "Authorization: AWS KEY:SIGNATURE" timed
//     by Date or x-amz-date, or a URL with AWSAccessKeyId, Expires (Unix
//     time, at most 7 days ahead) and Signature;
//   - none at all, only when anonymous access is enabled.
// The host header must always be among the signed headers (else a request
// could be replayed against another endpoint). Streaming uploads
// (aws-chunked) yield the context their chunk signatures are checked with.
//
// Thread safety: pure functions over the request and the key table.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "http/message.h"
#include "s3/errors.h"

namespace aq::s3 {

struct Credential {
  std::string access_key, secret;
};

// One "ACCESS_KEY_ID SECRET_ACCESS_KEY" pair per line; '#' starts a comment.
Result<std::vector<Credential>> LoadCredentials(const std::string& path);

// As LoadCredentials, but a missing file is first created (mode 0600) with
// one new random key pair; *created says so. Safe when several processes
// start on one path at once: exactly one file appears, all read it.
Result<std::vector<Credential>> LoadOrCreateCredentials(const std::string& path, bool* created);

// A new random key: a 20-character id ("AQ...") and a 40-character secret,
// as AWS's, from the kernel's random source.
Result<Credential> NewCredential();
// Writes `keys` to a new credentials file (mode 0600, `comment` on its
// first line) that appears whole or not at all. AlreadyExists if `path`
// does (nothing is overwritten).
Status CreateCredentialsFile(const std::string& path, const std::vector<Credential>& keys, const std::string& comment);

// What verifying an aws-chunked body's signatures needs.
struct StreamingContext {
  bool signed_chunks = false;  // STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]
  bool trailer = false;        // ...-TRAILER: a checksum trailer follows the last chunk
  std::string signing_key;     // raw bytes
  std::string amz_date, scope;
  std::string seed_signature;  // the request's own signature
};

struct AuthResult {
  std::string access_key;  // "" when anonymous
  std::string payload_hash;
  bool presigned = false;
  std::optional<StreamingContext> streaming;
};

struct AuthOptions {
  bool anonymous = false;
  int max_clock_skew_seconds = 15 * 60;
  // The secret of an access key, or nullptr when unknown.
  std::function<const Credential*(const std::string& access_key)> lookup;
  int64_t now_unix = 0;  // 0 = the clock (tests set it)
};

struct AuthOutcome {
  bool ok = false;
  AuthResult result;
  Error error;  // when !ok
};

// `raw_path` and `raw_query` as sent (percent-encoded).
AuthOutcome Authenticate(const http::Request& request, const AuthOptions& options);

}  // namespace aq::s3
