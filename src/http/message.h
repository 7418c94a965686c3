// HTTP/1.1 messages as the node and its clients exchange them: a request or
// response head (start line and header fields) and the limits every parse
// enforces. Bodies never live here; they stream through http::Exchange (the
// server side) and http::Connection (the client side).
//
// Parsing is Boost.Beast's (its parser validates the start line, field
// syntax, Content-Length / Transfer-Encoding conflicts and chunk framing);
// this file only hides it behind our types so that the layers above never
// include Boost.
//
// Thread safety: values; a parser is used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace aq::http {

// Header fields in the order they arrived; names compare case-insensitively.
class Headers {
 public:
  void Add(std::string name, std::string value) { fields_.emplace_back(std::move(name), std::move(value)); }
  // Replaces every field of that name with one.
  void Set(std::string_view name, std::string value);
  void Remove(std::string_view name);
  bool Has(std::string_view name) const { return Find(name) != nullptr; }
  // The first value, or "" when absent.
  std::string Get(std::string_view name) const;
  const std::string* Find(std::string_view name) const;
  size_t Count(std::string_view name) const;
  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }
  size_t size() const { return fields_.size(); }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

bool EqualsIgnoreCase(std::string_view a, std::string_view b);
std::string ToLower(std::string_view s);

struct Limits {
  size_t max_head_bytes = 16 << 10;  // start line + all fields
  size_t max_fields = 100;
  uint64_t max_body_bytes = 5ull << 30;  // Content-Length above this is refused before the body is read
};

struct Request {
  std::string method;
  std::string target;  // as sent: raw path and query
  std::string path;    // target before '?', still percent-encoded
  std::string query;   // target after '?', raw ("" when none)
  int version = 11;    // 10 or 11
  Headers headers;
  std::optional<uint64_t> content_length;
  bool chunked = false;          // Transfer-Encoding: chunked
  bool keep_alive = true;        // HTTP/1.1 default unless "Connection: close"
  bool expect_continue = false;  // "Expect: 100-continue"
};

struct ResponseHead {
  int status = 0;
  std::string reason;
  Headers headers;
  std::optional<uint64_t> content_length;
  bool chunked = false;
  bool keep_alive = true;
};

// The standard reason phrase of a status code ("Not Found").
std::string_view ReasonPhrase(int status);

// Parses one message at a time from bytes as they arrive: first the head,
// then (for requests with a body) the body, chunked or not.
class RequestParser {
 public:
  explicit RequestParser(const Limits& limits);
  ~RequestParser();
  RequestParser(RequestParser&&) noexcept;
  RequestParser& operator=(RequestParser&&) noexcept;

  // Offers the bytes received so far (from the start of the message). Returns
  // the head's length once it is complete (the request is then in
  // request()), 0 while more bytes are needed, or an error: a malformed head
  // is InvalidArgument; a head over the limits is kUnsupported with the
  // message naming the limit (mapped to 431 by the server).
  Result<size_t> ParseHead(std::string_view bytes);
  const Request& request() const { return request_; }
  Request& request() { return request_; }

  // Chunked bodies: decodes from `in` into `out` (at most out_size bytes).
  // Returns {bytes of `in` consumed, bytes written to out}. done() once the
  // last chunk and trailers were read. REQUIRES: the head was parsed.
  Result<std::pair<size_t, size_t>> ParseChunked(std::string_view in, char* out, size_t out_size);
  bool done() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Request request_;
  Limits limits_;
};

// Parses a response head (the client side). The same contract as
// RequestParser::ParseHead; `head_request` says there is no body to expect.
class ResponseParser {
 public:
  explicit ResponseParser(const Limits& limits, bool head_request = false);
  ~ResponseParser();
  Result<size_t> ParseHead(std::string_view bytes);
  const ResponseHead& response() const { return response_; }
  // As RequestParser::ParseChunked, for chunked responses.
  Result<std::pair<size_t, size_t>> ParseChunked(std::string_view in, char* out, size_t out_size);
  bool done() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  ResponseHead response_;
  Limits limits_;
};

// The bytes of a response head: status line, fields, blank line.
// Whether `value` may stand in a header field as is (RFC 9110 field-value:
// visible ASCII, obs-text, SP, HTAB): no CR, LF, NUL or other control
// character, so it can never end its line or start another.
bool ValidFieldValue(std::string_view value);
// A response head. A field whose name or value could break the head (CR,
// LF, control characters) is left out and logged: no request data can
// inject a header or a body, whatever path carried it here.
std::string SerializeHead(int status, const Headers& headers);
// The bytes of a request head.
std::string SerializeRequestHead(std::string_view method, std::string_view target, const Headers& headers);

// RFC 7231 IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") and its parse
// (also accepting RFC 850 and asctime forms, as RFC 7231 asks).
std::string HttpDate(int64_t unix_seconds);
std::optional<int64_t> ParseHttpDate(std::string_view s);

}  // namespace aq::http
