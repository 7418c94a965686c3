// Image folders: root/<class>/<image>.jpg, the layout of ImageNet's raw
// training set and of torchvision's ImageFolder. Classes are the
// subdirectories sorted by name (class index = position, 0-based); images are
// the files named .jpg/.jpeg (any case; what the bytes are is decided when
// they are read) or .png/.gif/.bmp, sorted by name within their class.
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
  std::string path;      // root/<class>/<file>
  uint32_t class_index;  // 0-based, into ImageFolder::classes
  uint64_t size;
  // Files beside it with its stem and an asked-for extension, e.g.
  // ("json", root/<class>/<stem>.json): annotations, captions.
  std::vector<std::pair<std::string, std::string>> sidecars = {};
};

struct ImageFolder {
  std::string root;
  std::vector<std::string> classes;
  std::vector<ImageFolderEntry> images;
  uint64_t total_bytes = 0;
  uint64_t ignored_files = 0;             // files in class directories with other names
  std::vector<std::string> ignored_some;  // the first few of them, to name in reports
  std::vector<SkippedRecord> skipped;     // unreadable class directories (kSkip)
};

// .jpg, .jpeg, .png, .gif or .bmp, in any case.
bool IsImageFileName(std::string_view name);

// Scans root. An unreadable class directory fails the scan (kFail) or is
// skipped and reported (kSkip). A root with no class directory is an error.
// `sidecars` (extensions, e.g. "json", "txt"): a file <stem>.<ext> beside
// an image <stem>.<image ext> belongs to that image; one without its image
// is ignored like any other file.
Result<ImageFolder> ScanImageFolder(io::FileSystem& fs, const std::string& root,
                                    ErrorPolicy policy = ErrorPolicy::kFail,
                                    const std::vector<std::string>& sidecars = {});

}  // namespace aq::format
