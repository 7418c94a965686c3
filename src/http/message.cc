#include "http/message.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/beast/http.hpp>
#include <cctype>
#include <ctime>

#include "common/log.h"

namespace aq::http {
namespace beast_http = boost::beast::http;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void Headers::Set(std::string_view name, std::string value) {
  Remove(name);
  fields_.emplace_back(std::string(name), std::move(value));
}

void Headers::Remove(std::string_view name) {
  std::erase_if(fields_, [&](const auto& f) { return EqualsIgnoreCase(f.first, name); });
}

const std::string* Headers::Find(std::string_view name) const {
  for (const auto& f : fields_) {
    if (EqualsIgnoreCase(f.first, name)) return &f.second;
  }
  return nullptr;
}

std::string Headers::Get(std::string_view name) const {
  const std::string* v = Find(name);
  return v ? *v : std::string();
}

size_t Headers::Count(std::string_view name) const {
  size_t n = 0;
  for (const auto& f : fields_) n += EqualsIgnoreCase(f.first, name) ? 1 : 0;
  return n;
}

std::string_view ReasonPhrase(int status) {
  if (status < 100 || status > 999) return "Unknown";
  const auto r = beast_http::obsolete_reason(static_cast<beast_http::status>(status));
  return std::string_view(r.data(), r.size());
}

namespace {

// Where the head ends ("\r\n\r\n" + 4), or npos.
size_t HeadEnd(std::string_view bytes) {
  size_t p = bytes.find("\r\n\r\n");
  return p == std::string_view::npos ? p : p + 4;
}

template <typename Parser>
Result<size_t> FeedHead(Parser& parser, std::string_view bytes, const Limits& limits, const char* what) {
  const size_t end = HeadEnd(bytes.substr(0, limits.max_head_bytes + 4));
  if (end == std::string_view::npos) {
    if (bytes.size() >= limits.max_head_bytes) {
      return Unsupported(fmt::format("the {} head is over {} bytes", what, limits.max_head_bytes));
    }
    return size_t{0};
  }
  if (end > limits.max_head_bytes) {
    return Unsupported(fmt::format("the {} head is over {} bytes", what, limits.max_head_bytes));
  }
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(bytes.data(), end), ec);
  if (ec && ec != beast_http::error::need_more) {
    if (ec == beast_http::error::header_limit) {
      return Unsupported(fmt::format("the {} head is over {} bytes", what, limits.max_head_bytes));
    }
    return InvalidArgument(fmt::format("malformed {} head: {}", what, ec.message()));
  }
  if (!parser.is_header_done()) return InvalidArgument(fmt::format("malformed {} head", what));
  size_t fields = 0;
  for (auto it = parser.get().begin(); it != parser.get().end(); ++it) ++fields;
  if (fields > limits.max_fields) {
    return Unsupported(
        fmt::format("the {} has {} header fields, over the limit of {}", what, fields, limits.max_fields));
  }
  return end;
}

template <typename Parser>
Result<std::pair<size_t, size_t>> FeedChunked(Parser& parser, std::string_view in, char* out, size_t out_size) {
  auto& body = parser.get().body();
  body.data = out;
  body.size = out_size;
  size_t consumed = 0;
  while (!parser.is_done() && consumed < in.size() && body.size > 0) {
    boost::system::error_code ec;
    size_t n = parser.put(boost::asio::buffer(in.data() + consumed, in.size() - consumed), ec);
    consumed += n;
    if (ec == beast_http::error::need_buffer) break;
    if (ec == beast_http::error::need_more) break;
    if (ec) return InvalidArgument(fmt::format("malformed chunked body: {}", ec.message()));
    if (n == 0) break;
  }
  const size_t produced = out_size - body.size;
  body.data = nullptr;
  body.size = 0;
  return std::make_pair(consumed, produced);
}

template <typename Fields>
void CopyFields(const Fields& from, Headers& to) {
  for (const auto& f : from) to.Add(std::string(f.name_string()), std::string(f.value()));
}

}  // namespace

struct RequestParser::Impl {
  beast_http::request_parser<beast_http::buffer_body> parser;
};

RequestParser::RequestParser(const Limits& limits) : impl_(std::make_unique<Impl>()), limits_(limits) {
  impl_->parser.header_limit(static_cast<std::uint32_t>(limits.max_head_bytes));
  impl_->parser.body_limit(limits.max_body_bytes);
}
RequestParser::~RequestParser() = default;
RequestParser::RequestParser(RequestParser&&) noexcept = default;
RequestParser& RequestParser::operator=(RequestParser&&) noexcept = default;

