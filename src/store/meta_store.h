// The storage node's namespace: buckets, objects, and each object's layout
// (the list of immutable blocks holding its bytes). A write stores new
// blocks first and then switches the object's layout in one metadata
// transaction, so a reader sees the old or the new object, never a mix, and
// anything keyed by block id (caches) never goes stale.
//
// MetaStore is the seam between the node and the engine that keeps this
// durable: SQLite for the embedded single node (OpenSqliteMetaStore); a
// cluster puts the same records in etcd.
//
// Thread safety: every MetaStore method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace aq::store {

// A block: immutable once written, named by a random 128-bit id (hex).
struct BlockRef {
  std::string id;
  uint64_t size = 0;
  uint32_t crc32c = 0;  // of the block's bytes
  std::string pool;     // where it lives
  // In a cluster: the nodes holding a replica (ids). Empty on a single node.
  // Of an erasure-coded block: the holder of each fragment, in order.
  std::vector<std::string> nodes;
  // Erasure-coded (ec_k > 0): ec_k data and ec_m parity fragments of
  // FragmentSize() bytes, fragment i stored on nodes[i] as block
  // FragmentId(id, i) with checksum fragment_crcs[i] (cluster only).
  uint8_t ec_k = 0, ec_m = 0;
  std::vector<uint32_t> fragment_crcs;
  bool operator==(const BlockRef&) const = default;

  bool erasure_coded() const { return ec_k > 0; }
  uint64_t FragmentSize() const { return ec_k == 0 ? size : (size + ec_k - 1) / ec_k; }
};

// The id fragment `i` of block `id` coded K+M is stored under: another
// 128-bit id, distinct from the block's, from its other fragments' and from
// its fragments under another scheme (re-protection writes those beside).
std::string FragmentId(const std::string& id, int i, int k, int m);
// Fragment `i` of an erasure-coded block as a block of its own (its id,
// size, checksum, pool and holder).
BlockRef FragmentRef(const BlockRef& block, int i);
// What each holder of `block` stores: the block itself on every replica
// holder, or one fragment per holder. (node, the block as stored there).
std::vector<std::pair<std::string, BlockRef>> StoredPieces(const BlockRef& block);

// S3's checksum of an object (x-amz-checksum-*): the algorithm (crc32,
// crc32c, crc64nvme, sha1, sha256), its base64 value ("-N" after it for a
// COMPOSITE one: the checksum of the N parts' checksums), its type
// (FULL_OBJECT or COMPOSITE), and for a COMPOSITE one each part's value.
struct ObjectChecksum {
  std::string algorithm, value, type;
  std::vector<std::string> parts;
  bool empty() const { return algorithm.empty(); }
  bool operator==(const ObjectChecksum&) const = default;
};

// What an object carries besides its bytes and layout.
struct ObjectAttrs {
  // The headers a client stored with it and gets back on GET/HEAD:
  // content-type, content-encoding, content-disposition, content-language,
  // cache-control, expires and x-amz-meta-* (names lower case).
  std::map<std::string, std::string> headers;
  std::vector<uint64_t> part_sizes;  // a multipart object's parts, in order (GET ?partNumber=)
  std::string upload_id;             // the multipart upload it was completed from
  std::string write_id;              // unique per write: tells whether an unanswered commit happened
  ObjectChecksum checksum;
  bool operator==(const ObjectAttrs&) const = default;
};
std::string AttrsToJson(const ObjectAttrs& attrs);
Result<ObjectAttrs> AttrsFromJson(const std::string& json);  // "" = none

// S3's conditional writes (PUT and CompleteMultipartUpload): checked by the
// commit inside its transaction, so of two writers racing on one key
// exactly one can win. `absent`: If-None-Match: * (the key must not exist);
// `etag`: If-Match (the key must exist with that ETag, quotes included).
// A condition that does not hold fails the commit as AlreadyExists
// (Subject kObject) when the key exists, NotFound (kObject) when it does not.
struct WriteCondition {
  bool absent = false;
  std::string etag;
  bool none() const { return !absent && etag.empty(); }
};
// Whether `current` (nullptr: the key does not exist) meets the condition.
Status CheckWriteCondition(const WriteCondition& c, const std::string& key, const std::string* current_etag);

