// MountFs without a kernel: driven call by call over an in-memory object
// store that counts every request, the way mountpoint-s3 tests its file
// system against a mock client. The kernel's side (FUSE) is tested by
// tests/integration/mount_test.py where /dev/fuse exists.
#include "mount/mount_fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace aq::mount {
namespace {

// Objects by key under "mem://bucket": whole writes at close, an ETag per
// write, delimiter listings, "dir/" markers; every request counted.
class ObjectStoreFs : public io::FileSystem {
 public:
  struct Object {
    std::string data;
    std::string etag;
  };

  std::map<std::string, int> calls;  // by operation
  int Calls(const std::string& op) {
    std::lock_guard<std::mutex> l(mu_);
    return calls[op];
  }
  void Put(const std::string& key, const std::string& data) {
    std::lock_guard<std::mutex> l(mu_);
    objects_[key] = {data, "\"v" + std::to_string(++gen_) + "\""};
  }
  std::optional<std::string> Get(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return std::nullopt;
    return it->second.data;
  }
  bool fail_writes = false;  // Close of every writer fails (a full store)
  bool positional = true;    // writers take writes at any offset (the aquifer:// spool does)
  // Read plans received, by stream.
  std::map<std::string, std::vector<PlannedRead>> plans;
  Result<size_t> Plan(const std::string& stream, const std::vector<PlannedRead>& reads) override {
    std::lock_guard<std::mutex> l(mu_);
    calls["plan"]++;
    auto& p = plans[stream];
    p.insert(p.end(), reads.begin(), reads.end());
    return reads.size();
  }

  Result<std::unique_ptr<io::RandomAccessFile>> OpenRead(const std::string& url, io::AccessHint) override {
    std::lock_guard<std::mutex> l(mu_);
    calls["open"]++;
    auto it = objects_.find(Key(url));
    if (it == objects_.end()) return NotFound(Subject::kObject, url);
    return std::unique_ptr<io::RandomAccessFile>(new Reader(this, url, it->second));
  }
  Result<std::unique_ptr<io::WritableFile>> OpenWrite(const std::string& url) override {
    std::lock_guard<std::mutex> l(mu_);
    calls["create"]++;
    return std::unique_ptr<io::WritableFile>(new Writer(this, url));
  }
  Result<io::FileInfo> Stat(const std::string& url) override {
    std::lock_guard<std::mutex> l(mu_);
    calls["stat"]++;
    const std::string key = Key(url);
    if (key.empty()) return io::FileInfo{url, 0, true, 0, ""};
    auto it = objects_.find(key);
    if (it != objects_.end()) return io::FileInfo{url, it->second.data.size(), false, 1700000000, it->second.etag};
    auto below = objects_.lower_bound(key + "/");
    if (below != objects_.end() && below->first.rfind(key + "/", 0) == 0) return io::FileInfo{url, 0, true, 0, ""};
    return NotFound(Subject::kObject, url);
  }
  Result<std::vector<io::FileInfo>> List(const std::string& url) override {
    std::lock_guard<std::mutex> l(mu_);
    calls["list"]++;
    const std::string prefix = Key(url).empty() ? "" : Key(url) + "/";
    std::map<std::string, io::FileInfo> out;
    for (auto it = objects_.lower_bound(prefix); it != objects_.end() && it->first.rfind(prefix, 0) == 0; ++it) {
      const std::string rest = it->first.substr(prefix.size());
      if (rest.empty()) continue;  // the directory's own marker
      const size_t slash = rest.find('/');
      if (slash == std::string::npos) {
        out[rest] = io::FileInfo{rest, it->second.data.size(), false, 1700000000, it->second.etag};
      } else {
        out[rest.substr(0, slash)] = io::FileInfo{rest.substr(0, slash), 0, true, 0, ""};
      }
    }
    std::vector<io::FileInfo> v;
    for (auto& [n, i] : out) v.push_back(i);
    return v;
  }
  Status MakeDirs(const std::string&) override { return Status::Ok(); }
  Status Remove(const std::string& url) override {
    std::lock_guard<std::mutex> l(mu_);
    calls["delete"]++;
    return objects_.erase(Key(url)) > 0 ? Status::Ok() : NotFound(Subject::kObject, url);
  }
  Status Rename(const std::string& from, const std::string& to) override {
    std::lock_guard<std::mutex> l(mu_);
    calls["rename"]++;
    auto it = objects_.find(Key(from));
    if (it == objects_.end()) return NotFound(Subject::kObject, from);
    objects_[Key(to)] = {it->second.data, "\"v" + std::to_string(++gen_) + "\""};
    objects_.erase(Key(from));
    return Status::Ok();
  }

