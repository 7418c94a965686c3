#include "store/object_store.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cctype>
#include <charconv>

#include "common/clock.h"

namespace aq::store {
namespace {

EVP_MD_CTX* Md5(void* p) { return static_cast<EVP_MD_CTX*>(p); }

}  // namespace

ObjectWriter::ObjectWriter(MetaStore& meta, BlockService& blocks, Reclaimer& reclaimer, std::string bucket,
                           std::string key, std::string pool, uint64_t block_size, ObjectAttrs attrs)
    : meta_(meta),
      blocks_(blocks),
      reclaimer_(reclaimer),
      attrs_(std::move(attrs)),
      bucket_(std::move(bucket)),
      key_(std::move(key)),
      pool_(std::move(pool)),
      block_size_(block_size),
      md5_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(Md5(md5_), EVP_md5(), nullptr);
  buffer_.reserve(block_size_);
}

ObjectWriter::~ObjectWriter() {
  Abort();
  EVP_MD_CTX_free(Md5(md5_));
}

Status ObjectWriter::Write(std::string_view data) {
  if (done_) return InvalidArgument(fmt::format("put of '{}': write after commit or abort", key_));
  if (!unique_etag_) EVP_DigestUpdate(Md5(md5_), data.data(), data.size());
  if (tap_) tap_(data);
  size_ += data.size();
  while (!data.empty()) {
    size_t take = std::min<size_t>(data.size(), block_size_ - buffer_.size());
    buffer_.append(data.substr(0, take));
    data.remove_prefix(take);
    if (buffer_.size() == block_size_) AQ_TRY(FlushBlock());
  }
  return Status::Ok();
}

Status ObjectWriter::FlushBlock() {
  if (buffer_.empty()) return Status::Ok();
  auto ref = blocks_.Write(pool_, buffer_, bucket_);
  if (!ref.ok() && ref.status().code() == StatusCode::kNoSpace && reclaimer_.FreeEarly() > 0) {
    ref = blocks_.Write(pool_, buffer_, bucket_);  // freed blocks waiting for their delay made room
  }
  if (!ref.ok()) {
    Abort();
    return ref.status();
  }
  written_.push_back(*ref);
  buffer_.clear();
  return Status::Ok();
}

Result<ObjectMeta> ObjectWriter::Commit() {
  if (done_) return InvalidArgument(fmt::format("put of '{}': already committed or aborted", key_));
  AQ_TRY(FlushBlock());
  std::string hex;
  if (unique_etag_) {
    hex = NewBlockId() + (part_ > 0 ? "" : "-1");
  } else {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(Md5(md5_), digest, &len);
    for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  }
  ObjectMeta m;
  m.bucket = bucket_;
  m.key = key_;
  m.size = size_;
  m.mtime_ns = Clock::Real().WallNanos();
  m.etag = "\"" + hex + "\"";
  m.block_size = block_size_;
  m.blocks = written_;
  m.attrs = attrs_;
  m.attrs.write_id = NewBlockId();
  m.condition = condition_;
  // A failed commit frees the new blocks only when it surely did not
  // happen; when the metadata service left the outcome unknown they stay
  // (referenced, or orphans for garbage collection).
  auto failed = [&](Status s) -> Status {
    if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kTimedOut || s.code() == StatusCode::kIoError) {
      done_ = true;
      blocks_.Unhold(written_);
      written_.clear();
      return Status(StatusCode::kUnavailable, s.message());
    }
    Abort();
    if (s.code() == StatusCode::kConflict) return Unavailable(std::string(s.message()));
    return s;
  };
  if (part_ > 0) {
    PartMeta p{part_, size_, m.etag, m.mtime_ns, written_, attrs_.checksum.value};
    auto old = meta_.PutPart(upload_id_, p);
    if (!old.ok()) {
      return failed(Status(old.status().code(), old.status().subject(),
                           fmt::format("part {} of '{}': {}", part_, key_, old.status().message())));
    }
    done_ = true;
    blocks_.Unhold(written_);
    reclaimer_.Release(*old);
    return m;
  }
  auto old = meta_.PutObject(m);
  if (!old.ok() && old.status().code() == StatusCode::kNoSpace && reclaimer_.FreeEarly() > 0) {
    old = meta_.PutObject(m);
  }
  if (!old.ok()) return failed(old.status());
  done_ = true;
  blocks_.Unhold(written_);
  reclaimer_.Release(*old);
  auto stored = meta_.GetObject(bucket_, key_);
  if (stored.ok()) m.version = stored->version;
  return m;
}

