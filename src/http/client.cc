#include "http/client.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace aq::http {
namespace {

Status RecvError(const std::string& address, int err) {
  if (err == EAGAIN || err == EWOULDBLOCK) {
    return TimedOut(fmt::format("{}: no answer within the read timeout", address));
  }
  if (err == ECONNRESET || err == EPIPE) return Unavailable(fmt::format("{}: connection reset", address));
  return ErrnoStatus(err, "receive from", address);
}

// What an exchange needs of a connection. Recv mirrors recv(2): > 0
// bytes, 0 at the peer's close, -1 with errno set (EAGAIN for a timeout).
class Wire {
 public:
  virtual bool SendAll(std::string_view data) = 0;
  // `all`: until n bytes, the close or an error (MSG_WAITALL).
  virtual ssize_t Recv(char* out, size_t n, bool all = false) = 0;

 protected:
  ~Wire() = default;
};

// Where a response body goes: the caller's buffer (a 2xx into SendInto)
// or the response's string, never past `limit` bytes.
class BodySink {
 public:
  BodySink(ClientResponse& response, char* out, uint64_t limit, const std::string& address)
      : r_(response), out_(out), limit_(limit), address_(address) {}

  uint64_t limit() const { return limit_; }
  Status Append(const char* data, size_t n) {
    if (r_.received + n > limit_) {
      return InvalidArgument(fmt::format("{}: a response body over {} bytes", address_, limit_));
    }
    if (out_ != nullptr) {
      std::memcpy(out_ + r_.received, data, n);
    } else {
      r_.body.append(data, n);
    }
    r_.received += n;
    return Status::Ok();
  }
  // Room for n more bytes to receive into directly; Commit what came.
  char* Reserve(size_t n) {
    if (out_ != nullptr) return out_ + r_.received;
    const size_t at = r_.body.size();
    r_.body.resize(at + n);
    return r_.body.data() + at;
  }
  void Commit(size_t reserved, ssize_t got) {
    const size_t n = static_cast<size_t>(std::max<ssize_t>(got, 0));
    if (out_ == nullptr) r_.body.resize(r_.body.size() - reserved + n);
    r_.received += n;
  }

 private:
  ClientResponse& r_;
  char* out_;
  uint64_t limit_;
  const std::string& address_;
};

// Sends the head (with a small body, in one send) and then a streamed
// body. `sent` false: the connection failed (errno kept in send_errno);
// a non-OK `error`: the body source failed, nothing to retry.
struct SendOutcome {
  bool sent = false;
  int send_errno = 0;
  Status error;
};

SendOutcome SendRequest(Wire& w, const std::string& head, const ClientRequest& request, uint64_t body_length) {
  SendOutcome o;
  const bool streaming = static_cast<bool>(request.body_source);
  o.sent = streaming ? w.SendAll(head) : w.SendAll(std::string(head).append(request.body));
  if (o.sent && streaming) {
    std::string chunk(std::min<uint64_t>(body_length, 1 << 20), '\0');
    for (uint64_t off = 0; o.sent && off < body_length;) {
      auto n = request.body_source(off, chunk.data(),
                                   static_cast<size_t>(std::min<uint64_t>(chunk.size(), body_length - off)));
      if (!n.ok()) {
        o.error = n.status();
        return o;
      }
      if (*n == 0) {
        o.error = Internal(fmt::format("the request body ended at {} of {} bytes", off, body_length));
        return o;
      }
      o.sent = w.SendAll(std::string_view(chunk.data(), *n));
      off += *n;
    }
  }
  o.send_errno = errno;
  return o;
}

// Reads until the response head is whole. The error: a malformed head.
// `connection`: why the connection gave no head; `got_any`: whether any
// byte came before (a pooled connection the server had closed gives none).
struct HeadOutcome {
  size_t length = 0;
  bool got_any = false;
  Status connection;
};

Result<HeadOutcome> ReceiveHead(Wire& w, ResponseParser& parser, std::string& buf, const std::string& address) {
  HeadOutcome o;
  while (o.length == 0) {
    char chunk[16 << 10];
    ssize_t r = w.Recv(chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      o.connection = r == 0 ? Unavailable(fmt::format("{}: the connection closed before an answer", address))
                            : RecvError(address, errno);
      return o;
    }
    o.got_any = true;
    buf.append(chunk, static_cast<size_t>(r));
    auto h = parser.ParseHead(buf);
    if (!h.ok()) return h.status().WithContext(address);
    o.length = *h;
  }
  return o;
}

// A chunked body; `buf` holds what came after the head.
Status ReceiveChunked(Wire& w, ResponseParser& parser, std::string& buf, BodySink& sink, const std::string& address) {
  std::string decoded(64 << 10, '\0');
  char chunk[64 << 10];
  while (!parser.done()) {
    if (buf.empty()) {
      ssize_t r = w.Recv(chunk, sizeof chunk);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        return r == 0 ? Truncated(fmt::format("{}: chunked answer cut short", address)) : RecvError(address, errno);
      }
      buf.append(chunk, static_cast<size_t>(r));
    }
    auto step = parser.ParseChunked(buf, decoded.data(), decoded.size());
    if (!step.ok()) return step.status().WithContext(address);
    buf.erase(0, step->first);
    AQ_TRY(sink.Append(decoded.data(), step->second));
    if (step->first == 0 && step->second == 0 && !parser.done()) {
      ssize_t r = w.Recv(chunk, sizeof chunk);
      if (r <= 0) return Truncated(fmt::format("{}: chunked answer cut short", address));
      buf.append(chunk, static_cast<size_t>(r));
    }
  }
  return Status::Ok();
}

