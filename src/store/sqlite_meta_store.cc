// MetaStore on SQLite: one connection, guarded by a mutex; every change in
// one transaction (BEGIN IMMEDIATE ... COMMIT) with synchronous=FULL.
//
// A full disk must not stop the changes that free space: SQLite needs room
// for its write-ahead log even to delete. The store keeps a reserve file
// (META-reserve, kReserveBytes) beside the database; a delete, an abort or
// a bucket's removal that fails for want of space gives the reserve up and
// tries again. Changes that add data take the reserve back first, when
// there is room (at most every few seconds), and never use it.
#include <fcntl.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "common/clock.h"
#include "common/log.h"
#include "common/mutex.h"
#include "store/meta_store.h"

namespace aq::store {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS buckets(
  name TEXT PRIMARY KEY,
  created_ns INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS objects(
  bucket TEXT NOT NULL,
  key TEXT NOT NULL,
  size INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL,
  etag TEXT NOT NULL,
  block_size INTEGER NOT NULL,
  version INTEGER NOT NULL,
  attrs TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(bucket, key));
CREATE TABLE IF NOT EXISTS blocks(
  bucket TEXT NOT NULL,
  key TEXT NOT NULL,
  idx INTEGER NOT NULL,
  id TEXT NOT NULL,
  size INTEGER NOT NULL,
  crc INTEGER NOT NULL,
  pool TEXT NOT NULL,
  nodes TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(bucket, key, idx));
CREATE TABLE IF NOT EXISTS uploads(
  id TEXT PRIMARY KEY,
  bucket TEXT NOT NULL,
  key TEXT NOT NULL,
  created_ns INTEGER NOT NULL,
  attrs TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS parts(
  upload_id TEXT NOT NULL,
  number INTEGER NOT NULL,
  size INTEGER NOT NULL,
  etag TEXT NOT NULL,
  mtime_ns INTEGER NOT NULL,
  checksum TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(upload_id, number));
CREATE TABLE IF NOT EXISTS part_blocks(
  upload_id TEXT NOT NULL,
  number INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  id TEXT NOT NULL,
  size INTEGER NOT NULL,
  crc INTEGER NOT NULL,
  pool TEXT NOT NULL,
  nodes TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(upload_id, number, idx));
CREATE TABLE IF NOT EXISTS settings(
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS access(
  bucket TEXT NOT NULL,
  key TEXT NOT NULL,
  atime_ns INTEGER NOT NULL,
  PRIMARY KEY(bucket, key));
CREATE INDEX IF NOT EXISTS blocks_shared ON blocks(id, pool, size) WHERE length(id) = 64;
CREATE INDEX IF NOT EXISTS part_blocks_shared ON part_blocks(id, pool, size) WHERE length(id) = 64;
CREATE TABLE IF NOT EXISTS versions(
  bucket TEXT NOT NULL,
  key TEXT NOT NULL,
  version INTEGER NOT NULL,
  attrs TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(bucket, key));
)sql";

// A prepared statement, finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  Stmt& Bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  int Step() { return sqlite3_step(s_); }
  std::string Text(int col) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, col))) : std::string();
  }
  int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  sqlite3_stmt* get() { return s_; }
  std::string Error() const { return sqlite3_errmsg(db_); }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
  int rc_;
};

// A block's replica holders, comma-separated (empty on a single node).
std::string JoinNodes(const std::vector<std::string>& nodes) {
  std::string out;
  for (const auto& n : nodes) out += (out.empty() ? "" : ",") + n;
  return out;
}
std::vector<std::string> SplitNodes(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

constexpr off_t kReserveBytes = 4 << 20;

// A file of kReserveBytes allocated blocks; false (and no file) without room.
bool MakeReserve(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok = ::posix_fallocate(fd, 0, kReserveBytes) == 0 && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) ::unlink(path.c_str());
  return ok;
}

StatusCode CodeOf(const Status& s) { return s.code(); }
template <typename T>
StatusCode CodeOf(const Result<T>& r) {
  return r.ok() ? StatusCode::kOk : r.status().code();
}

