// Tar headers (ustar, pax, GNU long names, base-256 sizes) and WebDataset
// samples: any bytes, as a whole archive and as one stored sample, with the
// default members and with a JSON label path.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/tar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = aq::io::NewSpanFile(bytes, "fuzz.tar");
  aq::format::TarReader tar(*file, "fuzz.tar");
  aq::format::WdsReader wds(tar);
  aq::format::WdsSample s;
  for (int i = 0; i < 10000; ++i) {
    auto more = wds.Next(&s);
    if (!more.ok() || !*more) break;
    // A sample's range lies inside the file and parses as it did in the scan.
    if (s.offset + s.size > size) __builtin_trap();
    (void)aq::format::ParseWdsSample(bytes.substr(s.offset, s.size), "fuzz");
  }
  auto members = aq::format::ParseTarMembers(bytes, "fuzz");
  if (members.ok()) {
    for (const auto& m : *members) {
      if (m.data_offset + m.size > size) __builtin_trap();
    }
  }
  (void)aq::format::ParseWdsSample(bytes, "fuzz");
  // A user's schema: other image members, the label a field of a JSON member.
  static const auto schema = aq::format::ParseWdsSchema("seg.png;jpg", "json:annotation.0.label");
  (void)aq::format::ParseWdsSample(bytes, "fuzz", *schema);
  return 0;
}
