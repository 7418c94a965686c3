#include "http/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_map>

#include "common/clock.h"
#include "common/log.h"
#include "common/mutex.h"

namespace aq::http {
namespace {

double Now() { return Clock::Real().Now(); }

int64_t UnixNow() { return Clock::Real().WallNanos() / 1'000'000'000; }

class SocketStream final : public Stream {
 public:
  explicit SocketStream(int fd) : fd_(fd) {}
  Result<size_t> Read(char* out, size_t n) override {
    for (;;) {
      ssize_t r = ::recv(fd_, out, n, 0);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return TimedOut("the client sent nothing within the read timeout");
      return ErrnoStatus(errno, "receive from", "client");
    }
  }
  Status Write(std::string_view data) override {
    while (!data.empty()) {
      ssize_t w = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return TimedOut("the client read nothing within the send timeout");
      }
      if (w <= 0) return ErrnoStatus(errno, "send to", "client");
      data.remove_prefix(static_cast<size_t>(w));
    }
    return Status::Ok();
  }
  size_t Peek(char* out, size_t n) override {
    ssize_t r = ::recv(fd_, out, n, MSG_PEEK | MSG_DONTWAIT);
    return r > 0 ? static_cast<size_t>(r) : 0;
  }
  // A zero linger time: the close that follows sends RST, not FIN.
  void Abort() override {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    aborted_ = true;
  }

 private:
  int fd_;
};

// A TLS connection on a worker thread: blocking, within the socket's timeouts.
class TlsStream final : public Stream {
 public:
  TlsStream(TlsConn& tls, int fd) : tls_(tls), fd_(fd) {}
  Result<size_t> Read(char* out, size_t n) override { return tls_.Read(out, n); }
  Status Write(std::string_view data) override { return tls_.Write(data); }
  // Only what is already decrypted: a record still on the socket could be
  // the next request or more body, and telling would mean waiting for it.
  size_t Peek(char* out, size_t n) override { return tls_.Peek(out, n); }
  void Abort() override {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    aborted_ = true;
  }

 private:
  TlsConn& tls_;
  int fd_;
};

// Nothing more arrives; writes are collected.
class MemoryStream final : public Stream {
 public:
  Result<size_t> Read(char*, size_t) override { return size_t{0}; }
  Status Write(std::string_view data) override {
    out.append(data);
    return Status::Ok();
  }
  size_t Peek(char*, size_t) override { return 0; }
  std::string out;
};

std::pair<std::string, std::string> ErrorBody(const ServerOptions& o, int status, const std::string& message) {
  if (o.error_body) return o.error_body(status, message);
  return {"text/plain; charset=utf-8", message + "\n"};
}

std::string ErrorResponse(const ServerOptions& o, int status, const std::string& message) {
  auto [type, body] = ErrorBody(o, status, message);
  Headers h;
  h.Add("Date", HttpDate(UnixNow()));
  h.Add("Server", o.server_name);
  h.Add("Content-Type", type);
  h.Add("Content-Length", std::to_string(body.size()));
  h.Add("Connection", "close");
  if (status == 503) h.Add("Retry-After", "1");
  return SerializeHead(status, h) + body;
}

// Blank lines before a request line are ignored (RFC 7230 3.5).
void SkipBlankLines(std::string& buf) {
  size_t i = 0;
  while (i + 1 < buf.size() && buf[i] == '\r' && buf[i + 1] == '\n') i += 2;
  if (i > 0) buf.erase(0, i);
}

// Whether `bytes` can be the start of a request line ("GET /..."), i.e. not
// the rest of a body that was longer than its Content-Length.
bool LooksLikeRequestStart(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size() && i < 20 && bytes[i] >= 'A' && bytes[i] <= 'Z') ++i;
  if (i == bytes.size()) return true;  // only a method's letters so far
  if (i == 0) return bytes[0] == '\r' || bytes[0] == '\n';
  return bytes[i] == ' ';
}

struct Counters {
  std::atomic<uint64_t> accepted{0}, requests{0}, refused{0}, header_timeouts{0}, idle_closed{0}, bad_heads{0}, open{0};
  std::atomic<uint64_t> tls_failures{0};
  // Signalled when an idle connection is closed (rare: no cost per request).
  std::mutex idle_mu;
  std::condition_variable idle_cv;
};

// The requests whose heads are complete in `buf`, one after another. Returns
// whether the connection stays open (with `buf` holding any partial next head).
bool ServeConnection(Stream& stream, std::string& buf, const ServerOptions& options, const Handler& handler,
                     const std::string& peer, Counters& counters) {
  for (;;) {
    SkipBlankLines(buf);
    RequestParser parser(options.limits);
    auto head = parser.ParseHead(buf);
    if (!head.ok()) {
      counters.bad_heads++;
      const int status = head.status().code() == StatusCode::kUnsupported ? 431 : 400;
      (void)stream.Write(ErrorResponse(options, status, head.status().message()));
      return false;
    }
    if (*head == 0) return true;
    const Request request = parser.request();
    buf.erase(0, *head);
    Exchange exchange(stream, request, buf, options, peer, &parser);
    try {
      handler(exchange);
    } catch (const std::exception& e) {
      // The edge of the request: a bug in a handler answers 500 and closes
      // this connection; it never takes the server down.
      log::error("{} {} from {}: unexpected exception: {}", request.method, request.path, peer, e.what());
      exchange.CloseAfter();
      if (!exchange.responded()) (void)exchange.Respond(500, {}, "internal error\n");
      return false;
    }
    counters.requests++;
    if (!exchange.Finish()) return false;
    SkipBlankLines(buf);
    if (buf.find("\r\n\r\n") == std::string::npos) return true;
  }
}

}  // namespace

