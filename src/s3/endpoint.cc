#include "s3/endpoint.h"

#include <fmt/format.h>

#include <charconv>

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

}  // namespace

bool IsStoreUrl(std::string_view path) {
  return path.substr(0, kScheme.size()) == kScheme || path.substr(0, kTlsScheme.size()) == kTlsScheme;
}

Result<StoreUrl> ParseStoreUrl(std::string_view url) {
  if (!IsStoreUrl(url)) {
    return InvalidArgument(
        fmt::format("'{}' is not an aquifer://HOST:PORT/BUCKET/KEY (or aquifers://, TLS) path", url));
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
