// The aquifer:// client: an io::FileSystem over a storage node's S3 API, so
// dataset tools, benches and the input pipeline read from the store without
// knowing it. Paths are aquifer://HOST:PORT/BUCKET/KEY; a "directory" is a
// key prefix ending in '/'. Reads are ranged GETs over a small pool of
// keep-alive connections (concurrent ReadAt calls use separate ones); a
// write is spooled to a local temporary file and sent as one PUT on Close,
// so it appears whole or not at all, with bounded memory.
//
// Requests are signed with AWS Signature V4 when credentials are known
// (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or the first line of the file
// named by AQUIFER_CREDENTIALS), else sent unsigned.
//
// Thread safety: as io::FileSystem.
#pragma once

#include <memory>
#include <string>

#include "io/file_system.h"

namespace aq::client {

inline constexpr std::string_view kScheme = "aquifer://";

// "aquifer://host:port/bucket/key" -> parts. InvalidArgument otherwise.
struct StorePath {
  std::string host;
  int port = 0;
  std::string bucket, key;  // key may be empty (the bucket itself)
};
Result<StorePath> ParseStorePath(const std::string& path);

struct ClientCredentials {
  std::string access_key, secret;  // empty = unsigned
};
ClientCredentials CredentialsFromEnvironment();

std::unique_ptr<io::FileSystem> NewStoreFileSystem(ClientCredentials credentials);

// Routes aquifer:// paths to `store` and everything else to `local`.
std::unique_ptr<io::FileSystem> NewRoutingFileSystem(std::unique_ptr<io::FileSystem> local,
                                                     std::unique_ptr<io::FileSystem> store);

}  // namespace aq::client