void ObjectWriter::Abort() {
  if (done_) return;
  done_ = true;
  // Unheld first: a shared block stays if another layout names it. A shared
  // block this writer found stored may also be pinned by a reader of a
  // layout replaced since, so it goes through the reclaimer like any freed
  // block; a block of its own no reader can have seen.
  blocks_.Unhold(written_);
  std::vector<BlockRef> shared;
  for (const auto& b : written_) {
    if (IsContentId(b.id)) {
      shared.push_back(b);
    } else {
      (void)blocks_.Remove(b);
    }
  }
  if (!shared.empty()) reclaimer_.Release(shared);
  written_.clear();
}

ObjectStore::ObjectStore(MetaStore& meta, BlockStore& blocks, ObjectStoreOptions options, BlockCache* cache)
    : meta_(meta),
      blocks_(blocks),
      local_(std::make_unique<LocalBlockService>(blocks, cache)),
      service_(local_.get()),
      options_(std::move(options)),
      cache_(cache),
      reclaimer_(std::make_unique<Reclaimer>(*service_, options_.reclaim)) {
  blocks_.set_reference_check([this](const BlockRef& b) { return meta_.IsReferenced(b); });
}

ObjectStore::ObjectStore(MetaStore& meta, BlockStore& blocks, BlockService& service, ObjectStoreOptions options,
                         BlockCache* cache)
    : meta_(meta),
      blocks_(blocks),
      service_(&service),
      options_(std::move(options)),
      cache_(cache),
      reclaimer_(std::make_unique<Reclaimer>(*service_, options_.reclaim)) {
  blocks_.set_reference_check([this](const BlockRef& b) { return meta_.IsReferenced(b); });
}

ObjectStore::~ObjectStore() {
  reclaimer_.reset();  // its last removals still ask the metadata
  blocks_.set_reference_check(nullptr);
}

Result<std::vector<PoolUsage>> ObjectStore::Usage() {
  auto pools = AQ_TRY(blocks_.Usage());
  auto shared = meta_.SharedBlockUsage();
  if (!shared.ok()) return pools;  // physical figures stand alone
  for (auto& p : pools) {
    for (const auto& s : *shared) {
      if (s.pool == p.name && s.referenced_bytes > s.bytes) p.dedup_saved_bytes = s.referenced_bytes - s.bytes;
    }
  }
  return pools;
}

std::string ObjectStore::PoolFor(const std::string& bucket, const std::string& key, uint64_t size) const {
  if (choose_pool_) {
    std::string pool = choose_pool_(bucket, key, size);
    if (!pool.empty()) return pool;
  }
  return options_.pool;
}

Result<std::unique_ptr<ObjectWriter>> ObjectStore::Put(const std::string& bucket, const std::string& key,
                                                       ObjectAttrs attrs, uint64_t size) {
  AQ_TRY(CheckObjectKey(key));
  // The bucket must exist before any byte is stored.
  auto page = meta_.ListObjects({bucket, "", "", 0});
  if (!page.ok()) return page.status();
  return std::unique_ptr<ObjectWriter>(new ObjectWriter(
      meta_, *service_, *reclaimer_, bucket, key, PoolFor(bucket, key, size), options_.block_size, std::move(attrs)));
}

bool ObjectStore::Available(const ObjectMeta& o, uint64_t offset, uint64_t n) {
  uint64_t start = 0;
  for (const auto& b : o.blocks) {
    const uint64_t end = start + b.size;
    if (end > offset && start < offset + n && !service_->Available(b)) return false;
    start = end;
  }
  return true;
}

Status ObjectStore::CopyInto(const ObjectMeta& source, uint64_t offset, uint64_t n, ObjectWriter& writer) {
  auto pin = Hold(source);
  return Read(source, offset, n, [&](std::string_view bytes) { return writer.Write(bytes); });
}

Result<ObjectMeta> ObjectStore::Head(const std::string& bucket, const std::string& key) {
  return meta_.GetObject(bucket, key);
}

namespace {
bool SameLayout(const ObjectMeta& a, const ObjectMeta& b) {
  if (a.version != b.version || a.blocks.size() != b.blocks.size()) return false;
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    if (a.blocks[i].id != b.blocks[i].id || a.blocks[i].pool != b.blocks[i].pool) return false;
  }
  return true;
}
}  // namespace

Result<ObjectStore::Held> ObjectStore::HeadHeld(const std::string& bucket, const std::string& key) {
  ObjectMeta meta = AQ_TRY(Head(bucket, key));
  // Each round costs a write that replaced the layout meanwhile; past the
  // bound (a key rewritten faster than it can be read) the last layout is
  // taken as before, its pin still taken before its blocks are read.
  for (int round = 0;; ++round) {
    Reclaimer::Pin pin = Hold(meta);
    ObjectMeta again = AQ_TRY(Head(bucket, key));  // deleted meanwhile: not found
    if (SameLayout(meta, again) || round == 16) return Held{std::move(meta), std::move(pin)};
    meta = std::move(again);
  }
}