// A body of Content-Length `total`, received in place. `clean` turns false
// when bytes came past the body (the connection cannot be reused).
Status ReceiveSized(Wire& w, uint64_t total, const std::string& buf, BodySink& sink, ClientResponse& response,
                    bool& clean, const std::string& address) {
  if (total > sink.limit()) {
    return InvalidArgument(fmt::format("{}: a response body of {} bytes, over {}", address, total, sink.limit()));
  }
  const size_t early = static_cast<size_t>(std::min<uint64_t>(buf.size(), total));
  AQ_TRY(sink.Append(buf.data(), early));
  if (buf.size() > total) clean = false;
  while (response.received < total) {
    const size_t want = static_cast<size_t>(total - response.received);
    ssize_t r = w.Recv(sink.Reserve(want), want, true);
    const int err = errno;
    sink.Commit(want, r);
    if (r < 0 && err == EINTR) continue;
    if (r <= 0) {
      // A reset after the head is a cut answer (the server gave up part
      // way, or died), not a server that did not answer.
      if (r == 0 || err == ECONNRESET) {
        return Truncated(fmt::format("{}: the answer was cut after {} of {} body bytes{}", address, response.received,
                                     total, r == 0 ? "" : " (connection reset)"));
      }
      return RecvError(address, err);
    }
  }
  return Status::Ok();
}

// A body with no length: it runs to the end of the connection.
Status ReceiveToClose(Wire& w, const std::string& buf, BodySink& sink, const std::string& address) {
  AQ_TRY(sink.Append(buf.data(), buf.size()));
  char chunk[64 << 10];
  for (;;) {
    ssize_t r = w.Recv(chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return RecvError(address, errno);
    if (r == 0) return Status::Ok();
    AQ_TRY(sink.Append(chunk, static_cast<size_t>(r)));
  }
}

}  // namespace

// One connection: a socket, and its TLS state when HTTPS.
struct Pool::Conn final : Wire {
  int fd = -1;
  std::unique_ptr<TlsConn> tls;
  explicit Conn(int f) : fd(f) {}
  ~Conn() {
    tls.reset();
    ::close(fd);
  }
  bool SendAll(std::string_view data) override {
    if (tls) {
      Status s = tls->Write(data);
      if (!s.ok()) errno = s.code() == StatusCode::kTimedOut ? EAGAIN : ECONNRESET;
      return s.ok();
    }
    while (!data.empty()) {
      ssize_t w = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      data.remove_prefix(static_cast<size_t>(w));
    }
    return true;
  }
  ssize_t Recv(char* out, size_t n, bool all = false) override {
    if (!tls) return ::recv(fd, out, n, all ? MSG_WAITALL : 0);
    size_t got = 0;
    while (got < n) {
      auto r = tls->Read(out + got, n - got);
      if (!r.ok()) {
        if (got > 0) return static_cast<ssize_t>(got);
        errno = r.status().code() == StatusCode::kTimedOut      ? EAGAIN
                : r.status().code() == StatusCode::kUnavailable ? ECONNRESET
                                                                : EIO;
        return -1;
      }
      if (*r == 0) break;
      got += *r;
      if (!all) break;
    }
    return static_cast<ssize_t>(got);
  }
};

Pool::Pool(ClientOptions options) : options_(std::move(options)) {}

Pool::~Pool() {
  MutexLock lock(mu_);
  idle_.clear();
}

Result<std::pair<std::string, int>> Pool::SplitAddress(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument(fmt::format("'{}': expected HOST:PORT", address));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(address.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || colon + 1 == address.size() || port <= 0 || port > 65535) {
    return InvalidArgument(fmt::format("'{}': the port must be 1 to 65535", address));
  }
  return std::make_pair(host, static_cast<int>(port));
}

