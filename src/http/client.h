// An HTTP/1.1 client over pooled keep-alive connections, for the aquifer://
// client and node-to-node calls. Response bodies are received straight into
// the caller's buffer in large reads (the read path's one copy), or into a
// string for small answers; request bodies stream from a source read by
// offset, so a request whose pooled connection turned out closed is resent
// on a fresh one without the caller noticing.
//
// Thread safety: a Pool may be used from any number of threads; each request
// takes a connection of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "http/message.h"
#include "http/tls.h"

namespace aq::http {

struct ClientOptions {
  double connect_timeout_s = 5;
  double io_timeout_s = 60;  // each read and write; a peer silent this long fails the request
  size_t max_idle_per_host = 64;
  Limits limits;
  // HTTPS when set: every connection is TLS, the server's certificate
  // verified against this client's CAs and the address's host.
  std::shared_ptr<TlsClient> tls;
};

struct ClientRequest {
  std::string method = "GET";
  std::string target = "/";  // raw path and query
  Headers headers;           // Host is added when absent
  std::string_view body;     // a small body, or:
  // A body of body_length bytes read from source(offset, out, n) -> bytes.
  uint64_t body_length = 0;
  std::function<Result<size_t>(uint64_t offset, char* out, size_t n)> body_source;
};

struct ClientResponse {
  int status = 0;
  Headers headers;
  std::string body;       // collected unless received into the caller's buffer
  uint64_t received = 0;  // body bytes received (into the buffer, or body.size())
};

class Pool {
 public:
  explicit Pool(ClientOptions options = {});
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Sends the request to `address` (HOST:PORT) and collects the response
  // body (at most max_body bytes, else an error).
  Result<ClientResponse> Send(const std::string& address, const ClientRequest& request,
                              uint64_t max_body = 64ull << 20);
  // As Send, but a 2xx body goes into out[0..capacity): more than capacity is
  // an error. Other statuses' bodies are collected into `body` (bounded).
  Result<ClientResponse> SendInto(const std::string& address, const ClientRequest& request, char* out, size_t capacity);

  // Splits "HOST:PORT" (IPv6 as [::1]:PORT).
  static Result<std::pair<std::string, int>> SplitAddress(const std::string& address);

 private:
  Result<ClientResponse> Exchange(const std::string& address, const ClientRequest& request, char* out, size_t capacity,
                                  uint64_t max_body);
  struct Conn;
  Result<std::unique_ptr<Conn>> Connect(const std::string& address);
  std::unique_ptr<Conn> TakeIdle(const std::string& address);
  void GiveIdle(const std::string& address, std::unique_ptr<Conn> conn);

  ClientOptions options_;
  Mutex mu_;
  std::map<std::string, std::vector<std::unique_ptr<Conn>>> idle_ AQ_GUARDED_BY(mu_);
};

}  // namespace aq::http
