#include "monitor/machine.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "monitor/proc.h"

namespace aq::monitor {
namespace {

// /proc/mounts escapes spaces and tabs in paths as octal (\040).
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = s[i + k];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

}  // namespace

RootFacts FindMount(const std::string& path, const std::string& mounts_text) {
  RootFacts best;
  best.path = path;
  std::istringstream in(mounts_text);
  std::string line;
  size_t best_len = 0;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string dev, point, type;
    if (!(f >> dev >> point >> type)) continue;
    point = Unescape(point);
    bool prefix = path.compare(0, point.size(), point) == 0 &&
                  (point == "/" || path.size() == point.size() || path[point.size()] == '/');
    // Later entries shadow earlier ones mounted on the same point.
    if (prefix && point.size() >= best_len) {
      best_len = point.size();
      best.mount_point = point;
      best.fs_type = type;
      best.device = Unescape(dev);
    }
  }
  return best;
}

MachineFacts CollectMachineFacts(const std::vector<std::string>& roots) {
  MachineFacts m;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) m.hostname = host;
  utsname u{};
  if (uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
  std::istringstream cpu(ReadProcFile("/proc/cpuinfo"));
  std::string line;
  while (std::getline(cpu, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) m.cpu_model = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  m.cores = std::thread::hardware_concurrency();
  m.memory_bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const std::string mounts = ReadProcFile("/proc/mounts");
  for (const auto& r : roots) {
    char resolved[PATH_MAX];
    std::string p = realpath(r.c_str(), resolved) != nullptr ? std::string(resolved) : r;
    RootFacts f = FindMount(p, mounts);
    f.path = r;
    m.roots.push_back(std::move(f));
  }
  return m;
}

nlohmann::json ToJson(const MachineFacts& m) {
  nlohmann::json roots = nlohmann::json::array();
  for (const auto& r : m.roots) {
    roots.push_back({{"path", r.path}, {"mount_point", r.mount_point}, {"fs_type", r.fs_type}, {"device", r.device}});
  }
  return {{"hostname", m.hostname},         {"cpu_model", m.cpu_model}, {"cores", m.cores},
          {"memory_bytes", m.memory_bytes}, {"kernel", m.kernel},       {"roots", roots}};
}

}  // namespace aq::monitor