struct ObjectMeta {
  std::string bucket, key;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  std::string etag;         // S3's ETag (MD5 of the bytes, or of the parts for multipart)
  uint64_t block_size = 0;  // the node's block size when written; blocks are at most this (a
                            // multipart object's parts each end with a shorter block)
  uint64_t version = 0;     // increases with every write of the key (set by the store)
  std::vector<BlockRef> blocks;
  ObjectAttrs attrs;
  WriteCondition condition;  // PutObject and CompleteUpload check it; never stored
};

// One uploaded part of a multipart upload: its bytes are already in blocks,
// not yet part of any object.
struct PartMeta {
  uint32_t number = 0;  // 1..10000
  uint64_t size = 0;
  std::string etag;  // MD5 of the part's bytes, quoted
  int64_t mtime_ns = 0;
  std::vector<BlockRef> blocks;
  std::string checksum;  // base64, in the upload's checksum algorithm ("" when it has none)
};

// A multipart upload in progress.
struct UploadInfo {
  std::string id, bucket, key;
  int64_t created_ns = 0;
  std::map<std::string, std::string> headers;  // stored with the object on completion
  std::vector<PartMeta> parts;                 // sorted by number (GetUpload only)
};

// A part as CompleteMultipartUpload names it.
struct CompletedPart {
  uint32_t number = 0;
  std::string etag;
};

struct BucketInfo {
  std::string name;
  int64_t created_ns = 0;
};

struct ListRequest {
  std::string bucket, prefix;
  std::string start_after;  // keys strictly greater than this
  uint32_t max_keys = 1000;
};

struct ListPage {
  std::vector<ObjectMeta> objects;  // without their blocks, sorted by key
  bool truncated = false;           // more keys follow the last one
};

struct AccessTime {
  std::string bucket, key;
  int64_t atime_ns = 0;
};
// "bucket/key": bucket names hold no '/', so the pair is unambiguous.
inline std::string AccessKey(const std::string& bucket, const std::string& key) { return bucket + "/" + key; }

class MetaStore {
 public:
  virtual ~MetaStore() = default;

  // AlreadyExists if it does; InvalidArgument for names S3 would refuse.
  virtual Status CreateBucket(const std::string& name) = 0;
  virtual Result<std::vector<BucketInfo>> ListBuckets() = 0;
  // NotFound if missing; InvalidArgument ("not empty") while objects remain.
  virtual Status DeleteBucket(const std::string& name) = 0;

  // NotFound if the bucket or the key is missing (the subject says which).
  virtual Result<ObjectMeta> GetObject(const std::string& bucket, const std::string& key) = 0;
  // Creates or replaces the object in one transaction and returns the blocks
  // of the layout it replaced, which the caller may now delete. The stored
  // version is the previous one plus one (returned in `version` via Get).
  // When the engine cannot tell whether the commit happened (its service
  // did not answer), it finds out by reading back attrs.write_id; if even
  // that fails the error is kUnavailable and the caller must keep the new
  // blocks (they may be referenced). kConflict: definitely not committed.
  virtual Result<std::vector<BlockRef>> PutObject(const ObjectMeta& object) = 0;
  // Removes the object; returns its blocks. NotFound if missing.
  virtual Result<std::vector<BlockRef>> DeleteObject(const std::string& bucket, const std::string& key) = 0;
  virtual Result<ListPage> ListObjects(const ListRequest& request) = 0;

  // Multipart uploads. An upload's parts are stored (blocks + a part
  // record) as they arrive; completing switches the object to the
  // concatenation of the named parts in one transaction.
  //
  // Records a new upload; the bucket must exist. `upload.id` is the caller's
  // (unique, random).
  virtual Status CreateUpload(const UploadInfo& upload) = 0;
  // The upload and its parts (with their blocks). NotFound if no such upload.
  virtual Result<UploadInfo> GetUpload(const std::string& upload_id) = 0;
  // Uploads in progress in a bucket, oldest first, without their parts.
  virtual Result<std::vector<UploadInfo>> ListUploads(const std::string& bucket) = 0;
  // Records (or replaces) a part; returns the blocks of the part it replaced.
  // NotFound if the upload is gone (completed or aborted meanwhile).
  virtual Result<std::vector<BlockRef>> PutPart(const std::string& upload_id, const PartMeta& part) = 0;
  // In one transaction: checks that every named part still exists with the
  // named ETag (else InvalidArgument "part N ..."), writes `object` (its size
  // and blocks are replaced by the parts' concatenation; its other fields
  // are kept) and removes the upload. Returns the blocks now unreferenced:
  // those of the object's previous layout and of parts left out.
  virtual Result<std::vector<BlockRef>> CompleteUpload(const std::string& upload_id,
                                                       const std::vector<CompletedPart>& parts,
                                                       const ObjectMeta& object) = 0;
  // Removes the upload; returns its parts' blocks. NotFound if missing.
  virtual Result<std::vector<BlockRef>> AbortUpload(const std::string& upload_id) = 0;

