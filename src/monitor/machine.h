// Facts about the machine a result was measured on, so a number is never
// quoted without its context: CPU model and cores, memory, kernel, and for
// each data root its file system and device (from /proc/mounts).
//
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace aq::monitor {

struct RootFacts {
  std::string path, mount_point, fs_type, device;
};

struct MachineFacts {
  std::string hostname, cpu_model, kernel;
  unsigned cores = 0;
  uint64_t memory_bytes = 0;
  std::vector<RootFacts> roots;
};

MachineFacts CollectMachineFacts(const std::vector<std::string>& roots);
nlohmann::json ToJson(const MachineFacts& m);

// The mount whose point is the longest prefix of `path` (resolved), given
// /proc/mounts' text. Exposed for tests.
RootFacts FindMount(const std::string& path, const std::string& mounts_text);

}  // namespace aq::monitor
