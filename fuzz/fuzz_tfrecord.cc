// TFRecord framing: any bytes, both error policies, the index builder and
// random access. Must never crash, hang or allocate absurd amounts.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = aq::io::NewSpanFile(bytes, "fuzz");
  for (auto policy : {aq::format::ErrorPolicy::kFail, aq::format::ErrorPolicy::kSkip}) {
    aq::format::TFRecordReaderOptions opt;
    opt.policy = policy;
    opt.buffer_size = 256;
    aq::format::TFRecordReader r(*file, opt);
    std::string rec;
    for (int i = 0; i < 10000; ++i) {
      auto more = r.Next(&rec);
      if (!more.ok() || !*more) break;
    }
  }
  auto idx = aq::format::BuildTFRecordIndex(*file);
  if (idx.ok()) {
    // The index builder checks framing (length CRCs), not data CRCs: every
    // entry must be readable as a frame of the indexed size.
    for (const auto& e : *idx) {
      auto rec = aq::format::ReadTFRecordAt(*file, e.offset, /*verify_crc=*/false);
      if (!rec.ok() || rec->size() + aq::format::kTFRecordOverhead != e.size) __builtin_trap();
    }
  }
  (void)aq::format::ReadTFRecordAt(*file, size > 3 ? size / 3 : 0);
  return 0;
}
