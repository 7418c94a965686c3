// The verification manifest (aquifer-manifest.json): any bytes parse to a
// manifest or an error, and a parsed one survives formatting unchanged.
// Also the JSON text codec under it: any bytes as a name come back from
// DumpJson + ParseJson as the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/json_text.h"
#include "format/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json named = {{"name", std::string(text)}};
  if (aq::format::ParseJson(aq::format::DumpJson(named)) != named) __builtin_trap();
  auto m = aq::format::ParseManifest(text, "fuzz.json");
  if (!m.ok()) return 0;
  auto again = aq::format::ParseManifest(aq::format::FormatManifest(*m), "again");
  if (!again.ok() || again->files.size() != m->files.size()) __builtin_trap();
  for (const auto& [name, f] : m->files) {
    const auto& g = again->files.at(name);
    if (g.image_crc32c != f.image_crc32c || g.unverified != f.unverified || g.bytes != f.bytes) __builtin_trap();
  }
  return 0;
}
