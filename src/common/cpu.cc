#include "common/cpu.h"

#include <cstdlib>
#include <cstring>

namespace aq {

bool SimdDisabled() {
  static const bool disabled = [] {
    const char* v = std::getenv("AQUIFER_NO_SIMD");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return disabled;
}

bool Avx2Disabled() {
  static const bool disabled = [] {
    const char* v = std::getenv("AQUIFER_NO_AVX2");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return disabled;
}

}  // namespace aq
