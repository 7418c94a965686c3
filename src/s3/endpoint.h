// Where a node is: "HOST:PORT" addresses (listen, advertise, metrics) and
// aquifer://HOST:PORT/BUCKET/KEY paths, parsed in one place for the server,
// the client, the cluster and the command line. Messages name the text, not
// a command-line flag; callers add their own context.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace aq::s3 {

struct HostPort {
  std::string host;  // without IPv6 brackets
  int port = 0;
  std::string ToString() const;  // "host:port" ("[::1]:port" for IPv6)
};

// "HOST:PORT" or "[IPV6]:PORT"; port 0..65535 (0 = any free port) when
// allow_zero, else 1..65535.
Result<HostPort> ParseHostPort(std::string_view text, bool allow_zero = true);

inline constexpr std::string_view kScheme = "aquifer://";
// The same over TLS (HTTPS), as rediss:// or wss:// are to their schemes.
inline constexpr std::string_view kTlsScheme = "aquifers://";

// s3://BUCKET/KEY: a bucket of any S3-compatible store, at the endpoint the
// AWS settings name, read as the AWS CLI and SDKs read them:
// AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else `endpoint_url` of the
// profile (AWS_PROFILE, default "default") in AWS_CONFIG_FILE or
// ~/.aws/config, in its `s3 =` sub-section or at its top level. An http://
// endpoint is read as aquifer://, https:// as aquifers://. No endpoint is
// an error naming these settings (AWS itself: give its regional endpoint).
inline constexpr std::string_view kS3Scheme = "s3://";

// The endpoint those settings name ("https://host[:port]"), and where it
// was found; NotFound when none does.
struct S3Endpoint {
  std::string url, source;
};
Result<S3Endpoint> ResolveS3Endpoint();

// "aquifer://host:port/bucket/key" -> parts (s3://bucket/key too, above). The key may be empty (the
// bucket itself) or end in '/' (a prefix). The authority may name several
// nodes of one cluster, "aquifer://h1:p1,h2:p2/bucket/key": the first is
// asked first, the others when it cannot answer.
struct StoreUrl {
  std::string host;
  int port = 0;
  std::vector<std::string> more;  // the other nodes named, "host:port"
  std::string bucket, key;
  bool tls = false;                            // aquifers://
  std::string address() const;                 // "host:port" of the first
  std::vector<std::string> addresses() const;  // every node named, the first first
};
Result<StoreUrl> ParseStoreUrl(std::string_view url);
bool IsStoreUrl(std::string_view path);

}  // namespace aq::s3
