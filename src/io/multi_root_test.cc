#include "io/multi_root.h"

#include <gtest/gtest.h>

#include <set>

namespace aq::io {
namespace {

class MultiRootTest : public testing::Test {
 protected:
  void SetUp() override {
    base_ = NewMemFileSystem();
    for (const char* root : {"/m1/train", "/m2/train", "/m3/train"}) {
      for (int i = 0; i < 30; ++i) {
        auto f = base_->OpenWrite(std::string(root) + "/shard-" + std::to_string(i));
        ASSERT_TRUE((*f)->Append(std::string(root)).ok());  // content says which mount served it
        ASSERT_TRUE((*f)->Close().ok());
      }
    }
  }
  std::string ReadVia(FileSystem& fs, const std::string& path) {
    auto f = fs.OpenRead(path);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    std::string s((*f)->size(), '\0');
    EXPECT_TRUE((*f)->ReadAt(0, s.size(), s.data()).ok());
    return s;
  }
  std::unique_ptr<FileSystem> base_;
};

TEST_F(MultiRootTest, SpreadUsesEveryRootDeterministically) {
  MultiRootFileSystem fs(*base_, {"/m1/train", "/m2/train", "/m3/train"}, RootPolicy::kSpread, 0);
  std::set<std::string> served;
  for (int i = 0; i < 30; ++i) {
    std::string path = "/m1/train/shard-" + std::to_string(i);
    std::string got = ReadVia(fs, path);
    EXPECT_EQ(got, fs.roots()[fs.RootOf(path)]);
    served.insert(got);
  }
  EXPECT_EQ(served.size(), 3u);
  uint64_t opens = 0, bytes = 0;
  for (size_t r = 0; r < 3; ++r) {
    opens += fs.opens(r);
    bytes += fs.bytes_read(r);
    EXPECT_GT(fs.opens(r), 0u);
  }
  EXPECT_EQ(opens, 30u);
  EXPECT_EQ(bytes, 30u * 9u);
  // Listing shows the dataset once, through the first root.
  EXPECT_EQ(fs.List("/m1/train")->size(), 30u);
}

TEST_F(MultiRootTest, PinnedSendsARankToOneRoot) {
  for (uint32_t rank = 0; rank < 4; ++rank) {
    MultiRootFileSystem fs(*base_, {"/m1/train", "/m2/train", "/m3/train"}, RootPolicy::kPinned, rank);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(ReadVia(fs, "/m1/train/shard-" + std::to_string(i)), fs.roots()[rank % 3]);
  }
}

TEST_F(MultiRootTest, ReadOnlyAndClearErrors) {
  MultiRootFileSystem fs(*base_, {"/m1/train", "/gone/train"}, RootPolicy::kPinned, 1);
  auto f = fs.OpenRead("/m1/train/shard-0");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("/gone/train/shard-0"), std::string::npos) << "names the failing mount";
  EXPECT_EQ(fs.OpenWrite("/m1/train/x").status().code(), StatusCode::kPermissionDenied);
  EXPECT_FALSE(SplitRoots("/a::/b").ok());
  EXPECT_EQ(*SplitRoots("/a/:/b"), (std::vector<std::string>{"/a", "/b"}));
  EXPECT_FALSE(ParseRootPolicy("random").ok());
}

TEST(SplitRootsTest, UrlRootsKeepTheirPorts) {
  auto r = SplitRoots("aquifer://127.0.0.1:9000/b/train:aquifer://127.0.0.2:9000/b/train:/mnt/x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(
      *r, (std::vector<std::string>{"aquifer://127.0.0.1:9000/b/train", "aquifer://127.0.0.2:9000/b/train", "/mnt/x"}));
  EXPECT_EQ(*SplitRoots("aquifer://h:1/b"), std::vector<std::string>{"aquifer://h:1/b"});
}

}  // namespace
}  // namespace aq::io