Result<std::unique_ptr<Pool::Conn>> Pool::Connect(const std::string& address) {
  auto [host, port] = AQ_TRY(SplitAddress(address));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port_s = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), port_s.c_str(), &hints, &res); rc != 0) {
    return Unavailable(fmt::format("{}: cannot resolve: {}", address, gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, &::freeaddrinfo);
  int err = ECONNREFUSED;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(options_.connect_timeout_s * 1000));
      if (rc == 1) {
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
      } else {
        err = rc == 0 ? ETIMEDOUT : errno;
        rc = -1;
      }
    } else if (rc != 0) {
      err = errno;
    }
    if (rc == 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      timeval tv{};
      tv.tv_sec = static_cast<time_t>(options_.io_timeout_s);
      tv.tv_usec = static_cast<suseconds_t>((options_.io_timeout_s - tv.tv_sec) * 1e6);
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto conn = std::make_unique<Conn>(fd);
      if (options_.tls) conn->tls = AQ_TRY(options_.tls->Connect(fd, host, address));
      return conn;
    }
    ::close(fd);
  }
  if (err == ETIMEDOUT) return TimedOut(fmt::format("{}: connect timed out", address));
  return Unavailable(fmt::format("{}: cannot connect: {}", address, std::strerror(err)));
}

std::unique_ptr<Pool::Conn> Pool::TakeIdle(const std::string& address) {
  MutexLock lock(mu_);
  auto it = idle_.find(address);
  if (it == idle_.end() || it->second.empty()) return nullptr;
  auto conn = std::move(it->second.back());
  it->second.pop_back();
  return conn;
}

void Pool::GiveIdle(const std::string& address, std::unique_ptr<Conn> conn) {
  MutexLock lock(mu_);
  auto& conns = idle_[address];
  if (conns.size() < options_.max_idle_per_host) conns.push_back(std::move(conn));
}

Result<ClientResponse> Pool::Send(const std::string& address, const ClientRequest& request, uint64_t max_body) {
  return Exchange(address, request, nullptr, 0, max_body);
}

Result<ClientResponse> Pool::SendInto(const std::string& address, const ClientRequest& request, char* out,
                                      size_t capacity) {
  return Exchange(address, request, out, capacity, 1 << 20);
}

Result<ClientResponse> Pool::Exchange(const std::string& address, const ClientRequest& request, char* out,
                                      size_t capacity, uint64_t max_body) {
  Headers headers = request.headers;
  if (!headers.Has("Host")) headers.Add("Host", address);
  const uint64_t body_length = request.body_source ? request.body_length : request.body.size();
  if (body_length > 0 || request.method == "PUT" || request.method == "POST") {
    headers.Set("Content-Length", std::to_string(body_length));
  }
  const std::string head = SerializeRequestHead(request.method, request.target, headers);
  const bool head_request = request.method == "HEAD";
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Conn> conn = attempt == 0 ? TakeIdle(address) : nullptr;
    const bool reused = conn != nullptr;
    if (!conn) conn = AQ_TRY(Connect(address));
    // On any error the connection is dropped with `conn`: never reused.
    SendOutcome sent = SendRequest(*conn, head, request, body_length);
    AQ_TRY(sent.error);
    ResponseParser parser(options_.limits, head_request);
    std::string buf;
    HeadOutcome got = AQ_TRY(ReceiveHead(*conn, parser, buf, address));
    if (!got.connection.ok()) {
      // A pooled connection the server had closed: nothing was answered, send
      // again. (Not after a timeout: the request may be in progress there.)
      if (reused && attempt == 0 && !got.got_any && got.connection.code() != StatusCode::kTimedOut) continue;
      if (!sent.sent) return Unavailable(fmt::format("{}: cannot send: {}", address, std::strerror(sent.send_errno)));
      return got.connection;
    }
    const ResponseHead& rh = parser.response();
    ClientResponse response;
    response.status = rh.status;
    response.headers = rh.headers;
    buf.erase(0, got.length);
    const bool no_body = head_request || rh.status == 204 || rh.status == 304 || rh.status / 100 == 1;
    const bool into = out != nullptr && rh.status / 100 == 2;
    BodySink sink(response, into ? out : nullptr, into ? capacity : max_body, address);
    bool keep = rh.keep_alive && sent.sent;
    if (no_body) {
      // HEAD, 1xx, 204 and 304 answers end at their head.
    } else if (rh.chunked) {
      AQ_TRY(ReceiveChunked(*conn, parser, buf, sink, address));
    } else if (rh.content_length) {
      if (!into) response.body.reserve(static_cast<size_t>(*rh.content_length));
      AQ_TRY(ReceiveSized(*conn, *rh.content_length, buf, sink, response, keep, address));
    } else {
      keep = false;
      AQ_TRY(ReceiveToClose(*conn, buf, sink, address));
    }
    if (keep) GiveIdle(address, std::move(conn));
    return response;
  }
}

}  // namespace aq::http
