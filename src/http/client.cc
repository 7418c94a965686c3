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

}  // namespace

// One connection: a socket, and its TLS state when HTTPS. Recv mirrors
// recv(2): > 0 bytes, 0 at the peer's close, -1 with errno set (EAGAIN
// for a timeout).
struct Pool::Conn {
  int fd = -1;
  std::unique_ptr<TlsConn> tls;
  explicit Conn(int f) : fd(f) {}
  ~Conn() {
    tls.reset();
    ::close(fd);
  }
  bool SendAll(std::string_view data) {
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
  // `all`: until n bytes, the close or an error (MSG_WAITALL).
  ssize_t Recv(char* out, size_t n, bool all = false) {
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
  const bool streaming = static_cast<bool>(request.body_source);
  const uint64_t body_length = streaming ? request.body_length : request.body.size();
  if (body_length > 0 || request.method == "PUT" || request.method == "POST") {
    headers.Set("Content-Length", std::to_string(body_length));
  }
  const std::string head = SerializeRequestHead(request.method, request.target, headers);
  const bool head_request = request.method == "HEAD";
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Conn> conn = attempt == 0 ? TakeIdle(address) : nullptr;
    const bool reused = conn != nullptr;
    if (!conn) conn = AQ_TRY(Connect(address));
    auto retry_or = [&](Status s) -> Status {
      conn.reset();
      return s;
    };
    // The request: head (and a small body) in one send, then a streamed body.
    bool sent = streaming ? conn->SendAll(head) : conn->SendAll(std::string(head).append(request.body));
    if (sent && streaming) {
      std::string chunk(std::min<uint64_t>(body_length, 1 << 20), '\0');
      for (uint64_t off = 0; sent && off < body_length;) {
        auto n = request.body_source(off, chunk.data(),
                                     static_cast<size_t>(std::min<uint64_t>(chunk.size(), body_length - off)));
        if (!n.ok()) return retry_or(n.status());
        if (*n == 0)
          return retry_or(Internal(fmt::format("the request body ended at {} of {} bytes", off, body_length)));
        sent = conn->SendAll(std::string_view(chunk.data(), *n));
        off += *n;
      }
    }
    const int send_errno = errno;
    // The response head.
    ResponseParser parser(options_.limits, head_request);
    std::string buf;
    size_t head_len = 0;
    bool got_any = false;
    Status failed;
    while (head_len == 0) {
      char chunk[16 << 10];
      ssize_t r = conn->Recv(chunk, sizeof chunk);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        failed = r == 0 ? Unavailable(fmt::format("{}: the connection closed before an answer", address))
                        : RecvError(address, errno);
        break;
      }
      got_any = true;
      buf.append(chunk, static_cast<size_t>(r));
      auto h = parser.ParseHead(buf);
      if (!h.ok()) return retry_or(h.status().WithContext(address));
      head_len = *h;
    }
    if (!failed.ok()) {
      // A pooled connection the server had closed: nothing was answered, send
      // again. (Not after a timeout: the request may be in progress there.)
      if (reused && attempt == 0 && !got_any && failed.code() != StatusCode::kTimedOut) {
        conn.reset();
        continue;
      }
      if (!sent) failed = Unavailable(fmt::format("{}: cannot send: {}", address, std::strerror(send_errno)));
      return retry_or(failed);
    }
    const ResponseHead& rh = parser.response();
    ClientResponse response;
    response.status = rh.status;
    response.headers = rh.headers;
    buf.erase(0, head_len);
    const bool no_body = head_request || rh.status == 204 || rh.status == 304 || rh.status / 100 == 1;
    const bool into = out != nullptr && rh.status / 100 == 2;
    const uint64_t limit = into ? capacity : max_body;
    auto sink = [&](const char* data, size_t n) -> Status {
      if (response.received + n > limit) {
        return InvalidArgument(fmt::format("{}: a response body over {} bytes", address, limit));
      }
      if (into) {
        std::memcpy(out + response.received, data, n);
      } else {
        response.body.append(data, n);
      }
      response.received += n;
      return Status::Ok();
    };
    bool keep = rh.keep_alive && sent;
    if (!no_body) {
      if (rh.chunked) {
        std::string decoded(64 << 10, '\0');
        while (!parser.done()) {
          if (buf.empty()) {
            char chunk[64 << 10];
            ssize_t r = conn->Recv(chunk, sizeof chunk);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0)
              return retry_or(r == 0 ? Truncated(fmt::format("{}: chunked answer cut short", address))
                                     : RecvError(address, errno));
            buf.append(chunk, static_cast<size_t>(r));
          }
          auto step = parser.ParseChunked(buf, decoded.data(), decoded.size());
          if (!step.ok()) return retry_or(step.status().WithContext(address));
          buf.erase(0, step->first);
          if (Status s = sink(decoded.data(), step->second); !s.ok()) return retry_or(s);
          if (step->first == 0 && step->second == 0 && !parser.done()) {
            char chunk[64 << 10];
            ssize_t r = conn->Recv(chunk, sizeof chunk);
            if (r <= 0) return retry_or(Truncated(fmt::format("{}: chunked answer cut short", address)));
            buf.append(chunk, static_cast<size_t>(r));
          }
        }
      } else if (rh.content_length) {
        const uint64_t total = *rh.content_length;
        if (total > limit) {
          return retry_or(
              InvalidArgument(fmt::format("{}: a response body of {} bytes, over {}", address, total, limit)));
        }
        if (!into) response.body.reserve(static_cast<size_t>(total));
        const size_t early = static_cast<size_t>(std::min<uint64_t>(buf.size(), total));
        if (Status s = sink(buf.data(), early); !s.ok()) return retry_or(s);
        if (buf.size() > total) keep = false;  // bytes past the body: not a clean connection
        while (response.received < total) {
          size_t want = static_cast<size_t>(total - response.received);
          ssize_t r;
          if (into) {
            r = conn->Recv(out + response.received, want, true);
          } else {
            const size_t at = response.body.size();
            response.body.resize(at + want);
            r = conn->Recv(response.body.data() + at, want, true);
            response.body.resize(at + static_cast<size_t>(std::max<ssize_t>(r, 0)));
          }
          if (r < 0 && errno == EINTR) continue;
          if (r <= 0) {
            return retry_or(r == 0 ? Truncated(fmt::format("{}: the answer ended after {} of {} body bytes", address,
                                                           response.received, total))
                                   : RecvError(address, errno));
          }
          response.received += static_cast<uint64_t>(r);
        }
      } else {
        // No length: the body runs to the end of the connection.
        keep = false;
        if (Status s = sink(buf.data(), buf.size()); !s.ok()) return retry_or(s);
        for (;;) {
          char chunk[64 << 10];
          ssize_t r = conn->Recv(chunk, sizeof chunk);
          if (r < 0 && errno == EINTR) continue;
          if (r < 0) return retry_or(RecvError(address, errno));
          if (r == 0) break;
          if (Status s = sink(chunk, static_cast<size_t>(r)); !s.ok()) return retry_or(s);
        }
      }
    }
    if (keep) GiveIdle(address, std::move(conn));
    return response;
  }
}

}  // namespace aq::http
