// Blocks on disk: each block of an object is one immutable file in a pool
// (a directory on a device, with its media kind), written under a temporary
// name, fsynced, then renamed into place, and read back only after its
// checksum matches: a block corrupted on disk is an error naming the block,
// pool and file, never silent bad bytes.
//
// On-disk block file: a header, then the data, plain or compressed by the
// pool's policy (block_format.h). Reads return the block's own bytes
// whatever form its file has.
//
// Layout: <pool>/blocks/<first two hex digits of the id>/<id>. Temporary
// files end in ".tmp"; CollectGarbage removes them and every block no
// object refers to (a crash between writing blocks and committing the
// layout leaves such orphans).
//
// Deduplication (a pool's `dedup` policy): a block written there is named
// by its content (ContentId: SHA-256, 64 hex digits), so equal blocks of
// any objects are one file. Such a file is shared: the metadata's layouts
// are its references, and Remove takes it away only when none names it
// (set_reference_check) and no writer holds it. A writer holds each shared
// block it wrote or found from Write until its layout committed or it gave
// up (Unhold): removal between "the file is there" and the commit naming it
// would lose the block.
//
// Thread safety: all methods may be called concurrently; blocks are
// immutable and random ids never repeat, so writers share no file but a
// shared block's, whose writes and removal are serialized by its id.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <semaphore>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "io/file_system.h"
#include "store/block_format.h"
#include "store/meta_store.h"

namespace aq::store {

enum class Media { kSsd, kHdd };
std::string_view MediaName(Media m);  // "ssd", "hdd"
std::optional<Media> ParseMedia(std::string_view name);

struct PoolConfig {
  std::string name;  // "default", "ssd", ...
  std::string path;
  Media media = Media::kSsd;
  bool direct = false;        // read blocks with O_DIRECT (past the page cache)
  double read_latency_s = 0;  // added to every block read: emulates a slower device
  // With a latency: at most this many reads wait it at once, the others
  // queue (a disk's heads serve one seek at a time; 0: no limit).
  int spindles = 0;
  // Inline compression of the blocks written here (blocks that do not
  // shrink by compression.min_saving are stored plain).
  Compression compression;
  // Content-addressed blocks: equal blocks are stored once.
  bool dedup = false;
};

// "NAME=PATH[,media=ssd|hdd][,direct][,latency=DURATION[,spindles=N]][,compress=lz4|zstd[:LEVEL]]
// [,min-saving=PERCENT][,dedup]" (DURATION: 8ms, 500us, 0.01s)
Result<PoolConfig> ParsePool(std::string_view spec);

// The one rule for which pool holds `media`: the pool name
// that most members have with that media, ties to the first seen in the
// members' order; "" if none. A single node is a cluster of one member:
// its first pool of that media.
std::string PoolForMedia(const std::vector<std::vector<PoolConfig>>& members, Media media);
inline std::string PoolForMedia(const std::vector<PoolConfig>& pools, Media media) {
  return PoolForMedia(std::vector<std::vector<PoolConfig>>{pools}, media);
}

// A node publishes its pools (name, media, path) in its metadata at every
// start: tools check a tiering policy's pool against them, and a restart
// without --pool reuses them.
inline constexpr const char* kNodePoolsSetting = "node/pools";
Status PublishPools(MetaStore& meta, const std::vector<PoolConfig>& pools);
// The published pools (empty when the node never started); Corruption when malformed.
Result<std::vector<PoolConfig>> PublishedPools(MetaStore& meta);

struct GcReport {
  uint64_t blocks_seen = 0, orphans_removed = 0, temporaries_removed = 0, bytes_freed = 0;
};

struct PoolUsage {
  std::string name;
  uint64_t blocks = 0;
  uint64_t bytes = 0;          // physical: the block files' sizes on disk
  uint64_t logical_bytes = 0;  // the blocks' own bytes (before compression)
  uint64_t compressed_blocks = 0;
  uint64_t shared_blocks = 0;  // content-addressed (dedup) block files
  // The bytes the objects' layouts name beyond the shared blocks' own:
  // what deduplication saved (known to the metadata: ObjectStore::Usage).
  uint64_t dedup_saved_bytes = 0;
  // What the objects hold in this pool: each shared block counted once per reference.
  uint64_t referenced_bytes() const { return logical_bytes + dedup_saved_bytes; }
  // bytes / referenced_bytes() (1 when empty): under 1 when compression or
  // deduplication saves.
  double ratio() const {
    const uint64_t logical = referenced_bytes();
    return logical > 0 ? static_cast<double>(bytes) / static_cast<double>(logical) : 1.0;
  }
};

// What a pool's deduplication did since the store opened.
struct DedupStats {
  std::string pool;
  uint64_t written = 0;      // shared blocks written (content not stored yet)
  uint64_t found = 0;        // ... found stored and verified: not written again
  uint64_t found_bytes = 0;  // the bytes those would have written
  uint64_t repaired = 0;     // found damaged and rewritten from the writer's bytes
  uint64_t kept = 0;         // removals refused: a layout still names the block, or a writer holds it
  double hash_seconds = 0;   // CPU time naming blocks by content
};

// What a pool's compression did since the store opened.
struct CompressionStats {
  std::string pool;
  uint64_t compressed = 0, plain = 0;                   // blocks written each way under a compressing policy
  uint64_t logical_in = 0, stored_out = 0;              // of the compressed ones
  uint64_t decompressed = 0;                            // blocks read back through the codec
  double compress_seconds = 0, decompress_seconds = 0;  // CPU time of the threads that did it
};

class BlockStore {
 public:
  static Result<std::unique_ptr<BlockStore>> Open(io::FileSystem& fs, std::vector<PoolConfig> pools);