Status ObjectStore::Read(const ObjectMeta& o, uint64_t offset, uint64_t n,
                         const std::function<Status(std::string_view)>& sink, ReadStream* stream) {
  if (offset > o.size || n > o.size - offset) {
    return InvalidArgument(fmt::format("range {}+{} outside '{}' ({} bytes)", offset, n, o.key, o.size));
  }
  if (access_ != nullptr) access_->Touch(o.bucket, o.key);
  uint64_t start = 0;  // of the current block in the object
  for (size_t index = 0; index < o.blocks.size(); ++index) {
    const BlockRef& b = o.blocks[index];
    if (n == 0) break;
    const uint64_t end = start + b.size;
    if (offset < end) {
      const uint64_t in = offset - start;
      const uint64_t take = std::min<uint64_t>(n, b.size - in);
      auto fail = [&](const Status& s) {
        return Status(s.code(), fmt::format("object '{}/{}' at byte {}: {}", o.bucket, o.key, offset, s.message()));
      };
      auto block = stream != nullptr ? stream->Block(index) : service_->Read(b);
      if (!block.ok()) return fail(block.status());
      AQ_TRY(sink(std::string_view(**block).substr(in, take)));
      offset += take;
      n -= take;
    }
    start = end;
  }
  if (n != 0) {
    return Status(StatusCode::kCorruption,
                  fmt::format("object '{}/{}': its blocks end before its size", o.bucket, o.key));
  }
  return Status::Ok();
}

Status ObjectStore::Delete(const std::string& bucket, const std::string& key) {
  reclaimer_->Release(AQ_TRY(meta_.DeleteObject(bucket, key)));
  return Status::Ok();
}

Result<UploadInfo> ObjectStore::CreateUpload(const std::string& bucket, const std::string& key,
                                             std::map<std::string, std::string> headers) {
  AQ_TRY(CheckObjectKey(key));
  UploadInfo u;
  u.id = NewBlockId();
  u.bucket = bucket;
  u.key = key;
  u.created_ns = Clock::Real().WallNanos();
  u.headers = std::move(headers);
  AQ_TRY(meta_.CreateUpload(u));
  return u;
}

Result<UploadInfo> ObjectStore::GetUpload(const std::string& upload_id, const std::string& bucket,
                                          const std::string& key) {
  auto u = AQ_TRY(meta_.GetUpload(upload_id));
  if (u.bucket != bucket || u.key != key) {
    return NotFound(Subject::kUpload, fmt::format("no multipart upload '{}' for '{}/{}'", upload_id, bucket, key));
  }
  return u;
}

Result<std::unique_ptr<ObjectWriter>> ObjectStore::PutPart(const std::string& upload_id, const std::string& bucket,
                                                           const std::string& key, uint32_t number,
                                                           UploadInfo* upload) {
  if (number < 1 || number > kMaxPartNumber) {
    return InvalidArgument(fmt::format("part number {} outside 1..{}", number, kMaxPartNumber));
  }
  auto info = AQ_TRY(GetUpload(upload_id, bucket, key));
  if (upload != nullptr) *upload = std::move(info);
  std::unique_ptr<ObjectWriter> w(new ObjectWriter(meta_, *service_, *reclaimer_, bucket, key,
                                                   PoolFor(bucket, key, kUnknownSize), options_.block_size, {}));
  w->upload_id_ = upload_id;
  w->part_ = number;
  return w;
}

namespace {

std::string MultipartEtag(const std::vector<CompletedPart>& parts) {
  std::string digests;  // the parts' binary MD5s
  for (const auto& p : parts) {
    std::string hex = p.etag;
    if (hex.size() >= 2 && hex.front() == '"' && hex.back() == '"') hex = hex.substr(1, hex.size() - 2);
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
      unsigned v = 0;
      std::from_chars(hex.data() + i, hex.data() + i + 2, v, 16);  // checked hex (IsMd5Etag)
      digests += static_cast<char>(v);
    }
  }
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(digests.data(), digests.size(), d, &len, EVP_md5(), nullptr);
  std::string out = "\"";
  for (unsigned i = 0; i < len; ++i) out += fmt::format("{:02x}", d[i]);
  return out + "-" + std::to_string(parts.size()) + "\"";
}

bool IsMd5Etag(const std::string& e) {
  if (e.size() != 34 || e.front() != '"' || e.back() != '"') return false;
  for (size_t i = 1; i + 1 < e.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(e[i]))) return false;
  }
  return true;
}

}  // namespace

