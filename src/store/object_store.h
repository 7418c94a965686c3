// Objects over blocks: what the node's protocols (S3 over HTTP, the
// aquifer:// client) call. A put streams: bytes are cut into blocks of the
// bucket's block size and each full block is written (durably) as it
// fills, so memory stays at one block whatever the object's size; Commit
// switches the object's layout in one metadata transaction and only then
// hands the blocks of the layout it replaced to the Reclaimer, which
// removes them once no reader holds them. An abandoned put (client gone,
// error) removes the blocks it wrote — unless the commit's outcome is
// unknown (the metadata service did not answer), when they are kept: they
// may be referenced. A crash leaves orphans that the next start collects.
// Reads map a byte range onto the blocks and hand the bytes to a sink block
// by block, each block verified.
//
// Thread safety: ObjectStore methods may be called concurrently; an
// ObjectWriter is used by one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/access_clock.h"
#include "store/block_cache.h"
#include "store/block_service.h"
#include "store/block_store.h"
#include "store/l3_cache.h"
#include "store/meta_store.h"
#include "store/prefetch.h"
#include "store/reclaimer.h"
#include "store/stager.h"

namespace aq::store {

struct ObjectStoreOptions {
  uint64_t block_size = 4 << 20;  // 4 MiB
  std::string pool;               // default pool for new blocks ("" = the first)
  ReclaimerOptions reclaim;       // how long freed blocks outlive their layout
};

class ObjectWriter {
 public:
  ~ObjectWriter();  // aborts unless committed
  ObjectWriter(const ObjectWriter&) = delete;
  ObjectWriter& operator=(const ObjectWriter&) = delete;

  Status Write(std::string_view data);
  // Writes the last block, commits the layout, deletes the replaced blocks.
  Result<ObjectMeta> Commit();
  // A condition the commit checks in its transaction (S3's If-None-Match: *
  // and If-Match; store::WriteCondition says how a failure reads).
  void set_condition(WriteCondition c) { condition_ = std::move(c); }
  // The checksum stored with the object (or, for a part, its value),
  // known once the body has been read.
  void set_checksum(ObjectChecksum c) { attrs_.checksum = std::move(c); }
  // Sees every byte written, in order (a checksum of a copy's bytes).
  void set_tap(std::function<void(std::string_view)> tap) { tap_ = std::move(tap); }
  // The ETag made unique per write instead of S3's MD5 of the bytes, for a
  // writer that does not need the MD5 (the aquifer:// client, which checks
  // bodies by CRC32C): an MD5 pass is about half a core per 370 MB/s.
  // Unique per write, it still tells versions apart (If-Match, a reader's
  // version check). An object's reads "<32 hex>-1" (a dash: no client
  // takes it for an MD5); a part's, 32 hex digits, which the completion
  // combines as it does MD5s. Before the first Write.
  void set_unique_etag() { unique_etag_ = true; }
  // Removes every block written so far. Idempotent.
  void Abort();
  uint64_t bytes_written() const { return size_; }

 private:
  friend class ObjectStore;
  ObjectWriter(MetaStore& meta, BlockService& blocks, Reclaimer& reclaimer, std::string bucket, std::string key,
               std::string pool, uint64_t block_size, ObjectAttrs attrs);
  Status FlushBlock();

