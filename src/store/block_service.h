// Where an ObjectStore's blocks are written and read: on this node
// (LocalBlockService: the node's pools, through its RAM and L3 caches) or across a
// cluster (cluster::ClusterBlockService: replicas on several nodes).
//
// Thread safety: implementations may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "store/block_cache.h"
#include "store/block_store.h"
#include "store/l3_cache.h"
#include "store/meta_store.h"

namespace aq::store {

// The bytes of a block a read will take: offset in the block, length.
struct BlockSpan {
  uint64_t offset = 0, length = 0;
};

class BlockService {
 public:
  virtual ~BlockService() = default;
  // Stores a new block of an object in `bucket` durably (every replica)
  // and returns its reference.
  virtual Result<BlockRef> Write(const std::string& pool, std::string_view data, const std::string& bucket) = 0;
  // The whole block, verified against its checksum.
  virtual Result<std::shared_ptr<const std::string>> Read(const BlockRef& ref) = 0;
  // Removes the block (every replica); a missing block is not an error.
  virtual Status Remove(const BlockRef& ref) = 0;
  // The writer of `blocks` is done with them (its layout committed, or it
  // gave up): ends the holds Write took on shared (dedup) blocks.
  virtual void Unhold(const std::vector<BlockRef>& /*blocks*/) {}
  // Whether the block can be read now, as far as can be told without
  // reading it (a holder is up, the file exists): checked before a response
  // is promised, so that a client gets an error instead of a cut body.
  virtual bool Available(const BlockRef&) { return true; }
};

// The node's own pools; reads through the RAM cache when there is one, and
// blocks of slow (HDD) pools through the L3 cache when there is one: RAM,
// then L3, then the pool. A block RAM does not keep (refused, or evicted
// later) is offered to L3.
class LocalBlockService final : public BlockService {
 public:
  LocalBlockService(BlockStore& blocks, BlockCache* cache, L3Cache* l3 = nullptr)
      : blocks_(blocks), cache_(cache), l3_(l3) {}
  Result<BlockRef> Write(const std::string& pool, std::string_view data, const std::string&) override {
    return blocks_.Write(pool, data);
  }
  Result<std::shared_ptr<const std::string>> Read(const BlockRef& ref) override {
    if (cache_ != nullptr) {
      if (auto hit = cache_->Get(ref.id)) return hit;
    }
    const bool slow = l3_ != nullptr && blocks_.IsSlow(ref.pool);
    if (slow) {
      if (auto hit = l3_->Get(ref)) {
        Keep(ref.id, hit, true);
        return hit;
      }
    }
    auto bytes = AQ_TRY(blocks_.Read(ref));
    auto block = std::make_shared<const std::string>(std::move(bytes));
    Keep(ref.id, block, slow);
    return block;
  }
  void Unhold(const std::vector<BlockRef>& blocks) override { blocks_.Unhold(blocks); }
  Status Remove(const BlockRef& ref) override {
    if (cache_ != nullptr) cache_->Erase(ref.id);
    if (l3_ != nullptr) l3_->Erase(ref.id);
    return blocks_.Remove(ref);
  }
  bool Available(const BlockRef& ref) override {
    return (cache_ != nullptr && cache_->Contains(ref.id)) || blocks_.Has(ref);
  }
  BlockStore& store() { return blocks_; }
  BlockCache* cache() { return cache_; }
  L3Cache* l3() { return l3_; }

 private:
  // RAM's policy decides; what it refuses or pushes out goes down to L3.
  void Keep(const std::string& id, const std::shared_ptr<const std::string>& block, bool slow) {
    BlockCache::Evicted evicted;
    const bool kept = cache_ != nullptr && cache_->Put(id, block, slow, l3_ != nullptr ? &evicted : nullptr);
    if (l3_ == nullptr) return;
    if (slow && !kept) l3_->Offer(id, block);
    for (auto& [victim, bytes] : evicted) l3_->Offer(victim, std::move(bytes));
  }

  BlockStore& blocks_;
  BlockCache* cache_;
  L3Cache* l3_;
};

}  // namespace aq::store
