#include "cluster/etcd_meta_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "common/log.h"

namespace aq::cluster {
namespace {

using nlohmann::json;
using store::BlockRef;
using store::ObjectMeta;
using store::PartMeta;
using store::UploadInfo;
using Target = Compare::Target;
using Op = Compare::Op;

Status BadRecord(const std::string& key, const std::string& why) {
  return Corruption(fmt::format("etcd record '{}': {}", key, why));
}

class EtcdMetaStore final : public store::MetaStore {
 public:
  EtcdMetaStore(std::shared_ptr<EtcdClient> etcd, std::string prefix) : etcd_(std::move(etcd)), p_(std::move(prefix)) {}

  Status CreateBucket(const std::string& name) override {
    AQ_TRY(store::CheckBucketName(name));
    json v = {{"created_ns", Clock::Real().WallNanos()}};
    auto t = AQ_TRY(etcd_->Txn({{BucketKey(name), "", Target::kCreateRevision, Op::kEqual, 0, ""}},
                               {{TxnOp::Kind::kPut, BucketKey(name), "", v.dump(), 0}}));
    if (!t.succeeded) return AlreadyExists(Subject::kBucket, fmt::format("bucket '{}' exists", name));
    return Status::Ok();
  }

  Result<std::vector<store::BucketInfo>> ListBuckets() override {
    std::vector<store::BucketInfo> out;
    const std::string prefix = p_ + "buckets/";
    for (const auto& kv : AQ_TRY(etcd_->Prefix(prefix))) {
      json v = json::parse(kv.value, nullptr, false);
      out.push_back({kv.key.substr(prefix.size()), v.is_object() ? v.value("created_ns", int64_t{0}) : 0});
    }
    return out;
  }

  Status DeleteBucket(const std::string& name) override {
    auto bucket = AQ_TRY(etcd_->Get(BucketKey(name)));
    if (!bucket) return NotFound(Subject::kBucket, fmt::format("no bucket '{}'", name));
    const std::string objects = ObjectKey(name, "");
    auto some = AQ_TRY(etcd_->Prefix(objects, 1, true));
    if (!some.empty()) return NotEmpty(fmt::format("bucket '{}' is not empty (objects remain)", name));
    if (!AQ_TRY(ListUploads(name)).empty()) {
      return NotEmpty(fmt::format("bucket '{}' is not empty (multipart uploads in progress; abort them)", name));
    }
    // Guarded: no object created in the bucket since the check.
    auto t = AQ_TRY(etcd_->Txn({{BucketKey(name), "", Target::kModRevision, Op::kEqual, bucket->mod_revision, ""},
                                {objects, EtcdClient::PrefixEnd(objects), Target::kCreateRevision, Op::kEqual, 0, ""}},
                               {{TxnOp::Kind::kDelete, BucketKey(name), "", "", 0}}));
    if (!t.succeeded) return NotEmpty(fmt::format("bucket '{}' is not empty (an object arrived)", name));
    return Status::Ok();
  }

  Result<ObjectMeta> GetObject(const std::string& bucket, const std::string& key) override {
    auto t = AQ_TRY(etcd_->Txn({}, {{TxnOp::Kind::kGet, ObjectKey(bucket, key), "", "", 0},
                                    {TxnOp::Kind::kGet, BucketKey(bucket), "", "", 0}}));
    if (t.ranges.size() != 2) return IoError("etcd: unexpected transaction answer");
    if (t.ranges[0].empty()) {
      if (t.ranges[1].empty()) return NotFound(Subject::kBucket, fmt::format("no bucket '{}'", bucket));
      return NotFound(Subject::kObject, fmt::format("no object '{}' in bucket '{}'", key, bucket));
    }
    return ParseObject(bucket, key, t.ranges[0][0]);
  }

