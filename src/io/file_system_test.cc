#include "io/file_system.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "io/sequential_reader.h"

namespace aq::io {
namespace {

// The same contract, checked on the POSIX and the in-memory file systems.
class FileSystemTest : public testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      fs_ = NewPosixFileSystem();
      char tmpl[] = "/tmp/aq_fs_test_XXXXXX";
      ASSERT_NE(mkdtemp(tmpl), nullptr);
      root_ = tmpl;
    } else {
      fs_ = NewMemFileSystem();
      root_ = "/mem";
      ASSERT_TRUE(fs_->MakeDirs(root_).ok());
    }
  }
  void TearDown() override {
    if (GetParam()) std::filesystem::remove_all(root_);
  }
  std::string P(const std::string& name) { return JoinPath(root_, name); }
  void Write(const std::string& path, std::string_view data) {
    auto f = fs_->OpenWrite(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE((*f)->Append(data).ok());
    ASSERT_TRUE((*f)->Close().ok());
  }
  std::unique_ptr<FileSystem> fs_;
  std::string root_;
};

TEST_P(FileSystemTest, WriteReadStatList) {
  ASSERT_TRUE(fs_->MakeDirs(P("a/b")).ok());
  Write(P("a/b/f1"), "hello");
  Write(P("a/f0"), std::string(3 << 20, 'x'));  // larger than the write buffer
  auto st = fs_->Stat(P("a/f0"));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->size, 3u << 20);
  auto list = fs_->List(P("a"));
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "b");
  EXPECT_TRUE((*list)[0].is_dir);
  EXPECT_EQ((*list)[1].name, "f0");
  auto s = ReadFileToString(*fs_, P("a/b/f1"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, "hello");
}

TEST_P(FileSystemTest, ReadAtPastEndIsShortNotAnError) {
  Write(P("f"), "0123456789");
  auto f = fs_->OpenRead(P("f"));
  ASSERT_TRUE(f.ok());
  char buf[8];
  auto n = (*f)->ReadAt(6, sizeof buf, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 4u);
  EXPECT_EQ(std::string(buf, 4), "6789");
  n = (*f)->ReadAt(100, sizeof buf, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

TEST_P(FileSystemTest, MissingFileIsNotFoundNamingThePath) {
  auto f = fs_->OpenRead(P("nope"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("nope"), std::string::npos);
  EXPECT_FALSE(fs_->List(P("nodir")).ok());
}

TEST_P(FileSystemTest, RenameReplacesAtomicallyAndRemoveDeletes) {
  Write(P("x"), "old");
  ASSERT_TRUE(WriteFileAtomic(*fs_, P("x"), "new").ok());
  EXPECT_EQ(*ReadFileToString(*fs_, P("x")), "new");
  EXPECT_FALSE(fs_->Exists(P("x.tmp")));
  ASSERT_TRUE(fs_->Remove(P("x")).ok());
  EXPECT_FALSE(fs_->Exists(P("x")));
  EXPECT_EQ(fs_->Remove(P("x")).code(), StatusCode::kNotFound);
}

TEST_P(FileSystemTest, CopyCopiesBytes) {
  std::string data(1 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  Write(P("src"), data);
  auto m = fs_->Copy(P("src"), P("dst"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*ReadFileToString(*fs_, P("dst")), data);
}

TEST_P(FileSystemTest, SequentialReaderAcrossBufferBoundaries) {
  std::string data(10000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i % 251);
  Write(P("s"), data);
  auto f = fs_->OpenRead(P("s"), AccessHint::kSequential);
  ASSERT_TRUE(f.ok());
  SequentialReader r(**f, 64);
  std::string got, part;
  for (size_t step : {1, 7, 63, 64, 65, 1000, 5000}) {
    ASSERT_TRUE(r.Read(step, &part).ok());
    got += part;
  }
  ASSERT_TRUE(r.Read(100000, &part).ok());
  got += part;
  EXPECT_EQ(got, data);
  EXPECT_EQ(r.remaining(), 0u);
  r.Seek(5);
  ASSERT_TRUE(r.Read(3, &part).ok());
  EXPECT_EQ(part, data.substr(5, 3));

  // Readers made one after another with one lent buffer (larger than theirs
  // after the first, holding the last one's bytes) read the same data.
  std::string lent;
  for (size_t buffer : {64, 16, 300}) {
    SequentialReader l(**f, buffer, 0, &lent);
    got.clear();
    for (size_t step : {1, 7, 63, 64, 65, 1000, 5000, 100000}) {
      ASSERT_TRUE(l.Read(step, &part).ok());
      got += part;
    }
    EXPECT_EQ(got, data) << "buffer " << buffer;
    EXPECT_GE(lent.size(), buffer);
  }
  EXPECT_EQ(lent.size(), 300u);
}

INSTANTIATE_TEST_SUITE_P(Both, FileSystemTest, testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Posix" : "Memory"; });

TEST(PosixFileSystem, FullDiskIsNoSpaceNamingTheFile) {
  auto fs = NewPosixFileSystem();
  if (!fs->Exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  auto f = fs->OpenWrite("/dev/full");
  ASSERT_TRUE(f.ok());
  Status s = (*f)->Append(std::string(4 << 20, 'x'));  // bypasses the buffer: the write fails now
  if (s.ok()) s = (*f)->Close();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNoSpace);
  EXPECT_NE(s.message().find("/dev/full"), std::string::npos);
}

TEST(PosixFileSystem, SyncOfADeviceHasNothingToMakeDurable) {
  // `aquifer cp aquifer://.../big /dev/null` reads an object and drops it.
  auto fs = NewPosixFileSystem();
  if (!fs->Exists("/dev/null")) GTEST_SKIP() << "no /dev/null";
  auto f = fs->OpenWrite("/dev/null");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("bytes").ok());
  EXPECT_TRUE((*f)->Sync().ok());
  EXPECT_TRUE((*f)->Close().ok());
}

TEST(PosixFileSystem, OpeningADirectoryForReadIsAClearError) {
  auto fs = NewPosixFileSystem();
  auto f = fs->OpenRead("/tmp");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("directory"), std::string::npos);
}

TEST(Paths, JoinBaseDir) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("a", "/b"), "/b");
  EXPECT_EQ(BaseName("/x/y/z.rec"), "z.rec");
  EXPECT_EQ(DirName("/x/y/z.rec"), "/x/y");
  EXPECT_EQ(DirName("z"), ".");
}

}  // namespace
}  // namespace aq::io

namespace aq::io {
namespace {

// Regression: the in-memory writer reported size 0 once closed.
TEST(MemFileSystem, WriterSizeSurvivesClose) {
  auto fs = NewMemFileSystem();
  auto f = fs->OpenWrite("/x");
  ASSERT_TRUE((*f)->Append("12345").ok());
  ASSERT_TRUE((*f)->Close().ok());
  EXPECT_EQ((*f)->size(), 5u);
}

}  // namespace
}  // namespace aq::io
