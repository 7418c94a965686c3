// tf.Example decoding: any bytes must parse or fail cleanly; what parses must
// re-serialize to something that parses to the same Example.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/example.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)aq::format::ParseImageFields(bytes);
  auto ex = aq::format::ParseExample(bytes);
  if (!ex.ok()) return 0;
  (void)aq::format::FromExample(*ex);
  std::string again = aq::format::SerializeExample(*ex);
  auto back = aq::format::ParseExample(again);
  if (!back.ok()) __builtin_trap();
  // NaN floats compare unequal; compare the serialized forms instead.
  if (aq::format::SerializeExample(*back) != again) __builtin_trap();
  return 0;
}
