// Image folders: root/<class>/.../<image>, the layout of ImageNet's raw
// training set and of torchvision's ImageFolder, read the way torchvision
// reads it so labels agree:
//  - classes are every directory in root (hidden ones too; links to
//    directories followed), sorted by name; class index = position;
//  - a class's images are the files with an image name anywhere below its
//    directory (sub-folders walked, links followed), in torchvision's order
//    (by folder path, then by name);
//  - a class with no image is refused (torchvision raises "Found no valid
//    file for the classes ..."), unless allowed, when it keeps its label
//    (torchvision's allow_empty=True).
// Every other file is listed with why it was not taken: files beside the
// classes, files with other names, dangling links, links back to a folder
// above them (not followed: torchvision would walk them until the path is
// too long). An image-named dangling link is an image that cannot be read:
// it is kept in `images` with the reason, for the caller's error policy.
// What the bytes of an image are is decided when they are read.
//
// Thread safety: pure functions over a FileSystem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/error_policy.h"
#include "io/file_system.h"

namespace aq::format {

struct ImageFolderEntry {
  std::string path;      // root/<class>/[<sub>/...]<file>
  uint32_t class_index;  // 0-based, into ImageFolder::classes
  uint64_t size;
  // Files beside it with its stem and an asked-for extension, e.g.
  // ("json", root/<class>/<stem>.json): annotations, captions.
  std::vector<std::pair<std::string, std::string>> sidecars = {};
  std::string unreadable = {};  // why it cannot be read (a dangling link), "" when it can
};

// A file the scan did not take, and why.
struct IgnoredFile {
  std::string path;
  std::string reason;
};

struct ImageFolder {
  std::string root;
  std::vector<std::string> classes;
  std::vector<ImageFolderEntry> images;
  uint64_t total_bytes = 0;
  std::vector<IgnoredFile> ignored;        // every one, by path
  std::vector<std::string> empty_classes;  // allowed and kept (allow_empty_classes)
  std::vector<SkippedRecord> skipped;      // unreadable class directories (kSkip)
};

struct FolderScanOptions {
  ErrorPolicy policy = ErrorPolicy::kFail;  // an unreadable class directory
  // Extensions (e.g. "json", "txt"): a file <stem>.<ext> beside an image
  // <stem>.<image ext> belongs to that image; one without its image is
  // ignored like any other file.
  std::vector<std::string> sidecars = {};
  bool allow_empty_classes = false;
};

// The image file names, as torchvision's IMG_EXTENSIONS plus .gif.
inline constexpr const char* kImageExtensions = ".jpg .jpeg .png .gif .bmp .webp .tif .tiff .ppm .pgm";

// Whether the name ends in one of kImageExtensions, in any case.
bool IsImageFileName(std::string_view name);

// Scans root. An unreadable class directory fails the scan (kFail) or is
// skipped and reported (kSkip). A root with no class directory, and
// (unless allowed) a class with no image, are errors that name them.
Result<ImageFolder> ScanImageFolder(io::FileSystem& fs, const std::string& root, const FolderScanOptions& options = {});

}  // namespace aq::format
