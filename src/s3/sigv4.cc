#include "s3/sigv4.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <ctime>

namespace aq::s3 {
namespace {

std::string Trim(std::string_view s) {
  size_t a = s.find_first_not_of(" \t");
  if (a == std::string_view::npos) return "";
  size_t b = s.find_last_not_of(" \t");
  // Inner runs of spaces collapse to one, as SigV4 canonical headers require.
  std::string out;
  bool space = false;
  for (char c : s.substr(a, b - a + 1)) {
    if (c == ' ' || c == '\t') {
      space = true;
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

}  // namespace

std::string HexEncode(const unsigned char* p, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kHex[p[i] >> 4];
    s[2 * i + 1] = kHex[p[i] & 15];
  }
  return s;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), d, &len, EVP_sha256(), nullptr);
  return HexEncode(d, len);
}

bool SameSignature(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string UriEncode(std::string_view s, bool encode_slash) {
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~' || (c == '/' && !encode_slash)) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string UriDecode(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

Result<SigV4Authorization> ParseAuthorization(std::string_view h) {
  constexpr std::string_view kAlg = "AWS4-HMAC-SHA256";
  if (h.substr(0, kAlg.size()) != kAlg) {
    return InvalidArgument("Authorization: only AWS4-HMAC-SHA256 (Signature Version 4) is supported");
  }
  SigV4Authorization a;
  std::string_view rest = h.substr(kAlg.size());
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string part = Trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    size_t eq = part.find('=');
    if (eq == std::string::npos) continue;
    std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    if (key == "Credential") {
      // KEY/DATE/REGION/SERVICE/aws4_request
      std::vector<std::string> f;
      size_t start = 0;
      for (size_t slash; (slash = value.find('/', start)) != std::string::npos; start = slash + 1) {
        f.push_back(value.substr(start, slash - start));
      }
      f.push_back(value.substr(start));
      if (f.size() != 5 || f[4] != "aws4_request") {
        return InvalidArgument(fmt::format("Authorization: malformed Credential '{}'", value));
      }
      a.access_key = f[0];
      a.date = f[1];
      a.region = f[2];
      a.service = f[3];
    } else if (key == "SignedHeaders") {
      size_t start = 0;
      for (size_t semi; (semi = value.find(';', start)) != std::string::npos; start = semi + 1) {
        a.signed_headers.push_back(value.substr(start, semi - start));
      }
      a.signed_headers.push_back(value.substr(start));
    } else if (key == "Signature") {
      a.signature = value;
    }
  }
  if (a.access_key.empty() || a.signed_headers.empty() || a.signature.empty()) {
    return InvalidArgument("Authorization: Credential, SignedHeaders and Signature are all required");
  }
  return a;
}

std::string CanonicalRequest(const SigV4Request& r, const std::vector<std::string>& signed_headers) {
  // Path: decode what was sent, then encode each byte the SigV4 way (S3
  // does not normalise '.' segments or double-encode).
  std::string path = UriEncode(UriDecode(r.raw_path.empty() ? "/" : r.raw_path), false);
  // Query: every parameter decoded, re-encoded, sorted by name then value.
  std::vector<std::pair<std::string, std::string>> params;
  for (const auto& [k, v] : ParseQuery(r.raw_query)) params.emplace_back(UriEncode(k, true), UriEncode(v, true));
  std::sort(params.begin(), params.end());
  std::string query;
  for (const auto& [k, v] : params) query += (query.empty() ? "" : "&") + k + "=" + v;
  std::string headers;
  for (const auto& name : signed_headers) {
    auto range = r.headers.equal_range(name);
    std::string value;
    for (auto it = range.first; it != range.second; ++it) value += (value.empty() ? "" : ",") + Trim(it->second);
    headers += name + ":" + value + "\n";
  }
  std::string list;
  for (const auto& name : signed_headers) list += (list.empty() ? "" : ";") + name;
  return r.method + "\n" + path + "\n" + query + "\n" + headers + "\n" + list + "\n" + r.payload_hash;
}

std::string StringToSign(const std::string& amz_date, const std::string& scope, const std::string& canonical) {
  return "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" + Sha256Hex(canonical);
}

std::string SigningKey(const std::string& secret, const std::string& date, const std::string& region,
                       const std::string& service) {
  std::string k = Hmac("AWS4" + secret, date);
  k = Hmac(k, region);
  k = Hmac(k, service);
  return Hmac(k, "aws4_request");
}

std::string HmacHex(std::string_view key, std::string_view data) {
  std::string sig = Hmac(key, data);
  return HexEncode(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
}

std::string Signature(const std::string& secret, const SigV4Authorization& a, const std::string& sts) {
  return HmacHex(SigningKey(secret, a.date, a.region, a.service), sts);
}

std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view q) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view kv = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    out.emplace_back(UriDecode(kv.substr(0, eq)), eq == std::string_view::npos ? "" : UriDecode(kv.substr(eq + 1)));
  }
  return out;
}

