// The aquifer:// client: an io::FileSystem over a storage node's S3 API, so
// dataset tools, benches, the input pipeline and the mount read from the
// store without knowing it. Paths are aquifer://HOST:PORT/BUCKET/KEY; a
// "directory" is a key prefix ending in '/'.
//
// Round trips are what small files cost, so each is counted:
//   - opening a file is one GET of its first bytes (open_bytes, 1 MiB by
//     default) that also tells its size, ETag and, from a cluster, its
//     layout: a whole-file reader of a small object makes exactly one
//     request, and nothing is ever asked past the end;
//   - later reads are ranged GETs pinned to the ETag seen at open (If-Match),
//     so a file overwritten while being read fails with an error instead of
//     mixing two versions; large reads go as parallel ranges;
//   - on a cluster, reads go to the nodes holding each block (the least
//     busy holder first, failing over to the others, then to the node the
//     path names);
//   - a node on this machine (a loopback address) lets the open read the
//     rest of what it holds in RAM from sealed shared memory (pread of a
//     memfd it passes over a Unix socket, s3/same_host.h), and what it
//     keeps plain in its local pools from the block files themselves
//     (passed read-only; every block checked against its CRC32C as read),
//     instead of copying it through the socket; the rest is read as below;
//   - listings are ListObjectsV2 pages; the sizes they carry answer Stat
//     for a few seconds, so walking a folder costs no HEAD per file;
//   - no node is a single point of failure: the client learns the cluster's
//     members (GET /_aquifer/cluster, from any node the path names) and a
//     request a node cannot answer (connection refused or reset, an answer
//     cut short, 5xx) goes to the next, with jittered backoff between
//     rounds, until retry_deadline_s; past it the request fails as
//     kUnavailable naming the nodes tried, never as damaged data.
// A write is spooled to an unlinked local file and stored on Close, as one
// PUT or, past multipart_threshold, as a multipart upload whose parts are
// sent in the background (max_parallel at a time) as the writer fills them;
// writes may go back into the file (WriteAt, Truncate): a part already
// sent is sent again at Close. It appears whole or not at all, with
// bounded memory.
//
// Credentials are found as AWS tools find them (client/credentials.h).
//
// aquifers://HOST:PORT/... is the same over TLS: every node's certificate
// is verified (ClientOptions::ca_file) for the host the client connects to.
// One file system speaks one of the two: a path of the other scheme is
// refused (a process talks to one store, with or without TLS).
//
// Thread safety: as io::FileSystem.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "client/credentials.h"
#include "io/file_system.h"
#include "s3/endpoint.h"

namespace aq::client {

using StorePath = s3::StoreUrl;
inline Result<StorePath> ParseStorePath(const std::string& path) { return s3::ParseStoreUrl(path); }
using s3::kScheme;

struct ClientOptions {
  uint64_t open_bytes = 1 << 20;               // fetched by the open itself
  bool read_ahead = false;                     // fetch a sequential reader's next range in the background
  uint64_t max_read_ahead = 8 << 20;           // largest range read ahead
  uint64_t parallel_chunk = 4 << 20;           // reads larger than this are split into ranges of this size
  size_t max_parallel = 4;                     // ... fetched (and parts sent) this many at a time
  uint64_t multipart_threshold = 64ull << 20;  // writes larger than this go as multipart uploads
  uint64_t part_size = 16ull << 20;
  std::string balance = "least";  // cluster reads: least (busy) | round-robin | off (through the named node)
  double listing_ttl_s = 5;       // how long a listing's sizes answer Stat
  // A cluster: how long a request keeps trying other nodes (and waiting
  // for one to come back) before it fails as unavailable.
  double retry_deadline_s = 60;
  double members_ttl_s = 30;  // how long a learned member list is used before it is asked again
  // aquifers:// (TLS): the CA bundle that signed the nodes' certificates.
  // Empty: AQUIFER_CA (what --ca sets), else AWS_CA_BUNDLE, else the
  // system's CAs; read at the first TLS request.
  std::string ca_file;
  // Same-host reads (s3/same_host.h): on a node at a loopback address, the
  // blocks it holds in RAM are read from memory it shares, not through the
  // socket. AQUIFER_SAME_HOST=0 turns it off.
  bool same_host = true;
  // With same_host: the blocks the node keeps plain in its local pools are
  // read from its block files too. AQUIFER_SAME_HOST_FILES=0 turns it off.
  bool same_host_files = true;
  // Objects written get S3's MD5 ETag (the node hashes every byte once
  // more). Off, the node is asked for an ETag unique per write
  // (s3::kEtagHeader): the bodies are checked by their CRC32C either way.
  // AQUIFER_MD5_ETAG=1 turns it on.
  bool md5_etags = false;
};
// Defaults, with AQUIFER_READAHEAD=1 turning read-ahead on,
// AQUIFER_BALANCE choosing the cluster read policy and
// AQUIFER_RETRY_DEADLINE (seconds) bounding failover, AQUIFER_SAME_HOST=0
// turning same-host reads off and AQUIFER_MD5_ETAG=1 asking for MD5 ETags.
ClientOptions ClientOptionsFromEnvironment();

// `credentials` is called once, at the first request (so command-line flags
// parsed after the file system is made still count).
std::unique_ptr<io::FileSystem> NewStoreFileSystem(std::function<Result<ClientCredentials>()> credentials,
                                                   ClientOptions options = ClientOptionsFromEnvironment());
std::unique_ptr<io::FileSystem> NewStoreFileSystem(ClientCredentials credentials,
                                                   ClientOptions options = ClientOptionsFromEnvironment());

// Routes aquifer:// paths to `store` and everything else to `local`.
std::unique_ptr<io::FileSystem> NewRoutingFileSystem(std::unique_ptr<io::FileSystem> local,
                                                     std::unique_ptr<io::FileSystem> store);

}  // namespace aq::client