  // A conditional write's guard (store::WriteCondition): the condition is
  // checked against the key as it is now, and the transaction then commits
  // only if the key is still so (never created; or unchanged since its
  // ETag was checked). Nothing for an unconditional write.
  Result<std::optional<Compare>> ConditionGuard(const ObjectMeta& o) {
    if (o.condition.none()) return std::optional<Compare>();
    const std::string k = ObjectKey(o.bucket, o.key);
    auto kv = AQ_TRY(etcd_->Get(k));
    if (!kv) {
      AQ_TRY(store::CheckWriteCondition(o.condition, o.key, nullptr));
      return std::optional<Compare>(Compare{k, "", Target::kCreateRevision, Op::kEqual, 0, ""});
    }
    auto current = AQ_TRY(ParseObject(o.bucket, o.key, *kv));
    AQ_TRY(store::CheckWriteCondition(o.condition, o.key, &current.etag));
    return std::optional<Compare>(Compare{k, "", Target::kModRevision, Op::kEqual, kv->mod_revision, ""});
  }

  Result<std::vector<BlockRef>> PutObject(const ObjectMeta& o) override {
    AQ_TRY(store::CheckObjectKey(o.key));
    AQ_TRY(CheckSize(o.size, o.blocks, o.key));
    // A conditional write whose key changed between its check and its
    // transaction checks again (the new state may still meet it).
    for (int attempt = 0;; ++attempt) {
      std::vector<Compare> guard = {{BucketKey(o.bucket), "", Target::kCreateRevision, Op::kGreater, 0, ""}};
      if (auto c = AQ_TRY(ConditionGuard(o))) guard.push_back(*c);
      auto t = etcd_->Txn(guard,
                          {{TxnOp::Kind::kGet, ObjectKey(o.bucket, o.key), "", "", 0},
                           {TxnOp::Kind::kPut, ObjectKey(o.bucket, o.key), "", ObjectJson(o), 0}},
                          {{TxnOp::Kind::kGet, BucketKey(o.bucket), "", "", 0}});
      if (!t.ok()) {
        if (!t.status().retryable() || o.attrs.write_id.empty()) return t.status();
        AQ_TRY(Resolve(o, t.status(), [&](const ObjectMeta& m) { return m.attrs.write_id == o.attrs.write_id; }));
        return std::vector<BlockRef>();  // committed; the replaced layout's blocks are left to garbage collection
      }
      if (t->succeeded) return OldBlocks(*t, 0);
      if (t->ranges.empty() || t->ranges[0].empty() || o.condition.none()) {
        return NotFound(Subject::kBucket, fmt::format("no bucket '{}'", o.bucket));
      }
      if (attempt >= 16) return Conflict(fmt::format("'{}' kept changing under a conditional write", o.key));
    }
  }

  Result<std::vector<BlockRef>> DeleteObject(const std::string& bucket, const std::string& key) override {
    const std::string k = ObjectKey(bucket, key);
    auto t = AQ_TRY(etcd_->Txn({{k, "", Target::kCreateRevision, Op::kGreater, 0, ""}},
                               {{TxnOp::Kind::kGet, k, "", "", 0},
                                {TxnOp::Kind::kDelete, k, "", "", 0},
                                {TxnOp::Kind::kDelete, AccessKeyOf(bucket, key), "", "", 0}},
                               {{TxnOp::Kind::kGet, BucketKey(bucket), "", "", 0}}));
    if (!t.succeeded) {
      if (t.ranges.empty() || t.ranges[0].empty())
        return NotFound(Subject::kBucket, fmt::format("no bucket '{}'", bucket));
      return NotFound(Subject::kObject, fmt::format("no object '{}' in bucket '{}'", key, bucket));
    }
    return OldBlocks(t, 0);
  }

