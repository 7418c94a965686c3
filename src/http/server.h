// An HTTP/1.1 server built for clients that cannot be trusted to be quick or
// well-formed, and for bodies far larger than memory.
//
// One event-loop thread accepts connections and reads request heads without
// blocking; only a complete head takes a worker thread, which reads the body
// and writes the response with blocking calls bounded by timeouts. So idle
// keep-alive connections and clients that trickle their headers hold no
// thread, and every phase has a limit:
//   - a head must arrive whole within header_timeout of its first byte (or of
//     the accept), and fit in Limits (bytes and field count) — else 408/431;
//   - a keep-alive connection idles at most idle_timeout between requests;
//   - each blocking read of a body and each send waits at most io_timeout,
//     and a body must average min_body_rate after body_grace;
//   - past max_connections a new connection is answered 503 and closed.
// A Content-Length that promises more than the client sends fails the read
// (timeout); one that promises less is detected when bytes that are not a
// request follow the body, and the read fails (InvalidArgument) so that
// nothing is stored from a body that was cut.
//
// The same exchange code serves a byte string (ServeBytes), so tests and
// fuzz targets drive handlers with raw requests and no sockets.
//
// Thread safety: Start/Stop from one thread; the handler runs on worker
// threads, one Exchange per request, each used by one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "http/message.h"
#include "http/tls.h"

namespace aq::http {

// Bytes in and out of one connection: a socket, or memory in tests.
class Stream {
 public:
  virtual ~Stream() = default;
  // Up to n bytes; 0 when the peer closed. Blocks up to the stream's timeout
  // (then TimedOut).
  virtual Result<size_t> Read(char* out, size_t n) = 0;
  // All of `data`, or an error.
  virtual Status Write(std::string_view data) = 0;
  // Bytes that have already arrived, without waiting or consuming them.
  virtual size_t Peek(char* out, size_t n) = 0;
  // The connection is to end with a reset, not a clean close: a response
  // cut short must never look complete, whatever the client checks.
  virtual void Abort() {}
  bool aborted() const { return aborted_; }

 protected:
  bool aborted_ = false;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = any free port
  size_t threads = 64;
  size_t max_connections = 2048;
  double header_timeout_s = 10;
  double idle_timeout_s = 60;
  double io_timeout_s = 30;
  double min_body_rate = 4096;  // bytes per second, averaged
  double body_grace_s = 10;
  Limits limits;
  std::string server_name = "aquifer";
  // HTTPS when set: every connection is TLS with this certificate
  // (TlsServer::Reload swaps it for new connections).
  std::shared_ptr<TlsServer> tls;
  // The body of an error the HTTP layer answers by itself (malformed head,
  // over a limit, timeout, overload): returns {content type, body}. Default:
  // text/plain with the message.
  std::function<std::pair<std::string, std::string>(int status, const std::string& message)> error_body;
};

struct ServerStats {
  uint64_t accepted = 0;
  uint64_t requests = 0;
  uint64_t refused_overload = 0;  // 503 past max_connections
  uint64_t header_timeouts = 0;   // 408: a head did not arrive in time
  uint64_t idle_closed = 0;
  uint64_t bad_heads = 0;     // 400 / 431
  uint64_t tls_failures = 0;  // handshakes that failed (wrong protocol, untrusted, cut)
  uint64_t open = 0;          // connections open now
};

// One request and its response, on a worker thread.
class Exchange {
 public:
  Exchange(Stream& stream, const Request& request, std::string& buffer, const ServerOptions& options, std::string peer,
           RequestParser* parser);
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  const Request& request() const { return request_; }
  const std::string& peer() const { return peer_; }

  // The next bytes of the request body (decoded if chunked); 0 at its end.
  // Sends "100 Continue" first when the client asked for it. Errors: the
  // client went away or stalled (TimedOut), the body was malformed or longer
  // than its Content-Length (InvalidArgument).
  Result<size_t> ReadBody(char* out, size_t n);
  bool body_done() const { return body_done_; }
  uint64_t body_received() const { return body_received_; }
  // Whether the request announced a body (Content-Length > 0 or chunked).
  bool has_body() const;

  // A whole response with a small body (Content-Length set). Both this and
  // Begin put "100 Continue" ahead of the head when an Expect: 100-continue
  // request has no body, so the client's wait ends the usual way.
  Status Respond(int status, Headers headers, std::string_view body);
  // A response head announcing `content_length` bytes, to be sent with Write.
  // For HEAD requests only the head goes out and Write discards.
  Status Begin(int status, Headers headers, uint64_t content_length);
  Status Write(std::string_view data);
  bool responded() const { return began_; }
  int status() const { return status_; }
  uint64_t bytes_sent() const { return sent_; }
  // Closes the connection after this response.
  void CloseAfter() { close_ = true; }
  // Ends a response whose head is out but whose body cannot be completed:
  // the connection is reset (RST), so no client can take the bytes it got
  // for the whole body.
  void Abort();

  // Whether the connection may carry another request: the response was
  // whole, the body read to its end (drained if the handler left some), and
  // neither side asked to close.
  bool Finish();

 private:
  Result<size_t> ReadRaw(char* out, size_t n);
  Status CheckOverrun();
  std::string InterimContinue();  // "100 Continue" owed ahead of the head, or ""

  Stream& stream_;
  const Request& request_;
  std::string& buffer_;  // bytes received past what was consumed
  const ServerOptions& options_;
  std::string peer_;
  RequestParser* parser_;  // for chunked bodies
  uint64_t body_received_ = 0, raw_received_ = 0;
  bool body_done_ = false, continued_ = false, began_ = false, close_ = false, failed_ = false;
  int status_ = 0;
  uint64_t content_length_ = 0, sent_ = 0;
  double body_started_ = 0;
};

using Handler = std::function<void(Exchange&)>;

class Server {
 public:
  // Binds and starts serving in background threads.
  static Result<std::unique_ptr<Server>> Start(ServerOptions options, Handler handler);
  ~Server();  // stops
  // Stops accepting, breaks open connections, joins every thread.
  void Stop();
  int port() const { return port_; }
  const std::string& host() const { return options_.host; }
  ServerStats Stats() const;
  // Waits until at least `at_least` idle connections were closed in all;
  // false when `timeout_s` passes first.
  bool WaitForIdleClosed(uint64_t at_least, double timeout_s) const;

 private:
  struct Loop;
  Server() = default;
  ServerOptions options_;
  int port_ = 0;
  std::unique_ptr<Loop> loop_;
};

// Serves the requests in `raw` (one or more, pipelined) through `handler` as
// a connection would, and returns every byte the server wrote. For tests and
// fuzzing.
std::string ServeBytes(const ServerOptions& options, const Handler& handler, std::string_view raw);

// Raises the soft limit of open files to the hard limit (a node may hold
// thousands of connections); returns the limit now in force.
uint64_t RaiseOpenFileLimit();

}  // namespace aq::http
