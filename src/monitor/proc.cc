#include "monitor/proc.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace aq::monitor {
namespace {

// Splits one line into whitespace-separated fields.
std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

uint64_t Num(std::string_view s) {
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    fn(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

}  // namespace

std::string ReadProcFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CpuTimes ParseProcStat(std::string_view text) {
  CpuTimes t;
  ForEachLine(text, [&](std::string_view line) {
    auto f = Fields(line);
    if (f.size() < 5 || f[0] != "cpu") return;
    uint64_t* dst[] = {&t.user, &t.nice, &t.system, &t.idle, &t.iowait, &t.irq, &t.softirq, &t.steal};
    for (size_t i = 0; i < 8 && i + 1 < f.size(); ++i) *dst[i] = Num(f[i + 1]);
  });
  return t;
}

std::map<std::string, uint64_t> ParseMeminfo(std::string_view text) {
  std::map<std::string, uint64_t> out;
  ForEachLine(text, [&](std::string_view line) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return;
    auto f = Fields(line.substr(colon + 1));
    if (f.empty()) return;
    uint64_t v = Num(f[0]);
    if (f.size() > 1 && f[1] == "kB") v *= 1024;
    out[std::string(line.substr(0, colon))] = v;
  });
  return out;
}

std::vector<DiskCounters> ParseDiskstats(std::string_view text) {
  std::vector<DiskCounters> out;
  ForEachLine(text, [&](std::string_view line) {
    auto f = Fields(line);
    // major minor name reads merged sectors ms writes merged sectors ms ...
    if (f.size() < 11) return;
    DiskCounters d;
    d.name = std::string(f[2]);
    d.reads = Num(f[3]);
    d.read_sectors = Num(f[5]);
    d.writes = Num(f[7]);
    d.write_sectors = Num(f[9]);
    out.push_back(std::move(d));
  });
  return out;
}

std::vector<NetCounters> ParseNetDev(std::string_view text) {
  std::vector<NetCounters> out;
  ForEachLine(text, [&](std::string_view line) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return;  // the two header lines have '|' but no ':'
    auto name = Fields(line.substr(0, colon));
    auto f = Fields(line.substr(colon + 1));
    if (name.size() != 1 || f.size() < 10) return;
    NetCounters n;
    n.name = std::string(name[0]);
    n.rx_bytes = Num(f[0]);
    n.rx_packets = Num(f[1]);
    n.tx_bytes = Num(f[8]);
    n.tx_packets = Num(f[9]);
    out.push_back(std::move(n));
  });
  return out;
}

uint64_t ParseProcessCpuTicks(std::string_view text) {
  size_t close = text.rfind(')');
  if (close == std::string_view::npos) return 0;
  auto f = Fields(text.substr(close + 1));
  // After the name: state(0) ppid pgrp session tty tpgid flags minflt cminflt
  // majflt cmajflt utime(11) stime(12).
  if (f.size() < 13) return 0;
  return Num(f[11]) + Num(f[12]);
}

ProcessIo ParseProcessIo(std::string_view text) {
  ProcessIo io;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    auto f = Fields(line.substr(colon + 1));
    if (f.empty()) continue;
    uint64_t v = Num(f[0]);
    if (key == "rchar") io.rchar = v;
    if (key == "wchar") io.wchar = v;
    if (key == "read_bytes") io.read_bytes = v;
    if (key == "write_bytes") io.write_bytes = v;
  }
  return io;
}

}  // namespace aq::monitor
