#include "http/tls.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace aq::http {

struct TlsGather {
  std::string* buffer = nullptr;  // set only inside TlsConn::Write
};

namespace {

// The queued OpenSSL errors as one line (and the queue emptied).
std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "unknown TLS error" : out;
}

// Writes to a socket the peer closed raise SIGPIPE (OpenSSL writes without
// MSG_NOSIGNAL): the process takes the EPIPE as an error instead.
void IgnoreSigpipe() {
  static const bool once = [] {
    ::signal(SIGPIPE, SIG_IGN);
    return true;
  }();
  (void)once;
}

// Each read takes what the socket holds, up to kReadAheadBytes (several
// 16 KiB records), instead of a record's 5-byte header and then its body:
// a bulk reader makes one system call per several records, not two per
// record.
constexpr size_t kReadAheadBytes = 128 << 10;
void ReadAhead(SSL_CTX* ctx) {
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, kReadAheadBytes);
}

// Writes leave in batches. OpenSSL hands its socket BIO one 16 KiB record
// at a time, which is one send, one TCP push and one wake-up of the reader
// per record. Between the SSL and the socket sits this filter: it passes
// writes through, except while TlsConn::Write sends a body larger than a
// record, when it gathers records in the writing thread's buffer and sends
// up to kWriteBatchBytes at once (flushed before Write returns). The buffer
// belongs to the thread, so an idle connection holds no memory for it.
// The handshake and alerts go through as they come.
constexpr size_t kWriteBatchBytes = 1 << 20;
constexpr size_t kRecordBytes = 16 << 10;

// Sends what the buffer holds; false (the next BIO's retry flags copied)
// if the socket took only part of it: the rest stays buffered.
bool Drain(BIO* b, std::string& buffer) {
  size_t off = 0;
  while (off < buffer.size()) {
    const int n = BIO_write(BIO_next(b), buffer.data() + off, static_cast<int>(buffer.size() - off));
    if (n <= 0) {
      BIO_copy_next_retry(b);
      buffer.erase(0, off);
      return false;
    }
    off += static_cast<size_t>(n);
  }
  buffer.clear();
  return true;
}

int GatherWrite(BIO* b, const char* in, int n) {
  BIO_clear_retry_flags(b);
  auto* g = static_cast<TlsGather*>(BIO_get_data(b));
  if (g->buffer == nullptr) {
    const int put = BIO_write(BIO_next(b), in, n);
    BIO_copy_next_retry(b);
    return put;
  }
  if (g->buffer->size() + static_cast<size_t>(n) > kWriteBatchBytes && !Drain(b, *g->buffer)) return -1;
  g->buffer->append(in, static_cast<size_t>(n));
  return n;
}

int GatherRead(BIO* b, char* out, int n) {
  BIO_clear_retry_flags(b);
  const int got = BIO_read(BIO_next(b), out, n);
  BIO_copy_next_retry(b);
  return got;
}

long GatherCtrl(BIO* b, int cmd, long num, void* ptr) {
  auto* g = static_cast<TlsGather*>(BIO_get_data(b));
  const size_t held = g->buffer != nullptr ? g->buffer->size() : 0;
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      BIO_clear_retry_flags(b);
      if (held > 0 && !Drain(b, *g->buffer)) return 0;
      break;
    case BIO_CTRL_WPENDING: return static_cast<long>(held) + BIO_ctrl(BIO_next(b), cmd, num, ptr);
    default: break;
  }
  return BIO_ctrl(BIO_next(b), cmd, num, ptr);
}

int GatherCreate(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

const BIO_METHOD* GatherMethod() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_FILTER, "aquifer write batches");
    BIO_meth_set_write(m, GatherWrite);
    BIO_meth_set_read(m, GatherRead);
    BIO_meth_set_ctrl(m, GatherCtrl);
    BIO_meth_set_create(m, GatherCreate);
    return m;
  }();
  return method;
}

bool IsIpAddress(const std::string& host) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

std::string Subject(X509* cert) {
  if (cert == nullptr) return "no certificate";
  char name[256] = "";
  X509_NAME_oneline(X509_get_subject_name(cert), name, sizeof name);
  const ASN1_TIME* until = X509_get0_notAfter(cert);
  std::tm tm{};
  std::string expiry = "?";
  if (until != nullptr && ASN1_TIME_to_tm(until, &tm) == 1) {
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
    expiry = buf;
  }
  return fmt::format("{} (valid until {})", name, expiry);
}

}  // namespace