  Result<store::ListPage> ListObjects(const store::ListRequest& r) override {
    if (!AQ_TRY(etcd_->Get(BucketKey(r.bucket))))
      return NotFound(Subject::kBucket, fmt::format("no bucket '{}'", r.bucket));
    store::ListPage page;
    if (r.max_keys == 0) return page;
    const std::string base = ObjectKey(r.bucket, "");
    std::string start = base + r.prefix;
    if (!r.start_after.empty() && r.start_after >= r.prefix) start = base + r.start_after + std::string(1, '\0');
    const std::string end = EtcdClient::PrefixEnd(base + r.prefix);
    if (start >= end) return page;
    auto kvs = AQ_TRY(etcd_->Range(start, end, static_cast<int64_t>(r.max_keys) + 1));
    for (const auto& kv : kvs) {
      if (page.objects.size() == r.max_keys) {
        page.truncated = true;
        break;
      }
      auto m = AQ_TRY(ParseObject(r.bucket, kv.key.substr(base.size()), kv));
      m.blocks.clear();
      page.objects.push_back(std::move(m));
    }
    return page;
  }

  Result<bool> UpdateLayout(const ObjectMeta& o) override {
    AQ_TRY(CheckSize(o.size, o.blocks, o.key));
    const std::string k = ObjectKey(o.bucket, o.key);
    auto t = AQ_TRY(etcd_->Txn({{k, "", Target::kModRevision, Op::kEqual, static_cast<int64_t>(o.version), ""}},
                               {{TxnOp::Kind::kPut, k, "", ObjectJson(o), 0}}));
    return t.succeeded;
  }

