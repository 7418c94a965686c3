#include "io/sequential_reader.h"

#include <algorithm>
#include <cstring>

namespace aq::io {

SequentialReader::SequentialReader(const RandomAccessFile& file, size_t buffer_size, uint64_t start,
                                   std::string* buffer)
    : file_(file), buffer_size_(std::max<size_t>(buffer_size, 1)), buf_(buffer ? buffer : &own_), pos_(start) {
  // A lent buffer grows now, once for all the readers that share it; one of
  // our own waits for the first small read.
  if (buffer != nullptr && buf_->size() < buffer_size_) buf_->resize(buffer_size_);
}

void SequentialReader::Seek(uint64_t offset) { pos_ = offset; }

Result<size_t> SequentialReader::Read(size_t n, void* out) {
  auto* dst = static_cast<char*>(out);
  size_t done = 0;
  while (done < n) {
    if (pos_ >= buf_start_ && pos_ < buf_start_ + buf_len_) {
      size_t at = static_cast<size_t>(pos_ - buf_start_);
      size_t k = std::min(n - done, buf_len_ - at);
      std::memcpy(dst + done, buf_->data() + at, k);
      done += k;
      pos_ += k;
      continue;
    }
    size_t want = n - done;
    if (want >= buffer_size_) {  // large read: straight into the caller's memory
      size_t got = AQ_TRY(file_.ReadAt(pos_, want, dst + done));
      done += got;
      pos_ += got;
      return done;  // got < want only at end of file
    }
    // Allocated on the first small read: a reader of whole records may
    // never need it.
    if (buf_->size() < buffer_size_) buf_->resize(buffer_size_);
    size_t got = AQ_TRY(file_.ReadAt(pos_, buffer_size_, buf_->data()));
    buf_start_ = pos_;
    buf_len_ = got;
    if (got == 0) break;
  }
  return done;
}

Result<size_t> SequentialReader::Read(size_t n, std::string* out) {
  out->resize(n);
  size_t got = AQ_TRY(Read(n, out->data()));
  out->resize(got);
  return got;
}

}  // namespace aq::io
