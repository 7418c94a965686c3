// The aquifer:// client: an io::FileSystem over a storage node's S3 API, so
// dataset tools, benches and the input pipeline read from the store without
// knowing it. Paths are aquifer://HOST:PORT/BUCKET/KEY; a "directory" is a
// key prefix ending in '/'. Reads are ranged GETs over a pool of keep-alive
// connections (concurrent ReadAt calls use separate ones). A large read is
// split into block-sized ranges fetched in parallel. With read-ahead on, a
// file read sequentially (each read starting where the last ended) has its
// next range fetched in the background while the caller works on the
// current one; it is off by default because the node already reads ahead
// for sequential streams and, over loopback, the extra copy costs more than
// the round trip it hides (docs/results.md). A
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

struct ClientOptions {
  bool read_ahead = false;            // fetch a sequential reader's next range in the background
  uint64_t max_read_ahead = 8 << 20;  // largest range read ahead
  uint64_t parallel_chunk = 4 << 20;  // reads larger than this are split into ranges of this size
  size_t max_parallel = 4;            // ... fetched this many at a time
};
// Defaults, with AQUIFER_READAHEAD=1 turning the client's read-ahead on.
ClientOptions ClientOptionsFromEnvironment();

std::unique_ptr<io::FileSystem> NewStoreFileSystem(ClientCredentials credentials,
                                                   ClientOptions options = ClientOptionsFromEnvironment());

// Routes aquifer:// paths to `store` and everything else to `local`.
std::unique_ptr<io::FileSystem> NewRoutingFileSystem(std::unique_ptr<io::FileSystem> local,
                                                     std::unique_ptr<io::FileSystem> store);

}  // namespace aq::client
