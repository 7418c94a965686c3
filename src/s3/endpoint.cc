#include "s3/endpoint.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>

namespace aq::s3 {

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Result<HostPort> ParseHostPort(std::string_view text, bool allow_zero) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgument(fmt::format("'{}': expected HOST:PORT", text));
  }
  HostPort hp;
  std::string_view host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  hp.host = std::string(host);
  std::string_view port = text.substr(colon + 1);
  int n = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || n < (allow_zero ? 0 : 1) || n > 65535) {
    return InvalidArgument(fmt::format("'{}': the port must be a number from {} to 65535", text, allow_zero ? 0 : 1));
  }
  hp.port = n;
  return hp;
}

std::string StoreUrl::address() const { return HostPort{host, port}.ToString(); }

std::vector<std::string> StoreUrl::addresses() const {
  std::vector<std::string> all{address()};
  all.insert(all.end(), more.begin(), more.end());
  return all;
}

namespace {

// One node of an authority: HOST:PORT, [IPV6]:PORT or HOST (port 80).
Result<HostPort> ParseNode(std::string_view node) {
  if (node.find(':') == std::string_view::npos) return HostPort{std::string(node), 80};
  return ParseHostPort(node, false);
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// endpoint_url of `profile` in an AWS config file: in the profile's "s3 ="
// sub-section (indented lines after it) first, else at its top level.
std::optional<std::string> ConfigEndpoint(const std::string& path, const std::string& profile) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const std::string want = profile == "default" ? "default" : "profile " + profile;
  bool in_profile = false, in_s3 = false;
  std::optional<std::string> top, s3;
  for (std::string line; std::getline(in, line);) {
    const bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    const std::string_view t = Trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      const std::string_view name = Trim(t.substr(1, t.size() - 2));
      in_profile = name == want || (profile == "default" && name == "profile default");
      in_s3 = false;
      continue;
    }
    if (!in_profile) continue;
    const size_t eq = t.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = Trim(t.substr(0, eq)), value = Trim(t.substr(eq + 1));
    if (!indented) {
      in_s3 = key == "s3" && value.empty();
      if (key == "endpoint_url") top = std::string(value);
    } else if (in_s3 && key == "endpoint_url") {
      s3 = std::string(value);
    }
  }
  return s3 ? s3 : top;
}

}  // namespace

Result<S3Endpoint> ResolveS3Endpoint() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (std::string v = env("AWS_ENDPOINT_URL_S3"); !v.empty()) return S3Endpoint{v, "AWS_ENDPOINT_URL_S3"};
  if (std::string v = env("AWS_ENDPOINT_URL"); !v.empty()) return S3Endpoint{v, "AWS_ENDPOINT_URL"};
  std::string path = env("AWS_CONFIG_FILE");
  if (path.empty() && !env("HOME").empty()) path = env("HOME") + "/.aws/config";
  std::string profile = env("AWS_PROFILE");
  if (profile.empty()) profile = "default";
  // Read again only when the file or the profile changes: a store path is
  // parsed on every call.
  static std::mutex mu;
  static std::string cached_key;
  static std::optional<std::string> cached;
  struct stat st {};
  const bool exists = !path.empty() && ::stat(path.c_str(), &st) == 0;
  const std::string key =
      fmt::format("{}\n{}\n{}.{}.{}", path, profile, exists ? static_cast<int64_t>(st.st_size) : -1,
                  static_cast<int64_t>(st.st_mtim.tv_sec), static_cast<int64_t>(st.st_mtim.tv_nsec));
  std::optional<std::string> found;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (cached_key != key) {
      cached = exists ? ConfigEndpoint(path, profile) : std::nullopt;
      cached_key = key;
    }
    found = cached;
  }
  if (found && !found->empty())
    return S3Endpoint{*found, fmt::format("endpoint_url of profile '{}' in {}", profile, path)};
  return NotFound(fmt::format(
      "s3:// paths need the store's endpoint: set AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3), or endpoint_url in "
      "profile '{}' of {} (AWS itself: its regional endpoint, e.g. https://s3.us-east-1.amazonaws.com); or write "
      "aquifer://HOST:PORT/BUCKET (aquifers:// for HTTPS)",
      profile, path.empty() ? "~/.aws/config" : path));
}