std::string DefaultCaBundle() {
  for (const char* var : {"AQUIFER_CA", "AWS_CA_BUNDLE"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return v;
  }
  return "";
}

// ---- server ----

Result<SSL_CTX*> TlsServer::MakeContext(const std::string& cert, const std::string& key, std::string* describe) {
  struct stat st {};
  if (::stat(key.c_str(), &st) != 0) {
    return NotFound(fmt::format("TLS key '{}': {}", key, std::strerror(errno)));
  }
  if ((st.st_mode & 077) != 0) {
    return Status(StatusCode::kPermissionDenied,
                  fmt::format("TLS key '{}' is readable by other users (mode {:04o}); fix it with: chmod 600 {}", key,
                              st.st_mode & 07777, key));
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Internal("TLS: " + OpenSslErrors());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // AES-128-GCM first: with AES-NI it encrypts ~45% faster than AES-256
  // here (bench/tls_cost), and bulk reads are what a node serves; the
  // server's order wins so every client gets it.
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  ReadAhead(ctx);
  auto fail = [&](const std::string& what) -> Status {
    const std::string why = OpenSslErrors();
    SSL_CTX_free(ctx);
    return InvalidArgument(fmt::format("{}: {}", what, why));
  };
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1) {
    return fail(fmt::format("TLS certificate '{}' (PEM, the certificate then any intermediates)", cert));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      return fail(fmt::format("TLS key '{}' does not match the certificate '{}'", key, cert));
    }
    return fail(fmt::format("TLS key '{}' (PEM)", key));
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return fail(fmt::format("TLS key '{}' does not match the certificate '{}'", key, cert));
  }
  if (describe != nullptr) *describe = Subject(SSL_CTX_get0_certificate(ctx));
  return ctx;
}

Result<std::shared_ptr<TlsServer>> TlsServer::Load(const std::string& cert_file, const std::string& key_file) {
  IgnoreSigpipe();
  std::shared_ptr<TlsServer> s(new TlsServer(cert_file, key_file));
  AQ_TRY(s->Reload());
  return s;
}

TlsServer::~TlsServer() = default;

Status TlsServer::Reload() {
  std::string describe;
  SSL_CTX* ctx = AQ_TRY(MakeContext(cert_, key_, &describe));
  MutexLock lock(mu_);
  ctx_ = std::shared_ptr<SSL_CTX>(ctx, SSL_CTX_free);
  describe_ = describe;
  return Status::Ok();
}

std::string TlsServer::Describe() {
  MutexLock lock(mu_);
  return describe_;
}

std::string TlsServer::DateWarning() {
  std::shared_ptr<SSL_CTX> ctx;
  {
    MutexLock lock(mu_);
    ctx = ctx_;
  }
  X509* cert = ctx ? SSL_CTX_get0_certificate(ctx.get()) : nullptr;
  if (cert == nullptr) return "";
  int days = 0, seconds = 0;
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    return fmt::format("the TLS certificate '{}' is not valid yet: clients refuse it until then", cert_);
  }
  // The time left until notAfter (negative: expired that long ago).
  if (ASN1_TIME_diff(&days, &seconds, nullptr, X509_get0_notAfter(cert)) != 1) return "";
  if (days < 0 || seconds < 0 || (days == 0 && seconds == 0)) {
    return fmt::format("the TLS certificate '{}' has expired: clients refuse it; renew it and send SIGHUP", cert_);
  }
  return "";
}

Result<std::unique_ptr<TlsConn>> TlsServer::Accept(int fd) {
  std::shared_ptr<SSL_CTX> ctx;
  {
    MutexLock lock(mu_);
    ctx = ctx_;
  }
  SSL* ssl = SSL_new(ctx.get());
  if (ssl == nullptr) return Internal("TLS: " + OpenSslErrors());
  std::unique_ptr<TlsConn> conn(new TlsConn(ssl, std::move(ctx)));
  if (!conn->Attach(fd)) return Internal("TLS: " + OpenSslErrors());
  SSL_set_accept_state(ssl);
  return conn;
}

// ---- client ----

