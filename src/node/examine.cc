#include "node/examine.h"

#include <fmt/format.h>

#include <memory>
#include <optional>

#include "cluster/etcd_client.h"
#include "cluster/etcd_meta_store.h"
#include "node/metadata.h"
#include "s3/checksum.h"
#include "store/block_store.h"

namespace aq::node {
namespace {

// This node's id in a cluster (its data directory's node-id file), or "".
std::string SelfId(io::FileSystem& fs, const std::string& data) {
  std::string self;
  auto id = fs.OpenRead(io::JoinPath(data, "node-id"), io::AccessHint::kSequential);
  if (!id.ok()) return self;
  self.resize((*id)->size());
  if (!(*id)->ReadAt(0, self.size(), self.data()).ok()) return {};
  while (!self.empty() && (self.back() == '\n' || self.back() == ' ')) self.pop_back();
  return self;
}

}  // namespace

nlohmann::json ObjectExamination::ToJson() const {
  nlohmann::json j = {{"bucket", bucket},          {"key", key},
                      {"size", object.size},       {"etag", object.etag},
                      {"version", object.version}, {"block_size", object.block_size},
                      {"blocks", blocks}};
  const auto& c = object.attrs.checksum;
  if (!c.empty()) {
    j["checksum"] = {{"algorithm", c.algorithm}, {"value", c.value}, {"type", c.type}, {"state", checksum_state}};
  }
  return j;
}

namespace {

// How a piece held here is stored ("plain", "zstd+delta 0.48"), or why that
// cannot be told.
// "plain", "zstd+delta 0.48"; ", shared" after a block named by its
// content (a dedup pool's: other objects may name it too).
std::string StoredAs(const store::BlockStore& blocks, const store::BlockRef& piece) {
  auto form = blocks.Stored(piece);
  if (!form.ok()) return std::string(StatusCodeName(form.status().code()));
  return form->Describe() + (store::IsContentId(piece.id) ? ", shared" : "");
}

// The object's S3 checksum from its bytes, in order: the whole object's for
// FULL_OBJECT, the checksum of the parts' checksums for COMPOSITE.
class ObjectSum {
 public:
  explicit ObjectSum(const store::ObjectMeta& o) : c_(o.attrs.checksum), parts_(o.attrs.part_sizes) {
    if (parts_.empty()) parts_.push_back(o.size);
    sum_ = s3::Checksum::Make(c_.algorithm).value();
  }
  void Update(std::string_view d) {
    while (!d.empty()) {
      if (c_.type == "COMPOSITE" && part_ < parts_.size() && in_part_ == parts_[part_]) NextPart();
      const size_t take = c_.type == "COMPOSITE" && part_ < parts_.size()
                              ? static_cast<size_t>(std::min<uint64_t>(d.size(), parts_[part_] - in_part_))
                              : d.size();
      sum_->Update(d.substr(0, take));
      in_part_ += take;
      d.remove_prefix(take);
    }
  }
  std::string Value() {
    if (c_.type != "COMPOSITE") return sum_->Base64();
    NextPart();
    auto top = s3::Checksum::Make(c_.algorithm).value();
    top->Update(raw_parts_);
    return fmt::format("{}-{}", top->Base64(), part_);
  }

