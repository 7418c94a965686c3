// When a reader reads sequentially: the one rule the aquifer:// client's
// read-ahead and the mount's chunked read-ahead both follow. A read
// "follows" when it starts within `slack` bytes of where the reads before
// it ended (either side: the kernel's asynchronous reads arrive slightly
// out of order); the reader is sequential after `min_streak` reads in a
// row that follow. A read from offset 0 of a fresh reader follows.
//
// Thread safety: none; callers hold their reader's lock.
#pragma once

#include <cstdint>

namespace aq::io {

class SequentialDetector {
 public:
  SequentialDetector(uint64_t slack, int min_streak) : slack_(slack), min_streak_(min_streak) {}
  // Records a read of [offset, offset + size); whether the reader is sequential now.
  bool Observe(uint64_t offset, uint64_t size) {
    const uint64_t dist = offset > end_ ? offset - end_ : end_ - offset;
    if (dist <= slack_) {
      ++streak_;
      if (offset + size > end_) end_ = offset + size;
    } else {
      streak_ = 0;  // a jump: start again from here
      end_ = offset + size;
    }
    return streak_ >= min_streak_;
  }
  // Where the reads so far ended: the next read of a sequential reader.
  uint64_t end() const { return end_; }

 private:
  const uint64_t slack_;
  const int min_streak_;
  uint64_t end_ = 0;
  int streak_ = 1;  // the start of the file counts as a read that ended at 0
};

}  // namespace aq::io
