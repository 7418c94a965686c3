#include "s3/auth.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "s3/checksum.h"
#include "s3/sigv4.h"

namespace aq::s3 {
namespace {

AuthOutcome Fail(int status, std::string code, std::string message) {
  AuthOutcome o;
  o.error = {status, std::move(code), std::move(message)};
  return o;
}

std::optional<int64_t> ParseAmzDate(const std::string& d) {
  if (d.size() != 16) return std::nullopt;
  std::tm tm{};
  const char* end = strptime(d.c_str(), "%Y%m%dT%H%M%SZ", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(timegm(&tm));
}

std::string AmzDate(int64_t t) {
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[20];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::multimap<std::string, std::string> SignedHeaderValues(const http::Request& req,
                                                           const std::vector<std::string>& names) {
  std::multimap<std::string, std::string> out;
  for (const auto& name : names) {
    for (const auto& [k, v] : req.headers.fields()) {
      if (http::EqualsIgnoreCase(k, name)) out.emplace(name, v);
    }
  }
  return out;
}

// The streaming payload forms S3 defines, and whether this node takes them.
AuthOutcome StreamingFor(const std::string& hash, const std::string& key, const std::string& amz_date,
                         const std::string& scope, const std::string& seed, AuthResult result) {
  StreamingContext c;
  if (hash == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD") {
    c.signed_chunks = true;
  } else if (hash == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER") {
    c.signed_chunks = c.trailer = true;
  } else if (hash == "STREAMING-UNSIGNED-PAYLOAD-TRAILER") {
    c.trailer = true;
  } else {
    return Fail(501, "NotImplemented", fmt::format("x-amz-content-sha256 '{}' is not supported", hash));
  }
  c.signing_key = key;
  c.amz_date = amz_date;
  c.scope = scope;
  c.seed_signature = seed;
  result.streaming = std::move(c);
  AuthOutcome o;
  o.ok = true;
  o.result = std::move(result);
  return o;
}

AuthOutcome Presigned(const http::Request& req, const AuthOptions& o, int64_t now) {
  std::string credential, amz_date, expires_s, signed_list, signature, query, query_hash;
  for (const auto& [k, v] : ParseQuery(req.query)) {
    if (k == "X-Amz-Content-Sha256") query_hash = v;  // the AWS SDK for JavaScript v3 signs it there
    if (k == "X-Amz-Credential") credential = v;
    if (k == "X-Amz-Date") amz_date = v;
    if (k == "X-Amz-Expires") expires_s = v;
    if (k == "X-Amz-SignedHeaders") signed_list = v;
    if (k == "X-Amz-Signature") signature = v;
  }
  // The canonical query is every parameter but the signature.
  std::string_view q = req.query;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view kv = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (kv.empty() || UriDecode(kv.substr(0, kv.find('='))) == "X-Amz-Signature") continue;
    query += (query.empty() ? "" : "&") + std::string(kv);
  }
  auto auth = ParseAuthorization(fmt::format("AWS4-HMAC-SHA256 Credential={}, SignedHeaders={}, Signature={}",
                                             credential, signed_list, signature));
  if (!auth.ok()) return Fail(400, "AuthorizationQueryParametersError", auth.status().message());
  if (!Contains(auth->signed_headers, "host")) {
    return Fail(400, "AuthorizationQueryParametersError", "X-Amz-SignedHeaders must include host");
  }
  const Credential* cred = o.lookup ? o.lookup(auth->access_key) : nullptr;
  if (cred == nullptr) return Fail(403, "InvalidAccessKeyId", "the access key id is not known to this node");
  auto t = ParseAmzDate(amz_date);
  if (!t || amz_date.compare(0, 8, auth->date) != 0) {
    return Fail(400, "AuthorizationQueryParametersError", "X-Amz-Date is malformed or does not match the credential");
  }
  int64_t expires = -1;
  auto [end, ec] = std::from_chars(expires_s.data(), expires_s.data() + expires_s.size(), expires);
  if (ec != std::errc() || end != expires_s.data() + expires_s.size() || expires < 1 || expires > 604800) {
    return Fail(400, "AuthorizationQueryParametersError", "X-Amz-Expires must be a number of seconds, 1 to 604800");
  }
  if (now > *t + expires) return Fail(403, "AccessDenied", "Request has expired");
  if (*t - now > o.max_clock_skew_seconds) {
    return Fail(403, "RequestTimeTooSkewed", "the presigned request's time is in the future");
  }
  SigV4Request sr;
  sr.method = req.method;
  sr.raw_path = req.path;
  sr.raw_query = query;
  sr.headers = SignedHeaderValues(req, auth->signed_headers);
  const std::string hash = req.headers.Has("x-amz-content-sha256") ? req.headers.Get("x-amz-content-sha256")
                           : !query_hash.empty()                   ? query_hash
                                                                   : "UNSIGNED-PAYLOAD";
  sr.payload_hash = hash;
  const std::string scope = auth->date + "/" + auth->region + "/" + auth->service + "/aws4_request";
  const std::string key = SigningKey(cred->secret, auth->date, auth->region, auth->service);
  const std::string expect = HmacHex(key, StringToSign(amz_date, scope, CanonicalRequest(sr, auth->signed_headers)));
  if (!SameSignature(expect, auth->signature)) {
    return Fail(403, "SignatureDoesNotMatch",
                "the request signature we calculated does not match the signature you provided");
  }
  AuthOutcome out;
  out.ok = true;
  out.result.access_key = cred->access_key;
  out.result.payload_hash = hash;
  out.result.presigned = true;
  return out;
}

// Signature Version 2 (HMAC-SHA1), which older clients still send: boto3's
// presigned URLs in its default configuration, s3fs -o sigv2, s3cmd with
// signature_v2. StringToSign = VERB \n Content-MD5 \n Content-Type \n
// Date-or-Expires \n x-amz-* headers (lower-case, sorted, "name:value\n")
// and the resource: the path as sent, then the sub-resources S3 names,
// sorted, with their values decoded.
std::string V2StringToSign(const http::Request& req, const std::string& when, const std::string& resource) {
  std::map<std::string, std::string> amz;
  for (const auto& [k, v] : req.headers.fields()) {
    std::string name = k;
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name.rfind("x-amz-", 0) != 0) continue;
    std::string value(v);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
    value.erase(0, value.find_first_not_of(" \t"));
    auto [it, fresh] = amz.emplace(name, value);
    if (!fresh) it->second += "," + value;
  }
  std::string out =
      req.method + "\n" + req.headers.Get("Content-MD5") + "\n" + req.headers.Get("Content-Type") + "\n" + when + "\n";
  for (const auto& [k, v] : amz) out += k + ":" + v + "\n";
  return out + resource;
}

// The resources a V2 client may have signed: the path as sent with S3's
// sub-resources (sorted, values decoded); for a bucket, also with a
// trailing "/"; and, as botocore signs, with the first query parameter
// (the one its operation's URI carries: list-type=2, uploads, x-id=...)
// kept before them.
std::vector<std::string> V2Resources(const http::Request& req) {
  static const std::set<std::string, std::less<>> kSubresources = {"acl",
                                                                   "cors",
                                                                   "delete",
                                                                   "lifecycle",
                                                                   "location",
                                                                   "logging",
                                                                   "notification",
                                                                   "partNumber",
                                                                   "policy",
                                                                   "requestPayment",
                                                                   "restore",
                                                                   "tagging",
                                                                   "torrent",
                                                                   "uploadId",
                                                                   "uploads",
                                                                   "versionId",
                                                                   "versioning",
                                                                   "versions",
                                                                   "website",
                                                                   "response-cache-control",
                                                                   "response-content-disposition",
                                                                   "response-content-encoding",
                                                                   "response-content-language",
                                                                   "response-content-type",
                                                                   "response-expires"};
  std::map<std::string, std::string> subs;
  for (const auto& [k, v] : ParseQuery(req.query)) {
    if (kSubresources.count(k) > 0) subs[k] = v;
  }
  std::string query;
  for (const auto& [k, v] : subs) query += (query.empty() ? "?" : "&") + k + (v.empty() ? "" : "=" + v);
  std::vector<std::string> out = {req.path + query};
  if (req.path.size() > 1 && req.path.find('/', 1) == std::string::npos) out.push_back(req.path + "/" + query);
  const std::string first = req.query.substr(0, req.query.find('&'));
  if (!first.empty()) out.push_back(req.path + "?" + first + query);
  return out;
}

std::string V2Signature(const std::string& secret, const std::string& string_to_sign) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  HMAC(EVP_sha1(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(string_to_sign.data()), string_to_sign.size(), mac, &len);
  return Base64Encode(std::string_view(reinterpret_cast<const char*>(mac), len));
}

AuthOutcome V2Verified(const http::Request& req, const Credential& cred, const std::string& signature,
                       const std::string& when, bool presigned) {
  bool match = false;
  for (const auto& resource : V2Resources(req)) {
    match = match || SameSignature(V2Signature(cred.secret, V2StringToSign(req, when, resource)), signature);
  }
  if (!match) {
    return Fail(403, "SignatureDoesNotMatch",
                "the request signature we calculated does not match the signature you provided");
  }
  AuthOutcome out;
  out.ok = true;
  out.result.access_key = cred.access_key;
  out.result.presigned = presigned;
  return out;
}

// A query-string (presigned) V2 URL: AWSAccessKeyId, Expires (Unix time), Signature.
AuthOutcome PresignedV2(const http::Request& req, const AuthOptions& o, int64_t now) {
  std::string key, expires_s, signature;
  for (const auto& [k, v] : ParseQuery(req.query)) {
    if (k == "AWSAccessKeyId") key = v;
    if (k == "Expires") expires_s = v;
    if (k == "Signature") signature = v;
  }
  int64_t expires = -1;
  auto [end, ec] = std::from_chars(expires_s.data(), expires_s.data() + expires_s.size(), expires);
  if (key.empty() || signature.empty() || ec != std::errc() || end != expires_s.data() + expires_s.size()) {
    return Fail(403, "AccessDenied",
                "a Signature Version 2 URL needs AWSAccessKeyId, Expires (Unix seconds) and Signature");
  }
  const Credential* cred = o.lookup ? o.lookup(key) : nullptr;
  if (cred == nullptr) return Fail(403, "InvalidAccessKeyId", "the access key id is not known to this node");
  if (now > expires) return Fail(403, "AccessDenied", "Request has expired");
  if (expires - now > 604800) return Fail(403, "AccessDenied", "Expires is more than 7 days ahead");
  return V2Verified(req, *cred, signature, expires_s, true);
}

// An HTTP date, or RFC 822's with a numeric zone ("+0000"), which V2
// clients send.
std::optional<int64_t> RequestDate(const std::string& text) {
  if (auto t = http::ParseHttpDate(text)) return t;
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S %z", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(timegm(&tm)) - tm.tm_gmtoff;
}

// Authorization: AWS ACCESS_KEY:SIGNATURE, timed by x-amz-date or Date.
AuthOutcome HeaderV2(const http::Request& req, const AuthOptions& o, int64_t now) {
  const std::string value = req.headers.Get("Authorization");
  const size_t colon = value.rfind(':');
  if (colon == std::string::npos || colon <= 4) {
    return Fail(400, "AuthorizationHeaderMalformed", "expected 'AWS ACCESS_KEY:SIGNATURE'");
  }
  const std::string key = value.substr(4, colon - 4), signature = value.substr(colon + 1);
  const Credential* cred = o.lookup ? o.lookup(key) : nullptr;
  if (cred == nullptr) return Fail(403, "InvalidAccessKeyId", "the access key id is not known to this node");
  const bool amz = req.headers.Has("x-amz-date");
  auto t = RequestDate(amz ? req.headers.Get("x-amz-date") : req.headers.Get("Date"));
  if (!t) return Fail(403, "AccessDenied", "a Signature Version 2 request needs a Date or x-amz-date (HTTP date)");
  const int64_t skew = now - *t;
  if (skew > o.max_clock_skew_seconds || skew < -o.max_clock_skew_seconds) {
    return Fail(403, "RequestTimeTooSkewed", fmt::format("the request time is {} s off", skew));
  }
  // With x-amz-date the Date line is empty (x-amz-date is among the x-amz-* headers).
  return V2Verified(req, *cred, signature, amz ? "" : req.headers.Get("Date"), false);
}

}  // namespace

Result<std::vector<Credential>> LoadCredentials(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("credentials file '{}' cannot be read", path));
  // Secrets others can read are anyone's on this machine: refused, as ssh
  // refuses a private key that is group- or world-readable.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    return Status(StatusCode::kPermissionDenied,
                  fmt::format("credentials file '{}' is open to other users (mode {:04o}): its secrets would be "
                              "theirs; make it private with: chmod 600 {}",
                              path, st.st_mode & 07777, path));
  }
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