// ---- Exchange ----

Exchange::Exchange(Stream& stream, const Request& request, std::string& buffer, const ServerOptions& options,
                   std::string peer, RequestParser* parser)
    : stream_(stream), request_(request), buffer_(buffer), options_(options), peer_(std::move(peer)), parser_(parser) {}

bool Exchange::has_body() const {
  return request_.chunked || (request_.content_length && *request_.content_length > 0);
}

Result<size_t> Exchange::ReadRaw(char* out, size_t n) {
  if (!buffer_.empty()) {
    const size_t take = std::min(n, buffer_.size());
    std::memcpy(out, buffer_.data(), take);
    buffer_.erase(0, take);
    return take;
  }
  return stream_.Read(out, n);
}

Status Exchange::CheckOverrun() {
  char peek[24];
  std::string_view next;
  if (!buffer_.empty()) {
    next = std::string_view(buffer_).substr(0, sizeof peek);
  } else {
    next = std::string_view(peek, stream_.Peek(peek, sizeof peek));
  }
  if (next.empty() || LooksLikeRequestStart(next)) return Status::Ok();
  return InvalidArgument(fmt::format("the request body is longer than its Content-Length ({} bytes)",
                                     request_.content_length.value_or(0)));
}

Result<size_t> Exchange::ReadBody(char* out, size_t n) {
  if (body_done_ || n == 0) return size_t{0};
  if (!has_body()) {
    body_done_ = true;
    return size_t{0};
  }
  auto fail = [&](Status s) -> Status {
    failed_ = true;
    close_ = true;
    return s;
  };
  if (request_.expect_continue && !continued_ && !began_) {
    continued_ = true;
    if (Status s = stream_.Write("HTTP/1.1 100 Continue\r\n\r\n"); !s.ok()) return fail(s);
  }
  if (body_started_ == 0) body_started_ = Now();
  size_t produced = 0;
  if (request_.chunked) {
    while (produced == 0 && !parser_->done()) {
      if (buffer_.empty()) {
        char chunk[64 << 10];
        auto r = stream_.Read(chunk, sizeof chunk);
        if (!r.ok()) return fail(r.status());
        if (*r == 0) return fail(Truncated("the client closed the connection inside a chunked body"));
        raw_received_ += *r;
        buffer_.append(chunk, *r);
      }
      auto step = parser_->ParseChunked(buffer_, out, n);
      if (!step.ok()) return fail(step.status());
      buffer_.erase(0, step->first);
      produced = step->second;
      if (step->first == 0 && produced == 0 && !parser_->done()) {
        // The parser needs more than what is buffered (a chunk header split across reads).
        if (buffer_.size() > (64 << 10)) return fail(InvalidArgument("a chunk header is over 64 KiB"));
        char chunk[64 << 10];
        auto r = stream_.Read(chunk, sizeof chunk);
        if (!r.ok()) return fail(r.status());
        if (*r == 0) return fail(Truncated("the client closed the connection inside a chunked body"));
        raw_received_ += *r;
        buffer_.append(chunk, *r);
      }
    }
    if (parser_->done()) body_done_ = true;
  } else {
    const uint64_t total = *request_.content_length;
    const uint64_t remaining = total - body_received_;
    auto r = ReadRaw(out, static_cast<size_t>(std::min<uint64_t>(n, remaining)));
    if (!r.ok()) {
      return fail(Status(r.status().code(),
                         fmt::format("{} after {} of {} body bytes", r.status().message(), body_received_, total)));
    }
    if (*r == 0) {
      return fail(Truncated(fmt::format("the client closed the connection after {} of {} body bytes (Content-Length)",
                                        body_received_, total)));
    }
    produced = *r;
    if (body_received_ + produced == total) {
      body_done_ = true;
      if (Status s = CheckOverrun(); !s.ok()) return fail(s);
    }
  }
  body_received_ += produced;
  const double elapsed = Now() - body_started_;
  if (!body_done_ && elapsed > options_.body_grace_s && body_received_ / elapsed < options_.min_body_rate) {
    return fail(TimedOut(fmt::format("the request body arrives at {:.0f} bytes/s, below the minimum of {:.0f}",
                                     body_received_ / elapsed, options_.min_body_rate)));
  }
  return produced;
}

