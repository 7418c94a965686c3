// TLS for the HTTP server and client, through OpenSSL (Debian's libssl).
//
// TlsServer holds the certificate chain and key a server presents; Reload()
// reads them again (a renewed certificate) and new connections get the new
// ones while open connections keep theirs, so a reload drops nothing.
// TlsClient verifies servers: against a CA bundle (the file a user names,
// as AWS tools take AWS_CA_BUNDLE) or the system's store, with the host
// name (or IP address) checked against the certificate.
//
// TlsConn is one connection's TLS state over a socket the caller owns, for
// blocking use (reads and writes wait up to the socket's SO_RCVTIMEO /
// SO_SNDTIMEO) and, for the server's event loop, non-blocking use (a step
// that cannot finish says whether it waits to read or to write).
//
// Thread safety: TlsServer and TlsClient may be shared by all threads; a
// TlsConn is used by one thread at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "common/status.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace aq::http {

class TlsConn;
struct TlsGather;  // tls.cc: the write-batching filter's state

// The CA bundle clients verify servers with when none is named: AQUIFER_CA
// (what `aquifer --ca` sets), else AWS_CA_BUNDLE (as the AWS tools take
// it), else "" (the system's CAs).
std::string DefaultCaBundle();

class TlsServer {
 public:
  // PEM files: the certificate (with any intermediates after it) and its
  // private key. Errors name the file and what is wrong (missing, not PEM,
  // the key does not match the certificate, a group/world-readable key).
  static Result<std::shared_ptr<TlsServer>> Load(const std::string& cert_file, const std::string& key_file);
  ~TlsServer();
  // Reads the files again; on any error the current certificate stays.
  Status Reload();
  // A server-side connection over `fd` with the current certificate.
  Result<std::unique_ptr<TlsConn>> Accept(int fd);
  // The certificate's subject and expiry, for logs ("CN=node1, until ...").
  std::string Describe();
  // What is wrong with the certificate's dates now, for a warning: expired
  // or not valid yet (clients refuse it either way); "" when neither.
  std::string DateWarning();

 private:
  TlsServer(std::string cert, std::string key) : cert_(std::move(cert)), key_(std::move(key)) {}
  static Result<SSL_CTX*> MakeContext(const std::string& cert, const std::string& key, std::string* describe);
  const std::string cert_, key_;
  Mutex mu_;
  std::shared_ptr<SSL_CTX> ctx_ AQ_GUARDED_BY(mu_);
  std::string describe_ AQ_GUARDED_BY(mu_);
};

class TlsClient {
 public:
  // `ca_file` empty: the system's trusted CAs. `cert_file`/`key_file`: a
  // client certificate to present (servers that ask for one, as etcd with
  // --client-cert-auth).
  static Result<std::shared_ptr<TlsClient>> Create(const std::string& ca_file, const std::string& cert_file = "",
                                                   const std::string& key_file = "");
  ~TlsClient();
  // A client-side connection over connected `fd`, verifying `host`; the
  // handshake runs within the socket's timeouts.
  Result<std::unique_ptr<TlsConn>> Connect(int fd, const std::string& host, const std::string& address);
  const std::string& ca_file() const { return ca_; }

 private:
  explicit TlsClient(std::string ca) : ca_(std::move(ca)) {}
  const std::string ca_;
  SSL_CTX* ctx_ = nullptr;
};

class TlsConn {
 public:
  ~TlsConn();
  TlsConn(const TlsConn&) = delete;
  TlsConn& operator=(const TlsConn&) = delete;

  // Non-blocking steps (the server's event loop). kWantRead/kWantWrite:
  // call again when the socket is readable/writable.
  enum class Step { kDone, kWantRead, kWantWrite, kClosed, kError };
  Step Handshake();
  // Bytes read (> 0) into out, or why none.
  Step ReadSome(char* out, size_t n, size_t* got);
  // Bytes waiting inside, decrypted or read ahead and not yet decrypted
  // (the socket may be quiet meanwhile).
  bool Pending() const;
  // Up to n bytes already decrypted, without consuming them (0 if none:
  // never waits).
  size_t Peek(char* out, size_t n);

  // Blocking use (the socket's timeouts bound each wait). 0 = closed.
  Result<size_t> Read(char* out, size_t n);
  Status Write(std::string_view data);
  // Sends close_notify, without waiting for the peer's.
  void Shutdown();
  // Why the last step failed ("certificate verify failed: ...").
  std::string LastError() const { return error_; }
  // OpenSSL's code of the last error (its first in the queue), 0 if none.
  unsigned long LastErrorCode() const { return error_code_; }

 private:
  friend class TlsServer;
  friend class TlsClient;
  TlsConn(SSL* ssl, std::shared_ptr<SSL_CTX> ctx);
  // Puts the socket under the SSL, its writes through the batching filter.
  bool Attach(int fd);
  Step Classify(int rc);
  SSL* ssl_;
  std::shared_ptr<SSL_CTX> ctx_;       // keeps the certificate it was made with
  std::unique_ptr<TlsGather> gather_;  // the filter's state: where Write gathers records
  std::string error_;
  unsigned long error_code_ = 0;
};

}  // namespace aq::http
