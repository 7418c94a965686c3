// MXNet RecordIO framing and the im2rec image header: any bytes, both
// error policies.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/recordio.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = aq::io::NewSpanFile(bytes, "fuzz.rec");
  for (auto policy : {aq::format::ErrorPolicy::kFail, aq::format::ErrorPolicy::kSkip}) {
    aq::format::RecordIOReaderOptions opt;
    opt.policy = policy;
    opt.buffer_size = 256;
    aq::format::RecordIOReader r(*file, opt);
    std::string rec;
    for (int i = 0; i < 10000; ++i) {
      auto more = r.Next(&rec);
      if (!more.ok() || !*more) break;
      auto img = aq::format::UnpackImageRecord(rec);
      if (img.ok() && aq::format::PackImageRecord(img->header, img->image) != rec) __builtin_trap();
    }
  }
  (void)aq::format::UnpackImageRecord(bytes);
  return 0;
}
