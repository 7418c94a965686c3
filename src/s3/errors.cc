#include "s3/errors.h"

#include <fmt/format.h>

#include <atomic>
#include <random>

#include "common/clock.h"
#include "s3/xml.h"

namespace aq::s3 {
namespace {

Error ErrorForCode(const Status& s, Subject subject) {
  const std::string& m = s.message();
  const Subject what = s.subject() != Subject::kNone ? s.subject() : subject;
  switch (s.code()) {
    case StatusCode::kOk: return {200, "", ""};
    case StatusCode::kNotFound:
      switch (what) {
        case Subject::kBucket: return {404, "NoSuchBucket", m};
        case Subject::kUpload: return {404, "NoSuchUpload", m};
        case Subject::kPart: return {400, "InvalidPart", m};
        case Subject::kBlock: return {404, "NoSuchBlock", m};
        default: return {404, "NoSuchKey", m};
      }
    case StatusCode::kAlreadyExists:
      if (what == Subject::kBucket) return {409, "BucketAlreadyOwnedByYou", m};
      return {409, "OperationAborted", m};
    case StatusCode::kNotEmpty: return {409, "BucketNotEmpty", m};
    case StatusCode::kInvalidArgument:
      if (what == Subject::kPart) return {400, "InvalidPart", m};
      return {400, "InvalidArgument", m};
    case StatusCode::kTruncated: return {400, "IncompleteBody", m};
    case StatusCode::kUnsupported: return {501, "NotImplemented", m};
    case StatusCode::kConflict: return {409, "OperationAborted", m};
    case StatusCode::kNoSpace: return {507, "InsufficientStorage", "the node's storage is full"};
    case StatusCode::kUnavailable:
    case StatusCode::kTimedOut:
      return {503, "ServiceUnavailable", "the storage service cannot complete this request now; retry"};
    case StatusCode::kCorruption:
    case StatusCode::kPermissionDenied:
    case StatusCode::kIoError:
    case StatusCode::kInternal: return {500, "InternalError", m};
  }
  return {500, "InternalError", m};
}

}  // namespace

Error ErrorFor(const Status& s, Subject subject) {
  Error e = ErrorForCode(s, subject);
  e.detail = s.message();
  return e;
}

bool ShowsMessage(const Error& e) { return e.status < 500 || e.status == 501 || e.status == 503 || e.status == 507; }

std::string ErrorXml(const Error& e, std::string_view resource, std::string_view request_id) {
  const std::string message = ShowsMessage(e)
                                  ? e.message
                                  : fmt::format(
                                        "We encountered an internal error; the node logged it under request id {}. "
                                        "Please try again.",
                                        request_id);
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{}</Code><Message>{}</Message><Resource>{}"
      "</Resource><RequestId>{}</RequestId><HostId>{}</HostId></Error>",
      XmlText(e.code), XmlText(message), XmlText(resource), XmlText(request_id), XmlText(request_id));
}

std::string NewRequestId() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t seed = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(Clock::Real().WallNanos());
  }();
  uint64_t x = seed + 0x9e3779b97f4a7c15ull * (counter.fetch_add(1) + 1);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return fmt::format("{:016X}", x);
}

}  // namespace aq::s3