class SqliteMetaStore final : public MetaStore {
 public:
  SqliteMetaStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)), reserve_path_(path_ + "-reserve") {
    if (path_ == ":memory:") return;  // nothing on a disk to fill
    reserved_ = MakeReserve(reserve_path_);
    if (!reserved_)
      log::warn("metadata {}: no room for the {} MiB reserve that lets deletes work on a full disk", path_,
                kReserveBytes >> 20);
  }
  ~SqliteMetaStore() override { sqlite3_close(db_); }

  // Whether the reserve is held now (tests, stats).
  bool reserved() {
    std::lock_guard<std::mutex> lock(reserve_mu_);
    return reserved_;
  }

  Status CreateBucket(const std::string& name) override {
    AQ_TRY(CheckBucketName(name));
    KeepReserve();
    MutexLock lock(mu_);
    Stmt s(db_, "INSERT INTO buckets(name, created_ns) VALUES(?, ?)");
    s.Bind(1, name).Bind(2, Clock::Real().WallNanos());
    int rc = s.Step();
    if (rc == SQLITE_CONSTRAINT) return AlreadyExists(Subject::kBucket, fmt::format("bucket '{}' exists", name));
    if (rc != SQLITE_DONE) return Error("create bucket " + name);
    return Status::Ok();
  }

  Result<std::vector<BucketInfo>> ListBuckets() override {
    MutexLock lock(mu_);
    Stmt s(db_, "SELECT name, created_ns FROM buckets ORDER BY name");
    std::vector<BucketInfo> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out.push_back({s.Text(0), s.Int(1)});
    if (rc != SQLITE_DONE) return Error("list buckets");
    return out;
  }

  Status DeleteBucket(const std::string& name) override {
    return Shrinking([&] { return DeleteBucketOnce(name); });
  }
  Status DeleteBucketOnce(const std::string& name) {
    MutexLock lock(mu_);
    AQ_TRY(Exec("BEGIN IMMEDIATE"));
    Status st = [&]() AQ_REQUIRES(mu_) -> Status {
      AQ_TRY(RequireBucket(name));
      Stmt count(db_, "SELECT COUNT(*) FROM objects WHERE bucket = ?");
      count.Bind(1, name);
      if (count.Step() != SQLITE_ROW) return Error("count objects of " + name);
      if (count.Int(0) > 0) {
        return NotEmpty(fmt::format("bucket '{}' is not empty ({} objects)", name, count.Int(0)));
      }
      Stmt uploads(db_, "SELECT COUNT(*) FROM uploads WHERE bucket = ?");
      uploads.Bind(1, name);
      if (uploads.Step() != SQLITE_ROW) return Error("count uploads of " + name);
      if (uploads.Int(0) > 0) {
        return NotEmpty(fmt::format("bucket '{}' is not empty ({} multipart uploads in progress; abort them)", name,
                                    uploads.Int(0)));
      }
      Stmt del(db_, "DELETE FROM buckets WHERE name = ?");
      del.Bind(1, name);
      if (del.Step() != SQLITE_DONE) return Error("delete bucket " + name);
      Stmt ver(db_, "DELETE FROM versions WHERE bucket = ?");
      ver.Bind(1, name);
      if (ver.Step() != SQLITE_DONE) return Error("delete versions of " + name);
      return Status::Ok();
    }();
    return Finish(st);
  }

  Result<ObjectMeta> GetObject(const std::string& bucket, const std::string& key) override {
    MutexLock lock(mu_);
    // One read transaction: the object row and its blocks from one snapshot.
    AQ_TRY(Exec("BEGIN"));
    Result<ObjectMeta> r = [&]() AQ_REQUIRES(mu_) -> Result<ObjectMeta> {
      Stmt s(db_, "SELECT size, mtime_ns, etag, block_size, version, attrs FROM objects WHERE bucket = ? AND key = ?");
      s.Bind(1, bucket).Bind(2, key);
      int rc = s.Step();
      if (rc == SQLITE_DONE) {
        AQ_TRY(RequireBucket(bucket));
        return NotFound(Subject::kObject, fmt::format("no object '{}' in bucket '{}'", key, bucket));
      }
      if (rc != SQLITE_ROW) return Error("read object " + key);
      ObjectMeta m;
      m.bucket = bucket;
      m.key = key;
      m.size = static_cast<uint64_t>(s.Int(0));
      m.mtime_ns = s.Int(1);
      m.etag = s.Text(2);
      m.block_size = static_cast<uint64_t>(s.Int(3));
      m.version = static_cast<uint64_t>(s.Int(4));
      m.attrs = AQ_TRY(AttrsFromJson(s.Text(5)));
      m.blocks = AQ_TRY(Blocks(bucket, key));
      return m;
    }();
    (void)Exec("COMMIT");
    return r;
  }

  Result<std::vector<BlockRef>> PutObject(const ObjectMeta& o) override {
    AQ_TRY(CheckObjectKey(o.key));
    KeepReserve();
    AQ_TRY(CheckSize(o));
    MutexLock lock(mu_);
    AQ_TRY(Exec("BEGIN IMMEDIATE"));
    std::vector<BlockRef> old;
    AQ_TRY(Finish(WriteObject(o, &old)));
    return old;
  }

  Status CreateUpload(const UploadInfo& u) override {
    AQ_TRY(CheckObjectKey(u.key));
    KeepReserve();
    MutexLock lock(mu_);
    AQ_TRY(Exec("BEGIN IMMEDIATE"));
    Status st = [&]() AQ_REQUIRES(mu_) -> Status {
      AQ_TRY(RequireBucket(u.bucket));
      Stmt s(db_, "INSERT INTO uploads(id, bucket, key, created_ns, attrs) VALUES(?, ?, ?, ?, ?)");
      ObjectAttrs attrs;
      attrs.headers = u.headers;
      s.Bind(1, u.id)
          .Bind(2, u.bucket)
          .Bind(3, u.key)
          .Bind(4, u.created_ns != 0 ? u.created_ns : Clock::Real().WallNanos())
          .Bind(5, AttrsToJson(attrs));
      int rc = s.Step();
      if (rc == SQLITE_CONSTRAINT) return AlreadyExists(Subject::kUpload, "upload id " + u.id + " exists");
      if (rc != SQLITE_DONE) return Error("create upload for " + u.key);
      return Status::Ok();
    }();
    return Finish(st);
  }

  Result<UploadInfo> GetUpload(const std::string& id) override {
    MutexLock lock(mu_);
    AQ_TRY(Exec("BEGIN"));
    Result<UploadInfo> r = [&]() AQ_REQUIRES(mu_) -> Result<UploadInfo> {
      UploadInfo u = AQ_TRY(Upload(id));
      Stmt s(db_, "SELECT number, size, etag, mtime_ns, checksum FROM parts WHERE upload_id = ? ORDER BY number");
      s.Bind(1, id);
      int rc;
      while ((rc = s.Step()) == SQLITE_ROW) {
        PartMeta p;
        p.number = static_cast<uint32_t>(s.Int(0));
        p.size = static_cast<uint64_t>(s.Int(1));
        p.etag = s.Text(2);
        p.mtime_ns = s.Int(3);
        p.checksum = s.Text(4);
        p.blocks = AQ_TRY(PartBlocks(id, p.number));
        u.parts.push_back(std::move(p));
      }
      if (rc != SQLITE_DONE) return Error("read parts of upload " + id);
      return u;
    }();
    (void)Exec("COMMIT");
    return r;
  }

  Result<std::vector<UploadInfo>> ListUploads(const std::string& bucket) override {
    MutexLock lock(mu_);
    AQ_TRY(RequireBucket(bucket));
    Stmt s(db_, "SELECT id, key, created_ns FROM uploads WHERE bucket = ? ORDER BY key, created_ns");
    s.Bind(1, bucket);
    std::vector<UploadInfo> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      UploadInfo u;
      u.id = s.Text(0);
      u.bucket = bucket;
      u.key = s.Text(1);
      u.created_ns = s.Int(2);
      out.push_back(std::move(u));
    }
    if (rc != SQLITE_DONE) return Error("list uploads of " + bucket);
    return out;
  }

  Result<std::vector<BlockRef>> PutPart(const std::string& id, const PartMeta& p) override {
    KeepReserve();
    uint64_t sum = 0;
    for (const auto& b : p.blocks) sum += b.size;
    if (sum != p.size) {
      return InvalidArgument(fmt::format("part {}: blocks hold {} bytes, size says {}", p.number, sum, p.size));
    }
    MutexLock lock(mu_);
    AQ_TRY(Exec("BEGIN IMMEDIATE"));
    std::vector<BlockRef> old;
    Status st = [&]() AQ_REQUIRES(mu_) -> Status {
      AQ_TRY(Upload(id));
      old = AQ_TRY(PartBlocks(id, p.number));
      Stmt del(db_, "DELETE FROM part_blocks WHERE upload_id = ? AND number = ?");
      del.Bind(1, id).Bind(2, static_cast<int64_t>(p.number));
      if (del.Step() != SQLITE_DONE) return Error("replace part " + std::to_string(p.number));
      Stmt ins(db_,
               "INSERT OR REPLACE INTO parts(upload_id, number, size, etag, mtime_ns, checksum) "
               "VALUES(?, ?, ?, ?, ?, ?)");
      ins.Bind(1, id)
          .Bind(2, static_cast<int64_t>(p.number))
          .Bind(3, static_cast<int64_t>(p.size))
          .Bind(4, p.etag)
          .Bind(5, p.mtime_ns != 0 ? p.mtime_ns : Clock::Real().WallNanos())
          .Bind(6, p.checksum);
      if (ins.Step() != SQLITE_DONE) return Error("write part " + std::to_string(p.number));
      for (size_t i = 0; i < p.blocks.size(); ++i) {
        const auto& b = p.blocks[i];
        if (b.erasure_coded()) return Unsupported("erasure-coded blocks need a cluster's metadata (etcd)");
        Stmt bl(db_,
                "INSERT INTO part_blocks(upload_id, number, idx, id, size, crc, pool, nodes) "
                "VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
        bl.Bind(1, id)
            .Bind(2, static_cast<int64_t>(p.number))
            .Bind(3, static_cast<int64_t>(i))
            .Bind(4, b.id)
            .Bind(5, static_cast<int64_t>(b.size))
            .Bind(6, static_cast<int64_t>(b.crc32c))
            .Bind(7, b.pool)
            .Bind(8, JoinNodes(b.nodes));
        if (bl.Step() != SQLITE_DONE) return Error("write block list of part " + std::to_string(p.number));
      }
      return Status::Ok();
    }();
    AQ_TRY(Finish(st));
    return old;
  }

  Result<std::vector<BlockRef>> CompleteUpload(const std::string& id, const std::vector<CompletedPart>& named,
                                               const ObjectMeta& object) override {
    MutexLock lock(mu_);
    AQ_TRY(Exec("BEGIN IMMEDIATE"));
    std::vector<BlockRef> freed;
    Status st = [&]() AQ_REQUIRES(mu_) -> Status {
      UploadInfo u = AQ_TRY(Upload(id));
      if (u.bucket != object.bucket || u.key != object.key) {
        return InvalidArgument(
            fmt::format("upload {} is for '{}/{}', not '{}/{}'", id, u.bucket, u.key, object.bucket, object.key));
      }
      ObjectMeta o = object;
      o.size = 0;
      o.blocks.clear();
      o.attrs.part_sizes.clear();
      std::vector<uint32_t> used;
      for (const auto& c : named) {
        Stmt s(db_, "SELECT size, etag FROM parts WHERE upload_id = ? AND number = ?");
        s.Bind(1, id).Bind(2, static_cast<int64_t>(c.number));
        int rc = s.Step();
        if (rc == SQLITE_DONE) return InvalidArgument(fmt::format("part {} was not uploaded", c.number));
        if (rc != SQLITE_ROW) return Error("read part " + std::to_string(c.number));
        if (s.Text(1) != c.etag) {
          return InvalidArgument(fmt::format("part {} has ETag {}, not {}", c.number, s.Text(1), c.etag));
        }
        o.size += static_cast<uint64_t>(s.Int(0));
        o.attrs.part_sizes.push_back(static_cast<uint64_t>(s.Int(0)));
        auto blocks = AQ_TRY(PartBlocks(id, c.number));
        o.blocks.insert(o.blocks.end(), blocks.begin(), blocks.end());
        used.push_back(c.number);
      }
      AQ_TRY(CheckSize(o));
      // Blocks of parts the completion leaves out are freed with the upload.
      Stmt rest(db_, "SELECT DISTINCT number FROM parts WHERE upload_id = ?");
      rest.Bind(1, id);
      int rc;
      std::vector<uint32_t> all;
      while ((rc = rest.Step()) == SQLITE_ROW) all.push_back(static_cast<uint32_t>(rest.Int(0)));
      if (rc != SQLITE_DONE) return Error("read parts of upload " + id);
      for (uint32_t n : all) {
        if (std::find(used.begin(), used.end(), n) != used.end()) continue;
        auto blocks = AQ_TRY(PartBlocks(id, n));
        freed.insert(freed.end(), blocks.begin(), blocks.end());
      }
      std::vector<BlockRef> old;
      AQ_TRY(WriteObject(o, &old));
      freed.insert(freed.end(), old.begin(), old.end());
      return DropUpload(id);
    }();
    AQ_TRY(Finish(st));
    return freed;
  }

  Result<std::vector<BlockRef>> AbortUpload(const std::string& id) override {
    return Shrinking([&] { return AbortUploadOnce(id); });
  }
  Result<std::vector<BlockRef>> AbortUploadOnce(const std::string& id) {
    MutexLock lock(mu_);
    AQ_TRY(Exec("BEGIN IMMEDIATE"));
    std::vector<BlockRef> freed;
    Status st = [&]() AQ_REQUIRES(mu_) -> Status {
      AQ_TRY(Upload(id));
      Stmt s(db_, "SELECT id, size, crc, pool, nodes FROM part_blocks WHERE upload_id = ?");
      s.Bind(1, id);
      int rc;
      while ((rc = s.Step()) == SQLITE_ROW) {
        freed.push_back({s.Text(0), static_cast<uint64_t>(s.Int(1)), static_cast<uint32_t>(s.Int(2)), s.Text(3),
                         SplitNodes(s.Text(4))});
      }
      if (rc != SQLITE_DONE) return Error("read blocks of upload " + id);
      return DropUpload(id);
    }();
    AQ_TRY(Finish(st));
    return freed;
  }

  Result<std::vector<BlockRef>> DeleteObject(const std::string& bucket, const std::string& key) override {
    return Shrinking([&] { return DeleteObjectOnce(bucket, key); });
  }
  Result<std::vector<BlockRef>> DeleteObjectOnce(const std::string& bucket, const std::string& key) {
    MutexLock lock(mu_);
    AQ_TRY(Exec("BEGIN IMMEDIATE"));
    std::vector<BlockRef> old;
    Status st = [&]() AQ_REQUIRES(mu_) -> Status {
      AQ_TRY(RequireBucket(bucket));
      Stmt obj(db_, "DELETE FROM objects WHERE bucket = ? AND key = ?");
      obj.Bind(1, bucket).Bind(2, key);
      if (obj.Step() != SQLITE_DONE) return Error("delete object " + key);
      if (sqlite3_changes(db_) == 0)
        return NotFound(Subject::kObject, fmt::format("no object '{}' in bucket '{}'", key, bucket));
      old = AQ_TRY(Blocks(bucket, key));
      Stmt del(db_, "DELETE FROM blocks WHERE bucket = ? AND key = ?");
      del.Bind(1, bucket).Bind(2, key);
      if (del.Step() != SQLITE_DONE) return Error("delete blocks of " + key);
      Stmt forget(db_, "DELETE FROM access WHERE bucket = ? AND key = ?");
      forget.Bind(1, bucket).Bind(2, key);
      if (forget.Step() != SQLITE_DONE) return Error("forget the access time of " + key);
      return Status::Ok();
    }();
    AQ_TRY(Finish(st));
    return old;
  }

  Result<ListPage> ListObjects(const ListRequest& r) override {
    MutexLock lock(mu_);
    AQ_TRY(RequireBucket(r.bucket));
    // Keys with the prefix sort in [prefix, prefix + U+10FFFF...); compare
    // with substr instead of LIKE so '%' and '_' in keys need no escaping.
    // As BLOBs: substr counts bytes there (the prefix's size is in bytes),
    // characters on TEXT, which would cut a non-ASCII prefix short.
    Stmt s(db_,
           "SELECT key, size, mtime_ns, etag, block_size, version FROM objects "
           "WHERE bucket = ? AND key > ? AND substr(CAST(key AS BLOB), 1, ?) = CAST(? AS BLOB) ORDER BY key LIMIT ?");
    s.Bind(1, r.bucket)
        .Bind(2, r.start_after)
        .Bind(3, static_cast<int64_t>(r.prefix.size()))
        .Bind(4, r.prefix)
        .Bind(5, static_cast<int64_t>(r.max_keys) + 1);
    ListPage page;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      if (page.objects.size() == r.max_keys) {
        page.truncated = true;
        break;
      }
      ObjectMeta m;
      m.bucket = r.bucket;
      m.key = s.Text(0);
      m.size = static_cast<uint64_t>(s.Int(1));
      m.mtime_ns = s.Int(2);
      m.etag = s.Text(3);
      m.block_size = static_cast<uint64_t>(s.Int(4));
      m.version = static_cast<uint64_t>(s.Int(5));
      page.objects.push_back(std::move(m));
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("list " + r.bucket);
    return page;
  }

  Result<bool> UpdateLayout(const ObjectMeta& o) override {
    MutexLock lock(mu_);
    AQ_TRY(Exec("BEGIN IMMEDIATE"));
    bool updated = false;
    Status st = [&]() AQ_REQUIRES(mu_) -> Status {
      Stmt cur(db_, "SELECT version, size FROM objects WHERE bucket = ? AND key = ?");
      cur.Bind(1, o.bucket).Bind(2, o.key);
      int rc = cur.Step();
      if (rc == SQLITE_DONE) return Status::Ok();  // deleted meanwhile
      if (rc != SQLITE_ROW) return Error("read object " + o.key);
      if (static_cast<uint64_t>(cur.Int(0)) != o.version) return Status::Ok();
      AQ_TRY(CheckSize(o));
      std::vector<BlockRef> old;
      AQ_TRY(WriteObject(o, &old));
      updated = true;
      return Status::Ok();
    }();
    AQ_TRY(Finish(st));
    return updated;
  }

  Result<std::vector<std::string>> ReferencedBlocks() override {
    MutexLock lock(mu_);
    Stmt s(db_, "SELECT id FROM blocks UNION SELECT id FROM part_blocks");
    std::vector<std::string> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out.push_back(s.Text(0));
    if (rc != SQLITE_DONE) return Error("list blocks");
    return out;
  }

  // Shared (content-addressed, 64-digit) ids are indexed apart: the partial
  // indexes cost nothing for random ids.
  Result<bool> IsReferenced(const BlockRef& b) override {
    MutexLock lock(mu_);
    Stmt s(db_,
           "SELECT EXISTS(SELECT 1 FROM blocks WHERE length(id) = 64 AND id = ?1 AND pool = ?2) "
           "OR EXISTS(SELECT 1 FROM part_blocks WHERE length(id) = 64 AND id = ?1 AND pool = ?2)");
    s.Bind(1, b.id).Bind(2, b.pool);
    if (s.Step() != SQLITE_ROW) return Error("look up references to block " + b.id);
    return s.Int(0) != 0;
  }

  Result<std::vector<SharedUsage>> SharedBlockUsage() override {
    MutexLock lock(mu_);
    AQ_TRY(Exec("BEGIN"));
    Result<std::vector<SharedUsage>> r = [&]() AQ_REQUIRES(mu_) -> Result<std::vector<SharedUsage>> {
      Stmt s(
          db_,
          "WITH refs AS (SELECT id, pool, size FROM blocks WHERE length(id) = 64 "
          "UNION ALL SELECT id, pool, size FROM part_blocks WHERE length(id) = 64), "
          "distinct_blocks AS (SELECT pool, size, COUNT(*) AS n FROM refs GROUP BY id, pool) "
          "SELECT pool, COUNT(*), SUM(size), SUM(n), SUM(size * n) FROM distinct_blocks GROUP BY pool ORDER BY pool");
      std::vector<SharedUsage> out;
      int rc;
      while ((rc = s.Step()) == SQLITE_ROW) {
        out.push_back({s.Text(0), static_cast<uint64_t>(s.Int(1)), static_cast<uint64_t>(s.Int(2)),
                       static_cast<uint64_t>(s.Int(3)), static_cast<uint64_t>(s.Int(4))});
      }
      if (rc != SQLITE_DONE) return Error("sum shared blocks");
      return out;
    }();
    (void)Exec("COMMIT");
    return r;
  }

  Result<std::string> GetSetting(const std::string& name) override {
    MutexLock lock(mu_);
    Stmt s(db_, "SELECT value FROM settings WHERE name = ?");
    s.Bind(1, name);
    const int rc = s.Step();
    if (rc == SQLITE_ROW) return s.Text(0);
    if (rc != SQLITE_DONE) return Error("read setting " + name);
    return NotFound(fmt::format("no setting '{}'", name));
  }

  Status PutSetting(const std::string& name, const std::string& value) override {
    MutexLock lock(mu_);
    Stmt s(db_, value.empty() ? "DELETE FROM settings WHERE name = ?"
                              : "INSERT INTO settings(name, value) VALUES(?, ?) "
                                "ON CONFLICT(name) DO UPDATE SET value = excluded.value");
    s.Bind(1, name);
    if (!value.empty()) s.Bind(2, value);
    if (s.Step() != SQLITE_DONE) return Error("write setting " + name);
    return Status::Ok();
  }

  Result<bool> SwapSetting(const std::string& name, const std::string& expected, const std::string& value) override {
    MutexLock lock(mu_);
    AQ_TRY(Exec("BEGIN IMMEDIATE"));
    Result<bool> swapped = [&]() AQ_REQUIRES(mu_) -> Result<bool> {
      Stmt get(db_, "SELECT value FROM settings WHERE name = ?");
      get.Bind(1, name);
      const int rc = get.Step();
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("read setting " + name);
      if ((rc == SQLITE_ROW ? get.Text(0) : std::string()) != expected) return false;
      Stmt put(db_, value.empty() ? "DELETE FROM settings WHERE name = ?"
                                  : "INSERT INTO settings(name, value) VALUES(?, ?) "
                                    "ON CONFLICT(name) DO UPDATE SET value = excluded.value");
      put.Bind(1, name);
      if (!value.empty()) put.Bind(2, value);
      if (put.Step() != SQLITE_DONE) return Error("write setting " + name);
      return true;
    }();
    if (!swapped.ok() || !*swapped) {
      (void)Exec("ROLLBACK");
      return swapped;
    }
    AQ_TRY(Exec("COMMIT"));
    return true;
  }

  Status RecordAccess(const std::vector<AccessTime>& times) override {
    if (times.empty()) return Status::Ok();
    MutexLock lock(mu_);
    AQ_TRY(Exec("BEGIN IMMEDIATE"));
    Status st = [&]() AQ_REQUIRES(mu_) -> Status {
      Stmt s(db_,
             "INSERT INTO access(bucket, key, atime_ns) VALUES(?, ?, ?) "
             "ON CONFLICT(bucket, key) DO UPDATE SET atime_ns = max(atime_ns, excluded.atime_ns)");
      for (const auto& t : times) {
        sqlite3_reset(s.get());
        s.Bind(1, t.bucket).Bind(2, t.key).Bind(3, t.atime_ns);
        if (s.Step() != SQLITE_DONE) return Error("record the access time of " + t.key);
      }
      return Status::Ok();
    }();
    return Finish(st);
  }

  Result<std::unordered_map<std::string, int64_t>> AccessTimes() override {
    MutexLock lock(mu_);
    Stmt s(db_, "SELECT bucket, key, atime_ns FROM access");
    std::unordered_map<std::string, int64_t> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out[AccessKey(s.Text(0), s.Text(1))] = s.Int(2);
    if (rc != SQLITE_DONE) return Error("read access times");
    return out;
  }

 private:
  // Runs a change that frees space; one that failed for want of space runs
  // again once the reserve is given up.
  template <typename F>
  auto Shrinking(F once) -> decltype(once()) {
    auto r = once();
    if (CodeOf(r) != StatusCode::kNoSpace || !ReleaseReserve()) return r;
    return once();
  }
  bool ReleaseReserve() {
    std::lock_guard<std::mutex> lock(reserve_mu_);
    if (!reserved_) return false;
    reserved_ = false;
    ::unlink(reserve_path_.c_str());
    log::warn("metadata {}: the disk is full: gave up the {} MiB reserve so deletes go on", path_, kReserveBytes >> 20);
    return true;
  }
  // Before a change that adds data: the reserve back, if there is room.
  void KeepReserve() {
    std::lock_guard<std::mutex> lock(reserve_mu_);
    if (reserved_ || path_ == ":memory:") return;
    const double now = Clock::Real().Now();
    if (now - reserve_tried_ < 2) return;
    reserve_tried_ = now;
    reserved_ = MakeReserve(reserve_path_);
    if (reserved_) log::info("metadata {}: the reserve for deletes on a full disk is back", path_);
  }

  Status Error(const std::string& what) AQ_REQUIRES(mu_) {
    int code = sqlite3_errcode(db_);
    if (code == SQLITE_FULL) {
      return Status(StatusCode::kNoSpace, fmt::format("{}: {}: the disk is full", path_, what));
    }
    return IoError(fmt::format("{}: {}: {}", path_, what, sqlite3_errmsg(db_)));
  }
  Status Exec(const char* sql) AQ_REQUIRES(mu_) {
    char* err = nullptr;
    if (const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err); rc != SQLITE_OK) {
      std::string msg = err ? err : "?";
      sqlite3_free(err);
      if ((rc & 0xff) == SQLITE_FULL) {
        return Status(StatusCode::kNoSpace, fmt::format("{}: {}: the disk is full", path_, sql));
      }
      return IoError(fmt::format("{}: {}: {}", path_, sql, msg));
    }
    return Status::Ok();
  }
  // Commits when st is OK, else rolls back and returns st.
  Status Finish(const Status& st) AQ_REQUIRES(mu_) {
    if (!st.ok()) {
      (void)Exec("ROLLBACK");
      return st;
    }
    Status c = Exec("COMMIT");
    if (!c.ok()) (void)Exec("ROLLBACK");
    return c;
  }
  Status RequireBucket(const std::string& name) AQ_REQUIRES(mu_) {
    Stmt s(db_, "SELECT 1 FROM buckets WHERE name = ?");
    s.Bind(1, name);
    int rc = s.Step();
    if (rc == SQLITE_ROW) return Status::Ok();
    if (rc == SQLITE_DONE) return NotFound(Subject::kBucket, fmt::format("no bucket '{}'", name));
    return Error("look up bucket " + name);
  }
  static Status CheckSize(const ObjectMeta& o) {
    uint64_t sum = 0;
    for (const auto& b : o.blocks) sum += b.size;
    if (sum != o.size) {
      return InvalidArgument(fmt::format("object '{}': blocks hold {} bytes, size says {}", o.key, sum, o.size));
    }
    return Status::Ok();
  }

  // Inside a write transaction: replaces the object's row and block list;
  // the blocks of the layout it replaced go to *old.
  Status WriteObject(const ObjectMeta& o, std::vector<BlockRef>* old) AQ_REQUIRES(mu_) {
    AQ_TRY(RequireBucket(o.bucket));
    if (!o.condition.none()) {  // checked in the write's transaction: of racing writers one wins
      Stmt cur(db_, "SELECT etag FROM objects WHERE bucket = ? AND key = ?");
      cur.Bind(1, o.bucket).Bind(2, o.key);
      const int rc = cur.Step();
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("read " + o.key);
      const std::string etag = rc == SQLITE_ROW ? cur.Text(0) : "";
      AQ_TRY(CheckWriteCondition(o.condition, o.key, rc == SQLITE_ROW ? &etag : nullptr));
    }
    *old = AQ_TRY(Blocks(o.bucket, o.key));
    Stmt del(db_, "DELETE FROM blocks WHERE bucket = ? AND key = ?");
    del.Bind(1, o.bucket).Bind(2, o.key);
    if (del.Step() != SQLITE_DONE) return Error("replace blocks of " + o.key);
    Stmt ver(db_,
             "INSERT INTO versions(bucket, key, version) VALUES(?, ?, 1) "
             "ON CONFLICT(bucket, key) DO UPDATE SET version = version + 1 RETURNING version");
    ver.Bind(1, o.bucket).Bind(2, o.key);
    if (ver.Step() != SQLITE_ROW) return Error("version " + o.key);
    const int64_t version = ver.Int(0);
    Stmt obj(db_,
             "INSERT OR REPLACE INTO objects(bucket, key, size, mtime_ns, etag, block_size, version, attrs) "
             "VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
    obj.Bind(1, o.bucket)
        .Bind(2, o.key)
        .Bind(3, static_cast<int64_t>(o.size))
        .Bind(4, o.mtime_ns != 0 ? o.mtime_ns : Clock::Real().WallNanos())
        .Bind(5, o.etag)
        .Bind(6, static_cast<int64_t>(o.block_size))
        .Bind(7, version)
        .Bind(8, AttrsToJson(o.attrs));
    if (obj.Step() != SQLITE_DONE) return Error("write object " + o.key);
    for (size_t i = 0; i < o.blocks.size(); ++i) {
      const auto& b = o.blocks[i];
      if (b.erasure_coded()) return Unsupported("erasure-coded blocks need a cluster's metadata (etcd)");
      Stmt ins(db_, "INSERT INTO blocks(bucket, key, idx, id, size, crc, pool, nodes) VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
      ins.Bind(1, o.bucket)
          .Bind(2, o.key)
          .Bind(3, static_cast<int64_t>(i))
          .Bind(4, b.id)
          .Bind(5, static_cast<int64_t>(b.size))
          .Bind(6, static_cast<int64_t>(b.crc32c))
          .Bind(7, b.pool)
          .Bind(8, JoinNodes(b.nodes));
      if (ins.Step() != SQLITE_DONE) return Error("write block list of " + o.key);
    }
    return Status::Ok();
  }

  Result<UploadInfo> Upload(const std::string& id) AQ_REQUIRES(mu_) {
    Stmt s(db_, "SELECT bucket, key, created_ns, attrs FROM uploads WHERE id = ?");
    s.Bind(1, id);
    int rc = s.Step();
    if (rc == SQLITE_DONE) return NotFound(Subject::kUpload, fmt::format("no multipart upload '{}'", id));
    if (rc != SQLITE_ROW) return Error("read upload " + id);
    UploadInfo u;
    u.id = id;
    u.bucket = s.Text(0);
    u.key = s.Text(1);
    u.created_ns = s.Int(2);
    u.headers = AQ_TRY(AttrsFromJson(s.Text(3))).headers;
    return u;
  }

  Result<std::vector<BlockRef>> PartBlocks(const std::string& id, uint32_t number) AQ_REQUIRES(mu_) {
    Stmt s(db_, "SELECT id, size, crc, pool, nodes FROM part_blocks WHERE upload_id = ? AND number = ? ORDER BY idx");
    s.Bind(1, id).Bind(2, static_cast<int64_t>(number));
    std::vector<BlockRef> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      out.push_back({s.Text(0), static_cast<uint64_t>(s.Int(1)), static_cast<uint32_t>(s.Int(2)), s.Text(3),
                     SplitNodes(s.Text(4))});
    }
    if (rc != SQLITE_DONE) return Error("read blocks of part " + std::to_string(number));
    return out;
  }

  Status DropUpload(const std::string& id) AQ_REQUIRES(mu_) {
    for (const char* sql : {"DELETE FROM part_blocks WHERE upload_id = ?", "DELETE FROM parts WHERE upload_id = ?",
                            "DELETE FROM uploads WHERE id = ?"}) {
      Stmt s(db_, sql);
      s.Bind(1, id);
      if (s.Step() != SQLITE_DONE) return Error("remove upload " + id);
    }
    return Status::Ok();
  }

  Result<std::vector<BlockRef>> Blocks(const std::string& bucket, const std::string& key) AQ_REQUIRES(mu_) {
    Stmt s(db_, "SELECT id, size, crc, pool, nodes FROM blocks WHERE bucket = ? AND key = ? ORDER BY idx");
    s.Bind(1, bucket).Bind(2, key);
    std::vector<BlockRef> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      out.push_back({s.Text(0), static_cast<uint64_t>(s.Int(1)), static_cast<uint32_t>(s.Int(2)), s.Text(3),
                     SplitNodes(s.Text(4))});
    }
    if (rc != SQLITE_DONE) return Error("read blocks of " + key);
    return out;
  }

  Mutex mu_;
  sqlite3* db_ AQ_GUARDED_BY(mu_);
  std::string path_;
  std::string reserve_path_;
  std::mutex reserve_mu_;
  bool reserved_ = false;        // guarded by reserve_mu_
  double reserve_tried_ = -1e9;  // Clock::Real().Now() of the last try
};

}  // namespace

