// Browser-based uploads (S3's POST Object): a multipart/form-data body whose
// fields name the key, the stored headers and the policy the upload was
// signed with, and whose "file" field is the object.
//
// FormReader parses the body as it streams: the fields before "file" are
// kept (at most a fixed number of bytes, S3's 20 KB, so nothing is held
// before the upload is authenticated beyond that bound), the file's bytes are
// handed on as they arrive, and what follows the file is read and dropped.
//
// CheckPostPolicy judges the policy document (the JSON the base64 "policy"
// field carries) against the form: its expiration, and every condition
// (exact match, "starts-with", "content-length-range"), with every field of
// the form covered by some condition, as S3 does.
//
// Thread safety: a FormReader is one request's, used by one thread; the
// functions are pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "s3/errors.h"

namespace aq::s3 {

// The boundary of a "multipart/form-data; boundary=..." Content-Type.
Result<std::string> FormBoundary(std::string_view content_type);

class FormReader {
 public:
  explicit FormReader(std::string boundary, size_t fields_limit = 20 << 10);

  // Consumes all of `in`; the file's bytes in it are appended to *file.
  // A malformed body is InvalidArgument (S3's MalformedPOSTRequest); fields
  // past the limit are Unsupported (MaxPostPreDataLengthExceeded).
  Status Feed(std::string_view in, std::string* file);
  // The "file" field's headers have been read: fields() is complete.
  bool in_file() const { return file_seen_; }
  // The closing boundary has been read.
  bool done() const { return state_ == State::kEpilogue; }
  // The fields before the file, names lower-cased (the first of a repeated
  // name is kept), and the file's filename.
  const std::map<std::string, std::string>& fields() const { return fields_; }
  const std::string& filename() const { return filename_; }

 private:
  enum class State { kPreamble, kHeaders, kValue, kAfterDelimiter, kEpilogue };
  Status PartHeaders(std::string_view block);

  std::string delimiter_;  // "\r\n--" + boundary
  size_t limit_, field_bytes_ = 0;
  State state_ = State::kPreamble;
  std::string buf_;
  std::string name_, value_, filename_;
  bool file_seen_ = false, in_file_part_ = false;
  std::map<std::string, std::string> fields_;
};

// What a policy allows the file's size to be (content-length-range).
struct PostLimits {
  uint64_t min_size = 0;
  uint64_t max_size = UINT64_MAX;
};

// Checks the policy document `json` against the form's fields (lower-cased
// names) for an upload to `bucket` at `now_s` (Unix seconds). nullopt when
// it holds; else the error S3 answers: 400 InvalidPolicyDocument for a
// malformed document, 403 AccessDenied for an expired one or a condition
// (or an extra field) that does not hold.
std::optional<Error> CheckPostPolicy(std::string_view json, const std::map<std::string, std::string>& fields,
                                     const std::string& bucket, int64_t now_s, PostLimits* limits);

}  // namespace aq::s3
