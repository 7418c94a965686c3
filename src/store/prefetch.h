// Stream prefetch: per open stream, detect sequential access and read the
// next blocks ahead in the background, so a streaming reader finds its next
// block already in memory while the previous one is still on the wire.
//
// A stream is one reader's pass over one object (one object version: block
// ids are immutable, so prefetched bytes never go stale). Inside a request
// the range is known, so its blocks are read ahead up to the stream's window;
// the window starts at 2 blocks and doubles with every block consumed in
// order, up to `max_window_blocks`. When a request ends, the stream waits
// (with what it prefetched) for the reader's next request: one that starts
// exactly where the last ended continues the stream and may be read ahead
// past its own end (speculation). A request from the object's first byte
// starts a stream that speculates at once (a pass over a shard begins
// there); any other request starts a stream with no speculation, so random
// readers cost nothing but their own blocks.
// Streams share what they read ahead, by block id: a client that reads one
// object in parallel ranges has a request (so a stream) per range in
// flight, each starting where no idle stream ended; such a request takes
// the blocks its sibling's stream read ahead instead of reading them again,
// and a stream never issues a block another stream is already reading.
// Memory is bounded: every prefetched block is charged to one budget across
// streams; when it is spent, the oldest idle streams give theirs back, and
// otherwise no more is issued until blocks are consumed.
//
// Thread safety: Prefetcher methods may be called from any thread; a
// ReadStream is used by one request at a time (Begin .. End).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "store/block_service.h"
#include "store/meta_store.h"

namespace aq::store {

struct PrefetchOptions {
  uint32_t max_window_blocks = 8;        // read-ahead ceiling per stream
  uint64_t memory_bytes = 256ull << 20;  // prefetched blocks held, all streams together
  size_t threads = 4;                    // background block readers
  double idle_seconds = 10;              // an idle stream is forgotten after this
  size_t max_idle_streams = 1024;
};

struct PrefetchStats {
  uint64_t issued = 0;       // blocks read ahead
  uint64_t hits = 0;         // blocks a reader found already read ahead
  uint64_t late_hits = 0;    // ... still being read (the reader waited less)
  uint64_t wasted = 0;       // read ahead, never consumed
  uint64_t continued = 0;    // requests that continued a sequential stream
  uint64_t new_streams = 0;  // requests that started a stream (first or random access)
  uint64_t bytes_held = 0;   // prefetched bytes in memory now
};

class Prefetcher;

class ReadStream {
 public:
  ~ReadStream();
  // The whole block `index` of the stream's object, verified: from a
  // prefetch when one was issued, otherwise read now. Issues read-ahead for
  // the blocks after it.
  Result<std::shared_ptr<const std::string>> Block(size_t index);
  const ObjectMeta& object() const { return *object_; }

 private:
  friend class Prefetcher;
  struct Slot;
  ReadStream(Prefetcher& owner, std::shared_ptr<const ObjectMeta> object);
  void Issue(size_t from, size_t to);
  void IssueAfter(size_t index);  // read-ahead after handing out block `index`
  void DropPending();

  Prefetcher& owner_;
  std::shared_ptr<const ObjectMeta> object_;
  std::vector<uint64_t> starts_;  // byte offset of each block
  uint64_t next_offset_ = 0;      // where the last request ended
  size_t request_last_ = 0;       // last block the current request covers
  bool speculate_ = false;        // read ahead past the request's end
  uint32_t window_ = 2;
  size_t last_ = static_cast<size_t>(-1);  // last block handed out
  std::map<size_t, std::shared_ptr<Slot>> pending_;
  std::shared_ptr<const std::string> last_data_;
  double idle_since_ = 0;
};

class Prefetcher {
 public:
  // Blocks are read through `blocks` (a node's pools and cache, or a
  // cluster's replicas).
  Prefetcher(BlockService& blocks, PrefetchOptions options);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // A stream for a request of bytes [offset, offset + n) of the object:
  // the idle stream that ended exactly at `offset` when there is one (a
  // sequential reader's next request), else a new one.
  std::shared_ptr<ReadStream> Begin(std::shared_ptr<const ObjectMeta> object, uint64_t offset, uint64_t n);
  // The request is over (it read up to `end`); the stream waits, with what
  // it prefetched, for its continuation.
  void End(std::shared_ptr<ReadStream> stream, uint64_t end);
  PrefetchStats Stats() const;
  // Waits until at most `bytes` of prefetched data are held (read-ahead
  // tasks drop blocks on their own threads); false when `timeout` passes.
  bool WaitUntilHeldAtMost(uint64_t bytes, std::chrono::milliseconds timeout) const;
  const PrefetchOptions& options() const { return options_; }

  // Reads a block (verified).
  Result<std::shared_ptr<const std::string>> ReadBlock(const BlockRef& ref) { return blocks_.Read(ref); }

 private:
  friend class ReadStream;
  // Charges `bytes` to the budget, evicting idle streams' prefetches if
  // needed; false when the budget stays spent.
  bool Reserve(uint64_t bytes);
  void Unreserve(uint64_t bytes);
  void Submit(std::function<void()> task);
  void Worker();
  // Read-ahead by block id, across streams: a reader whose request made a
  // stream of its own takes a block another stream read ahead (or is
  // reading) instead of reading it again.
  std::shared_ptr<ReadStream::Slot> Shared(const std::string& id);
  void Share(const std::string& id, const std::shared_ptr<ReadStream::Slot>& slot);
  void Unshare(const std::string& id);  // the block's slot is gone
  void Count(uint64_t PrefetchStats::*field);
  // Removes idle streams older than the idle limit, and the oldest beyond
  // `keep`; the caller destroys them after unlocking. REQUIRES: mu_ held.
  std::vector<std::shared_ptr<ReadStream>> Evict(size_t keep);
  static double Now();

  BlockService& blocks_;
  const PrefetchOptions options_;

  Mutex shared_mu_;  // never held with mu_
  std::unordered_map<std::string, std::weak_ptr<ReadStream::Slot>> shared_ AQ_GUARDED_BY(shared_mu_);

  mutable Mutex mu_;  // guards the fields below
  CondVar cv_{mu_};
  mutable CondVar held_cv_{mu_};  // held_ went down
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  // Idle streams by object ("bucket/key#version"), oldest first.
  std::multimap<std::string, std::shared_ptr<ReadStream>> idle_;
  uint64_t held_ = 0;
  PrefetchStats stats_;
  std::vector<std::thread> threads_;
};

}  // namespace aq::store