std::string PresignQuery(const std::string& access_key, const std::string& secret, const std::string& host,
                         const std::string& method, const std::string& raw_path, const std::string& raw_query,
                         int64_t expires_seconds, int64_t now_unix) {
  std::time_t now = now_unix != 0 ? static_cast<std::time_t>(now_unix) : std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[20], day[9];
  std::strftime(date, sizeof date, "%Y%m%dT%H%M%SZ", &tm);
  std::strftime(day, sizeof day, "%Y%m%d", &tm);
  const std::string scope = std::string(day) + "/us-east-1/s3/aws4_request";
  std::string query = raw_query;
  auto add = [&](const std::string& k, const std::string& v) {
    query += (query.empty() ? "" : "&") + k + "=" + UriEncode(v, true);
  };
  add("X-Amz-Algorithm", "AWS4-HMAC-SHA256");
  add("X-Amz-Credential", access_key + "/" + scope);
  add("X-Amz-Date", date);
  add("X-Amz-Expires", std::to_string(expires_seconds));
  add("X-Amz-SignedHeaders", "host");
  SigV4Request r;
  r.method = method;
  r.raw_path = raw_path;
  r.raw_query = query;
  r.payload_hash = "UNSIGNED-PAYLOAD";
  r.headers = {{"host", host}};
  const std::string sts = StringToSign(date, scope, CanonicalRequest(r, {"host"}));
  add("X-Amz-Signature", HmacHex(SigningKey(secret, day, "us-east-1", "s3"), sts));
  return query;
}

std::vector<std::pair<std::string, std::string>> SignRequest(const std::string& access_key, const std::string& secret,
                                                             const std::string& host, const std::string& method,
                                                             const std::string& raw_path, const std::string& raw_query,
                                                             const std::string& payload_hash) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[20], day[9];
  std::strftime(date, sizeof date, "%Y%m%dT%H%M%SZ", &tm);
  std::strftime(day, sizeof day, "%Y%m%d", &tm);
  SigV4Request r;
  r.method = method;
  r.raw_path = raw_path;
  r.raw_query = raw_query;
  r.payload_hash = payload_hash;
  r.headers = {{"host", host}, {"x-amz-content-sha256", payload_hash}, {"x-amz-date", date}};
  const std::vector<std::string> signed_headers = {"host", "x-amz-content-sha256", "x-amz-date"};
  SigV4Authorization a{access_key, day, "us-east-1", "s3", signed_headers, ""};
  const std::string scope = std::string(day) + "/us-east-1/s3/aws4_request";
  const std::string sig = Signature(secret, a, StringToSign(date, scope, CanonicalRequest(r, signed_headers)));
  return {{"x-amz-date", date},
          {"x-amz-content-sha256", payload_hash},
          {"Authorization", "AWS4-HMAC-SHA256 Credential=" + access_key + "/" + scope +
                                ", SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" + sig}};
}

}  // namespace aq::s3