bool CheckCompletion(const UploadInfo& upload, const std::vector<CompletedPart>& parts, uint64_t min_part_size,
                     std::string* code, std::string* message) {
  if (parts.empty()) {
    *code = "MalformedXML";
    *message = "the completion names no part";
    return false;
  }
  // Order first, then each part's existence and ETag, then sizes: the
  // first rule broken is the one reported, as S3 does.
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].number <= parts[i - 1].number) {
      *code = "InvalidPartOrder";
      *message = fmt::format("part {} follows part {}: parts must be in ascending order", parts[i].number,
                             parts[i - 1].number);
      return false;
    }
  }
  std::vector<const PartMeta*> found(parts.size(), nullptr);
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& c = parts[i];
    // ETags arrive quoted or not; compare them quoted.
    std::string etag = c.etag;
    if (etag.empty() || etag.front() != '"') etag = "\"" + etag + "\"";
    for (const auto& p : upload.parts) {
      if (p.number == c.number) found[i] = &p;
    }
    if (found[i] == nullptr) {
      *code = "InvalidPart";
      *message = fmt::format("part {} was not uploaded", c.number);
      return false;
    }
    if (found[i]->etag != etag || !IsMd5Etag(etag)) {
      *code = "InvalidPart";
      *message = fmt::format("part {} has ETag {}, the completion names {}", c.number, found[i]->etag, c.etag);
      return false;
    }
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (found[i]->size < min_part_size) {
      *code = "EntityTooSmall";
      *message = fmt::format("part {} is {} bytes; every part but the last must be at least {}", parts[i].number,
                             found[i]->size, min_part_size);
      return false;
    }
  }
  return true;
}

Result<ObjectMeta> ObjectStore::CompleteUpload(const std::string& upload_id, const std::string& bucket,
                                               const std::string& key, const std::vector<CompletedPart>& parts,
                                               const WriteCondition& condition, ObjectChecksum checksum) {
  std::vector<CompletedPart> quoted = parts;
  for (auto& p : quoted) {
    if (p.etag.empty() || p.etag.front() != '"') p.etag = "\"" + p.etag + "\"";
    if (!IsMd5Etag(p.etag)) return InvalidArgument(fmt::format("part {}: ETag {} is not an MD5", p.number, p.etag));
  }
  auto upload = AQ_TRY(GetUpload(upload_id, bucket, key));
  ObjectMeta m;
  m.bucket = bucket;
  m.key = key;
  m.mtime_ns = Clock::Real().WallNanos();
  m.etag = MultipartEtag(quoted);
  m.block_size = options_.block_size;
  m.attrs.headers = upload.headers;
  m.attrs.headers.erase(kUploadChecksumAlgorithm);
  m.attrs.headers.erase(kUploadChecksumType);
  m.attrs.checksum = std::move(checksum);
  m.attrs.upload_id = upload_id;
  m.attrs.write_id = NewBlockId();
  m.condition = condition;
  auto freed = meta_.CompleteUpload(upload_id, quoted, m);
  if (!freed.ok()) {
    // (a conditional completion's conflict is the client's to resolve: 409)
    if (freed.status().code() == StatusCode::kConflict && condition.none()) {
      return Unavailable(freed.status().message());
    }
    return freed.status();
  }
  reclaimer_->Release(*freed);
  return meta_.GetObject(bucket, key);
}

Status ObjectStore::AbortUpload(const std::string& upload_id, const std::string& bucket, const std::string& key) {
  AQ_TRY(GetUpload(upload_id, bucket, key));
  reclaimer_->Release(AQ_TRY(meta_.AbortUpload(upload_id)));
  return Status::Ok();
}

Result<ListV2Page> ObjectStore::List(const ListV2Request& r) {
  ListV2Page page;
  if (r.max_keys == 0) {
    AQ_TRY(meta_.ListObjects({r.bucket, r.prefix, r.start_after, 0}));  // bucket exists?
    return page;
  }
  std::string after = r.start_after;
  uint32_t count = 0;
  while (true) {
    auto batch = AQ_TRY(meta_.ListObjects({r.bucket, r.prefix, after, 1000}));
    if (!batch.objects.empty()) after = batch.objects.back().key;  // the next batch starts here
    for (auto& o : batch.objects) {
      std::string rolled;  // the common prefix this key rolls up into, if any
      if (!r.delimiter.empty()) {
        size_t pos = o.key.find(r.delimiter, r.prefix.size());
        if (pos != std::string::npos) rolled = o.key.substr(0, pos + r.delimiter.size());
      }
      if (!rolled.empty() && !page.common_prefixes.empty() && page.common_prefixes.back() == rolled) continue;
      if (count == r.max_keys) {
        page.truncated = true;
        return page;
      }
      ++count;
      if (!rolled.empty()) {
        // Resume after everything under this prefix ("\xff" sorts after any
        // byte a UTF-8 key can hold).
        page.next_start_after = rolled + "\xff";
        page.common_prefixes.push_back(std::move(rolled));
      } else {
        page.next_start_after = o.key;
        page.objects.push_back(std::move(o));
      }
    }
    if (!batch.truncated) return page;
  }
}

}  // namespace aq::store
