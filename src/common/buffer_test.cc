#include "common/buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>

namespace aq {
namespace {

TEST(ReadBuffer, IsNZeroBytesWhateverItsSize) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, size_t{2} << 20, (size_t{4} << 20) + 37, size_t{9} << 20}) {
    std::string b = ReadBuffer(n);
    ASSERT_EQ(b.size(), n);
    EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](char c) { return c == 0; })) << n;
    if (n > 0) {
      b[n - 1] = 'x';  // writable to its end
      EXPECT_EQ(b.back(), 'x');
    }
  }
}

// The VmFlags of the mapping holding `p` (/proc/self/smaps), "" if none.
std::string FlagsAt(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(ReadBuffer, AsksForHugePagesOverWhatItSpans) {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
  if (mode.find("[madvise]") == std::string::npos) {
    GTEST_SKIP() << "transparent huge pages are not left to programs here: " << mode;
  }
  const std::string b = ReadBuffer(size_t{9} << 20);
  const auto at = reinterpret_cast<uintptr_t>(b.data());
  const uintptr_t aligned = (at + (size_t{2} << 20) - 1) & ~((uintptr_t{2} << 20) - 1);
  const std::string flags = FlagsAt(reinterpret_cast<const void*>(aligned));
  ASSERT_FALSE(flags.empty()) << "no mapping holds the buffer";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
}

}  // namespace
}  // namespace aq
