#include "format/image_folder.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace aq::format {
namespace {

void Put(io::FileSystem& fs, const std::string& path, std::string_view data = "x") {
  ASSERT_TRUE(fs.MakeDirs(std::string(io::DirName(path))).ok());
  auto f = fs.OpenWrite(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append(data).ok());
  ASSERT_TRUE((*f)->Close().ok());
}

std::vector<std::string> Paths(const ImageFolder& f) {
  std::vector<std::string> out;
  for (const auto& i : f.images) out.push_back(i.path);
  return out;
}

std::map<std::string, std::string> Ignored(const ImageFolder& f) {
  std::map<std::string, std::string> out;
  for (const auto& i : f.ignored) out[i.path] = i.reason;
  return out;
}

TEST(ImageFolder, ClassesSortedImagesSortedOthersIgnoredWithWhy) {
  auto fs = io::NewMemFileSystem();
  Put(*fs, "/d/zebra/b.jpg");
  Put(*fs, "/d/zebra/a.JPEG");
  Put(*fs, "/d/ant/x.jpeg", "12345");
  Put(*fs, "/d/ant/notes.txt");
  Put(*fs, "/d/README");
  auto f = ScanImageFolder(*fs, "/d");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->classes, (std::vector<std::string>{"ant", "zebra"}));
  EXPECT_EQ(Paths(*f), (std::vector<std::string>{"/d/ant/x.jpeg", "/d/zebra/a.JPEG", "/d/zebra/b.jpg"}));
  EXPECT_EQ(f->images[0].class_index, 0u);
  EXPECT_EQ(f->images[2].class_index, 1u);
  EXPECT_EQ(f->total_bytes, 7u);
  const auto ignored = Ignored(*f);
  ASSERT_EQ(ignored.size(), 2u);
  EXPECT_NE(ignored.at("/d/README").find("in no class"), std::string::npos);
  EXPECT_NE(ignored.at("/d/ant/notes.txt").find("not named as an image"), std::string::npos);
}

// torchvision walks sub-folders of a class (os.walk) and orders images by
// folder path, then name: folder "c/a" before "c/a b" (a prefix first),
// though "c/a b/y.jpg" < "c/a/x.jpg" as whole paths.
TEST(ImageFolder, SubFoldersAreWalkedInTorchvisionsOrder) {
  auto fs = io::NewMemFileSystem();
  Put(*fs, "/d/c/z.jpg");
  Put(*fs, "/d/c/sub/b.png");
  Put(*fs, "/d/c/sub/deeper/a.jpg");
  Put(*fs, "/d/c/a b/y.jpg");
  Put(*fs, "/d/c/a/x.jpg");
  auto f = ScanImageFolder(*fs, "/d");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Paths(*f), (std::vector<std::string>{"/d/c/z.jpg", "/d/c/a/x.jpg", "/d/c/a b/y.jpg", "/d/c/sub/b.png",
                                                 "/d/c/sub/deeper/a.jpg"}));
  for (const auto& i : f->images) EXPECT_EQ(i.class_index, 0u);
  EXPECT_TRUE(f->ignored.empty());
}

// torchvision counts hidden folders (.ipynb_checkpoints) as classes and
// refuses a class with no image; so does the scan, naming them, unless
// empty classes are allowed, when they keep their labels.
TEST(ImageFolder, HiddenAndEmptyClassesAreCountedAsTorchvisionDoes) {
  auto fs = io::NewMemFileSystem();
  Put(*fs, "/d/.ipynb_checkpoints/notebook-checkpoint.ipynb");
  Put(*fs, "/d/cat/a.jpg");
  Put(*fs, "/d/dog/b.jpg");
  ASSERT_TRUE(fs->MakeDirs("/d/empty").ok());
  auto refused = ScanImageFolder(*fs, "/d");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(".ipynb_checkpoints (hidden), empty"), std::string::npos)
      << refused.status().message();
  FolderScanOptions o;
  o.allow_empty_classes = true;
  auto f = ScanImageFolder(*fs, "/d", o);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->classes, (std::vector<std::string>{".ipynb_checkpoints", "cat", "dog", "empty"}));
  EXPECT_EQ(f->empty_classes, (std::vector<std::string>{".ipynb_checkpoints", "empty"}));
  EXPECT_EQ(f->images[0].class_index, 1u);  // cat: index 1, as torchvision's class_to_idx
  EXPECT_EQ(f->images[1].class_index, 2u);
}

TEST(ImageFolder, NoClassesOrMissingRootIsAClearError) {
  auto fs = io::NewMemFileSystem();
  Put(*fs, "/flat/a.jpg");
  auto flat = ScanImageFolder(*fs, "/flat");
  ASSERT_FALSE(flat.ok());
  EXPECT_NE(flat.status().message().find("no class subdirectories"), std::string::npos);
  EXPECT_EQ(ScanImageFolder(*fs, "/missing").status().code(), StatusCode::kNotFound);
}