 private:
  static std::string Key(const std::string& url) {
    const std::string root = "mem://bucket";
    return url.size() > root.size() ? url.substr(root.size() + 1) : "";
  }
  class Reader : public io::RandomAccessFile {
   public:
    Reader(ObjectStoreFs* fs, std::string url, Object o) : fs_(fs), url_(std::move(url)), o_(std::move(o)) {}
    Result<size_t> ReadAt(uint64_t off, size_t n, void* buf) const override {
      {
        std::lock_guard<std::mutex> l(fs_->mu_);
        fs_->calls["read"]++;
      }
      if (off >= o_.data.size()) return size_t{0};
      n = std::min<size_t>(n, o_.data.size() - off);
      std::memcpy(buf, o_.data.data() + off, n);
      return n;
    }
    uint64_t size() const override { return o_.data.size(); }
    const std::string& path() const override { return url_; }
    std::string version() const override { return o_.etag; }

   private:
    ObjectStoreFs* fs_;
    std::string url_;
    Object o_;
  };
  class Writer : public io::WritableFile {
   public:
    Writer(ObjectStoreFs* fs, std::string url) : fs_(fs), url_(std::move(url)) {}
    Status Append(std::string_view d) override {
      data_.append(d);
      return Status::Ok();
    }
    Status WriteAt(uint64_t offset, std::string_view d) override {
      if (!fs_->positional) return io::WritableFile::WriteAt(offset, d);
      if (data_.size() < offset + d.size()) data_.resize(offset + d.size(), '\0');
      data_.replace(offset, d.size(), d);
      return Status::Ok();
    }
    Status Truncate(uint64_t to) override {
      if (!fs_->positional) return io::WritableFile::Truncate(to);
      data_.resize(to, '\0');
      return Status::Ok();
    }
    Status Sync() override { return Status::Ok(); }
    Status Close() override {
      if (closed_) return Status::Ok();
      closed_ = true;
      std::lock_guard<std::mutex> l(fs_->mu_);
      fs_->calls["put"]++;
      if (fs_->fail_writes) return Status(StatusCode::kNoSpace, "the store is full");
      fs_->objects_[Key(url_)] = {data_, "\"v" + std::to_string(++fs_->gen_) + "\""};
      return Status::Ok();
    }
    uint64_t size() const override { return data_.size(); }
    const std::string& path() const override { return url_; }

   private:
    ObjectStoreFs* fs_;
    std::string url_, data_;
    bool closed_ = false;
  };

  std::mutex mu_;
  std::map<std::string, Object> objects_;
  int gen_ = 0;
};

class MountFsTest : public ::testing::Test {
 protected:
  MountFsTest() {
    o.root = "mem://bucket";
    o.attr_ttl_s = 30;
    store.Put("train/a.jpg", "aaaa");
    store.Put("train/b.jpg", std::string(3 << 20, 'b'));
    store.Put("train/sub/c.jpg", "c");
    store.Put("readme", "hello");
  }
  MountFs& Fs() {
    if (!fs)
      fs = std::make_unique<MountFs>(
          store, o, [this](Ino i) { invalidated.push_back(i); }, clock);
    return *fs;
  }
  Ino Look(Ino parent, const std::string& name) {
    EntryReply e;
    EXPECT_EQ(Fs().Lookup(parent, name, &e), 0) << name;
    return e.ino;
  }
  std::string ReadAll(uint64_t fh, size_t chunk = 1 << 20) {
    std::string out, buf(chunk, '\0');
    for (;;) {
      size_t got = 0;
      EXPECT_EQ(Fs().Read(fh, out.size(), chunk, buf.data(), &got), 0);
      if (got == 0) return out;
      out.append(buf.data(), got);
    }
  }

