// S3's errors: what a Status means to an S3 client (status code and S3 error
// code), and the XML error document every error response carries, with the
// request id that also goes in the x-amz-request-id header.
//
// Mapping switches on the Status code and subject, never on message text.
// A server-side failure (5xx) never shows its message to the client (it may
// name server paths or internals); the client gets a generic text and the
// request id under which the node logged the detail.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace aq::s3 {

struct Error {
  int status = 500;
  std::string code;     // "NoSuchKey"
  std::string message;  // for people
  std::string detail;   // what the node logs for a 5xx (the store's own message); never sent
};

// The S3 error for a failed store operation. `subject` says what a bare
// NotFound is about when the Status does not (the object a GET names, say).
Error ErrorFor(const Status& s, Subject subject = Subject::kNone);

// <?xml ...?><Error><Code/><Message/><Resource/><RequestId/><HostId/></Error>
std::string ErrorXml(const Error& e, std::string_view resource, std::string_view request_id);

// Whether the error's message may be shown to the client (4xx: it is about
// the request; 5xx: it is about the server, and is replaced).
bool ShowsMessage(const Error& e);

// A request id: 16 upper-case hex digits, unique enough to find a request
// in the node's log.
std::string NewRequestId();

}  // namespace aq::s3
