// The node's S3 endpoint: an http::Server whose every request goes to an
// S3Handler. The HTTP layer bounds what one client can hold (connections,
// head size and time, body rate); the handler is the S3 API (docs/s3.md).
//
// Thread safety: Start/Stop from one thread; requests run on the server's
// worker threads.
#pragma once

#include <memory>

#include "common/status.h"
#include "http/server.h"
#include "server/s3_handler.h"
#include "store/object_store.h"

namespace aq::server {

struct S3ServerOptions {
  http::ServerOptions http;  // address, threads, connection and time limits
  S3HandlerOptions s3;       // credentials, limits, cluster hooks
};

class S3Server {
 public:
  // Binds and starts serving in background threads. InvalidArgument without
  // credentials unless anonymous access is enabled.
  static Result<std::unique_ptr<S3Server>> Start(store::ObjectStore& objects, S3ServerOptions options);
  ~S3Server();  // stops
  int port() const { return http_->port(); }
  http::ServerStats Stats() const { return http_->Stats(); }
  void Stop();
  // Replaces the credentials file's keys (KeyTable::SetAdminKeys).
  void SetAdminKeys(std::vector<s3::Credential> keys) { handler_->SetAdminKeys(std::move(keys)); }

 private:
  S3Server() = default;
  std::unique_ptr<S3Handler> handler_;
  std::unique_ptr<http::Server> http_;
};

// The HTTP layer's own errors (malformed head, timeouts, overload) as S3
// error documents.
std::pair<std::string, std::string> S3ErrorBody(int status, const std::string& message);

}  // namespace aq::server
