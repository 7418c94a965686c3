#include "format/image_folder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

namespace aq::format {

bool IsImageFileName(std::string_view name) {
  auto dot = name.rfind('.');
  if (dot == std::string_view::npos) return false;
  std::string ext(name.substr(dot + 1));
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == "jpg" || ext == "jpeg" || ext == "png" || ext == "gif" || ext == "bmp";
}

Result<ImageFolder> ScanImageFolder(io::FileSystem& fs, const std::string& root, ErrorPolicy policy,
                                    const std::vector<std::string>& sidecars) {
  ImageFolder out;
  out.root = root;
  auto top = fs.List(root);
  if (!top.ok()) return top.status().WithContext("image folder");
  for (const auto& e : *top) {
    if (e.is_dir) {
      if (e.name.empty() || e.name[0] == '.') continue;  // hidden, like torchvision's scandir
      out.classes.push_back(e.name);
    }
    // Files beside the class directories (labels, READMEs) are not images
    // of any class and are not counted.
  }
  if (out.classes.empty()) {
    return InvalidArgument(fmt::format("'{}' has no class subdirectories: expected root/<class>/<image>.jpg", root));
  }
  for (uint32_t c = 0; c < out.classes.size(); ++c) {
    std::string dir = io::JoinPath(root, out.classes[c]);
    auto files = fs.List(dir);
    if (!files.ok()) {
      if (policy == ErrorPolicy::kFail || IsOutage(files.status()))
        return files.status().WithContext(fmt::format("class {} ({})", c, out.classes[c]));
      out.skipped.push_back({dir, 0, c, 0, files.status().message()});
      continue;
    }
    const size_t first = out.images.size();
    std::map<std::string, size_t> by_stem;  // this class's images by stem
    auto stem_of = [](std::string_view name) { return std::string(name.substr(0, name.rfind('.'))); };
    for (const auto& f : *files) {
      if (f.is_dir || !IsImageFileName(f.name)) continue;
      by_stem.emplace(stem_of(f.name), out.images.size());
      out.images.push_back({io::JoinPath(dir, f.name), c, f.size});
      out.total_bytes += f.size;
    }
    for (const auto& f : *files) {
      if (!f.is_dir && IsImageFileName(f.name)) continue;
      if (!f.is_dir && !sidecars.empty()) {
        const size_t dot = f.name.rfind('.');
        const std::string ext = dot == std::string::npos ? "" : f.name.substr(dot + 1);
        auto it = by_stem.find(stem_of(f.name));
        if (dot != std::string::npos && it != by_stem.end() &&
            std::find(sidecars.begin(), sidecars.end(), ext) != sidecars.end()) {
          out.images[it->second].sidecars.emplace_back(ext, io::JoinPath(dir, f.name));
          continue;
        }
      }
      ++out.ignored_files;
      if (out.ignored_some.size() < 10) out.ignored_some.push_back(io::JoinPath(dir, f.name));
    }
    for (size_t i = first; i < out.images.size(); ++i) {
      std::sort(out.images[i].sidecars.begin(), out.images[i].sidecars.end());
    }
  }
  return out;
}

}  // namespace aq::format
