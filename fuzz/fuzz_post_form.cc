// POST Object forms (s3/post_form.h): any body parses to fields and a file or
// an error, whatever pieces it arrives in (the same fields, file bytes and
// outcome fed whole or in pieces of the size the first byte picks), and any
// policy document is judged without crashing.
#include <cstddef>
#include <cstdint>
#include <string>

#include "s3/post_form.h"

namespace {

struct Outcome {
  bool ok = true, in_file = false, done = false;
  std::map<std::string, std::string> fields;
  std::string file;
};

Outcome Parse(std::string_view body, size_t piece) {
  aq::s3::FormReader reader("xYz", 4096);
  Outcome o;
  for (size_t i = 0; i < body.size() && o.ok; i += piece) {
    o.ok = reader.Feed(body.substr(i, piece), &o.file).ok();
  }
  o.in_file = reader.in_file();
  o.done = reader.done();
  o.fields = reader.fields();
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t piece = 1 + data[0] % 64;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Outcome whole = Parse(body, body.size() + 1), pieces = Parse(body, piece);
  // Errors may be found at different points; a body read without one must
  // read the same in any pieces.
  if (whole.ok && pieces.ok &&
      (whole.fields != pieces.fields || whole.file != pieces.file || whole.done != pieces.done ||
       whole.in_file != pieces.in_file)) {
    __builtin_trap();
  }
  if (whole.ok) {
    aq::s3::PostLimits limits;
    auto it = whole.fields.find("policy");
    (void)aq::s3::CheckPostPolicy(it == whole.fields.end() ? std::string_view(body) : std::string_view(it->second),
                                  whole.fields, "bucket", 1700000000, &limits);
  }
  return 0;
}