  Result<std::vector<std::string>> ReferencedBlocks() override {
    std::vector<std::string> out;
    for (const char* what : {"objects/", "parts/"}) {
      for (const auto& kv : AQ_TRY(etcd_->Prefix(p_ + what))) {
        json v = json::parse(kv.value, nullptr, false);
        if (!v.is_object() || !v.contains("blocks")) return BadRecord(kv.key, "no block list");
        for (const auto& b : AQ_TRY(store::BlocksFromJson(v["blocks"].dump()))) out.push_back(b.id);
      }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  Result<std::string> GetSetting(const std::string& name) override {
    auto kv = AQ_TRY(etcd_->Get(p_ + "settings/" + name));
    if (!kv) return NotFound(fmt::format("no setting '{}'", name));
    return kv->value;
  }

  Status PutSetting(const std::string& name, const std::string& value) override {
    if (value.empty()) return etcd_->Delete(p_ + "settings/" + name).status();
    return etcd_->Put(p_ + "settings/" + name, value);
  }

  Result<bool> SwapSetting(const std::string& name, const std::string& expected, const std::string& value) override {
    const std::string key = p_ + "settings/" + name;
    cluster::Compare c;
    c.key = key;
    if (expected.empty()) {
      c.target = cluster::Compare::Target::kVersion;  // absent
      c.number = 0;
    } else {
      c.target = cluster::Compare::Target::kValue;
      c.value = expected;
    }
    cluster::TxnOp op;
    op.kind = value.empty() ? cluster::TxnOp::Kind::kDelete : cluster::TxnOp::Kind::kPut;
    op.key = key;
    op.value = value;
    return AQ_TRY(etcd_->Txn({c}, {op})).succeeded;
  }

  // One key per object under PREFIX access/, the decimal time: the last
  // recorded wins (nodes record within a granularity of each other).
  Status RecordAccess(const std::vector<store::AccessTime>& times) override {
    // etcd refuses a transaction naming a key twice: one time per object, the latest.
    std::map<std::string, int64_t> latest;
    for (const auto& t : times) {
      auto& v = latest[AccessKeyOf(t.bucket, t.key)];
      v = std::max(v, t.atime_ns);
    }
    constexpr size_t kBatch = 64;  // under etcd's default limit of 128 operations per transaction
    std::vector<TxnOp> puts;
    for (auto it = latest.begin(); it != latest.end();) {
      puts.push_back({TxnOp::Kind::kPut, it->first, "", std::to_string(it->second), 0});
      if (++it == latest.end() || puts.size() == kBatch) {
        AQ_TRY(etcd_->Txn({}, puts));
        puts.clear();
      }
    }
    return Status::Ok();
  }

  Result<std::unordered_map<std::string, int64_t>> AccessTimes() override {
    const std::string prefix = p_ + "access/";
    std::unordered_map<std::string, int64_t> out;
    for (const auto& kv : AQ_TRY(etcd_->Prefix(prefix))) {
      char* end = nullptr;
      const long long ns = std::strtoll(kv.value.c_str(), &end, 10);
      if (kv.value.empty() || end != kv.value.c_str() + kv.value.size()) return BadRecord(kv.key, "not a time");
      out[kv.key.substr(prefix.size())] = ns;
    }
    return out;
  }

  Status CreateUpload(const UploadInfo& u) override {
    AQ_TRY(store::CheckObjectKey(u.key));
    json v = {{"bucket", u.bucket},
              {"key", u.key},
              {"created_ns", u.created_ns != 0 ? u.created_ns : Clock::Real().WallNanos()}};
    if (!u.headers.empty()) v["headers"] = u.headers;
    auto t = AQ_TRY(etcd_->Txn(
        {{BucketKey(u.bucket), "", Target::kCreateRevision, Op::kGreater, 0, ""},
         {UploadKey(u.id), "", Target::kCreateRevision, Op::kEqual, 0, ""}},
        {{TxnOp::Kind::kPut, UploadKey(u.id), "", v.dump(-1, ' ', false, json::error_handler_t::replace), 0}},
        {{TxnOp::Kind::kGet, BucketKey(u.bucket), "", "", 0}}));
    if (!t.succeeded) {
      if (t.ranges.empty() || t.ranges[0].empty())
        return NotFound(Subject::kBucket, fmt::format("no bucket '{}'", u.bucket));
      return AlreadyExists(Subject::kUpload, "upload id " + u.id + " exists");
    }
    return Status::Ok();
  }

  Result<UploadInfo> GetUpload(const std::string& id) override {
    auto r = AQ_TRY(GetUploadRecords(id));
    return r.info;
  }

  Result<std::vector<UploadInfo>> ListUploads(const std::string& bucket) override {
    if (!AQ_TRY(etcd_->Get(BucketKey(bucket))))
      return NotFound(Subject::kBucket, fmt::format("no bucket '{}'", bucket));
    std::vector<UploadInfo> out;
    const std::string prefix = p_ + "uploads/";
    for (const auto& kv : AQ_TRY(etcd_->Prefix(prefix))) {
      UploadInfo u = AQ_TRY(ParseUpload(kv.key.substr(prefix.size()), kv));
      if (u.bucket == bucket) out.push_back(std::move(u));
    }
    std::sort(out.begin(), out.end(), [](const UploadInfo& a, const UploadInfo& b) {
      return std::tie(a.key, a.created_ns) < std::tie(b.key, b.created_ns);
    });
    return out;
  }

  Result<std::vector<BlockRef>> PutPart(const std::string& id, const PartMeta& p) override {
    AQ_TRY(CheckSize(p.size, p.blocks, fmt::format("part {}", p.number)));
    json v = {{"size", p.size},
              {"etag", p.etag},
              {"mtime_ns", p.mtime_ns != 0 ? p.mtime_ns : Clock::Real().WallNanos()},
              {"blocks", json::parse(store::BlocksToJson(p.blocks))}};
    if (!p.checksum.empty()) v["checksum"] = p.checksum;
    auto t = AQ_TRY(etcd_->Txn({{UploadKey(id), "", Target::kCreateRevision, Op::kGreater, 0, ""}},
                               {{TxnOp::Kind::kGet, PartKey(id, p.number), "", "", 0},
                                {TxnOp::Kind::kPut, PartKey(id, p.number), "", v.dump(), 0}}));
    if (!t.succeeded) return NotFound(Subject::kUpload, fmt::format("no multipart upload '{}'", id));
    return OldBlocks(t, 0);
  }

  Result<std::vector<BlockRef>> CompleteUpload(const std::string& id, const std::vector<store::CompletedPart>& named,
                                               const ObjectMeta& object) override {
    auto u = AQ_TRY(GetUploadRecords(id));
    if (u.info.bucket != object.bucket || u.info.key != object.key) {
      return InvalidArgument(fmt::format("upload {} is for '{}/{}', not '{}/{}'", id, u.info.bucket, u.info.key,
                                         object.bucket, object.key));
    }
    ObjectMeta o = object;
    o.size = 0;
    o.blocks.clear();
    o.attrs.part_sizes.clear();
    std::vector<Compare> guard = {{UploadKey(id), "", Target::kModRevision, Op::kEqual, u.upload_revision, ""},
                                  {BucketKey(o.bucket), "", Target::kCreateRevision, Op::kGreater, 0, ""}};
    std::vector<BlockRef> freed;
    for (const auto& c : named) {
      auto it = std::find_if(u.info.parts.begin(), u.info.parts.end(),
                             [&](const PartMeta& p) { return p.number == c.number; });
      if (it == u.info.parts.end()) return InvalidArgument(fmt::format("part {} was not uploaded", c.number));
      if (it->etag != c.etag) {
        return InvalidArgument(fmt::format("part {} has ETag {}, not {}", c.number, it->etag, c.etag));
      }
      o.size += it->size;
      o.attrs.part_sizes.push_back(it->size);
      o.blocks.insert(o.blocks.end(), it->blocks.begin(), it->blocks.end());
      // The part must be the one checked when the transaction commits.
      guard.push_back({PartKey(id, c.number), "", Target::kModRevision, Op::kEqual,
                       u.part_revisions[static_cast<size_t>(it - u.info.parts.begin())], ""});
    }
    for (const auto& p : u.info.parts) {
      if (std::none_of(named.begin(), named.end(), [&](const auto& c) { return c.number == p.number; })) {
        freed.insert(freed.end(), p.blocks.begin(), p.blocks.end());
      }
    }
    AQ_TRY(CheckSize(o.size, o.blocks, o.key));
    const std::string parts = PartPrefix(id);
    o.attrs.upload_id = id;
    // A condition that no longer holds at the transaction fails it: the
    // client completes again, and is then told which.
    if (auto c = AQ_TRY(ConditionGuard(o))) guard.push_back(*c);
    auto r = etcd_->Txn(guard, {{TxnOp::Kind::kGet, ObjectKey(o.bucket, o.key), "", "", 0},
                                {TxnOp::Kind::kPut, ObjectKey(o.bucket, o.key), "", ObjectJson(o), 0},
                                {TxnOp::Kind::kDelete, UploadKey(id), "", "", 0},
                                {TxnOp::Kind::kDelete, parts, EtcdClient::PrefixEnd(parts), "", 0}});
    if (!r.ok()) {
      if (!r.status().retryable()) return r.status();
      AQ_TRY(Resolve(o, r.status(), [&](const ObjectMeta& m) { return m.attrs.upload_id == id; }));
      return std::vector<BlockRef>();  // committed; left-out parts and the old layout go to garbage collection
    }
    const TxnResult& t = *r;
    if (!t.succeeded) {
      if (!o.condition.none()) {
        return Conflict(fmt::format("upload {} or '{}' changed while completing (a concurrent write)", id, o.key));
      }
      return InvalidArgument(
          fmt::format("upload {} changed while completing (a part was replaced or it was aborted)", id));
    }
    auto old = AQ_TRY(OldBlocks(t, 0));
    freed.insert(freed.end(), old.begin(), old.end());
    return freed;
  }

  Result<std::vector<BlockRef>> AbortUpload(const std::string& id) override {
    const std::string parts = PartPrefix(id);
    auto t = AQ_TRY(etcd_->Txn({{UploadKey(id), "", Target::kCreateRevision, Op::kGreater, 0, ""}},
                               {{TxnOp::Kind::kGet, parts, EtcdClient::PrefixEnd(parts), "", 0},
                                {TxnOp::Kind::kDelete, parts, EtcdClient::PrefixEnd(parts), "", 0},
                                {TxnOp::Kind::kDelete, UploadKey(id), "", "", 0}}));
    if (!t.succeeded) return NotFound(Subject::kUpload, fmt::format("no multipart upload '{}'", id));
    std::vector<BlockRef> freed;
    for (const auto& kv : t.ranges.at(0)) {
      auto p = AQ_TRY(ParsePart(kv));
      freed.insert(freed.end(), p.blocks.begin(), p.blocks.end());
    }
    return freed;
  }

 private:
  // A commit etcd did not answer: read back whether it happened, for up to
  // 20 s (plus one read's timeout). OK when `ours` holds for the stored object; kConflict when it
  // definitely did not commit; kUnavailable (outcome still unknown) when
  // etcd cannot be read either.
  Status Resolve(const ObjectMeta& o, const Status& why, const std::function<bool(const ObjectMeta&)>& ours) {
    Status last = why;
    const double deadline = Clock::Real().Now() + 20;
    for (int attempt = 0; Clock::Real().Now() < deadline; ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));  // etcd recovering
      auto kv = etcd_->Get(ObjectKey(o.bucket, o.key));
      if (!kv.ok()) {
        last = kv.status();
        continue;
      }
      if (!*kv) return Conflict(fmt::format("'{}/{}' was not committed ({})", o.bucket, o.key, why.message()));
      auto m = ParseObject(o.bucket, o.key, **kv);
      if (m.ok() && ours(*m)) {
        log::warn("etcd did not answer the commit of '{}/{}' ({}); read back: it was committed", o.bucket, o.key,
                  why.message());
        return Status::Ok();
      }
      return Conflict(fmt::format("'{}/{}' was not committed ({})", o.bucket, o.key, why.message()));
    }
    return Unavailable(fmt::format("'{}/{}': the commit's outcome is unknown; etcd does not answer ({})", o.bucket,
                                   o.key, last.message()));
  }