  ObjectStoreFs store;
  MountOptions o;
  ManualClock clock;
  std::vector<Ino> invalidated;
  std::unique_ptr<MountFs> fs;
};

TEST_F(MountFsTest, ALookupAfterAListingAsksTheStoreNothing) {
  const Ino train = Look(kRootIno, "train");
  uint64_t dh = 0;
  ASSERT_EQ(Fs().OpenDir(train, &dh), 0);
  ASSERT_EQ(Fs().DirSize(dh), 3u);
  EXPECT_EQ(Fs().DirAt(dh, 0).name, "a.jpg");
  EXPECT_TRUE(Fs().DirAt(dh, 2).is_dir);  // sub
  Fs().ReleaseDir(dh);
  const int stats = store.Calls("stat"), lists = store.Calls("list");
  EntryReply e;
  ASSERT_EQ(Fs().Lookup(train, "b.jpg", &e), 0);
  EXPECT_EQ(e.attr.st_size, 3 << 20);
  ASSERT_EQ(Fs().Lookup(train, "missing.jpg", &e), 0);
  EXPECT_EQ(e.ino, 0u);  // a negative entry, from the listing
  EXPECT_EQ(e.entry_timeout, o.negative_ttl_s);
  EXPECT_EQ(store.Calls("stat"), stats);
  EXPECT_EQ(store.Calls("list"), lists);
  // Past the TTL the listing is taken again.
  clock.Advance(31);
  ASSERT_EQ(Fs().OpenDir(train, &dh), 0);
  Fs().ReleaseDir(dh);
  EXPECT_EQ(store.Calls("list"), lists + 1);
}

TEST_F(MountFsTest, AReopenWithinTheTtlIsLazyAndKeepsTheKernelsPages) {
  const Ino f = Look(kRootIno, "readme");
  OpenReply r;
  ASSERT_EQ(Fs().Open(f, O_RDONLY, 100, &r), 0);
  EXPECT_EQ(ReadAll(r.fh), "hello");
  Fs().Release(r.fh);
  const int opens = store.Calls("open");
  ASSERT_EQ(Fs().Open(f, O_RDONLY, 100, &r), 0);
  EXPECT_TRUE(r.keep_cache);
  EXPECT_EQ(store.Calls("open"), opens);  // no request for an open the kernel's pages serve
  Fs().Release(r.fh);
  // The object changes; a lazy handle's first read finds another version:
  // refused (never two versions mixed), the kernel told, the next open reads anew.
  store.Put("readme", "HELLO, world");
  ASSERT_EQ(Fs().Open(f, O_RDONLY, 100, &r), 0);
  std::string buf(64, '\0');
  size_t got = 0;
  EXPECT_EQ(Fs().Read(r.fh, 0, 64, buf.data(), &got), ESTALE);
  EXPECT_EQ(invalidated, std::vector<Ino>{f});
  Fs().Release(r.fh);
  ASSERT_EQ(Fs().Open(f, O_RDONLY, 100, &r), 0);
  EXPECT_FALSE(r.keep_cache);
  EXPECT_EQ(ReadAll(r.fh), "HELLO, world");
  Fs().Release(r.fh);
}

TEST_F(MountFsTest, ASequentialReaderIsReadAheadInChunks) {
  o.read_ahead = 8 << 20;
  Fs().StartFetchers(2);
  const Ino train = Look(kRootIno, "train");
  const Ino b = Look(train, "b.jpg");
  OpenReply r;
  ASSERT_EQ(Fs().Open(b, O_RDONLY, 1, &r), 0);
  const int reads = store.Calls("read");
  EXPECT_EQ(ReadAll(r.fh, 128 << 10), std::string(3 << 20, 'b'));
  // 24 reads of 128 KiB became one fetch of the 4 MiB chunk (plus the
  // first two reads, direct, before the streak).
  EXPECT_LE(store.Calls("read") - reads, 4);
  EXPECT_GT(Fs().stats().read_ahead_used_bytes.load(), 0u);
  Fs().Release(r.fh);
}

TEST_F(MountFsTest, ANewFileIsStoredWholeAtItsOpenersCloseOnly) {
  const Ino train = Look(kRootIno, "train");
  EntryReply e;
  OpenReply r;
  ASSERT_EQ(Fs().Create(train, "new.bin", S_IFREG | 0644, 7, &e, &r), 0);
  EXPECT_EQ(Fs().StateOf(r.fh), HandleState::kWriting);
  ASSERT_EQ(Fs().Write(r.fh, "abc", 3, 0), 0);
  ASSERT_EQ(Fs().Write(r.fh, "def", 3, 3), 0);
  EXPECT_FALSE(store.Get("train/new.bin"));  // nothing visible before close
  EXPECT_EQ(Fs().Flush(r.fh, 8), 0);         // a child's close sends nothing
  EXPECT_FALSE(store.Get("train/new.bin"));
  EXPECT_EQ(Fs().Flush(r.fh, 7), 0);  // the opener's close sends it
  EXPECT_EQ(store.Get("train/new.bin"), "abcdef");
  EXPECT_EQ(Fs().StateOf(r.fh), HandleState::kSent);
  // A write after a close (a dup'd descriptor) continues the file; the next close sends the whole.
  ASSERT_EQ(Fs().Write(r.fh, "g", 1, 6), 0);
  EXPECT_EQ(Fs().StateOf(r.fh), HandleState::kWriting);
  Fs().Release(r.fh);  // the last close sends what the opener left
  EXPECT_EQ(store.Get("train/new.bin"), "abcdefg");
}

TEST_F(MountFsTest, AFailedUploadFailsTheCloseAndLeavesNoName) {
  EntryReply e;
  OpenReply r;
  ASSERT_EQ(Fs().Create(kRootIno, "big", S_IFREG | 0644, 7, &e, &r), 0);
  ASSERT_EQ(Fs().Write(r.fh, "x", 1, 0), 0);
  store.fail_writes = true;
  EXPECT_EQ(Fs().Flush(r.fh, 7), ENOSPC);
  EXPECT_EQ(Fs().Flush(r.fh, 7), ENOSPC);  // every close says so
  Fs().Release(r.fh);
  store.fail_writes = false;
  EXPECT_FALSE(store.Get("big"));
  clock.Advance(31);
  EXPECT_EQ(Look(kRootIno, "big"), 0u);
}

TEST_F(MountFsTest, WritersThatSeekBackAreStoredAsTheyWroteIt) {
  EntryReply e;
  OpenReply r;
  // A zip writer: a header with blank sizes, the data, then the header again.
  ASSERT_EQ(Fs().Create(kRootIno, "a.zip", S_IFREG | 0644, 7, &e, &r), 0);
  ASSERT_EQ(Fs().Write(r.fh, "H????", 5, 0), 0);
  ASSERT_EQ(Fs().Write(r.fh, "datadata", 8, 5), 0);
  ASSERT_EQ(Fs().Write(r.fh, "H0008", 5, 0), 0);
  ASSERT_EQ(Fs().Write(r.fh, "end", 3, 13), 0);
  ASSERT_EQ(Fs().Write(r.fh, "!", 1, 20), 0);  // past the end: a hole of zeros
  EXPECT_FALSE(store.Get("a.zip"));
  ASSERT_EQ(Fs().Flush(r.fh, 7), 0);
  Fs().Release(r.fh);
  EXPECT_EQ(store.Get("a.zip"), std::string("H0008datadataend\0\0\0\0!", 21));
  // ftruncate while writing, shorter and longer.
  ASSERT_EQ(Fs().Create(kRootIno, "t.bin", S_IFREG | 0644, 7, &e, &r), 0);
  ASSERT_EQ(Fs().Write(r.fh, "abcdef", 6, 0), 0);
  ASSERT_EQ(Fs().Truncate(e.ino, r.fh, 2), 0);
  ASSERT_EQ(Fs().Truncate(e.ino, r.fh, 4), 0);
  ASSERT_EQ(Fs().Flush(r.fh, 7), 0);
  Fs().Release(r.fh);
  EXPECT_EQ(store.Get("t.bin"), std::string("ab\0\0", 4));
}

TEST_F(MountFsTest, AWriteTheStoreCannotTakeFailsTheCloseAndStoresNothing) {
  store.positional = false;  // a writer that only appends
  EntryReply e;
  OpenReply r;
  ASSERT_EQ(Fs().Create(kRootIno, "a.zip", S_IFREG | 0644, 7, &e, &r), 0);
  ASSERT_EQ(Fs().Write(r.fh, "H????data", 9, 0), 0);
  EXPECT_EQ(Fs().Write(r.fh, "H0004", 5, 0), EOPNOTSUPP);
  EXPECT_EQ(Fs().Write(r.fh, "more", 4, 9), EOPNOTSUPP);  // the file stays failed
  EXPECT_EQ(Fs().Flush(r.fh, 7), EOPNOTSUPP);
  Fs().Release(r.fh);
  EXPECT_FALSE(store.Get("a.zip"));  // never the first 9 bytes as if they were the file
}

TEST_F(MountFsTest, WhatAWriteOnceStoreCannotDoIsRefusedBeforeAnyChange) {
  const Ino f = Look(kRootIno, "readme");
  OpenReply r;
  // Append to an existing object.
  EXPECT_EQ(Fs().Open(f, O_WRONLY | O_APPEND, 1, &r), EOPNOTSUPP);
  // Opened for writing without O_TRUNC: a write into it is refused, and so
  // is its close; the object keeps its bytes.
  ASSERT_EQ(Fs().Open(f, O_WRONLY, 1, &r), 0);
  EXPECT_EQ(Fs().StateOf(r.fh), HandleState::kExisting);
  EXPECT_EQ(Fs().Write(r.fh, "x", 1, 2), EOPNOTSUPP);
  EXPECT_EQ(Fs().Truncate(f, r.fh, 0), EOPNOTSUPP);
  EXPECT_EQ(Fs().Flush(r.fh, 1), EOPNOTSUPP);
  Fs().Release(r.fh);
  EXPECT_EQ(store.Get("readme"), "hello");
  ASSERT_EQ(Fs().Open(f, O_WRONLY, 1, &r), 0);
  EXPECT_EQ(Fs().Truncate(f, r.fh, 2), EOPNOTSUPP);
  EXPECT_EQ(Fs().Flush(r.fh, 1), EOPNOTSUPP);
  Fs().Release(r.fh);
  EXPECT_EQ(store.Get("readme"), "hello");
  // A truncate to 0 first makes it a whole replacement.
  ASSERT_EQ(Fs().Open(f, O_WRONLY, 1, &r), 0);
  ASSERT_EQ(Fs().Truncate(f, r.fh, 0), 0);
  EXPECT_EQ(Fs().StateOf(r.fh), HandleState::kWriting);
  ASSERT_EQ(Fs().Write(r.fh, "bye", 3, 0), 0);
  EXPECT_EQ(Fs().Flush(r.fh, 1), 0);
  Fs().Release(r.fh);
  EXPECT_EQ(store.Get("readme"), "bye");
  // Links, device nodes, a directory rename, RENAME_EXCHANGE.
  EXPECT_EQ(Fs().Refuse("x", "make a hard link", EPERM), EPERM);
  EXPECT_EQ(Fs().Rename(kRootIno, "train", kRootIno, "train2", false, false), EXDEV);
  EXPECT_EQ(Fs().Rename(kRootIno, "readme", kRootIno, "r2", true, false), EOPNOTSUPP);
  EXPECT_GE(Fs().stats().refused.load(), 5u);
  EntryReply e;
  EXPECT_EQ(Fs().Create(kRootIno, "fifo", S_IFIFO | 0644, 1, &e, &r), EOPNOTSUPP);
}

TEST_F(MountFsTest, AFileIsReadOrWrittenWithinOneMountNotBoth) {
  const Ino f = Look(kRootIno, "readme");
  OpenReply reader, writer;
  ASSERT_EQ(Fs().Open(f, O_RDONLY, 1, &reader), 0);
  EXPECT_EQ(Fs().Open(f, O_WRONLY | O_TRUNC, 1, &writer), EBUSY);
  Fs().Release(reader.fh);
  ASSERT_EQ(Fs().Open(f, O_WRONLY | O_TRUNC, 1, &writer), 0);
  EXPECT_EQ(Fs().Open(f, O_RDONLY, 1, &reader), EBUSY);
  size_t got = 0;
  char c;
  EXPECT_EQ(Fs().Read(writer.fh, 0, 1, &c, &got), EBADF);
  Fs().Release(writer.fh);
  EXPECT_EQ(store.Get("readme"), "");  // the truncating open's empty version
}

TEST_F(MountFsTest, NamesChangeWithUnlinkMkdirRmdirAndRename) {
  EntryReply e;
  ASSERT_EQ(Fs().MkDir(kRootIno, "empty", &e), 0);
  EXPECT_TRUE(store.Get("empty/"));  // the marker keeps it
  EXPECT_EQ(Fs().MkDir(kRootIno, "empty", &e), EEXIST);
  EXPECT_EQ(Fs().RmDir(kRootIno, "train"), ENOTEMPTY);
  ASSERT_EQ(Fs().RmDir(kRootIno, "empty"), 0);
  EXPECT_FALSE(store.Get("empty/"));
  const Ino f = Look(kRootIno, "readme");
  ASSERT_EQ(Fs().Rename(kRootIno, "readme", kRootIno, "README", false, false), 0);
  EXPECT_EQ(store.Get("README"), "hello");
  EXPECT_FALSE(store.Get("readme"));
  EXPECT_EQ(Look(kRootIno, "README"), f);  // the same inode under its new name
  EXPECT_EQ(Fs().Rename(kRootIno, "README", kRootIno, "train", false, true), EEXIST);  // RENAME_NOREPLACE
  ASSERT_EQ(Fs().Unlink(kRootIno, "README"), 0);
  EXPECT_FALSE(store.Get("README"));
  EXPECT_FALSE(Fs().Known(f));
  EXPECT_EQ(Fs().Unlink(kRootIno, "README"), ENOENT);
}

TEST_F(MountFsTest, ReadOnlyRefusesEveryChange) {
  o.read_only = true;
  EntryReply e;
  OpenReply r;
  EXPECT_EQ(Fs().Create(kRootIno, "x", S_IFREG | 0644, 1, &e, &r), EROFS);
  EXPECT_EQ(Fs().MkDir(kRootIno, "d", &e), EROFS);
  EXPECT_EQ(Fs().Unlink(kRootIno, "readme"), EROFS);
  EXPECT_EQ(Fs().Open(Look(kRootIno, "readme"), O_RDWR, 1, &r), EROFS);
  EXPECT_EQ(store.Calls("put") + store.Calls("delete") + store.Calls("rename"), 0);
}

// The plan file: lines become the store's read plan as they are written,
// by relative or absolute path, with or without a range, also on a
// read-only mount; it is never listed or read, and bad lines are EINVAL.
TEST_F(MountFsTest, ThePlanFileSendsEachLineToTheStoreAsItIsWritten) {
  o.read_only = true;
  o.mountpoint = "/mnt/data/";
  EntryReply e;
  ASSERT_EQ(Fs().Lookup(kRootIno, kPlanName, &e), 0);
  ASSERT_EQ(e.ino, kPlanIno);
  EXPECT_TRUE(S_ISREG(e.attr.st_mode));
  uint64_t dh = 0;
  ASSERT_EQ(Fs().OpenDir(kRootIno, &dh), 0);
  for (size_t i = 0; i < Fs().DirSize(dh); ++i) EXPECT_NE(Fs().DirAt(dh, i).name, kPlanName);
  Fs().ReleaseDir(dh);
  OpenReply r;
  EXPECT_EQ(Fs().Open(kPlanIno, O_RDONLY, 7, &r), EACCES);
  ASSERT_EQ(Fs().Open(kPlanIno, O_WRONLY | O_TRUNC, 7, &r), 0);
  EXPECT_EQ(Fs().Truncate(kPlanIno, r.fh, 0), 0);
  // A line split across writes is sent once it ends.
  const std::string part1 = "train/b.jpg\n/mnt/data/train/a.jpg\ntrain/s", part2 = "ub/c.jpg\ttrain/x\n";
  ASSERT_EQ(Fs().Write(r.fh, part1.data(), part1.size(), 0), 0);
  ASSERT_EQ(store.plans.size(), 1u);
  const auto& plan = store.plans.begin()->second;
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].path, "mem://bucket/train/b.jpg");
  EXPECT_EQ(plan[1].path, "mem://bucket/train/a.jpg");
  EXPECT_EQ(Fs().Write(r.fh, part2.data(), part2.size(), part1.size()), EINVAL);  // not PATH<tab>OFF<tab>LEN
  const std::string ranged = "train/sub/c.jpg\t0\t1\n../etc/passwd\n/elsewhere/x\nreadme";
  EXPECT_EQ(Fs().Write(r.fh, ranged.data(), ranged.size(), 0), EINVAL);  // two bad lines; the good one sent
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[2].path, "mem://bucket/train/sub/c.jpg");
  EXPECT_EQ(plan[2].offset, 0u);
  EXPECT_EQ(plan[2].length, 1u);
  EXPECT_EQ(Fs().Flush(r.fh, 7), 0);  // the last line, without its newline
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[3].path, "mem://bucket/readme");
  EXPECT_EQ(plan[3].length, UINT64_MAX);
  Fs().Release(r.fh);
  EXPECT_EQ(Fs().stats().planned.load(), 4u);
  EXPECT_EQ(store.Calls("put") + store.Calls("create"), 0);  // nothing written
  // Another open is another stream.
  ASSERT_EQ(Fs().Open(kPlanIno, O_WRONLY, 8, &r), 0);
  ASSERT_EQ(Fs().Write(r.fh, "readme\n", 7, 0), 0);
  Fs().Release(r.fh);
  EXPECT_EQ(store.plans.size(), 2u);
}

