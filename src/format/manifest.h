// The verification manifest: which records of a dataset were decoded in
// full without damage, and the CRC32C of each one's image bytes as they
// were then. `dataset pack` writes it beside the shards it makes (every
// image was checked or made by pack); `dataset verify --decode` writes it
// for the records it found clean. The pipeline trusts a record while its
// image bytes still have that CRC, and then skips reading the file to its
// end for the damage check, so a verified dataset's first epoch runs at the
// speed of later ones. A changed record (other CRC), a file of another size
// or record count, or a manifest written under other damage rules is simply
// not trusted: the pipeline checks as it does without one.
//
// Format (JSON, docs/formats.md): {"aquifer_manifest": 1, "damage_rules": 1,
// "verified_by": "...", "created": "...", "files": [{"name": ..., "bytes":
// ..., "records": ..., "image_crc32c": [...], "unverified": [...]}]}.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "io/file_system.h"

namespace aq::format {

inline constexpr int kManifestVersion = 1;
// What counts as damage (libjpeg-turbo's warnings, see image/jpeg.h): bumped
// when that changes, so records verified under other rules are read to
// their end again. 2: every Huffman code checked (the slow path), coded
// data left over before a marker is damage.
inline constexpr int kDamageRules = 2;
inline constexpr const char* kManifestName = "aquifer-manifest.json";

struct ManifestFile {
  uint64_t bytes = 0;                  // the file's size when verified
  std::vector<uint32_t> image_crc32c;  // one per record: its image bytes' CRC32C
  std::vector<uint32_t> unverified;    // records not verified clean (sorted)
  bool Trusted(uint32_t record) const;
};

struct Manifest {
  std::string verified_by;  // "dataset pack", "dataset verify --decode"
  std::string created;      // UTC, ISO 8601
  int damage_rules = kDamageRules;
  std::map<std::string, ManifestFile> files;  // by path relative to the manifest's folder
};

// The manifest of the dataset at `path`: in it when it is a folder, beside
// it when it is one file.
std::string ManifestPath(const std::string& path, bool path_is_file);
// A file's name in its manifest (its path relative to the manifest's folder).
std::string ManifestName(const std::string& manifest_path, const std::string& file);

// nullopt when there is none; an error naming the file when it is not a
// manifest this version reads.
Result<std::optional<Manifest>> ReadManifest(io::FileSystem& fs, const std::string& manifest_path);
Result<Manifest> ParseManifest(std::string_view text, const std::string& where);
std::string FormatManifest(const Manifest& m);
// Replaces it whole (written under a temporary name, then renamed).
Status WriteManifest(io::FileSystem& fs, const std::string& manifest_path, const Manifest& m);

// Sets the entries of `files` in the manifest at manifest_path (made when
// there is none; one that cannot be read or has other damage rules is
// replaced), stamped verified_by and now, and writes it whole.
Status UpdateManifest(io::FileSystem& fs, const std::string& manifest_path, const std::string& verified_by,
                      std::map<std::string, ManifestFile> files);

// An empty manifest stamped with the time now.
Manifest NewManifest(std::string verified_by);

}  // namespace aq::format
