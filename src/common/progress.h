// A progress line for long work: items/s, MB/s, percentage and ETA, redrawn
// on stderr at most ~8 times a second. Off when stdout is not a terminal (so
// pipes, CI logs and --json output stay clean) or when disabled explicitly.
//
// Thread safety: Add() may be called from any number of threads; Finish()
// from one thread after all Add() calls.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace aq {

class Progress {
 public:
  struct Options {
    std::string label;
    uint64_t total_items = 0;  // 0 = unknown
    uint64_t total_bytes = 0;  // 0 = unknown; percentages use bytes when known
    const char* item_name = "files";
    bool enabled = true;  // and only if stdout and stderr are terminals
  };
  explicit Progress(Options options);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Add(uint64_t items, uint64_t bytes);
  // Clears the line (the caller prints its own summary).
  void Finish();

  // Whether progress would be drawn for this process (stdout is a terminal).
  static bool TerminalAttached();

 private:
  void Draw(bool final) /* REQUIRES: mu_ held */;

  Options opt_;
  bool active_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> items_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<int64_t> next_draw_ns_{0};
  std::mutex mu_;  // serialises drawing
  bool finished_ = false;
};

}  // namespace aq
