#include "monitor/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aq::monitor {

Residency PageCacheResidency(const std::vector<std::string>& files) {
  Residency r;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec;
  for (const auto& path : files) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
      ::close(fd);
      continue;
    }
    const size_t size = static_cast<size_t>(st.st_size);
    r.bytes += size;
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) continue;
    const size_t pages = (size + page - 1) / page;
    vec.assign(pages, 0);
    if (::mincore(p, size, vec.data()) == 0) {
      for (size_t i = 0; i < pages; ++i) {
        if (vec[i] & 1) r.resident_bytes += (i + 1 == pages) ? size - i * page : page;
      }
    }
    ::munmap(p, size);
  }
  return r;
}

}  // namespace aq::monitor