Result<std::unique_ptr<MetaStore>> OpenSqliteMetaStore(const std::string& path) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return IoError(fmt::format("open metadata '{}': {}", path, msg));
  }
  sqlite3_busy_timeout(db, 5000);
  char* err = nullptr;
  std::string setup =
      std::string("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;") + kSchema;
  if (sqlite3_exec(db, setup.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    sqlite3_close(db);
    return Status(StatusCode::kCorruption, fmt::format("metadata '{}' is not an aquifer store: {}", path, msg));
  }
  // Stores created by earlier versions gain the columns added since (each
  // ALTER fails harmlessly when the column exists).
  for (const char* alter : {"ALTER TABLE blocks ADD COLUMN nodes TEXT NOT NULL DEFAULT ''",
                            "ALTER TABLE part_blocks ADD COLUMN nodes TEXT NOT NULL DEFAULT ''",
                            "ALTER TABLE objects ADD COLUMN attrs TEXT NOT NULL DEFAULT ''",
                            "ALTER TABLE uploads ADD COLUMN attrs TEXT NOT NULL DEFAULT ''",
                            "ALTER TABLE parts ADD COLUMN checksum TEXT NOT NULL DEFAULT ''"}) {
    sqlite3_exec(db, alter, nullptr, nullptr, nullptr);
  }
  return std::unique_ptr<MetaStore>(std::make_unique<SqliteMetaStore>(db, path));
}

}  // namespace aq::store