  // Writes a new block of `data` into the pool (the first pool if empty)
  // and makes it durable before returning its reference. In a dedup pool:
  // the block is named by its content, found (and verified) when stored
  // already, and held for the caller, who must Unhold it once its layout
  // committed or was given up.
  Result<BlockRef> Write(const std::string& pool, std::string_view data);
  // Ends the holds Write took on the shared blocks among `blocks` (others
  // are ignored), one per Write.
  void Unhold(const std::vector<BlockRef>& blocks);
  // Whether a layout names a shared block: Remove asks before it takes one
  // away, and keeps the block when the answer is yes or an error, or when
  // no check is set. Set while nothing removes (the object store sets its
  // metadata's and clears it when it goes).
  using ReferenceCheck = std::function<Result<bool>(const BlockRef&)>;
  void set_reference_check(ReferenceCheck check) { referenced_ = std::move(check); }
  // The same with the id given (a replica of a block named elsewhere);
  // InvalidArgument unless it is a block id.
  Result<BlockRef> WriteWithId(const std::string& id, const std::string& pool, std::string_view data);
  // Whether this store holds the block's file (not read or verified).
  bool Has(const BlockRef& ref) const;
  // The block's bytes [offset, offset + n) after checking the whole block's
  // CRC32C against the file's and the reference's. kCorruption on mismatch.
  Result<std::string> Read(const BlockRef& ref, uint64_t offset = 0, uint64_t n = UINT64_MAX);
  // For same-host reads (server/same_host.h): a descriptor of the block's
  // file, open read-only, and where the block's bytes start in it, when the
  // block is stored plain in a pool whose files a reader on this machine may
  // read itself: on the machine's own file system, not on slow media (those
  // reads go through L3), not read past the page cache (`direct`), no
  // emulated latency. nullopt otherwise (the block is read through Read).
  // Only the header is checked (its magic, checksum and the reference's size
  // and CRC); the reader checks the bytes against ref.crc32c.
  struct PlainFile {
    int fd = -1;  // the caller's to close
    uint64_t data_offset = 0;
  };
  Result<std::optional<PlainFile>> OpenPlain(const BlockRef& ref);
  // How the block's file stores it (its header, not verified against the
  // data) and the file's size: for tools showing what compression did.
  struct StoredForm {
    BlockHeader header;
    uint64_t file_bytes = 0;
    std::string Describe() const;  // "plain", "lz4 0.33", "zstd+delta 0.48" (stored / logical bytes)
  };
  Result<StoredForm> Stored(const BlockRef& ref) const;
  // Removes a block file (missing is fine: removal is idempotent). A
  // shared block stays while a writer holds it or a layout names it.
  Status Remove(const BlockRef& ref);
  // Moves a damaged block file aside, out of the way of a rebuilt copy and
  // of garbage collection, into its pool's quarantine/ folder (kept for
  // salvage until an operator removes it). Returns the path it now has.
  Result<std::string> Quarantine(const BlockRef& ref);
  // What the pools' quarantine folders hold: (path, bytes) of each file.
  std::vector<std::pair<std::string, uint64_t>> Quarantined() const;
  // Removes one file Quarantine set aside (a path it returned); refuses
  // any other path.
  Status DropQuarantined(const std::string& path);
  // Removes temporaries and blocks whose ids are not in `referenced`.
  // REQUIRES: no write is in progress (run it before serving).
  Result<GcReport> CollectGarbage(const std::vector<std::string>& referenced);
  // Per pool: blocks, physical and logical bytes. Reads the header of each
  // block file it has not seen before (once per process), so the first
  // call after a start costs one small read per block.
  Result<std::vector<PoolUsage>> Usage();
  std::vector<CompressionStats> CompressionCounters() const;
  std::vector<DedupStats> DedupCounters() const;
  // The ids of every block in every pool (or in `only_pool`), sorted.
  Result<std::vector<std::string>> List(const std::string& only_pool = "");

