// The node's side of same-host reads (the exchange: s3/same_host.h): an
// aquifer:// client on this machine reads the blocks this node holds in RAM
// from sealed memfds the node passes it over a Unix socket, and (when it
// asks for them) the blocks this node keeps plain in a local pool from the
// block files themselves, with no copy of the bytes through a socket and
// none in the node.
//
// Grant() runs in the GET that opens an object (already authorised): it
// lists the object's blocks past the open's bytes that are in the RAM cache
// (or already shared) or, for a client that takes files, that this node
// holds, and records them under a fresh token. A client then presents the
// token once, on the node's abstract SOCK_SEQPACKET socket, and receives a
// descriptor per block it can have:
//   - the block's memfd, if the table of shared memfds has it: made once
//     per block from the cache's verified bytes, sealed against writes and
//     resizes, and kept LRU under `memory_bytes`, so that every same-host
//     reader of a block shares one copy (a reader's descriptor keeps its
//     block readable after the table drops it);
//   - else, for a client that takes files, the block's file open read-only
//     (store::BlockStore::OpenPlain: plain, on a pool a reader may read
//     directly), whose bytes the client checks against the block's CRC32C
//     before it uses them: no copy in the node at all;
//   - else a memfd made for the table from the RAM cache, if it is there.
//
// Thread safety: Grant() and Stats() may be called from any thread; the
// socket is served by a few threads of its own until destruction.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "store/block_cache.h"
#include "store/block_store.h"
#include "store/meta_store.h"

namespace aq::server {

struct SameHostOptions {
  uint64_t memory_bytes = 1ull << 30;  // the shared memfds' bytes, at most
  double grant_ttl_s = 30;             // an unused token is good this long
  size_t max_grants = 4096;            // tokens outstanding, oldest dropped first
  size_t threads = 4;                  // serving the socket
};

struct SameHostStats {
  uint64_t grants = 0, granted_blocks = 0;    // tokens given, blocks they named
  uint64_t fetches = 0;                       // tokens presented and honoured
  uint64_t blocks_sent = 0, blocks_gone = 0;  // memfds passed; blocks neither in RAM nor passed as files by then
  uint64_t files_sent = 0;                    // block files passed
  uint64_t refused = 0;                       // malformed requests, unknown or expired tokens
  uint64_t created = 0, evicted = 0;          // memfds made from the cache, dropped from the table
  uint64_t shared = 0, shared_bytes = 0;      // in the table now
};

class SameHostReads {
 public:
  // Binds the socket (abstract "aquifer-<pid>-<random>") and starts serving.
  // With `files`, blocks this node holds (`node_id`'s in a cluster, any on a
  // single node: "") are passed as their files to the clients that take them.
  static Result<std::unique_ptr<SameHostReads>> Start(store::BlockCache& cache, SameHostOptions options,
                                                      store::BlockStore* files = nullptr, std::string node_id = "");
  ~SameHostReads();
  SameHostReads(const SameHostReads&) = delete;
  SameHostReads& operator=(const SameHostReads&) = delete;

  // The x-aquifer-same-host header's value for an open of `object` whose
  // answer carries its bytes up to `from`, for a client that takes block
  // files too (`files`) or memfds only; empty when no later block is in RAM
  // (or, for `files`, held here).
  std::string Grant(const store::ObjectMeta& object, uint64_t from, bool files);
  SameHostStats Stats() const;
  const std::string& socket_name() const { return name_; }
  const SameHostOptions& options() const { return o_; }

 private:
  struct MemFd {
    int fd = -1;
    uint64_t size = 0;
    ~MemFd();
  };
  struct Pending {
    std::vector<store::BlockRef> blocks;
    bool files = false;  // the client takes block files
    double expires = 0;
  };
  SameHostReads(store::BlockCache& cache, SameHostOptions options, store::BlockStore* files, std::string node_id)
      : cache_(cache), o_(options), files_(files), node_id_(std::move(node_id)) {}
  void Loop();
  void Serve(int fd);
  // The block's shared memfd, made from the cache's bytes when the table
  // lacks it; null when the block is not in RAM.
  std::shared_ptr<MemFd> Share(const std::string& id, uint64_t size);
  // The block's memfd if the table has it (made for an earlier reader).
  std::shared_ptr<MemFd> Shared(const std::string& id);
  bool Resident(const std::string& id);
  // Whether this node should hold the block's file (checked at the fetch).
  bool Held(const store::BlockRef& b) const;

  store::BlockCache& cache_;
  const SameHostOptions o_;
  store::BlockStore* const files_;
  const std::string node_id_;
  std::string name_;
  int listen_fd_ = -1, stop_fd_ = -1;
  std::vector<std::thread> threads_;

  mutable Mutex mu_;
  std::unordered_map<std::string, Pending> grants_ AQ_GUARDED_BY(mu_);
  std::list<std::string> grant_order_ AQ_GUARDED_BY(mu_);  // oldest first
  // The shared memfds, most recently used first.
  std::list<std::pair<std::string, std::shared_ptr<MemFd>>> lru_ AQ_GUARDED_BY(mu_);
  std::unordered_map<std::string, decltype(lru_)::iterator> shared_ AQ_GUARDED_BY(mu_);
  uint64_t shared_bytes_ AQ_GUARDED_BY(mu_) = 0;
  SameHostStats stats_ AQ_GUARDED_BY(mu_);
};

}  // namespace aq::server