Result<size_t> RequestParser::ParseHead(std::string_view bytes) {
  const size_t end = AQ_TRY(FeedHead(impl_->parser, bytes, limits_, "request"));
  if (end == 0) return end;
  auto& p = impl_->parser;
  const auto& m = p.get();
  request_ = Request();
  request_.method = std::string(m.method_string());
  request_.target = std::string(m.target());
  const size_t q = request_.target.find('?');
  request_.path = request_.target.substr(0, q);
  request_.query = q == std::string::npos ? "" : request_.target.substr(q + 1);
  request_.version = static_cast<int>(m.version());
  CopyFields(m, request_.headers);
  if (auto n = p.content_length()) request_.content_length = *n;
  request_.chunked = p.chunked();
  request_.keep_alive = p.keep_alive();
  request_.expect_continue = EqualsIgnoreCase(request_.headers.Get("Expect"), "100-continue");
  if (request_.content_length && *request_.content_length > limits_.max_body_bytes) {
    return Unsupported(fmt::format("Content-Length {} is over the limit of {} bytes", *request_.content_length,
                                   limits_.max_body_bytes));
  }
  if (request_.target.empty() || (request_.target[0] != '/' && request_.target != "*")) {
    return InvalidArgument(fmt::format("request target '{}' is not an absolute path", request_.target.substr(0, 64)));
  }
  return end;
}

Result<std::pair<size_t, size_t>> RequestParser::ParseChunked(std::string_view in, char* out, size_t out_size) {
  return FeedChunked(impl_->parser, in, out, out_size);
}

bool RequestParser::done() const { return impl_->parser.is_done(); }

struct ResponseParser::Impl {
  beast_http::response_parser<beast_http::buffer_body> parser;
};

ResponseParser::ResponseParser(const Limits& limits, bool head_request)
    : impl_(std::make_unique<Impl>()), limits_(limits) {
  impl_->parser.header_limit(static_cast<std::uint32_t>(limits.max_head_bytes));
  impl_->parser.body_limit(limits.max_body_bytes);
  impl_->parser.skip(head_request);
}
ResponseParser::~ResponseParser() = default;

Result<size_t> ResponseParser::ParseHead(std::string_view bytes) {
  const size_t end = AQ_TRY(FeedHead(impl_->parser, bytes, limits_, "response"));
  if (end == 0) return end;
  auto& p = impl_->parser;
  const auto& m = p.get();
  response_ = ResponseHead();
  response_.status = static_cast<int>(m.result_int());
  response_.reason = std::string(m.reason());
  CopyFields(m, response_.headers);
  if (auto n = p.content_length()) response_.content_length = *n;
  response_.chunked = p.chunked();
  response_.keep_alive = p.keep_alive();
  return end;
}

Result<std::pair<size_t, size_t>> ResponseParser::ParseChunked(std::string_view in, char* out, size_t out_size) {
  return FeedChunked(impl_->parser, in, out, out_size);
}

bool ResponseParser::done() const { return impl_->parser.is_done(); }

bool ValidFieldValue(std::string_view value) {
  return std::none_of(value.begin(), value.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && u != '\t') || u == 0x7f;
  });
}

std::string SerializeHead(int status, const Headers& headers) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status, ReasonPhrase(status));
  for (const auto& [k, v] : headers.fields()) {
    const bool name_ok = !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
      const auto u = static_cast<unsigned char>(c);
      return u > 0x20 && u < 0x7f && c != ':';
    });
    if (!name_ok || !ValidFieldValue(v)) {
      std::string shown = k.substr(0, 64);
      for (char& c : shown) c = (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
      log::error("response header '{}' left out: its name or value holds a control character or a line break", shown);
      continue;
    }
    out += k;
    out += ": ";
    out += v;
    out += "\r\n";
  }
  out += "\r\n";
  return out;
}

std::string SerializeRequestHead(std::string_view method, std::string_view target, const Headers& headers) {
  std::string out = fmt::format("{} {} HTTP/1.1\r\n", method, target);
  for (const auto& [k, v] : headers.fields()) {
    out += k;
    out += ": ";
    out += v;
    out += "\r\n";
  }
  out += "\r\n";
  return out;
}

std::string HttpDate(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

std::optional<int64_t> ParseHttpDate(std::string_view s) {
  const std::string text(s);
  static const char* kFormats[] = {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"};
  for (const char* f : kFormats) {
    std::tm tm{};
    const char* end = strptime(text.c_str(), f, &tm);
    if (end != nullptr && *end == '\0') return static_cast<int64_t>(timegm(&tm));
  }
  return std::nullopt;
}

}  // namespace aq::http
