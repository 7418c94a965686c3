// Status and Result<T>: the one error type of aquifer.
//
// Expected failures (I/O errors, corrupt input, bad configuration) travel as
// values, never as exceptions. A message names what failed and where: the
// file, the byte offset and the record number when there is one.
//
// Thread safety: values; safe to copy and move between threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace aq {

// Codes are few and coarse; the message carries the detail. Callers branch on
// the code (e.g. skip a corrupt record, retry an I/O error, map to a protocol
// error), never on the message, which is for people.
enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,   // bad flag, bad config, misuse of an API, malformed request
  kNotFound,          // file, directory, bucket, object, upload, block (see Subject)
  kAlreadyExists,     // refusing to overwrite
  kPermissionDenied,  // EACCES / EPERM
  kIoError,           // read/write failed for an OS reason
  kNoSpace,           // ENOSPC / EDQUOT: the disk is full
  kCorruption,        // bad CRC, bad magic, impossible length, bad JPEG
  kTruncated,         // input ends in the middle of a record
  kUnsupported,       // valid input we do not handle
  kInternal,          // a bug in aquifer
  kNotEmpty,          // a bucket or directory that still holds entries
  kUnavailable,       // a service (etcd, another node) cannot answer now: retry later. After a
                      // write was sent, its outcome is unknown: keep what it refers to.
  kTimedOut,          // no answer within the deadline (the peer may be slow, not gone)
  kConflict,          // the state changed under the caller (a concurrent write won)
};

std::string_view StatusCodeName(StatusCode code);

// What a NotFound or AlreadyExists is about, for callers that map it to a
// protocol's error (S3's NoSuchBucket vs NoSuchKey vs NoSuchUpload).
enum class Subject : uint8_t { kNone = 0, kBucket, kObject, kUpload, kPart, kBlock };

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  Status(StatusCode code, Subject subject, std::string message)
      : code_(code), subject_(subject), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  Subject subject() const { return subject_; }
  const std::string& message() const { return message_; }
  // True when a request may succeed if repeated later (unavailable, timed out).
  bool retryable() const { return code_ == StatusCode::kUnavailable || code_ == StatusCode::kTimedOut; }

  // "Corruption: <message>" (or "OK").
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(std::string_view context) const;

  // Lets AQ_TRY treat Status and Result<T> alike.
  const Status& status() const& { return *this; }
  Status status() && { return std::move(*this); }

 private:
  StatusCode code_ = StatusCode::kOk;
  Subject subject_ = Subject::kNone;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
inline Status Truncated(std::string m) { return {StatusCode::kTruncated, std::move(m)}; }
inline Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status NotEmpty(std::string m) { return {StatusCode::kNotEmpty, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status TimedOut(std::string m) { return {StatusCode::kTimedOut, std::move(m)}; }
inline Status Conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
inline Status NotFound(Subject s, std::string m) { return {StatusCode::kNotFound, s, std::move(m)}; }
inline Status AlreadyExists(Subject s, std::string m) { return {StatusCode::kAlreadyExists, s, std::move(m)}; }

// Maps an errno value to a Status naming the operation and path.
Status ErrnoStatus(int err, std::string_view op, std::string_view path);

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<T, Status>, "Result<Status> makes no sense");

 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result built from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }

  // REQUIRES: ok()
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // OK when ok(), else the error.
  Status status() const& { return ok() ? Status() : std::get<Status>(v_); }
  Status status() && { return ok() ? Status() : std::get<Status>(std::move(v_)); }

 private:
  std::variant<T, Status> v_;
};

namespace internal {
inline void ValueOf(Status&&) {}
template <typename T>
T ValueOf(Result<T>&& r) {
  return std::move(r).value();
}
}  // namespace internal

}  // namespace aq

// AQ_TRY(expr): evaluates a Status or Result<T>; on error returns the Status
// from the enclosing function, otherwise yields the value (void for Status).
//   AQ_TRY(file->Sync());
//   auto bytes = AQ_TRY(file->ReadAt(off, n, buf));
// The one control-flow macro of the code base (a GNU statement expression,
// supported by GCC and Clang).
#define AQ_TRY(expr)                                                     \
  ({                                                                     \
    auto&& aq_try_result_ = (expr);                                      \
    if (!aq_try_result_.ok()) return std::move(aq_try_result_).status(); \
    ::aq::internal::ValueOf(std::move(aq_try_result_));                  \
  })