  struct UploadRecords {
    UploadInfo info;
    int64_t upload_revision = 0;
    std::vector<int64_t> part_revisions;  // parallel to info.parts
  };

  std::string BucketKey(const std::string& b) const { return p_ + "buckets/" + b; }
  std::string ObjectKey(const std::string& b, const std::string& k) const { return p_ + "objects/" + b + "/" + k; }
  std::string AccessKeyOf(const std::string& b, const std::string& k) const {
    return p_ + "access/" + store::AccessKey(b, k);
  }
  std::string UploadKey(const std::string& id) const { return p_ + "uploads/" + id; }
  std::string PartPrefix(const std::string& id) const { return p_ + "parts/" + id + "/"; }
  std::string PartKey(const std::string& id, uint32_t n) const { return PartPrefix(id) + fmt::format("{:05d}", n); }

  static Status CheckSize(uint64_t size, const std::vector<BlockRef>& blocks, const std::string& what) {
    uint64_t sum = 0;
    for (const auto& b : blocks) sum += b.size;
    if (sum != size) return InvalidArgument(fmt::format("'{}': blocks hold {} bytes, size says {}", what, sum, size));
    return Status::Ok();
  }

  static std::string ObjectJson(const ObjectMeta& o) {
    json v = {{"size", o.size},
              {"mtime_ns", o.mtime_ns != 0 ? o.mtime_ns : Clock::Real().WallNanos()},
              {"etag", o.etag},
              {"block_size", o.block_size},
              {"blocks", json::parse(store::BlocksToJson(o.blocks))},
              {"attrs", json::parse(store::AttrsToJson(o.attrs))}};
    return v.dump(-1, ' ', false, json::error_handler_t::replace);
  }