Result<Credential> NewCredential() {
  // 20 and 40 characters, as AWS's key ids and secrets.
  static constexpr char kId[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  static constexpr char kSecret[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  unsigned char random[60];
  if (::getrandom(random, sizeof(random), 0) != static_cast<ssize_t>(sizeof(random))) {
    return IoError(fmt::format("no random bytes for a new key: {}", std::strerror(errno)));
  }
  Credential c;
  c.access_key = "AQ";
  for (int i = 0; i < 18; ++i) c.access_key += kId[random[i] % 32];
  for (int i = 0; i < 40; ++i) c.secret += kSecret[random[20 + i] % 64];
  return c;
}

Status CreateCredentialsFile(const std::string& path, const std::vector<Credential>& keys, const std::string& comment) {
  std::string text = fmt::format("# {}: ACCESS_KEY_ID SECRET_ACCESS_KEY per line (created {})\n", comment,
                                 static_cast<int64_t>(std::time(nullptr)));
  for (const auto& k : keys) text += k.access_key + " " + k.secret + "\n";
  // Written under a private name, then linked into place: link() fails if
  // the file appeared meanwhile, so a file is never seen half written.
  const std::string tmp = fmt::format("{}.new.{}.{}", path, ::getpid(), keys.empty() ? "" : keys[0].access_key);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return IoError(fmt::format("cannot create credentials file '{}': {}", path, std::strerror(errno)));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!written) {
    ::unlink(tmp.c_str());
    return IoError(fmt::format("cannot write credentials file '{}'", path));
  }
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (linked != 0 && link_errno == EEXIST) {
    return Status(StatusCode::kAlreadyExists,
                  fmt::format("credentials file '{}' already exists; nothing was written", path));
  }
  if (linked != 0) {
    return IoError(fmt::format("cannot create credentials file '{}': {}", path, std::strerror(link_errno)));
  }
  return Status::Ok();
}

Result<std::vector<Credential>> LoadOrCreateCredentials(const std::string& path, bool* created) {
  *created = false;
  if (::access(path.c_str(), F_OK) == 0) return LoadCredentials(path);
  const Credential key = AQ_TRY(NewCredential());
  Status s = CreateCredentialsFile(path, {key}, "aquifer node credentials");
  if (!s.ok() && s.code() != StatusCode::kAlreadyExists) return s;
  *created = s.ok();
  return LoadCredentials(path);
}

// Long by design: SigV4's checks in the specification's order (header or
// query form, credential scope, date skew, expiry, signed headers, payload
// hash, signature), each a distinct refusal.
AuthOutcome Authenticate(const http::Request& req, const AuthOptions& o) {
  const int64_t now = o.now_unix != 0 ? o.now_unix : static_cast<int64_t>(std::time(nullptr));
  const bool presigned = req.query.find("X-Amz-Signature=") != std::string::npos ||
                         req.query.find("X-Amz-Algorithm=") != std::string::npos;
  const bool presigned_v2 = !presigned && req.query.find("Signature=") != std::string::npos &&
                            req.query.find("AWSAccessKeyId=") != std::string::npos;
  if (req.headers.Get("Authorization").rfind("AWS ", 0) == 0) return HeaderV2(req, o, now);
  if (presigned_v2 && !req.headers.Has("Authorization")) return PresignedV2(req, o, now);
  if (!req.headers.Has("Authorization") && !presigned) {
    if (o.anonymous) {
      AuthOutcome out;
      out.ok = true;
      out.result.payload_hash = req.headers.Get("x-amz-content-sha256");
      if (out.result.payload_hash.rfind("STREAMING-", 0) == 0) {
        if (out.result.payload_hash != "STREAMING-UNSIGNED-PAYLOAD-TRAILER") {
          return Fail(400, "InvalidRequest", "a signed streaming upload needs an Authorization header");
        }
        return StreamingFor(out.result.payload_hash, "", "", "", "", out.result);
      }
      return out;
    }
    return Fail(403, "AccessDenied", "this node requires AWS Signature Version 4 (no Authorization header)");
  }
  if (presigned && !req.headers.Has("Authorization")) return Presigned(req, o, now);
  auto auth = ParseAuthorization(req.headers.Get("Authorization"));
  if (!auth.ok()) return Fail(400, "AuthorizationHeaderMalformed", auth.status().message());
  if (!Contains(auth->signed_headers, "host")) {
    return Fail(400, "AuthorizationHeaderMalformed", "SignedHeaders must include host");
  }
  const Credential* cred = o.lookup ? o.lookup(auth->access_key) : nullptr;
  if (cred == nullptr) return Fail(403, "InvalidAccessKeyId", "the access key id is not known to this node");
  // The request time: x-amz-date, or the Date header when only that is sent.
  std::string amz_date = req.headers.Get("x-amz-date");
  std::optional<int64_t> t;
  if (!amz_date.empty()) {
    t = ParseAmzDate(amz_date);
    if (!t) return Fail(403, "AccessDenied", "malformed x-amz-date");
    if (!Contains(auth->signed_headers, "x-amz-date")) {
      return Fail(403, "AccessDenied", "x-amz-date must be among the signed headers");
    }
  } else if (req.headers.Has("Date")) {
    t = http::ParseHttpDate(req.headers.Get("Date"));
    if (!t) return Fail(403, "AccessDenied", "malformed Date header");
    if (!Contains(auth->signed_headers, "date"))
      return Fail(403, "AccessDenied", "Date must be among the signed headers");
    amz_date = AmzDate(*t);
  } else {
    return Fail(403, "AccessDenied", "the request has neither x-amz-date nor Date");
  }
  if (amz_date.compare(0, 8, auth->date) != 0) {
    return Fail(403, "AccessDenied", "the request date does not match the credential's date");
  }
  const int64_t skew = now - *t;
  if (skew > o.max_clock_skew_seconds || skew < -o.max_clock_skew_seconds) {
    return Fail(403, "RequestTimeTooSkewed", fmt::format("the request time is {} s off", skew));
  }
  const std::string hash = req.headers.Get("x-amz-content-sha256");
  if (hash.empty()) {
    return Fail(400, "InvalidRequest", "x-amz-content-sha256 is required with Signature Version 4");
  }
  SigV4Request sr;
  sr.method = req.method;
  sr.raw_path = req.path;
  sr.raw_query = req.query;
  sr.headers = SignedHeaderValues(req, auth->signed_headers);
  sr.payload_hash = hash;
  const std::string scope = auth->date + "/" + auth->region + "/" + auth->service + "/aws4_request";
  const std::string key = SigningKey(cred->secret, auth->date, auth->region, auth->service);
  const std::string expect = HmacHex(key, StringToSign(amz_date, scope, CanonicalRequest(sr, auth->signed_headers)));
  if (!SameSignature(expect, auth->signature)) {
    return Fail(403, "SignatureDoesNotMatch",
                "the request signature we calculated does not match the signature you provided");
  }
  AuthResult result;
  result.access_key = cred->access_key;
  result.payload_hash = hash;
  if (hash.rfind("STREAMING-", 0) == 0) return StreamingFor(hash, key, amz_date, scope, expect, std::move(result));
  AuthOutcome out;
  out.ok = true;
  out.result = std::move(result);
  return out;
}

}  // namespace aq::s3
