// Parsers for the Linux /proc files the sampler reads: /proc/stat (CPU
// time), /proc/meminfo, /proc/diskstats, /proc/net/dev, /proc/<pid>/stat and /proc/<pid>/io.
// Pure functions over the file's text so tests feed them fixed snapshots;
// lines they do not understand are skipped, never fatal.
//
// Thread safety: all functions are reentrant.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace aq::monitor {

// The whole text of a /proc (or other small) file; empty if unreadable.
std::string ReadProcFile(const std::string& path);

// Aggregate CPU time in clock ticks, from the "cpu " line of /proc/stat.
struct CpuTimes {
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  uint64_t Total() const { return user + nice + system + idle + iowait + irq + softirq + steal; }
};
CpuTimes ParseProcStat(std::string_view text);

// /proc/meminfo, values in bytes (the file says kB = KiB).
std::map<std::string, uint64_t> ParseMeminfo(std::string_view text);

struct DiskCounters {
  std::string name;
  uint64_t reads = 0, read_sectors = 0, writes = 0, write_sectors = 0;  // sectors are 512 bytes
};
std::vector<DiskCounters> ParseDiskstats(std::string_view text);

struct NetCounters {
  std::string name;
  uint64_t rx_bytes = 0, rx_packets = 0, tx_bytes = 0, tx_packets = 0;
};
std::vector<NetCounters> ParseNetDev(std::string_view text);

// utime + stime in clock ticks from /proc/<pid>/stat (the command name may
// contain spaces and parentheses: fields are counted after the last ')').
uint64_t ParseProcessCpuTicks(std::string_view text);

// /proc/<pid>/io: this process's own I/O, as opposed to the machine-wide
// /proc/diskstats. rchar counts every byte read() returned (page-cache hits
// and sockets included); read_bytes only what the process caused to be
// fetched from a block device. Zero where the kernel keeps no task I/O
// accounting.
struct ProcessIo {
  uint64_t rchar = 0, wchar = 0, read_bytes = 0, write_bytes = 0;
};
ProcessIo ParseProcessIo(std::string_view text);

}  // namespace aq::monitor