Result<std::shared_ptr<TlsClient>> TlsClient::Create(const std::string& ca_file, const std::string& cert_file,
                                                     const std::string& key_file) {
  IgnoreSigpipe();
  std::shared_ptr<TlsClient> c(new TlsClient(ca_file));
  c->ctx_ = SSL_CTX_new(TLS_client_method());
  if (c->ctx_ == nullptr) return Internal("TLS: " + OpenSslErrors());
  SSL_CTX_set_min_proto_version(c->ctx_, TLS1_2_VERSION);
  SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(c->ctx_, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  ReadAhead(c->ctx_);
  if (ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(c->ctx_) != 1) {
      return Internal("TLS: the system's CA certificates: " + OpenSslErrors());
    }
  } else if (SSL_CTX_load_verify_locations(c->ctx_, ca_file.c_str(), nullptr) != 1) {
    return InvalidArgument(fmt::format("TLS CA bundle '{}': {}", ca_file, OpenSslErrors()));
  }
  if (cert_file.empty() != key_file.empty()) {
    return InvalidArgument("a TLS client certificate needs both its certificate and its key");
  }
  if (!cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(c->ctx_, cert_file.c_str()) != 1) {
      return InvalidArgument(fmt::format("TLS client certificate '{}': {}", cert_file, OpenSslErrors()));
    }
    if (SSL_CTX_use_PrivateKey_file(c->ctx_, key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(c->ctx_) != 1) {
      return InvalidArgument(fmt::format("TLS client key '{}': {}", key_file, OpenSslErrors()));
    }
  }
  return c;
}

TlsClient::~TlsClient() {
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

Result<std::unique_ptr<TlsConn>> TlsClient::Connect(int fd, const std::string& host, const std::string& address) {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return Internal("TLS: " + OpenSslErrors());
  std::unique_ptr<TlsConn> conn(new TlsConn(ssl, nullptr));
  if (!conn->Attach(fd)) return Internal("TLS: " + OpenSslErrors());
  if (IsIpAddress(host)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, host.c_str());
    SSL_set1_host(ssl, host.c_str());
  }
  const int rc = SSL_connect(ssl);
  if (rc == 1) return conn;
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    ERR_clear_error();
    return Status(StatusCode::kPermissionDenied,
                  fmt::format("{}: the server's TLS certificate is not trusted ({}); give the CA that signed it with "
                              "--ca FILE or AWS_CA_BUNDLE{}",
                              address, X509_verify_cert_error_string(verify),
                              ca_.empty() ? " (the system's CAs were used)" : " (used: " + ca_ + ")"));
  }
  const int err = errno;
  const auto step = conn->Classify(rc);
  if (step == TlsConn::Step::kWantRead || step == TlsConn::Step::kWantWrite) {
    return TimedOut(fmt::format("{}: no TLS handshake within the timeout", address));
  }
  // A plain HTTP server answers the ClientHello with an HTTP status line,
  // which OpenSSL reads as a record of a wrong version: the address's
  // configuration, not an outage, so it is not retried (InvalidArgument).
  if (const unsigned long e = conn->LastErrorCode(); ERR_GET_LIB(e) == ERR_LIB_SSL) {
    const int reason = ERR_GET_REASON(e);
    if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
        reason == SSL_R_HTTP_REQUEST) {
      return InvalidArgument(fmt::format(
          "{}: the server does not speak TLS (a plain HTTP port?); use aquifer:// for a node without TLS", address));
    }
  }
  if (err == ECONNRESET || err == EPIPE || step == TlsConn::Step::kClosed) {
    return Unavailable(fmt::format("{}: the connection closed during the TLS handshake (is it a TLS port?)", address));
  }
  return Unavailable(fmt::format("{}: TLS handshake failed: {}", address, conn->LastError()));
}

// ---- a connection ----

TlsConn::TlsConn(SSL* ssl, std::shared_ptr<SSL_CTX> ctx)
    : ssl_(ssl), ctx_(std::move(ctx)), gather_(std::make_unique<TlsGather>()) {}

TlsConn::~TlsConn() { SSL_free(ssl_); }

bool TlsConn::Attach(int fd) {
  BIO* sock = BIO_new_socket(fd, BIO_NOCLOSE);
  BIO* filter = BIO_new(GatherMethod());
  if (sock == nullptr || filter == nullptr || BIO_up_ref(sock) != 1) {
    BIO_free(filter);
    BIO_free(sock);
    return false;
  }
  BIO_set_data(filter, gather_.get());
  BIO_push(filter, sock);
  // Reads from the socket BIO, writes through the filter to it: the SSL
  // holds one reference to each end.
  SSL_set_bio(ssl_, sock, filter);
  return true;
}

