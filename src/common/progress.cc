#include "common/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "common/units.h"

namespace aq {

namespace {
constexpr int64_t kRedrawNs = 125'000'000;
}

bool Progress::TerminalAttached() { return isatty(STDOUT_FILENO) && isatty(STDERR_FILENO); }

Progress::Progress(Options options)
    : opt_(std::move(options)), active_(opt_.enabled && TerminalAttached()), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { Finish(); }

void Progress::Add(uint64_t items, uint64_t bytes) {
  items_.fetch_add(items, std::memory_order_relaxed);
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (!active_) return;
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
  int64_t due = next_draw_ns_.load(std::memory_order_relaxed);
  if (now < due) return;
  if (!next_draw_ns_.compare_exchange_strong(due, now + kRedrawNs)) return;  // another thread draws
  std::lock_guard<std::mutex> lock(mu_);
  if (!finished_) Draw(false);
}

void Progress::Draw(bool final) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  uint64_t items = items_.load(), bytes = bytes_.load();
  double frac = -1;
  if (opt_.total_bytes > 0) {
    frac = static_cast<double>(bytes) / static_cast<double>(opt_.total_bytes);
  } else if (opt_.total_items > 0) {
    frac = static_cast<double>(items) / static_cast<double>(opt_.total_items);
  }
  std::string line = fmt::format("{} ", opt_.label);
  if (frac >= 0) {
    constexpr int kWidth = 24;
    int fill = static_cast<int>(std::min(1.0, frac) * kWidth);
    line += "[" + std::string(fill, '#') + std::string(kWidth - fill, '.') + fmt::format("] {:5.1f}% ", 100 * frac);
  }
  line += fmt::format("{} {}", items, opt_.item_name);
  if (opt_.total_items > 0) line += fmt::format("/{}", opt_.total_items);
  if (secs > 0) {
    line += fmt::format("  {:.1f} {}/s  {}", static_cast<double>(items) / secs, opt_.item_name,
                        units::Rate(static_cast<double>(bytes) / secs));
  }
  if (frac > 0 && frac < 1 && !final) line += "  ETA " + units::Duration(secs * (1 - frac) / frac);
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
}

void Progress::Finish() {
  if (!active_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace aq
