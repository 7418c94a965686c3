#include "store/object_store.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <chrono>

namespace aq::store {
namespace {

EVP_MD_CTX* Md5(void* p) { return static_cast<EVP_MD_CTX*>(p); }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ObjectWriter::ObjectWriter(MetaStore& meta, BlockStore& blocks, BlockCache* cache, std::string bucket, std::string key,
                           std::string pool, uint64_t block_size)
    : meta_(meta),
      blocks_(blocks),
      cache_(cache),
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
  EVP_DigestUpdate(Md5(md5_), data.data(), data.size());
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
  auto ref = blocks_.Write(pool_, buffer_);
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
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(Md5(md5_), digest, &len);
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  ObjectMeta m;
  m.bucket = bucket_;
  m.key = key_;
  m.size = size_;
  m.mtime_ns = NowNs();
  m.etag = "\"" + hex + "\"";
  m.block_size = block_size_;
  m.blocks = written_;
  auto old = meta_.PutObject(m);
  if (!old.ok()) {
    Abort();
    return old.status();
  }
  done_ = true;
  // The new layout is durable; the old blocks are unreachable now. A
  // failure to remove one leaves an orphan for garbage collection.
  for (const auto& b : *old) {
    if (cache_) cache_->Erase(b.id);
    (void)blocks_.Remove(b);
  }
  auto stored = meta_.GetObject(bucket_, key_);
  if (stored.ok()) m.version = stored->version;
  return m;
}

void ObjectWriter::Abort() {
  if (done_) return;
  done_ = true;
  for (const auto& b : written_) (void)blocks_.Remove(b);
  written_.clear();
}

Result<std::unique_ptr<ObjectWriter>> ObjectStore::Put(const std::string& bucket, const std::string& key) {
  AQ_TRY(CheckObjectKey(key));
  // The bucket must exist before any byte is stored.
  auto page = meta_.ListObjects({bucket, "", "", 0});
  if (!page.ok()) return page.status();
  return std::unique_ptr<ObjectWriter>(
      new ObjectWriter(meta_, blocks_, cache_, bucket, key, options_.pool, options_.block_size));
}

Result<ObjectMeta> ObjectStore::Head(const std::string& bucket, const std::string& key) {
  return meta_.GetObject(bucket, key);
}

Status ObjectStore::Read(const ObjectMeta& o, uint64_t offset, uint64_t n,
                         const std::function<Status(std::string_view)>& sink) {
  if (offset > o.size || n > o.size - offset) {
    return InvalidArgument(fmt::format("range {}+{} outside '{}' ({} bytes)", offset, n, o.key, o.size));
  }
  uint64_t start = 0;  // of the current block in the object
  for (const auto& b : o.blocks) {
    if (n == 0) break;
    const uint64_t end = start + b.size;
    if (offset < end) {
      const uint64_t in = offset - start;
      const uint64_t take = std::min<uint64_t>(n, b.size - in);
      auto fail = [&](const Status& s) {
        return Status(s.code(), fmt::format("object '{}/{}' at byte {}: {}", o.bucket, o.key, offset, s.message()));
      };
      if (cache_ != nullptr) {
        auto block = cache_->Get(b.id);
        if (!block) {
          auto bytes = blocks_.Read(b);  // the whole block, verified
          if (!bytes.ok()) return fail(bytes.status());
          block = std::make_shared<const std::string>(std::move(*bytes));
          cache_->Put(b.id, block);
        }
        AQ_TRY(sink(std::string_view(*block).substr(in, take)));
      } else {
        auto bytes = blocks_.Read(b, in, take);
        if (!bytes.ok()) return fail(bytes.status());
        AQ_TRY(sink(*bytes));
      }
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
  auto old = AQ_TRY(meta_.DeleteObject(bucket, key));
  for (const auto& b : old) {
    if (cache_) cache_->Erase(b.id);
    (void)blocks_.Remove(b);
  }
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