TEST(ImageFolder, ImageNamesAreTorchvisionsPlusGif) {
  for (const char* n : {"a.jpg", "n01440764_10026.JPEG", "a.png", "b.GIF", "c.bmp", "d.webp", "e.tif", "f.TIFF",
                        "g.ppm", "h.pgm", ".jpg"}) {
    EXPECT_TRUE(IsImageFileName(n)) << n;
  }
  for (const char* n : {"notes.txt", "jpg", "a.jpg.txt", "a.jp", ""}) EXPECT_FALSE(IsImageFileName(n)) << n;
}

TEST(ImageFolder, SidecarsBelongToTheirImageOrphansAreIgnored) {
  auto fs = io::NewMemFileSystem();
  Put(*fs, "/d/c/a.jpg");
  Put(*fs, "/d/c/a.json");
  Put(*fs, "/d/c/b.json");
  FolderScanOptions o;
  o.sidecars = {"json"};
  auto f = ScanImageFolder(*fs, "/d", o);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->images.size(), 1u);
  EXPECT_EQ(f->images[0].sidecars, (std::vector<std::pair<std::string, std::string>>{{"json", "/d/c/a.json"}}));
  EXPECT_EQ(Ignored(*f).count("/d/c/b.json"), 1u);
}

// Links on a real file system: a linked class folder is followed, an
// image-named dangling link is an image that cannot be read (the caller's
// error policy decides), other dangling links and loops are listed.
TEST(ImageFolder, LinksDanglingLinksAndLoops) {
  namespace sfs = std::filesystem;
  char tmpl[] = "/tmp/aq_folder_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const sfs::path root = sfs::path(tmpl) / "d";
  auto fs = io::NewPosixFileSystem();
  Put(*fs, (root / "cat/a.jpg").string());
  Put(*fs, (sfs::path(tmpl) / "elsewhere/b.jpg").string());
  sfs::create_directory_symlink(sfs::path(tmpl) / "elsewhere", root / "dog");
  sfs::create_symlink(root / "cat/gone.jpg", root / "cat/dangling.jpg");
  sfs::create_symlink(root / "cat/gone.txt", root / "cat/dangling.txt");
  sfs::create_directory_symlink(root / "cat", root / "cat/loop");
  sfs::create_directory_symlink(root, root / "cat/up");
  auto f = ScanImageFolder(*fs, root.string());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->classes, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(f->images.size(), 3u);
  EXPECT_EQ(f->images[0].path, (root / "cat/a.jpg").string());
  EXPECT_EQ(f->images[1].path, (root / "cat/dangling.jpg").string());
  EXPECT_EQ(f->images[1].unreadable, "a dangling symbolic link");
  EXPECT_EQ(f->images[2].path, (root / "dog/b.jpg").string());
  EXPECT_EQ(f->images[2].class_index, 1u);
  const auto ignored = Ignored(*f);
  EXPECT_EQ(ignored.at((root / "cat/dangling.txt").string()), "a dangling symbolic link");
  EXPECT_NE(ignored.at((root / "cat/loop").string()).find("loop"), std::string::npos);
  EXPECT_NE(ignored.at((root / "cat/up").string()).find("loop"), std::string::npos);
  sfs::remove_all(tmpl);
}

// A FIFO or a socket named like an image is listed as ignored and never
// opened: opening a FIFO with no writer waits forever. Opened by name, it
// is refused at once.
TEST(ImageFolder, FifosAndSocketsAreIgnoredNeverOpened) {
  namespace sfs = std::filesystem;
  char tmpl[] = "/tmp/aq_folder_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const sfs::path root = sfs::path(tmpl);
  auto fs = io::NewPosixFileSystem();
  Put(*fs, (root / "cat/a.jpg").string());
  ASSERT_EQ(::mkfifo((root / "cat/fifo.jpg").c_str(), 0644), 0);
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock_path = (root / "cat/sock.JPEG").string();
  ASSERT_LT(sock_path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, sock_path.c_str(), sock_path.size() + 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  auto f = ScanImageFolder(*fs, root.string());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->images.size(), 1u);
  const auto ignored = Ignored(*f);
  EXPECT_EQ(ignored.at((root / "cat/fifo.jpg").string()), "a FIFO (named pipe), not a regular file");
  EXPECT_EQ(ignored.at(sock_path), "a socket, not a regular file");
  auto opened = fs->OpenRead((root / "cat/fifo.jpg").string(), io::AccessHint::kSequential);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("not a regular file"), std::string::npos) << opened.status().ToString();
  ::close(sock);
  sfs::remove_all(tmpl);
}

}  // namespace
}  // namespace aq::format
