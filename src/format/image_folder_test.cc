#include "format/image_folder.h"

#include <gtest/gtest.h>

namespace aq::format {
namespace {

void Put(io::FileSystem& fs, const std::string& path, std::string_view data = "x") {
  auto f = fs.OpenWrite(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append(data).ok());
  ASSERT_TRUE((*f)->Close().ok());
}

TEST(ImageFolder, ClassesSortedImagesSortedOthersIgnored) {
  auto fs = io::NewMemFileSystem();
  Put(*fs, "/d/zebra/b.jpg");
  Put(*fs, "/d/zebra/a.JPEG");
  Put(*fs, "/d/ant/x.jpeg", "12345");
  Put(*fs, "/d/ant/notes.txt");
  Put(*fs, "/d/README");
  ASSERT_TRUE(fs->MakeDirs("/d/empty").ok());
  auto f = ScanImageFolder(*fs, "/d");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->classes, (std::vector<std::string>{"ant", "empty", "zebra"}));
  ASSERT_EQ(f->images.size(), 3u);
  EXPECT_EQ(f->images[0].path, "/d/ant/x.jpeg");
  EXPECT_EQ(f->images[0].class_index, 0u);
  EXPECT_EQ(f->images[1].path, "/d/zebra/a.JPEG");
  EXPECT_EQ(f->images[2].class_index, 2u);
  EXPECT_EQ(f->ignored_files, 1u);  // notes.txt; files beside the classes are not counted
  EXPECT_EQ(f->total_bytes, 7u);
}

TEST(ImageFolder, NoClassesOrMissingRootIsAClearError) {
  auto fs = io::NewMemFileSystem();
  Put(*fs, "/flat/a.jpg");
  auto flat = ScanImageFolder(*fs, "/flat");
  ASSERT_FALSE(flat.ok());
  EXPECT_NE(flat.status().message().find("no class subdirectories"), std::string::npos);
  EXPECT_EQ(ScanImageFolder(*fs, "/missing").status().code(), StatusCode::kNotFound);
}

TEST(ImageFolder, ImageNames) {
  EXPECT_TRUE(IsImageFileName("a.jpg"));
  EXPECT_TRUE(IsImageFileName("n01440764_10026.JPEG"));
  EXPECT_TRUE(IsImageFileName("a.png"));
  EXPECT_TRUE(IsImageFileName("b.GIF"));
  EXPECT_TRUE(IsImageFileName("c.bmp"));
  EXPECT_FALSE(IsImageFileName("a.webp"));
  EXPECT_FALSE(IsImageFileName("notes.txt"));
  EXPECT_FALSE(IsImageFileName("jpg"));
}

TEST(ImageFolder, IgnoredFilesAreNamed) {
  auto fs = io::NewMemFileSystem();
  Put(*fs, "/d/c/a.jpg");
  Put(*fs, "/d/c/a.xml");
  Put(*fs, "/d/c/b.webp");
  auto f = ScanImageFolder(*fs, "/d");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->ignored_files, 2u);
  EXPECT_EQ(f->ignored_some, (std::vector<std::string>{"/d/c/a.xml", "/d/c/b.webp"}));
}

}  // namespace
}  // namespace aq::format
