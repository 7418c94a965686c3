#include "common/buffer.h"

#include <sys/mman.h>

#include <cstdint>

namespace aq {

std::string ReadBuffer(size_t n) {
  constexpr uintptr_t kHuge = 2 << 20;
  std::string s;
  s.reserve(n);  // allocated, not yet touched
  const auto at = reinterpret_cast<uintptr_t>(s.data());
  const uintptr_t begin = (at + kHuge - 1) & ~(kHuge - 1), end = (at + n) & ~(kHuge - 1);
  // Advice only: a kernel without THP, or with it off, answers EINVAL and
  // the buffer is backed by small pages as before.
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  s.resize(n);
  return s;
}

}  // namespace aq
