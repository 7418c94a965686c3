#include "server/s3_server.h"

#include "s3/errors.h"

namespace aq::server {

std::pair<std::string, std::string> S3ErrorBody(int status, const std::string& message) {
  const char* code = status == 408   ? "RequestTimeout"
                     : status == 431 ? "RequestHeaderSectionTooLarge"
                     : status == 503 ? "SlowDown"
                     : status >= 500 ? "InternalError"
                                     : "BadRequest";
  return {"application/xml", s3::ErrorXml({status, code, message}, "", s3::NewRequestId())};
}

Result<std::unique_ptr<S3Server>> S3Server::Start(store::ObjectStore& objects, S3ServerOptions options) {
  if (options.s3.credentials.empty() && !options.s3.anonymous) {
    return InvalidArgument("an S3 endpoint needs credentials, or anonymous access enabled");
  }
  std::unique_ptr<S3Server> s(new S3Server());
  s->handler_ = std::make_unique<S3Handler>(objects, std::move(options.s3));
  options.http.error_body = S3ErrorBody;
  options.http.limits.max_body_bytes = s->handler_->options().max_object_bytes * 2 + (64ull << 20);
  S3Handler* h = s->handler_.get();
  s->http_ = AQ_TRY(http::Server::Start(std::move(options.http), [h](http::Exchange& ex) { h->Handle(ex); }));
  return s;
}

void S3Server::Stop() {
  if (http_) http_->Stop();
}

S3Server::~S3Server() { Stop(); }

}  // namespace aq::server