bool IsStoreUrl(std::string_view path) {
  return path.substr(0, kScheme.size()) == kScheme || path.substr(0, kTlsScheme.size()) == kTlsScheme ||
         path.substr(0, kS3Scheme.size()) == kS3Scheme;
}

Result<StoreUrl> ParseStoreUrl(std::string_view url) {
  if (!IsStoreUrl(url)) {
    return InvalidArgument(fmt::format(
        "'{}' is not an aquifer://HOST:PORT/BUCKET/KEY (or aquifers://, TLS; or s3://BUCKET/KEY) path", url));
  }
  if (url.substr(0, kS3Scheme.size()) == kS3Scheme) {
    auto resolved = ResolveS3Endpoint();
    if (!resolved.ok()) return resolved.status().WithContext(fmt::format("'{}'", url));
    const S3Endpoint e = *resolved;
    std::string_view ep = e.url;
    bool tls;
    if (ep.substr(0, 8) == "https://") {
      tls = true;
      ep.remove_prefix(8);
    } else if (ep.substr(0, 7) == "http://") {
      tls = false;
      ep.remove_prefix(7);
    } else {
      return InvalidArgument(
          fmt::format("the S3 endpoint '{}' ({}) must start with http:// or https://", e.url, e.source));
    }
    while (!ep.empty() && ep.back() == '/') ep.remove_suffix(1);
    if (ep.empty() || ep.find('/') != std::string_view::npos) {
      return InvalidArgument(
          fmt::format("the S3 endpoint '{}' ({}) must be a scheme and a host[:port], without a path", e.url, e.source));
    }
    std::string authority(ep);
    if (authority.find(':') == std::string::npos || (authority.front() == '[' && authority.back() == ']')) {
      authority += tls ? ":443" : ":80";
    }
    const std::string as_store =
        fmt::format("{}{}/{}", tls ? kTlsScheme : kScheme, authority, url.substr(kS3Scheme.size()));
    auto u = ParseStoreUrl(as_store);
    if (!u.ok()) return u.status().WithContext(fmt::format("'{}' at {} ({})", url, e.url, e.source));
    return u;
  }
  const bool tls = url.substr(0, kTlsScheme.size()) == kTlsScheme;
  std::string_view rest = url.substr(tls ? kTlsScheme.size() : kScheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  StoreUrl u;
  u.tls = tls;
  for (size_t at = 0, n = 0;; ++n) {
    const size_t comma = authority.find(',', at);
    const std::string_view node = authority.substr(at, comma == std::string_view::npos ? comma : comma - at);
    auto hp = ParseNode(node);
    if (!hp.ok()) return hp.status().WithContext(fmt::format("'{}'", url));
    if (hp->host.empty()) return InvalidArgument(fmt::format("'{}': a node without a host", url));
    if (n == 0) {
      u.host = hp->host;
      u.port = hp->port;
    } else {
      u.more.push_back(hp->ToString());
    }
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  if (u.host.empty()) return InvalidArgument(fmt::format("'{}': no host", url));
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  const size_t s2 = path.find('/');
  u.bucket = std::string(path.substr(0, s2));
  if (s2 != std::string_view::npos) u.key = std::string(path.substr(s2 + 1));
  // "prefix//" names the same prefix as "prefix/".
  while (u.key.size() > 1 && u.key.back() == '/' && u.key[u.key.size() - 2] == '/') u.key.pop_back();
  if (u.bucket.empty()) return InvalidArgument(fmt::format("'{}': no bucket", url));
  return u;
}

}  // namespace aq::s3