  const std::vector<PoolConfig>& pools() const { return pools_; }
  // Whether the pool is on slow media (hdd): its blocks go through L3.
  bool IsSlow(const std::string& pool) const;
  std::string PathOf(const BlockRef& ref) const;

 private:
  BlockStore(io::FileSystem& fs, std::vector<PoolConfig> pools);
  Result<const PoolConfig*> Pool(const std::string& name) const;
  void CountDecode(const BlockHeader& h, const PoolConfig* pool, double cpu_t0);
  Result<BlockRef> WriteFile(const std::string& id, const PoolConfig* pool, std::string_view data, uint32_t crc);
  Result<BlockRef> WriteShared(const PoolConfig* pool, std::string_view data);
  Status RemoveShared(const BlockRef& ref);
  // Writes and removals of one shared block are serialized by its id's stripe.
  Mutex& Stripe(const std::string& id) { return stripes_[std::hash<std::string>()(id) % stripes_.size()]; }
  io::FileSystem& fs_;
  std::vector<PoolConfig> pools_;
  std::vector<std::unique_ptr<std::counting_semaphore<>>> spindles_;  // per pool, null: no limit
  // What Usage knows of each block file it has seen, by pool and id.
  struct KnownBlock {
    uint64_t logical = 0;
    bool compressed = false;
  };
  mutable Mutex usage_mu_;
  std::vector<std::unordered_map<std::string, KnownBlock>> logical_ AQ_GUARDED_BY(usage_mu_);
  mutable Mutex stats_mu_;
  std::vector<CompressionStats> compression_ AQ_GUARDED_BY(stats_mu_);
  std::vector<DedupStats> dedup_ AQ_GUARDED_BY(stats_mu_);
  std::array<Mutex, 64> stripes_;
  mutable Mutex holds_mu_;
  std::unordered_map<std::string, int> holds_ AQ_GUARDED_BY(holds_mu_);  // "pool/id" -> writers holding it
  ReferenceCheck referenced_;
};

// A new random block id (128 bits, 32 lowercase hex digits).
std::string NewBlockId();
// The id of a shared block of `data` in a dedup pool: its SHA-256 (64
// lowercase hex digits). OpenSSL's, which uses the CPU's SHA extensions.
std::string ContentId(std::string_view data);
// Whether `id` names a block by its content (ContentId's form).
bool IsContentId(std::string_view id);

}  // namespace aq::store
