#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace aq {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "Invalid argument";
    case StatusCode::kNotFound: return "Not found";
    case StatusCode::kAlreadyExists: return "Already exists";
    case StatusCode::kPermissionDenied: return "Permission denied";
    case StatusCode::kIoError: return "I/O error";
    case StatusCode::kNoSpace: return "No space";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kTruncated: return "Truncated";
    case StatusCode::kUnsupported: return "Unsupported";
    case StatusCode::kInternal: return "Internal error";
    case StatusCode::kNotEmpty: return "Not empty";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kTimedOut: return "Timed out";
    case StatusCode::kConflict: return "Conflict";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(StatusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, subject_, std::move(m));
}

Status ErrnoStatus(int err, std::string_view op, std::string_view path) {
  StatusCode code = StatusCode::kIoError;
  switch (err) {
    case ENOENT:
    case ENOTDIR: code = StatusCode::kNotFound; break;
    case EEXIST: code = StatusCode::kAlreadyExists; break;
    case EACCES:
    case EPERM:
    case EROFS: code = StatusCode::kPermissionDenied; break;
    case ENOSPC:
    case EDQUOT: code = StatusCode::kNoSpace; break;
    case EINVAL: code = StatusCode::kInvalidArgument; break;
    case ENOTEMPTY: code = StatusCode::kNotEmpty; break;
    case ETIMEDOUT: code = StatusCode::kTimedOut; break;
    case ECONNREFUSED:
    case EHOSTUNREACH:
    case ENETUNREACH: code = StatusCode::kUnavailable; break;
    default: break;
  }
  std::string m;
  m.reserve(op.size() + path.size() + 48);
  m += op;
  m += " '";
  m += path;
  m += "': ";
  m += std::strerror(err);
  return Status(code, std::move(m));
}

}  // namespace aq
