// SequentialReader: buffered, forward reads over a RandomAccessFile, the way
// record formats walk a shard. Large buffers (default 1 MiB) so each read
// reaching storage is big, as the documents' ~9 MB average disk operations.
//
// Thread safety: one reader per thread; many readers may share one file.
#pragma once

#include <cstdint>
#include <string>

#include "io/file_system.h"

namespace aq::io {

class SequentialReader {
 public:
  // With `buffer`, reads are buffered in that string (grown here when
  // smaller than buffer_size, never shrunk) so a thread that makes a reader
  // per run of records allocates and touches its buffer once, not per run.
  // Without, the reader allocates its own on its first read smaller than
  // buffer_size (one that only reads whole records never does).
  SequentialReader(const RandomAccessFile& file, size_t buffer_size = 1 << 20, uint64_t start = 0,
                   std::string* buffer = nullptr);

  // Reads exactly n bytes into out, or fewer only at end of file; the count
  // is returned.
  Result<size_t> Read(size_t n, void* out);
  // Reads exactly n bytes into *out (resized), or fewer at end of file.
  Result<size_t> Read(size_t n, std::string* out);
  // Moves the position to an absolute offset (drops the buffer if needed).
  void Seek(uint64_t offset);

  uint64_t position() const { return pos_; }
  uint64_t file_size() const { return file_.size(); }
  uint64_t remaining() const { return pos_ >= file_.size() ? 0 : file_.size() - pos_; }
  const RandomAccessFile& file() const { return file_; }

 private:
  const RandomAccessFile& file_;
  size_t buffer_size_;
  std::string own_;         // the buffer when none is lent
  std::string* buf_;        // allocated on the first read smaller than buffer_size_
  uint64_t buf_start_ = 0;  // file offset of buf_[0]
  size_t buf_len_ = 0;      // valid bytes in buf_
  uint64_t pos_;
};

}  // namespace aq::io