// "100 Continue" ahead of the final answer to an Expect: 100-continue request
// without a body (Content-Length: 0). The server may omit it there (RFC 9110
// 10.1.1), but a client that waits for it takes any other first status line
// for an early final answer and may keep treating the connection that way:
// botocore then reads the next response's status line as a header on that
// connection and loses its headers (an UploadPart without its ETag).
std::string Exchange::InterimContinue() {
  if (!request_.expect_continue || continued_ || has_body()) return {};
  continued_ = true;
  return "HTTP/1.1 100 Continue\r\n\r\n";
}

Status Exchange::Begin(int status, Headers headers, uint64_t content_length) {
  if (began_) return Internal("a response was already sent for this request");
  began_ = true;
  status_ = status;
  const bool no_body = status == 204 || status == 304 || (status >= 100 && status < 200);
  if (!request_.keep_alive) close_ = true;
  // An unread body that the client holds back for "100 Continue" will not
  // come: the connection cannot carry another request.
  if (request_.expect_continue && !continued_ && has_body()) close_ = true;
  if (!headers.Has("Date")) headers.Add("Date", HttpDate(UnixNow()));
  if (!headers.Has("Server")) headers.Add("Server", options_.server_name);
  headers.Remove("Content-Length");
  if (!no_body) headers.Add("Content-Length", std::to_string(content_length));
  if (close_) headers.Set("Connection", "close");
  content_length_ = (no_body || request_.method == "HEAD") ? 0 : content_length;
  Status s = stream_.Write(InterimContinue() + SerializeHead(status, headers));
  if (!s.ok()) failed_ = true;
  return s;
}

Status Exchange::Respond(int status, Headers headers, std::string_view body) {
  if (began_) return Internal("a response was already sent for this request");
  began_ = true;
  status_ = status;
  if (!request_.keep_alive) close_ = true;
  if (request_.expect_continue && !continued_ && has_body()) close_ = true;
  if (!headers.Has("Date")) headers.Add("Date", HttpDate(UnixNow()));
  if (!headers.Has("Server")) headers.Add("Server", options_.server_name);
  headers.Set("Content-Length", std::to_string(body.size()));
  if (close_) headers.Set("Connection", "close");
  std::string out = InterimContinue() + SerializeHead(status, headers);
  const bool send_body = request_.method != "HEAD" && status != 204 && status != 304;
  if (send_body) out.append(body);
  content_length_ = send_body ? body.size() : 0;
  sent_ = content_length_;
  Status s = stream_.Write(out);
  if (!s.ok()) failed_ = true;
  return s;
}

Status Exchange::Write(std::string_view data) {
  if (!began_) return Internal("Write before Begin");
  if (request_.method == "HEAD") return Status::Ok();
  if (sent_ + data.size() > content_length_) {
    failed_ = true;
    return Internal(fmt::format("response body over its Content-Length of {}", content_length_));
  }
  Status s = stream_.Write(data);
  if (!s.ok()) {
    failed_ = true;
    return s;
  }
  sent_ += data.size();
  return s;
}

