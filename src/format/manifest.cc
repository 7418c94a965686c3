#include "format/manifest.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "format/json_text.h"

namespace aq::format {

using nlohmann::json;

bool ManifestFile::Trusted(uint32_t record) const {
  return record < image_crc32c.size() && !std::binary_search(unverified.begin(), unverified.end(), record);
}

std::string ManifestPath(const std::string& path, bool path_is_file) {
  if (path_is_file) {
    const std::string_view dir = io::DirName(path);
    return io::JoinPath(dir.empty() ? "." : std::string(dir), kManifestName);
  }
  return io::JoinPath(path, kManifestName);
}

std::string ManifestName(const std::string& manifest_path, const std::string& file) {
  const std::string_view dir = io::DirName(manifest_path);
  if (!dir.empty() && file.size() > dir.size() + 1 && file.compare(0, dir.size(), dir) == 0 &&
      file[dir.size()] == '/') {
    return file.substr(dir.size() + 1);
  }
  return std::string(io::BaseName(file));
}

Manifest NewManifest(std::string verified_by) {
  Manifest m;
  m.verified_by = std::move(verified_by);
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  m.created = buf;
  return m;
}

std::string FormatManifest(const Manifest& m) {
  json files = json::array();
  for (const auto& [name, f] : m.files) {
    files.push_back({{"name", name},
                     {"bytes", f.bytes},
                     {"records", f.image_crc32c.size()},
                     {"image_crc32c", f.image_crc32c},
                     {"unverified", f.unverified}});
  }
  json j = {{"aquifer_manifest", kManifestVersion},
            {"damage_rules", m.damage_rules},
            {"verified_by", m.verified_by},
            {"created", m.created},
            {"files", files}};
  return DumpJson(j) + "\n";  // names are bytes
}

namespace {

// A JSON array of numbers in 0..2^32-1 (nlohmann would wrap -1 or 2^32).
std::vector<uint32_t> U32Array(const json& a, const char* what) {
  if (!a.is_array()) throw std::invalid_argument(fmt::format("\"{}\" is not an array", what));
  std::vector<uint32_t> v;
  v.reserve(a.size());
  for (const auto& x : a) {
    if (!x.is_number_unsigned() || x.get<uint64_t>() > UINT32_MAX) {
      throw std::invalid_argument(fmt::format("\"{}\" holds {}, not a number in 0..4294967295", what, x.dump()));
    }
    v.push_back(x.get<uint32_t>());
  }
  return v;
}

uint64_t Unsigned(const json& x, const char* what) {
  if (!x.is_number_unsigned()) throw std::invalid_argument(fmt::format("\"{}\" is not a count", what));
  return x.get<uint64_t>();
}

}  // namespace

Result<Manifest> ParseManifest(std::string_view text, const std::string& where) {
  const json j = ParseJson(text);
  auto bad = [&](const std::string& what) { return InvalidArgument(fmt::format("manifest '{}': {}", where, what)); };
  if (!j.is_object()) return bad("not a JSON object");
  const auto version = j.find("aquifer_manifest");
  if (version == j.end() || !version->is_number_integer()) return bad("no \"aquifer_manifest\" version");
  if (*version != kManifestVersion) {
    return bad(fmt::format("version {} (this aquifer reads version {})", version->dump(), kManifestVersion));
  }
  Manifest m;
  try {
    m.damage_rules = j.at("damage_rules").get<int>();
    m.verified_by = j.value("verified_by", "");
    m.created = j.value("created", "");
    for (const auto& f : j.at("files")) {
      ManifestFile mf;
      const std::string name = f.at("name").get<std::string>();
      mf.bytes = Unsigned(f.at("bytes"), "bytes");
      mf.image_crc32c = U32Array(f.at("image_crc32c"), "image_crc32c");
      mf.unverified = U32Array(f.at("unverified"), "unverified");
      if (Unsigned(f.at("records"), "records") != mf.image_crc32c.size()) {
        return bad(fmt::format("'{}' says {} records and lists {} CRCs", name, f.at("records").dump(),
                               mf.image_crc32c.size()));
      }
      std::sort(mf.unverified.begin(), mf.unverified.end());
      if (!m.files.emplace(name, std::move(mf)).second) return bad(fmt::format("'{}' listed twice", name));
    }
  } catch (const std::invalid_argument& e) {
    return bad(e.what());
  } catch (const json::exception& e) {
    const std::string_view what = e.what();  // "[json.exception.type_error.302] type must be ..."
    const size_t cut = what.find("] ");
    return bad(std::string(cut == std::string_view::npos ? what : what.substr(cut + 2)));
  }
  return m;
}

Result<std::optional<Manifest>> ReadManifest(io::FileSystem& fs, const std::string& manifest_path) {
  if (!fs.Exists(manifest_path)) return std::optional<Manifest>();
  const std::string text = AQ_TRY(io::ReadFileToString(fs, manifest_path));
  return std::optional<Manifest>(AQ_TRY(ParseManifest(text, manifest_path)));
}

Status WriteManifest(io::FileSystem& fs, const std::string& manifest_path, const Manifest& m) {
  return io::WriteFileAtomic(fs, manifest_path, FormatManifest(m));
}

Status UpdateManifest(io::FileSystem& fs, const std::string& manifest_path, const std::string& verified_by,
                      std::map<std::string, ManifestFile> files) {
  Manifest m = NewManifest(verified_by);
  if (auto old = ReadManifest(fs, manifest_path);
      old.ok() && old->has_value() && (*old)->damage_rules == kDamageRules) {
    m.files = std::move((*old)->files);
  }
  for (auto& [name, f] : files) m.files[name] = std::move(f);
  return WriteManifest(fs, manifest_path, m);
}

}  // namespace aq::format