TEST_F(MountFsTest, ForgottenInodesGoAndTheRootStays) {
  const Ino f = Look(kRootIno, "readme");
  EXPECT_EQ(Look(kRootIno, "readme"), f);  // two references
  Fs().Forget(f, 1);
  EXPECT_TRUE(Fs().Known(f));
  Fs().Forget(f, 1);
  EXPECT_FALSE(Fs().Known(f));
  Fs().Forget(kRootIno, 100);
  EXPECT_TRUE(Fs().Known(kRootIno));
  struct stat st {};
  EXPECT_EQ(Fs().GetAttr(f, 0, &st), ENOENT);
}

// FUSE's request threads at once: each thread reads the big file through
// its own handle, all of them read one shared handle at random offsets,
// look names up and list the folder, and one thread writes new files and
// closes them. Every read sees the object's bytes, every new file is
// stored whole; under ThreadSanitizer (make sanitize) none of it races.
TEST_F(MountFsTest, RequestsFromManyThreadsAtOnce) {
  o.read_ahead = 8 << 20;
  Fs().StartFetchers(2);
  const Ino train = Look(kRootIno, "train");
  const Ino b = Look(train, "b.jpg");
  OpenReply shared;
  ASSERT_EQ(Fs().Open(b, O_RDONLY, 1, &shared), 0);
  std::atomic<int> wrong{0};
  auto all_b = [](const std::string& s, size_t n) { return s.find_first_not_of('b') >= n; };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string buf(256 << 10, '\0');
      for (int round = 0; round < 3; ++round) {
        OpenReply r;
        if (Fs().Open(b, O_RDONLY, 10 + t, &r) != 0) {
          ++wrong;
          return;
        }
        uint64_t off = 0;
        for (size_t got = 1; got > 0; off += got) {
          if (Fs().Read(r.fh, off, buf.size(), buf.data(), &got) != 0 || !all_b(buf, got)) ++wrong;
        }
        if (off != 3u << 20) ++wrong;
        Fs().Release(r.fh);
        size_t got = 0;
        const uint64_t at = (static_cast<uint64_t>(t) * 7919 + round * 104729) % (3u << 20);
        if (Fs().Read(shared.fh, at, 4096, buf.data(), &got) != 0 || !all_b(buf, got)) ++wrong;
        EntryReply e;
        if (Fs().Lookup(train, "a.jpg", &e) != 0 || e.attr.st_size != 4) ++wrong;
        uint64_t dh = 0;
        if (Fs().OpenDir(train, &dh) == 0) Fs().ReleaseDir(dh);
      }
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 5; ++i) {
      EntryReply e;
      OpenReply r;
      const std::string name = "new" + std::to_string(i);
      if (Fs().Create(kRootIno, name, S_IFREG | 0644, 99, &e, &r) != 0 || Fs().Write(r.fh, "xyz", 3, 0) != 0 ||
          Fs().Flush(r.fh, 99) != 0) {
        ++wrong;
      }
      Fs().Release(r.fh);
    }
  });
  for (auto& t : threads) t.join();
  Fs().Release(shared.fh);
  EXPECT_EQ(wrong.load(), 0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(store.Get("new" + std::to_string(i)), "xyz");
}

}  // namespace
}  // namespace aq::mount