  MetaStore& meta_;
  BlockService& blocks_;
  Reclaimer& reclaimer_;
  ObjectAttrs attrs_;
  std::string bucket_, key_, pool_;
  uint64_t block_size_;
  std::string buffer_;
  std::vector<BlockRef> written_;
  uint64_t size_ = 0;
  void* md5_;  // EVP_MD_CTX*, the ETag
  bool unique_etag_ = false;
  bool done_ = false;
  std::string upload_id_;  // a part of this multipart upload, when part_ > 0
  uint32_t part_ = 0;
  WriteCondition condition_;
  std::function<void(std::string_view)> tap_;
};

struct ListV2Request {
  std::string bucket, prefix, delimiter;
  std::string start_after;  // exclusive; also how continuation tokens resume
  uint32_t max_keys = 1000;
};

struct ListV2Page {
  std::vector<ObjectMeta> objects;           // keys without the delimiter past the prefix
  std::vector<std::string> common_prefixes;  // prefix + ... + delimiter, each once
  bool truncated = false;
  std::string next_start_after;  // resume point when truncated
};

class ObjectStore {
 public:
  // A single node: blocks in `blocks`' pools. With a cache, reads go
  // through it: a block is read from its pool and verified once, then
  // served from RAM while the policy keeps it.
  ObjectStore(MetaStore& meta, BlockStore& blocks, ObjectStoreOptions options, BlockCache* cache = nullptr);
  // Blocks through `service` (a cluster's replicas); `blocks` and `cache`
  // are this node's own, for statistics.
  ObjectStore(MetaStore& meta, BlockStore& blocks, BlockService& service, ObjectStoreOptions options,
              BlockCache* cache = nullptr);
  // The node's L3 cache (for statistics; reads reach it through the block service).
  void set_l3(L3Cache* l3) { l3_ = l3; }
  // Reads are recorded here (last access times for tiering policies).
  void set_access_clock(AccessClock* clock) { access_ = clock; }
  // Where a new object's blocks go (tiering policies at write time): the
  // pool for (bucket, key, size; kUnknownSize when not known), or "" for
  // the default pool.
  static constexpr uint64_t kUnknownSize = UINT64_MAX;
  using PoolChooser = std::function<std::string(const std::string&, const std::string&, uint64_t)>;
  void set_pool_chooser(PoolChooser chooser) { choose_pool_ = std::move(chooser); }
  L3Cache* l3() const { return l3_; }
  // The plan stager reads go through (the service given), for readers'
  // plans and statistics; null when staging is off.
  void set_stager(Stager* stager) { stager_ = stager; }
  Stager* stager() const { return stager_; }
  ~ObjectStore();

  // Starts a put. The bucket must exist and the key be valid (checked now,
  // so a bad request fails before any byte is stored). `attrs.headers` are
  // stored with the object.
  // `size`: the object's size when the caller knows it (a PUT's length),
  // for tiering policies on size.
  Result<std::unique_ptr<ObjectWriter>> Put(const std::string& bucket, const std::string& key, ObjectAttrs attrs = {},
                                            uint64_t size = kUnknownSize);
  Result<ObjectMeta> Head(const std::string& bucket, const std::string& key);
  // Keeps the object's blocks readable until the pin is dropped, whatever
  // writes or deletes happen meanwhile (bounded: ReclaimerOptions).
  Reclaimer::Pin Hold(const ObjectMeta& object) { return reclaimer_->Hold(object.blocks); }
  // Head and Hold with no gap between them: the layout is read again once
  // its blocks are pinned and taken only if it is still the object's. A
  // layout replaced between the read and the pin may have had its blocks
  // removed already (at once when the reclaimer has no delay), and a reader
  // holding it would fail part way through the object.
  struct Held {
    ObjectMeta meta;
    Reclaimer::Pin pin;
  };
  Result<Held> HeadHeld(const std::string& bucket, const std::string& key);
  // Whether every block holding bytes [offset, offset + n) can be read now.
  bool Available(const ObjectMeta& object, uint64_t offset, uint64_t n);
  // Streams bytes [offset, offset + n) of `source` into `writer` (server-side copy).
  Status CopyInto(const ObjectMeta& source, uint64_t offset, uint64_t n, ObjectWriter& writer);
  // Streams bytes [offset, offset + n) of the object to `sink`, at most one
  // block at a time. With a stream (Prefetcher::Begin), blocks come through
  // it and the blocks after them are read ahead. REQUIRES: offset + n <=
  // object.size; the stream is over this object.
  Status Read(const ObjectMeta& object, uint64_t offset, uint64_t n,
              const std::function<Status(std::string_view)>& sink, ReadStream* stream = nullptr);
  Status Delete(const std::string& bucket, const std::string& key);

