// The text index formats: DALI-style TFRecord .idx and MXNet .idx.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/recordio.h"
#include "format/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tf = aq::format::ParseTFRecordIndex(text, "fuzz.idx");
  if (tf.ok()) {
    auto again = aq::format::ParseTFRecordIndex(aq::format::FormatTFRecordIndex(*tf), "again");
    if (!again.ok() || *again != *tf) __builtin_trap();
  }
  auto rec = aq::format::ParseRecordIOIndex(text, "fuzz.idx");
  if (rec.ok()) {
    auto again = aq::format::ParseRecordIOIndex(aq::format::FormatRecordIOIndex(*rec), "again");
    if (!again.ok() || *again != *rec) __builtin_trap();
  }
  return 0;
}