void Exchange::Abort() {
  failed_ = true;
  stream_.Abort();
}

bool Exchange::Finish() {
  if (!began_) {
    auto [type, body] = ErrorBody(options_, 500, "the server produced no response");
    Headers h;
    h.Add("Content-Type", type);
    close_ = true;
    (void)Respond(500, std::move(h), body);
  }
  if (failed_ || close_) return false;
  if (sent_ != content_length_) return false;  // a response cut short: the client must see the connection end
  if (!body_done_) {
    // The handler answered without reading the body: read it away (up to a
    // bound) so the next request parses.
    char scratch[64 << 10];
    uint64_t drained = 0;
    while (!body_done_) {
      auto r = ReadBody(scratch, sizeof scratch);
      if (!r.ok() || (*r == 0 && !body_done_)) return false;
      drained += *r;
      if (drained > (1 << 20)) return false;
    }
  }
  return request_.keep_alive;
}

// ---- the server ----

struct Server::Loop {
  struct Conn {
    int fd = -1;
    std::string peer;
    std::string buf;
    double deadline = 0;
    bool head_started = false;
    bool closing = false;  // answered and shut for writing: what the client still sends is read away
    uint64_t discarded = 0;
    std::unique_ptr<TlsConn> tls;  // HTTPS
    bool handshaken = false;
    bool want_write = false;  // a TLS step waits for the socket to take bytes
  };

  ServerOptions options;
  Handler handler;
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  std::thread loop_thread;
  std::vector<std::thread> workers;
  Counters counters;
  std::atomic<bool> stop_loop{false};

  Mutex mu;
  CondVar cv{mu};
  std::deque<std::unique_ptr<Conn>> ready AQ_GUARDED_BY(mu);      // heads complete, for the workers
  std::vector<std::unique_ptr<Conn>> returned AQ_GUARDED_BY(mu);  // keep-alive, back to the loop
  std::set<int> active AQ_GUARDED_BY(mu);                         // sockets a worker is serving
  bool stopping AQ_GUARDED_BY(mu) = false;

  std::unordered_map<int, std::unique_ptr<Conn>> waiting;  // loop thread only

  void Close(std::unique_ptr<Conn> c) {
    ::close(c->fd);
    counters.open--;
  }

  void Wake() {
    uint64_t one = 1;
    (void)!::write(wake_fd, &one, sizeof one);
  }