  // Replaces the object's block list (same bytes, replicas moved: repair,
  // rebalancing) if the object is still at `object.version`; false when it
  // changed meanwhile (a new write wins; the caller's copies are orphans).
  // The version moves on.
  virtual Result<bool> UpdateLayout(const ObjectMeta& object) = 0;

  // Every block id an object or an uploaded part refers to (garbage collection).
  virtual Result<std::vector<std::string>> ReferencedBlocks() = 0;

  // Deduplication: a shared block (content-addressed, one file for every
  // layout naming it) is referenced by the layouts themselves, so its count
  // changes in the transaction that switches a layout and cannot drift.
  //
  // Whether an object or an uploaded part names the block (id and pool).
  // kUnsupported where the engine does not index its layouts by block.
  virtual Result<bool> IsReferenced(const BlockRef& /*block*/) {
    return Unsupported("this metadata store does not track shared blocks");
  }
  // Per pool: the shared blocks the layouts name and how often.
  struct SharedUsage {
    std::string pool;
    uint64_t blocks = 0, bytes = 0;                 // distinct shared blocks and their bytes
    uint64_t references = 0, referenced_bytes = 0;  // every naming of one, and the bytes named
  };
  virtual Result<std::vector<SharedUsage>> SharedBlockUsage() { return std::vector<SharedUsage>(); }

  // Small named settings kept with the metadata (tiering policies and the
  // like): NotFound if never set; an empty value removes the setting.
  virtual Result<std::string> GetSetting(const std::string& name) = 0;
  virtual Status PutSetting(const std::string& name, const std::string& value) = 0;
  // Sets `name` to `value` only if its value is still `expected` ("" = not
  // set), in one transaction: false (nothing written) when another writer
  // changed it meanwhile. For read-modify-write of a shared setting.
  virtual Result<bool> SwapSetting(const std::string& name, const std::string& expected, const std::string& value) = 0;

  // Last access times of objects (reads), kept apart from the objects so
  // that recording one never races a write or a layout switch, and written
  // in batches, at most once per object per AccessClock granularity.
  // Recording keeps the later of the stored and the given time; deleting an
  // object forgets its access time.
  virtual Status RecordAccess(const std::vector<AccessTime>& times) = 0;
  // Every recorded access time, by AccessKey(bucket, key).
  virtual Result<std::unordered_map<std::string, int64_t>> AccessTimes() = 0;
};

// Metadata in SQLite at `path` (WAL journal, synchronous=FULL: a committed
// put survives a crash). Creates the schema on first use.
Result<std::unique_ptr<MetaStore>> OpenSqliteMetaStore(const std::string& path);

// Calls `fn` with every object (with its layout), bucket by bucket, key
// order; objects deleted meanwhile are skipped. Stops at the first error
// `fn` returns, or when `stop` (may be null) becomes true.
Status ForEachObject(MetaStore& meta, const std::function<Status(ObjectMeta)>& fn,
                     const std::atomic<bool>* stop = nullptr);

// BlockRef lists as JSON (how the cluster's metadata stores layouts).
std::string BlocksToJson(const std::vector<BlockRef>& blocks);
Result<std::vector<BlockRef>> BlocksFromJson(const std::string& json);

// S3's bucket naming rules: 3-63 characters of a-z, 0-9, '.', '-', starting
// and ending with a letter or digit, no "..", not formatted as an IP address,
// no "xn--" prefix or "-s3alias" suffix. InvalidArgument (subject kBucket).
Status CheckBucketName(const std::string& name);
// Object keys: 1-1024 bytes of valid UTF-8 without NUL or other control
// characters than TAB, LF and CR (so every listing is valid XML 1.0), and no
// "." or ".." path segment (a key must never name a place outside its
// bucket). InvalidArgument (subject kObject); over 1024 bytes kUnsupported.
Status CheckObjectKey(const std::string& key);

}  // namespace aq::store