  static Result<ObjectMeta> ParseObject(const std::string& bucket, const std::string& key, const KeyValue& kv) {
    json v = json::parse(kv.value, nullptr, false);
    if (!v.is_object()) return BadRecord(kv.key, "not a JSON object");
    ObjectMeta m;
    m.bucket = bucket;
    m.key = key;
    try {
      m.size = v.at("size").get<uint64_t>();
      m.mtime_ns = v.at("mtime_ns").get<int64_t>();
      m.etag = v.at("etag").get<std::string>();
      m.block_size = v.at("block_size").get<uint64_t>();
    } catch (const json::exception& e) {
      return BadRecord(kv.key, e.what());
    }
    m.version = static_cast<uint64_t>(kv.mod_revision);
    m.blocks = AQ_TRY(store::BlocksFromJson(v.value("blocks", json::array()).dump()));
    if (v.contains("attrs")) m.attrs = AQ_TRY(store::AttrsFromJson(v["attrs"].dump()));
    return m;
  }

  static Result<UploadInfo> ParseUpload(const std::string& id, const KeyValue& kv) {
    json v = json::parse(kv.value, nullptr, false);
    if (!v.is_object()) return BadRecord(kv.key, "not a JSON object");
    UploadInfo u;
    u.id = id;
    u.bucket = v.value("bucket", "");
    u.key = v.value("key", "");
    u.created_ns = v.value("created_ns", int64_t{0});
    try {
      if (v.contains("headers")) u.headers = v["headers"].get<std::map<std::string, std::string>>();
    } catch (const json::exception& e) {
      return BadRecord(kv.key, e.what());
    }
    return u;
  }