TlsConn::Step TlsConn::Classify(int rc) {
  const int saved = errno;
  switch (SSL_get_error(ssl_, rc)) {
    case SSL_ERROR_WANT_READ: return Step::kWantRead;
    case SSL_ERROR_WANT_WRITE: return Step::kWantWrite;
    case SSL_ERROR_ZERO_RETURN: return Step::kClosed;
    case SSL_ERROR_SYSCALL:
      ERR_clear_error();
      if (saved == 0) return Step::kClosed;  // an EOF without close_notify
      error_ = std::strerror(saved);
      errno = saved;
      return saved == EAGAIN || saved == EWOULDBLOCK ? Step::kWantRead : Step::kError;
    default:
      error_code_ = ERR_peek_error();
      error_ = OpenSslErrors();
      return Step::kError;
  }
}

TlsConn::Step TlsConn::Handshake() {
  errno = 0;
  const int rc = SSL_do_handshake(ssl_);
  return rc == 1 ? Step::kDone : Classify(rc);
}

TlsConn::Step TlsConn::ReadSome(char* out, size_t n, size_t* got) {
  *got = 0;
  errno = 0;
  if (SSL_read_ex(ssl_, out, n, got) == 1) return Step::kDone;
  return Classify(0);
}

// Read ahead, bytes may wait in OpenSSL's buffer still encrypted, where
// SSL_pending does not count them and no epoll wakes for them.
bool TlsConn::Pending() const { return SSL_has_pending(ssl_) == 1; }

size_t TlsConn::Peek(char* out, size_t n) {
  // Only bytes already decrypted: a partial record read ahead would make
  // SSL_peek wait for the rest of it.
  if (SSL_pending(ssl_) <= 0) return 0;
  size_t got = 0;
  if (SSL_peek_ex(ssl_, out, n, &got) != 1) {
    ERR_clear_error();
    return 0;
  }
  return got;
}

Result<size_t> TlsConn::Read(char* out, size_t n) {
  size_t got = 0;
  errno = 0;
  if (SSL_read_ex(ssl_, out, n, &got) == 1) return got;
  switch (Classify(0)) {
    case Step::kClosed: return size_t{0};
    case Step::kWantRead:
    case Step::kWantWrite: return TimedOut("nothing arrived within the read timeout");
    default:
      if (errno == ECONNRESET) return Unavailable("connection reset");
      return IoError("TLS read: " + error_);
  }
}

Status TlsConn::Write(std::string_view data) {
  thread_local std::string batch;
  if (data.size() > kRecordBytes) {
    batch.clear();
    batch.reserve(kWriteBatchBytes);
    gather_->buffer = &batch;
  }
  struct Done {
    TlsGather& g;
    ~Done() {
      if (g.buffer != nullptr) g.buffer->clear();  // sent, or the connection failed
      g.buffer = nullptr;
    }
  } done{*gather_};
  while (!data.empty()) {
    size_t put = 0;
    errno = 0;
    if (SSL_write_ex(ssl_, data.data(), data.size(), &put) == 1) {
      data.remove_prefix(put);
      continue;
    }
    switch (Classify(0)) {
      case Step::kWantRead:
      case Step::kWantWrite: return TimedOut("the peer read nothing within the send timeout");
      case Step::kClosed: return Unavailable("the peer closed the connection");
      default:
        if (errno == ECONNRESET || errno == EPIPE) return Unavailable("connection reset");
        return IoError("TLS write: " + error_);
    }
  }
  if (gather_->buffer == nullptr) return Status::Ok();
  BIO* out = SSL_get_wbio(ssl_);
  errno = 0;
  if (BIO_flush(out) == 1) return Status::Ok();
  const int err = errno;
  const std::string why = OpenSslErrors();  // and the queue emptied
  if (BIO_should_retry(out)) return TimedOut("the peer read nothing within the send timeout");
  if (err == ECONNRESET || err == EPIPE) return Unavailable("connection reset");
  return IoError(fmt::format("TLS write: {}", err != 0 ? std::strerror(err) : why));
}

void TlsConn::Shutdown() {
  (void)SSL_shutdown(ssl_);
  ERR_clear_error();
}

}  // namespace aq::http