 private:
  void NextPart() {
    raw_parts_ += s3::Base64Decode(sum_->Base64()).value();
    sum_ = s3::Checksum::Make(c_.algorithm).value();
    ++part_;
    in_part_ = 0;
  }
  const store::ObjectChecksum& c_;
  std::vector<uint64_t> parts_;
  std::unique_ptr<s3::Checksum> sum_;
  std::string raw_parts_;
  size_t part_ = 0;
  uint64_t in_part_ = 0;
};

}  // namespace

Result<ObjectExamination> ExamineObject(io::FileSystem& fs, const ExamineOptions& o) {
  const size_t slash = o.object.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == o.object.size()) {
    return InvalidArgument(fmt::format("'{}': expected BUCKET/KEY", o.object));
  }
  ObjectExamination x;
  x.bucket = o.object.substr(0, slash);
  x.key = o.object.substr(slash + 1);
  std::unique_ptr<store::MetaStore> meta;
  std::string self;  // this node's id in a cluster
  if (!o.etcd_url.empty()) {
    meta = cluster::NewEtcdMetaStore(AQ_TRY(cluster::EtcdClient::Connect(o.etcd_url)), kClusterPrefix);
    self = SelfId(fs, o.data);
  } else {
    meta = AQ_TRY(store::OpenSqliteMetaStore(io::JoinPath(o.data, "meta.db")));
  }
  std::vector<store::PoolConfig> pools;
  for (const auto& p : o.pools) pools.push_back(AQ_TRY(store::ParsePool(p)));
  if (pools.empty()) {
    // The pools the node last started with (it records them), else its default.
    if (auto known = store::PublishedPools(*meta); known.ok()) pools = std::move(*known);
  }
  if (pools.empty()) pools.push_back({"default", io::JoinPath(o.data, "pool-default"), store::Media::kSsd});
  std::unique_ptr<store::BlockStore> blocks;
  if (o.etcd_url.empty() || fs.Stat(o.data).ok()) blocks = AQ_TRY(store::BlockStore::Open(fs, pools));
  x.object = AQ_TRY(meta->GetObject(x.bucket, x.key));
  uint64_t offset = 0;
  const bool summed = !x.object.attrs.checksum.empty() && s3::Checksum::Make(x.object.attrs.checksum.algorithm).ok();
  std::optional<ObjectSum> sum;
  if (o.verify && summed) sum.emplace(x.object);
  bool whole = true;  // every block read back here, in order
  for (const auto& b : x.object.blocks) {
    // On a cluster's node, only the pieces (replicas, fragments) this node
    // holds are its to verify.
    std::vector<store::BlockRef> mine;
    if (blocks && b.nodes.empty()) mine.push_back(b);
    nlohmann::json fragments = nlohmann::json::array();
    int index = 0;
    for (const auto& [holder, piece] : store::StoredPieces(b)) {
      const bool at_self = blocks && holder == self;
      if (at_self) mine.push_back(piece);
      if (b.erasure_coded()) {
        fragments.push_back({{"index", index},
                             {"kind", index < b.ec_k ? "data" : "parity"},
                             {"id", piece.id},
                             {"size", piece.size},
                             {"crc32c", fmt::format("{:08x}", piece.crc32c)},
                             {"node", holder},
                             {"path", at_self ? blocks->PathOf(piece) : ""},
                             {"stored", at_self ? StoredAs(*blocks, piece) : ""}});
      }
      ++index;
    }
    const bool here = !mine.empty();
    std::string state = here ? "not checked" : "elsewhere";
    if (o.verify && here) {
      state = "ok";
      bool fed = false;
      for (const auto& piece : mine) {
        auto r = blocks->Read(piece);
        if (!r.ok()) {
          state = std::string(r.status().message());
          ++x.damaged;
          break;
        }
        if (sum && !fed && !b.erasure_coded() && r->size() == b.size) {
          sum->Update(*r);
          fed = true;
        }
      }
      whole = whole && fed;
    } else {
      whole = false;
    }
    nlohmann::json entry = {
        {"offset", offset},
        {"size", b.size},
        {"id", b.id},
        {"crc32c", fmt::format("{:08x}", b.crc32c)},
        {"pool", b.pool},
        {"media", store::MediaName(blocks && blocks->IsSlow(b.pool) ? store::Media::kHdd : store::Media::kSsd)},
        {"nodes", b.nodes},
        {"path", here && !b.erasure_coded() ? blocks->PathOf(mine.front()) : ""},
        {"stored", here && !b.erasure_coded() ? StoredAs(*blocks, mine.front()) : ""},
        {"state", state}};
    if (b.erasure_coded()) {
      entry["ec"] = fmt::format("{}+{}", b.ec_k, b.ec_m);
      entry["fragments"] = std::move(fragments);
    }
    x.blocks.push_back(std::move(entry));
    offset += b.size;
  }
  if (!summed) {
    x.checksum_state = x.object.attrs.checksum.empty() ? "none stored" : "not checked";
  } else if (!sum || !whole) {
    x.checksum_state = "not checked";
  } else if (const std::string got = sum->Value(); got == x.object.attrs.checksum.value) {
    x.checksum_state = "ok";
  } else {
    x.checksum_state = fmt::format("mismatch: the blocks give {}", got);
    x.checksum_mismatch = true;
  }
  return x;
}

}  // namespace aq::node