  // Multipart upload (S3's create / upload part / complete / abort). Parts
  // stream into blocks like a put; completing switches the object to the
  // parts' blocks in one metadata transaction (no bytes copied).
  Result<UploadInfo> CreateUpload(const std::string& bucket, const std::string& key,
                                  std::map<std::string, std::string> headers = {});
  // A writer whose Commit records part `number` (1..10000) of the upload
  // (and returns its size and ETag). NotFound if the upload is not one for
  // bucket/key. `upload`, when given, receives the upload as read.
  Result<std::unique_ptr<ObjectWriter>> PutPart(const std::string& upload_id, const std::string& bucket,
                                                const std::string& key, uint32_t number, UploadInfo* upload = nullptr);
  // The upload, checked to be for bucket/key (NotFound otherwise).
  Result<UploadInfo> GetUpload(const std::string& upload_id, const std::string& bucket, const std::string& key);
  // Commits the named parts, in order, as the object; frees the blocks of
  // the replaced object and of parts left out. The ETag is S3's: the MD5 of
  // the parts' MD5s, "-" and the part count. The caller has checked the
  // list (CheckCompletion); a part replaced meanwhile is InvalidArgument.
  // The object keeps the upload's headers (but for its checksum settings)
  // and records its id, part sizes and `checksum`.
  Result<ObjectMeta> CompleteUpload(const std::string& upload_id, const std::string& bucket, const std::string& key,
                                    const std::vector<CompletedPart>& parts, const WriteCondition& condition = {},
                                    ObjectChecksum checksum = {});
  // Where an upload keeps the checksum its object will carry (with its
  // headers, under names no stored header has): the algorithm
  // (ObjectChecksum::algorithm) and the type (FULL_OBJECT or COMPOSITE).
  static constexpr const char* kUploadChecksumAlgorithm = "x-amz-checksum-algorithm";
  static constexpr const char* kUploadChecksumType = "x-amz-checksum-type";
  Status AbortUpload(const std::string& upload_id, const std::string& bucket, const std::string& key);
  // S3 ListObjectsV2: keys under the prefix; with a delimiter, keys that
  // contain it after the prefix are rolled up into common prefixes. Keys and
  // prefixes together count against max_keys.
  Result<ListV2Page> List(const ListV2Request& request);

  // The pools' usage (BlockStore::Usage) with what deduplication saved:
  // the bytes the layouts name beyond their shared blocks' own.
  Result<std::vector<PoolUsage>> Usage();

  MetaStore& meta() { return meta_; }
  BlockStore& blocks() { return blocks_; }
  BlockService& service() { return *service_; }
  BlockCache* cache() { return cache_; }
  Reclaimer& reclaimer() { return *reclaimer_; }
  // Stream prefetch for readers (optional; must outlive its use here).
  void set_prefetcher(Prefetcher* p) { prefetch_ = p; }
  Prefetcher* prefetcher() { return prefetch_; }
  const ObjectStoreOptions& options() const { return options_; }

 private:
  MetaStore& meta_;
  BlockStore& blocks_;
  std::unique_ptr<LocalBlockService> local_;
  BlockService* service_;
  ObjectStoreOptions options_;
  BlockCache* cache_;
  L3Cache* l3_ = nullptr;
  Stager* stager_ = nullptr;
  AccessClock* access_ = nullptr;
  PoolChooser choose_pool_;
  std::string PoolFor(const std::string& bucket, const std::string& key, uint64_t size) const;
  Prefetcher* prefetch_ = nullptr;
  std::unique_ptr<Reclaimer> reclaimer_;
};

// S3's rules for CompleteMultipartUpload's part list against the upload:
// at least one part, numbers strictly ascending, each uploaded with the
// named ETag, every part but the last at least `min_part_size` bytes. On a
// violation returns false and sets the S3 error code (InvalidPartOrder,
// InvalidPart, EntityTooSmall) and a message naming the part.
bool CheckCompletion(const UploadInfo& upload, const std::vector<CompletedPart>& parts, uint64_t min_part_size,
                     std::string* code, std::string* message);

inline constexpr uint64_t kMinPartSize = 5ull << 20;  // S3's 5 MiB
inline constexpr uint32_t kMaxPartNumber = 10000;

}  // namespace aq::store
