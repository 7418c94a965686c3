#include "format/image_folder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

namespace aq::format {

bool IsImageFileName(std::string_view name) {
  static const std::set<std::string, std::less<>> known = [] {
    std::set<std::string, std::less<>> s;
    std::istringstream in(kImageExtensions);
    for (std::string e; in >> e;) s.insert(e);
    return s;
  }();
  auto dot = name.rfind('.');
  if (dot == std::string_view::npos) return false;
  std::string ext(name.substr(dot));
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return known.count(ext) != 0;
}

namespace {

constexpr int kMaxDepth = 64;  // sub-folders below a class

std::string StemOf(std::string_view name) { return std::string(name.substr(0, name.rfind('.'))); }

// One class's walk: its images in torchvision's order, and what it passed.
class ClassWalk {
 public:
  ClassWalk(io::FileSystem& fs, ImageFolder& out, uint32_t class_index, const FolderScanOptions& o, uint64_t root_node)
      : fs_(fs), out_(out), c_(class_index), o_(o) {
    if (root_node != 0) above_.insert(root_node);
  }

  // Walks `dir` (whose identity is `node`, 0 if unknown); the folders
  // above it on this path are in `above`.
  Status Walk(const std::string& dir, uint64_t node, int depth) {
    auto files = fs_.List(dir);
    if (!files.ok()) return files.status();
    if (node != 0) above_.insert(node);
    std::map<std::string, size_t> by_stem;  // this folder's images by stem
    Folder here{dir, {}};
    for (const auto& f : *files) {
      const std::string path = io::JoinPath(dir, f.name);
      if (f.is_dir) {
        if (f.node != 0 && above_.count(f.node) != 0) {
          out_.ignored.push_back({path, "a link back to a folder above it (a loop): not followed"});
        } else if (depth >= kMaxDepth) {
          out_.ignored.push_back({path, fmt::format("more than {} folders deep: not walked", kMaxDepth)});
        } else {
          AQ_TRY(Walk(path, f.node, depth + 1));
        }
        continue;
      }
      if (!IsImageFileName(f.name)) continue;
      if (f.special) {  // named as an image, but a FIFO or device: never opened
        out_.ignored.push_back({path, f.unreadable});
        continue;
      }
      by_stem.emplace(StemOf(f.name), here.images.size());
      here.images.push_back({path, c_, f.size, {}, f.unreadable});
    }
    for (const auto& f : *files) {
      if (f.is_dir || IsImageFileName(f.name)) continue;
      const std::string path = io::JoinPath(dir, f.name);
      if (!f.unreadable.empty()) {
        out_.ignored.push_back({path, f.unreadable});
        continue;
      }
      const size_t dot = f.name.rfind('.');
      auto it = by_stem.find(StemOf(f.name));
      if (dot != std::string::npos && it != by_stem.end() &&
          std::find(o_.sidecars.begin(), o_.sidecars.end(), f.name.substr(dot + 1)) != o_.sidecars.end()) {
        here.images[it->second].sidecars.emplace_back(f.name.substr(dot + 1), path);
        continue;
      }
      out_.ignored.push_back({path, fmt::format("not named as an image ({})", kImageExtensions)});
    }
    for (auto& img : here.images) std::sort(img.sidecars.begin(), img.sidecars.end());
    folders_.push_back(std::move(here));
    if (node != 0) above_.erase(node);
    return Status::Ok();
  }

  // The class's images in torchvision's order: by folder path (as
  // sorted(os.walk(...)) orders them), then by name within a folder.
  size_t Finish() {
    std::sort(folders_.begin(), folders_.end(), [](const Folder& a, const Folder& b) { return a.dir < b.dir; });
    size_t n = 0;
    for (auto& f : folders_) {
      for (auto& img : f.images) {
        out_.total_bytes += img.size;
        out_.images.push_back(std::move(img));
        ++n;
      }
    }
    return n;
  }

 private:
  struct Folder {
    std::string dir;
    std::vector<ImageFolderEntry> images;  // sorted by name (List's order)
  };
  io::FileSystem& fs_;
  ImageFolder& out_;
  const uint32_t c_;
  const FolderScanOptions& o_;
  std::set<uint64_t> above_;
  std::vector<Folder> folders_;
};

}  // namespace

Result<ImageFolder> ScanImageFolder(io::FileSystem& fs, const std::string& root, const FolderScanOptions& o) {
  ImageFolder out;
  out.root = root;
  auto top = fs.List(root);
  if (!top.ok()) return top.status().WithContext("image folder");
  std::vector<uint64_t> nodes;
  for (const auto& e : *top) {
    const std::string path = io::JoinPath(root, e.name);
    if (e.is_dir) {
      out.classes.push_back(e.name);
      nodes.push_back(e.node);
    } else {
      out.ignored.push_back({path, e.unreadable.empty() ? "beside the class folders, in no class" : e.unreadable});
    }
  }
  if (out.classes.empty()) {
    return InvalidArgument(fmt::format("'{}' has no class subdirectories: expected root/<class>/<image>.jpg", root));
  }
  uint64_t root_node = 0;
  if (auto st = fs.Stat(root); st.ok()) root_node = st->node;
  std::vector<std::string> empty;
  for (uint32_t c = 0; c < out.classes.size(); ++c) {
    const std::string dir = io::JoinPath(root, out.classes[c]);
    ClassWalk walk(fs, out, c, o, root_node);
    Status st = root_node != 0 && nodes[c] == root_node
                    ? Status(StatusCode::kInvalidArgument, "a link to the folder itself (a loop)")
                    : walk.Walk(dir, nodes[c], 0);
    if (!st.ok()) {
      if (o.policy == ErrorPolicy::kFail || IsOutage(st)) {
        return st.WithContext(fmt::format("class {} ({})", c, out.classes[c]));
      }
      out.skipped.push_back({dir, 0, c, 0, st.message()});
      continue;
    }
    if (walk.Finish() == 0) empty.push_back(out.classes[c]);
  }
  std::sort(out.ignored.begin(), out.ignored.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  if (!empty.empty() && !o.allow_empty_classes) {
    std::string names;
    for (const auto& e : empty) names += (names.empty() ? "" : ", ") + e + (e[0] == '.' ? " (hidden)" : "");
    return InvalidArgument(fmt::format(
        "'{}': no image in the class folder(s) {}; each folder in the root is a class, as torchvision's "
        "ImageFolder counts them (it refuses these too). Remove them, or allow empty classes to keep their labels "
        "(--allow-empty-classes; allow_empty_classes=True in aquifer.Loader; torchvision's allow_empty=True)",
        root, names));
  }
  out.empty_classes = std::move(empty);
  return out;
}

}  // namespace aq::format