  static Result<PartMeta> ParsePart(const KeyValue& kv) {
    json v = json::parse(kv.value, nullptr, false);
    if (!v.is_object()) return BadRecord(kv.key, "not a JSON object");
    PartMeta p;
    try {
      p.number = static_cast<uint32_t>(std::stoul(kv.key.substr(kv.key.rfind('/') + 1)));
      p.size = v.at("size").get<uint64_t>();
      p.etag = v.at("etag").get<std::string>();
      p.mtime_ns = v.value("mtime_ns", int64_t{0});
      p.checksum = v.value("checksum", "");
    } catch (const std::exception& e) {
      return BadRecord(kv.key, e.what());
    }
    p.blocks = AQ_TRY(store::BlocksFromJson(v.value("blocks", json::array()).dump()));
    return p;
  }

  // The blocks of the record a transaction's get `index` found (none: {}).
  static Result<std::vector<BlockRef>> OldBlocks(const TxnResult& t, size_t index) {
    if (index >= t.ranges.size() || t.ranges[index].empty()) return std::vector<BlockRef>();
    const KeyValue& kv = t.ranges[index][0];
    json v = json::parse(kv.value, nullptr, false);
    if (!v.is_object()) return BadRecord(kv.key, "not a JSON object");
    return store::BlocksFromJson(v.value("blocks", json::array()).dump());
  }

  Result<UploadRecords> GetUploadRecords(const std::string& id) {
    const std::string parts = PartPrefix(id);
    auto t = AQ_TRY(etcd_->Txn({}, {{TxnOp::Kind::kGet, UploadKey(id), "", "", 0},
                                    {TxnOp::Kind::kGet, parts, EtcdClient::PrefixEnd(parts), "", 0}}));
    if (t.ranges.size() != 2) return IoError("etcd: unexpected transaction answer");
    if (t.ranges[0].empty()) return NotFound(Subject::kUpload, fmt::format("no multipart upload '{}'", id));
    UploadRecords r;
    r.info = AQ_TRY(ParseUpload(id, t.ranges[0][0]));
    r.upload_revision = t.ranges[0][0].mod_revision;
    for (const auto& kv : t.ranges[1]) {
      r.info.parts.push_back(AQ_TRY(ParsePart(kv)));
      r.part_revisions.push_back(kv.mod_revision);
    }
    return r;
  }

  std::shared_ptr<EtcdClient> etcd_;
  std::string p_;
};

}  // namespace

std::unique_ptr<store::MetaStore> NewEtcdMetaStore(std::shared_ptr<EtcdClient> etcd, std::string prefix) {
  return std::make_unique<EtcdMetaStore>(std::move(etcd), std::move(prefix));
}

}  // namespace aq::cluster