  void Watch(std::unique_ptr<Conn> c) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | (c->want_write ? EPOLLOUT : 0u);
    ev.data.fd = c->fd;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev) != 0) return Close(std::move(c));
    const int fd = c->fd;
    waiting[fd] = std::move(c);
  }

  void Dispatch(std::unique_ptr<Conn> c) {
    MutexLock lock(mu);
    ready.push_back(std::move(c));
    cv.Signal();
  }

  // Sends a short answer without blocking (best effort), then closes gracefully.
  void Refuse(std::unique_ptr<Conn> c, int status, const std::string& message) {
    const std::string r = ErrorResponse(options, status, message);
    if (c->tls) {
      // A TLS client can only read an answer once the handshake is done.
      if (c->handshaken) (void)c->tls->Write(r);  // non-blocking here: best effort
    } else {
      (void)!::send(c->fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    Linger(std::move(c));
  }

  // A close after an answer the client may still be sending to: closing a
  // socket with unread input resets the connection, and the reset can
  // destroy the answer before the client reads it. So: shut for writing,
  // read and discard for a moment (bounded in time and bytes), then close.
  void Linger(std::unique_ptr<Conn> c) {
    if (c->tls && c->handshaken) c->tls->Shutdown();
    c->want_write = false;
    ::shutdown(c->fd, SHUT_WR);
    c->closing = true;
    c->buf.clear();
    c->buf.shrink_to_fit();
    c->deadline = Now() + 2;
    Watch(std::move(c));
  }

  // After reading: dispatches a complete head, refuses an oversized one.
  void Examine(std::unique_ptr<Conn> c) {
    SkipBlankLines(c->buf);
    if (c->buf.find("\r\n\r\n") != std::string::npos) return Dispatch(std::move(c));
    if (c->buf.size() > options.limits.max_head_bytes) {
      counters.bad_heads++;
      return Refuse(std::move(c), 431, fmt::format("the request head is over {} bytes", options.limits.max_head_bytes));
    }
    if (!c->buf.empty() && !c->head_started) {
      c->head_started = true;
      c->deadline = Now() + options.header_timeout_s;
    }
    Watch(std::move(c));
  }

  void Accept() {
    for (;;) {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or out of descriptors: try again on the next event
      counters.accepted++;
      counters.open++;
      auto c = std::make_unique<Conn>();
      c->fd = fd;
      char host[INET6_ADDRSTRLEN] = "?";
      int port = 0;
      if (addr.ss_family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(&addr);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
      } else if (addr.ss_family == AF_INET6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
      }
      c->peer = fmt::format("{}:{}", host, port);
      if (counters.open > options.max_connections) {
        counters.refused++;
        Refuse(std::move(c), 503,
               fmt::format("the server has {} connections open, its limit; retry", options.max_connections));
        continue;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (options.tls) {
        auto tls = options.tls->Accept(fd);
        if (!tls.ok()) {
          log::warn("TLS for {}: {}", c->peer, tls.status().ToString());
          Close(std::move(c));
          continue;
        }
        c->tls = std::move(*tls);
      }
      // The handshake and the first request must arrive within the head
      // timeout of the accept.
      c->deadline = Now() + options.header_timeout_s;
      c->head_started = true;
      Watch(std::move(c));
    }
  }

  void ReadFrom(int fd) {
    auto it = waiting.find(fd);
    if (it == waiting.end()) return;
    std::unique_ptr<Conn> c = std::move(it->second);
    waiting.erase(it);
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    ReadConn(std::move(c));
  }

  // Reads what has arrived on `c` (through TLS when it is HTTPS), then
  // dispatches, watches or closes it.
  void ReadConn(std::unique_ptr<Conn> c) {
    const int fd = c->fd;
    char chunk[16 << 10];
    if (c->closing) {
      for (;;) {
        ssize_t r = ::recv(fd, chunk, sizeof chunk, 0);
        if (r > 0 && (c->discarded += static_cast<uint64_t>(r)) < (8u << 20)) continue;
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Watch(std::move(c));
        return Close(std::move(c));
      }
    }
    if (c->tls) {
      c->want_write = false;
      if (!c->handshaken) {
        // Plain HTTP sent to the TLS port: say so in plain HTTP (as a web
        // server does) rather than end the connection without a word.
        char first[8];
        const ssize_t n = ::recv(fd, first, sizeof first, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0 && first[0] != 0x16 && LooksLikeRequestStart(std::string_view(first, static_cast<size_t>(n)))) {
          counters.tls_failures++;
          c->tls.reset();
          return Refuse(std::move(c), 400,
                        "this port speaks TLS: use https:// (aquifers:// for the aquifer client) and the node's CA");
        }
        const auto step = c->tls->Handshake();
        if (step == TlsConn::Step::kWantRead || step == TlsConn::Step::kWantWrite) {
          c->want_write = step == TlsConn::Step::kWantWrite;
          return Watch(std::move(c));
        }
        if (step != TlsConn::Step::kDone) {
          counters.tls_failures++;
          log::debug("TLS handshake with {} failed: {}", c->peer, c->tls->LastError());
          return Close(std::move(c));
        }
        c->handshaken = true;
      }
      for (;;) {
        size_t got = 0;
        const auto step = c->tls->ReadSome(chunk, sizeof chunk, &got);
        if (step == TlsConn::Step::kDone) {
          c->buf.append(chunk, got);
          if (c->buf.size() > options.limits.max_head_bytes + 4) break;
          continue;
        }
        if (step == TlsConn::Step::kWantRead) break;
        if (step == TlsConn::Step::kWantWrite) {
          c->want_write = true;
          break;
        }
        return Close(std::move(c));  // closed by the client, or an error
      }
      return Examine(std::move(c));
    }
    for (;;) {
      ssize_t r = ::recv(fd, chunk, sizeof chunk, 0);
      if (r > 0) {
        c->buf.append(chunk, static_cast<size_t>(r));
        if (c->buf.size() > options.limits.max_head_bytes + 4) break;
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      return Close(std::move(c));  // closed by the client, or an error
    }
    // A TLS ClientHello (a handshake record: 0x16 0x03 0x00..0x04) sent to
    // this plain port: answered at once, in plain HTTP (which the client's
    // TLS reads as a wrong version and reports), instead of being held as
    // an unfinished request head until the header timeout.
    if (c->buf.size() >= 3 && static_cast<unsigned char>(c->buf[0]) == 0x16 && c->buf[1] == 0x03 &&
        static_cast<unsigned char>(c->buf[2]) <= 0x04) {
      return Refuse(std::move(c), 400,
                    "this port speaks plain HTTP, not TLS: use http:// (aquifer:// for the aquifer client)");
    }
    Examine(std::move(c));
  }

  void TakeReturned() {
    std::vector<std::unique_ptr<Conn>> back;
    {
      MutexLock lock(mu);
      back.swap(returned);
    }
    for (auto& c : back) {
      if (c->closing) {
        c->closing = false;
        Linger(std::move(c));
        continue;
      }
      c->head_started = !c->buf.empty();
      c->deadline = Now() + (c->head_started ? options.header_timeout_s : options.idle_timeout_s);
      // Bytes TLS already decrypted wake no epoll: read them now.
      if (c->tls && c->tls->Pending()) {
        c->head_started = true;
        c->deadline = Now() + options.header_timeout_s;
        ReadConn(std::move(c));
        continue;
      }
      Examine(std::move(c));
    }
  }

  void Expire() {
    const double now = Now();
    std::vector<int> expired;
    for (const auto& [fd, c] : waiting) {
      if (c->deadline <= now) expired.push_back(fd);
    }
    for (int fd : expired) {
      auto c = std::move(waiting[fd]);
      waiting.erase(fd);
      ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
      if (c->closing) {
        Close(std::move(c));
      } else if (c->head_started) {
        counters.header_timeouts++;
        Refuse(std::move(c), 408,
               fmt::format("the request head did not arrive within {:.0f} s", options.header_timeout_s));
      } else {
        {
          std::lock_guard<std::mutex> lock(counters.idle_mu);
          counters.idle_closed++;
        }
        counters.idle_cv.notify_all();
        Close(std::move(c));
      }
    }
  }

  void Run() {
    epoll_event events[256];
    double last_expire = Now();
    while (!stop_loop.load()) {
      int n = ::epoll_wait(epoll_fd, events, 256, 200);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listen_fd) {
          Accept();
        } else if (fd == wake_fd) {
          uint64_t v;
          (void)!::read(wake_fd, &v, sizeof v);
          TakeReturned();
        } else {
          ReadFrom(fd);
        }
      }
      if (Now() - last_expire > 0.1) {
        Expire();
        last_expire = Now();
      }
    }
    for (auto& [fd, c] : waiting) {
      ::close(fd);
      counters.open--;
    }
    waiting.clear();
  }

  void Work() {
    for (;;) {
      std::unique_ptr<Conn> c;
      {
        MutexLock lock(mu);
        while (ready.empty() && !stopping) cv.Wait();
        if (ready.empty()) return;
        c = std::move(ready.front());
        ready.pop_front();
        if (stopping) {
          Close(std::move(c));
          continue;
        }
        active.insert(c->fd);
      }
      const int flags = ::fcntl(c->fd, F_GETFL);
      ::fcntl(c->fd, F_SETFL, flags & ~O_NONBLOCK);
      timeval tv{};
      tv.tv_sec = static_cast<time_t>(options.io_timeout_s);
      tv.tv_usec = static_cast<suseconds_t>((options.io_timeout_s - tv.tv_sec) * 1e6);
      ::setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      SocketStream plain(c->fd);
      std::unique_ptr<TlsStream> secure;
      if (c->tls) secure = std::make_unique<TlsStream>(*c->tls, c->fd);
      Stream& stream = secure ? static_cast<Stream&>(*secure) : plain;
      const bool keep = ServeConnection(stream, c->buf, options, handler, c->peer, counters);
      ::fcntl(c->fd, F_SETFL, flags | O_NONBLOCK);
      MutexLock lock(mu);
      active.erase(c->fd);
      if (stopping || stream.aborted()) {  // an aborted one is reset now, never closed gracefully
        Close(std::move(c));
      } else {
        c->closing = !keep;  // the loop closes it gracefully
        returned.push_back(std::move(c));
        Wake();
      }
    }
  }
};

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options, Handler handler) {
  if (options.threads == 0) return InvalidArgument("an HTTP server needs at least one thread");
  if (options.max_connections == 0) return InvalidArgument("an HTTP server needs max_connections >= 1");
  std::unique_ptr<Server> s(new Server());
  s->options_ = options;
  auto loop = std::make_unique<Loop>();
  loop->options = options;
  loop->handler = std::move(handler);

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(options.port);
  if (int rc = ::getaddrinfo(options.host.empty() ? nullptr : options.host.c_str(), port.c_str(), &hints, &res);
      rc != 0) {
    return InvalidArgument(fmt::format("cannot resolve listen address '{}': {}", options.host, gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, &::freeaddrinfo);
  int err = 0;
  for (addrinfo* a = res; a != nullptr && loop->listen_fd < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
      loop->listen_fd = fd;
      break;
    }
    err = errno;
    ::close(fd);
  }
  if (loop->listen_fd < 0) {
    if (err == EADDRINUSE) {
      return Status(StatusCode::kAlreadyExists,
                    fmt::format("cannot listen on {}:{}: the port is in use (another node or program holds it; "
                                "pick another port, or 0 for any free one)",
                                options.host, options.port));
    }
    return ErrnoStatus(err, "listen on", fmt::format("{}:{}", options.host, options.port));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(loop->listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  s->port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  loop->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  loop->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (loop->epoll_fd < 0 || loop->wake_fd < 0) return ErrnoStatus(errno, "create", "epoll");
  for (int fd : {loop->listen_fd, loop->wake_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }
  Loop* l = loop.get();
  for (size_t i = 0; i < options.threads; ++i) l->workers.emplace_back([l] { l->Work(); });
  l->loop_thread = std::thread([l] { l->Run(); });
  s->loop_ = std::move(loop);
  return s;
}

void Server::Stop() {
  if (!loop_) return;
  Loop& l = *loop_;
  {
    MutexLock lock(l.mu);
    l.stopping = true;
    for (int fd : l.active) ::shutdown(fd, SHUT_RDWR);  // a worker blocked on this client returns now
    l.cv.SignalAll();
  }
  l.stop_loop = true;
  l.Wake();
  if (l.loop_thread.joinable()) l.loop_thread.join();
  for (auto& w : l.workers) {
    if (w.joinable()) w.join();
  }
  {
    MutexLock lock(l.mu);
    for (auto& c : l.returned) l.Close(std::move(c));
    l.returned.clear();
    for (auto& c : l.ready) l.Close(std::move(c));
    l.ready.clear();
  }
  ::close(l.listen_fd);
  ::close(l.epoll_fd);
  ::close(l.wake_fd);
  loop_.reset();
}

Server::~Server() { Stop(); }

bool Server::WaitForIdleClosed(uint64_t at_least, double timeout_s) const {
  if (!loop_) return false;
  Counters& c = loop_->counters;
  std::unique_lock<std::mutex> lock(c.idle_mu);
  return c.idle_cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                            [&] { return c.idle_closed.load() >= at_least; });
}

ServerStats Server::Stats() const {
  ServerStats s;
  if (!loop_) return s;
  const Counters& c = loop_->counters;
  s.accepted = c.accepted;
  s.requests = c.requests;
  s.refused_overload = c.refused;
  s.header_timeouts = c.header_timeouts;
  s.idle_closed = c.idle_closed;
  s.bad_heads = c.bad_heads;
  s.open = c.open;
  s.tls_failures = c.tls_failures;
  return s;
}

std::string ServeBytes(const ServerOptions& options, const Handler& handler, std::string_view raw) {
  MemoryStream stream;
  std::string buf(raw);
  Counters counters;
  if (ServeConnection(stream, buf, options, handler, "test", counters) && !buf.empty()) {
    // A head that never completed: what the server answers at the head timeout.
    SkipBlankLines(buf);
    if (!buf.empty()) {
      stream.out += ErrorResponse(options, 408, "the request head did not arrive within the timeout");
    }
  }
  return stream.out;
}

uint64_t RaiseOpenFileLimit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

}  // namespace aq::http
