#include "client/s3_file_system.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "server/sigv4.h"

namespace aq::client {
namespace {

using server::UriDecode;
using server::UriEncode;

constexpr const char* kEmptySha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string XmlUnescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '&') {
      static const std::pair<const char*, char> kEnt[] = {
          {"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
      bool done = false;
      for (const auto& [ent, c] : kEnt) {
        if (s.substr(i, std::strlen(ent)) == ent) {
          out += c;
          i += std::strlen(ent) - 1;
          done = true;
          break;
        }
      }
      if (done) continue;
    }
    out += s[i];
  }
  return out;
}

// Every <tag>text</tag> inside `xml`, in order (the node's listings are flat).
std::vector<std::string_view> Elements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  for (size_t p = xml.find(open); p != std::string_view::npos; p = xml.find(open, p)) {
    size_t start = p + open.size(), end = xml.find(close, start);
    if (end == std::string_view::npos) break;
    out.push_back(xml.substr(start, end - start));
    p = end + close.size();
  }
  return out;
}

std::string ErrorCode(const std::string& body) {
  auto c = Elements(body, "Code");
  return c.empty() ? "" : std::string(c[0]);
}

class Endpoint;

class StoreFs final : public io::FileSystem {
 public:
  StoreFs(ClientCredentials c, ClientOptions o) : creds_(std::move(c)), options_(o) {
    if (const char* b = std::getenv("AQUIFER_BALANCE")) balance_ = b;
  }
  const ClientOptions& options() const { return options_; }
  ~StoreFs() override {
    for (auto& [host, fds] : sockets_) {
      for (int fd : fds) ::close(fd);
    }
  }

  Result<std::unique_ptr<io::RandomAccessFile>> OpenRead(const std::string& path, io::AccessHint) override;
  Result<std::unique_ptr<io::WritableFile>> OpenWrite(const std::string& path) override;
  Result<io::FileInfo> Stat(const std::string& path) override;
  Result<std::vector<io::FileInfo>> List(const std::string& dir) override;
  Status MakeDirs(const std::string& path) override;
  Status Remove(const std::string& path) override;
  Status Rename(const std::string& from, const std::string&) override {
    return Status(StatusCode::kUnsupported,
                  fmt::format("'{}': aquifer:// objects are not renamed; a put replaces an object whole", from));
  }

  // One signed request; retries once on a dropped keep-alive connection.
  Result<httplib::Result> Request(
      const StorePath& p, const std::string& method, const std::string& query, const httplib::Headers& extra,
      const std::string& payload_hash,
      const std::function<httplib::Result(httplib::Client&, const std::string&, const httplib::Headers&)>& send);

  // The read path: a ranged GET on a plain keep-alive socket, the body
  // received straight into `out` in large pieces. (httplib receives bodies
  // 4 KiB at a time with a poll() before each, which holds a reader near
  // 1.5 GB/s over loopback.) Returns the bytes received, which are n unless
  // the object ends first.
  Result<size_t> ReadRange(const StorePath& p, uint64_t offset, size_t n, char* out, const std::string& what);
  // GET of `resource`?`query` at p's node (with a Range header unless
  // empty), the body of exactly up to n bytes received into `out`.
  Result<size_t> RawGet(const StorePath& p, const std::string& resource, const std::string& query,
                        const std::string& range, size_t n, char* out, const std::string& what);

  // In a cluster: the nodes by fewest reads in flight from this client (or
  // round-robin), for one block's holders.
  std::vector<std::string> RankHolders(const std::vector<std::string>& addresses);
  void Started(const std::string& address, int delta);
  const std::string& balance() const { return balance_; }

 private:
  std::vector<std::pair<std::string, std::string>> Sign(const StorePath& p, const std::string& method,
                                                        const std::string& resource, const std::string& query,
                                                        const std::string& payload_hash) const;
  Result<int> Connect(const StorePath& p);
  int TakeSocket(const StorePath& p);
  void GiveSocket(const StorePath& p, int fd);
  std::mutex sockets_mu_;
  std::map<std::string, std::vector<int>> sockets_;  // idle keep-alive sockets by host:port
  std::string balance_ = "least";                    // least | round-robin | off (AQUIFER_BALANCE)
  std::mutex balance_mu_;
  std::map<std::string, int> in_flight_;  // GUARDED_BY(balance_mu_), by node address
  uint64_t rr_ = 0;                       // GUARDED_BY(balance_mu_)
  struct Pool {
    std::mutex mu;
    std::vector<std::unique_ptr<httplib::Client>> idle;
  };
  std::unique_ptr<httplib::Client> Take(const StorePath& p);
  void Give(const StorePath& p, std::unique_ptr<httplib::Client> c);

  ClientCredentials creds_;
  ClientOptions options_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Pool>> pools_;  // GUARDED_BY(mu_), by host:port
};

std::string HostPort(const StorePath& p) { return p.host + ":" + std::to_string(p.port); }

std::string Resource(const StorePath& p) {
  std::string path = "/" + p.bucket;
  if (!p.key.empty()) path += "/" + p.key;
  return UriEncode(path, false);
}

std::unique_ptr<httplib::Client> StoreFs::Take(const StorePath& p) {
  Pool* pool;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = pools_[HostPort(p)];
    if (!slot) slot = std::make_unique<Pool>();
    pool = slot.get();
  }
  {
    std::lock_guard<std::mutex> lock(pool->mu);
    if (!pool->idle.empty()) {
      auto c = std::move(pool->idle.back());
      pool->idle.pop_back();
      return c;
    }
  }
  auto c = std::make_unique<httplib::Client>(p.host, p.port);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  c->set_connection_timeout(5);
  c->set_read_timeout(60);
  c->set_write_timeout(60);
  return c;
}

void StoreFs::Give(const StorePath& p, std::unique_ptr<httplib::Client> c) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& pool = pools_[HostPort(p)];
  std::lock_guard<std::mutex> plock(pool->mu);
  if (pool->idle.size() < 16) pool->idle.push_back(std::move(c));
}

std::vector<std::pair<std::string, std::string>> StoreFs::Sign(const StorePath& p, const std::string& method,
                                                               const std::string& resource, const std::string& query,
                                                               const std::string& payload_hash) const {
  if (creds_.access_key.empty()) return {};
  return server::SignRequest(creds_.access_key, creds_.secret, HostPort(p), method, resource, query, payload_hash);
}

Result<httplib::Result> StoreFs::Request(
    const StorePath& p, const std::string& method, const std::string& query, const httplib::Headers& extra,
    const std::string& payload_hash,
    const std::function<httplib::Result(httplib::Client&, const std::string&, const httplib::Headers&)>& send) {
  const std::string resource = Resource(p);
  const std::string target = query.empty() ? resource : resource + "?" + query;
  for (int attempt = 0;; ++attempt) {
    httplib::Headers headers = extra;
    for (auto& h : Sign(p, method, resource, query, payload_hash)) headers.emplace(std::move(h));
    auto client = Take(p);
    httplib::Result res = send(*client, target, headers);
    if (res) {
      Give(p, std::move(client));
      return res;
    }
    if (attempt == 1) {
      return IoError(
          fmt::format("{} aquifer://{}{}: {}", method, HostPort(p), resource, httplib::to_string(res.error())));
    }
  }
}

Status HttpError(const httplib::Result& res, const std::string& what) {
  const std::string code = ErrorCode(res->body);
  const std::string msg = fmt::format("{}: HTTP {}{}", what, res->status, code.empty() ? "" : " " + code);
  if (res->status == 404) return NotFound(msg);
  if (res->status == 403) return Status(StatusCode::kPermissionDenied, msg);
  if (res->status == 409) return Status(StatusCode::kAlreadyExists, msg);
  if (res->status == 507) return Status(StatusCode::kNoSpace, msg);
  if (res->status >= 400 && res->status < 500) return InvalidArgument(msg);
  return IoError(msg);
}

// ---- the raw read path ----

Result<int> StoreFs::Connect(const StorePath& p) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(p.port);
  if (int rc = ::getaddrinfo(p.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return IoError(fmt::format("aquifer://{}: cannot resolve: {}", HostPort(p), gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, &::freeaddrinfo);
  int err = 0;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    timeval tv{60, 0};  // a node that stops answering fails the read instead of hanging it
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) return fd;
    err = errno;
    ::close(fd);
  }
  return IoError(fmt::format("GET aquifer://{}: Connection: {}", HostPort(p), std::strerror(err)));
}

int StoreFs::TakeSocket(const StorePath& p) {
  std::lock_guard<std::mutex> lock(sockets_mu_);
  auto& idle = sockets_[HostPort(p)];
  if (idle.empty()) return -1;
  int fd = idle.back();
  idle.pop_back();
  return fd;
}

void StoreFs::GiveSocket(const StorePath& p, int fd) {
  std::lock_guard<std::mutex> lock(sockets_mu_);
  auto& idle = sockets_[HostPort(p)];
  if (idle.size() < 64) {
    idle.push_back(fd);
  } else {
    ::close(fd);
  }
}

namespace {

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t w = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

// Receives exactly n bytes (or fewer at end of stream / error: returns what arrived).
size_t RecvAll(int fd, char* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, out + got, n - got, MSG_WAITALL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Status StatusFromHttp(int status, const std::string& body, const std::string& what) {
  const std::string code = ErrorCode(body);
  const std::string msg = fmt::format("{}: HTTP {}{}", what, status, code.empty() ? "" : " " + code);
  if (status == 404) return NotFound(msg);
  if (status == 403) return Status(StatusCode::kPermissionDenied, msg);
  if (status == 416) return InvalidArgument(msg);
  if (status >= 400 && status < 500) return InvalidArgument(msg);
  return IoError(msg);
}

}  // namespace

Result<size_t> StoreFs::ReadRange(const StorePath& p, uint64_t offset, size_t n, char* out, const std::string& what) {
  return RawGet(p, Resource(p), "", fmt::format("bytes={}-{}", offset, offset + n - 1), n, out, what);
}

Result<size_t> StoreFs::RawGet(const StorePath& p, const std::string& resource, const std::string& query,
                               const std::string& range, size_t n, char* out, const std::string& what) {
  const std::string target = query.empty() ? resource : resource + "?" + query;
  for (int attempt = 0;; ++attempt) {
    // A pooled socket the node closed (idle timeout) fails on first use: retry once on a new one.
    int fd = attempt == 0 ? TakeSocket(p) : -1;
    const bool reused = fd >= 0;
    if (fd < 0) fd = AQ_TRY(Connect(p));
    std::string req = fmt::format("GET {} HTTP/1.1\r\nHost: {}\r\n", target, HostPort(p));
    if (!range.empty()) req += "Range: " + range + "\r\n";
    for (const auto& [k, v] : Sign(p, "GET", resource, query, kEmptySha)) req += k + ": " + v + "\r\n";
    req += "\r\n";
    auto fail = [&](const std::string& why) -> Status {
      ::close(fd);
      return IoError(fmt::format("GET aquifer://{}{} ({}): {}", HostPort(p), resource, what, why));
    };
    if (!SendAll(fd, req)) {
      if (reused && attempt == 0) {
        ::close(fd);
        continue;
      }
      return fail(std::strerror(errno));
    }
    // The status line and headers; what arrives after them is body.
    char head[16384];
    size_t have = 0, header_end = std::string_view::npos;
    while (header_end == std::string_view::npos) {
      if (have == sizeof head) return fail("response headers over 16 KiB");
      ssize_t r = ::recv(fd, head + have, sizeof head - have, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        if (reused && attempt == 0 && have == 0) break;  // the node closed the idle connection
        return fail(r == 0 ? "the node closed the connection" : std::strerror(errno));
      }
      have += static_cast<size_t>(r);
      header_end = std::string_view(head, have).find("\r\n\r\n");
    }
    if (header_end == std::string_view::npos) {
      ::close(fd);
      continue;
    }
    std::string_view headers(head, header_end);
    int status = 0;
    if (headers.size() < 12 || headers.substr(0, 5) != "HTTP/" ||
        std::sscanf(std::string(headers.substr(9, 3)).c_str(), "%d", &status) != 1) {
      return fail("malformed status line");
    }
    uint64_t length = 0;
    bool has_length = false, close_after = false;
    for (size_t pos = headers.find("\r\n"); pos != std::string_view::npos;) {
      size_t next = headers.find("\r\n", pos + 2);
      std::string_view line =
          headers.substr(pos + 2, next == std::string_view::npos ? std::string_view::npos : next - pos - 2);
      pos = next;
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string name = Lower(line.substr(0, colon));
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (name == "content-length") {
        has_length = std::sscanf(std::string(value).c_str(), "%" SCNu64, &length) == 1;
      } else if (name == "connection") {
        close_after = Lower(value) == "close";
      } else if (name == "transfer-encoding") {
        return fail("chunked responses are not expected from a node");
      }
    }
    if (!has_length) return fail("no Content-Length");
    std::string_view early(head + header_end + 4, have - header_end - 4);  // body bytes already received
    if (status != 200 && status != 206) {
      std::string body(early);
      if (length > body.size() && length < (1 << 20)) {
        body.resize(length);
        body.resize(early.size() + RecvAll(fd, body.data() + early.size(), length - early.size()));
      }
      ::close(fd);
      return StatusFromHttp(status, body, fmt::format("read {}", what));
    }
    if (length > n || early.size() > length) {
      return fail(fmt::format("{} bytes of body for a {} byte range", length, n));
    }
    std::memcpy(out, early.data(), early.size());
    size_t got = early.size() + RecvAll(fd, out + early.size(), length - early.size());
    if (got != length) {
      return fail(fmt::format("the body ended after {} of {} bytes", got, length));
    }
    if (close_after) {
      ::close(fd);
    } else {
      GiveSocket(p, fd);
    }
    return got;
  }
}

class StoreFile final : public io::RandomAccessFile {
 public:
  StoreFile(StoreFs& fs, StorePath p, std::string path, uint64_t size)
      : fs_(fs), p_(std::move(p)), path_(std::move(path)), size_(size) {}
  ~StoreFile() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (ahead_.valid()) ahead_.wait();  // it writes into ahead_buf_
  }

  Result<size_t> ReadAt(uint64_t offset, size_t n, void* buf) const override {
    if (offset >= size_ || n == 0) return size_t{0};
    n = static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
    char* out = static_cast<char*>(buf);
    const ClientOptions& o = fs_.options();
    if (!o.read_ahead) return Fetch(offset, n, out);
    std::unique_lock<std::mutex> lock(mu_);
    const bool sequential = offset == next_;
    next_ = offset + n;
    size_t done = 0;
    if (ahead_.valid() && ahead_offset_ == offset) {
      // The range read ahead starts here: take what it covers.
      Result<size_t> got = ahead_.get();
      if (got.ok()) {
        done = std::min<size_t>(n, *got);
        std::memcpy(out, ahead_buf_.data(), done);
      }
    } else if (ahead_.valid()) {
      ahead_.wait();  // a jump: the range read ahead is not wanted
      ahead_ = {};
    }
    if (done < n) {
      lock.unlock();
      AQ_TRY(Fetch(offset + done, n - done, out + done));
      lock.lock();
    }
    if (sequential && next_ < size_ && !ahead_.valid()) {
      const size_t len =
          static_cast<size_t>(std::min<uint64_t>({std::max<uint64_t>(n, 1 << 20), o.max_read_ahead, size_ - next_}));
      ahead_offset_ = next_;
      ahead_buf_.resize(len);
      ahead_ = std::async(std::launch::async, [this, at = next_, len] { return Fetch(at, len, ahead_buf_.data()); });
    }
    return n;
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  // Exactly n bytes at offset, in parallel ranges when n is large.
  Result<size_t> Fetch(uint64_t offset, size_t n, char* out) const {
    const ClientOptions& o = fs_.options();
    if (n <= o.parallel_chunk || o.max_parallel <= 1) return FetchOne(offset, n, out);
    const size_t chunks = static_cast<size_t>((n + o.parallel_chunk - 1) / o.parallel_chunk);
    std::vector<Status> results(chunks);
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t c; (c = next++) < chunks;) {
        const uint64_t at = c * o.parallel_chunk;
        const size_t len = static_cast<size_t>(std::min<uint64_t>(o.parallel_chunk, n - at));
        auto r = FetchOne(offset + at, len, out + at);
        results[c] = r.ok() ? Status::Ok() : r.status();
      }
    };
    std::vector<std::future<void>> helpers;
    for (size_t i = 1; i < std::min(chunks, o.max_parallel); ++i) {
      helpers.push_back(std::async(std::launch::async, worker));
    }
    worker();
    for (auto& h : helpers) h.wait();
    for (const auto& st : results) {
      if (!st.ok()) return st;
    }
    return n;
  }
  Result<size_t> FetchOne(uint64_t offset, size_t n, char* out) const {
    size_t got = AQ_TRY(fs_.ReadRange(p_, offset, n, out, path_));
    if (got != n) {
      return Status(StatusCode::kTruncated,
                    fmt::format("read at offset {} of {}: {} of {} bytes arrived", offset, path_, got, n));
    }
    return got;
  }

  StoreFs& fs_;
  StorePath p_;
  std::string path_;
  uint64_t size_;
  // Read-ahead for a sequential reader: one range in flight.
  mutable std::mutex mu_;
  mutable uint64_t next_ = 0;  // where the last read ended
  mutable uint64_t ahead_offset_ = 0;
  mutable std::string ahead_buf_;
  mutable std::future<Result<size_t>> ahead_;
};

std::vector<std::string> StoreFs::RankHolders(const std::vector<std::string>& addresses) {
  std::vector<std::string> order = addresses;  // the node's order: the block's owner first
  std::lock_guard<std::mutex> lock(balance_mu_);
  if (balance_ == "round-robin" && !order.empty()) {
    std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(rr_++ % order.size()), order.end());
  } else if (balance_ != "off") {
    std::stable_sort(order.begin(), order.end(),
                     [&](const std::string& a, const std::string& b) { return in_flight_[a] < in_flight_[b]; });
  }
  return order;
}

void StoreFs::Started(const std::string& address, int delta) {
  std::lock_guard<std::mutex> lock(balance_mu_);
  in_flight_[address] += delta;
}

// A file on a cluster: reads go straight to the nodes holding each block
// (the least busy holder first, as this client sees it), failing over to the
// next holder and, when none answers, to a ranged GET through the node the
// path names. Readers never see an error while one replica can be read.
class ClusterStoreFile final : public io::RandomAccessFile {
 public:
  struct Block {
    std::string id, pool;
    uint64_t size = 0, start = 0;
    uint32_t crc32c = 0;
    std::vector<std::string> addresses;
  };
  ClusterStoreFile(StoreFs& fs, StorePath p, std::string path, uint64_t size, std::vector<Block> blocks)
      : fs_(fs), p_(std::move(p)), path_(std::move(path)), size_(size), blocks_(std::move(blocks)) {}

  Result<size_t> ReadAt(uint64_t offset, size_t n, void* buf) const override {
    if (offset >= size_ || n == 0) return size_t{0};
    n = static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
    char* out = static_cast<char*>(buf);
    size_t done = 0;
    // The first block that ends after `offset`.
    auto it = std::upper_bound(blocks_.begin(), blocks_.end(), offset,
                               [](uint64_t off, const Block& b) { return off < b.start + b.size; });
    for (; it != blocks_.end() && done < n; ++it) {
      const uint64_t in = offset + done - it->start;
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n - done, it->size - in));
      AQ_TRY(Piece(*it, in, take, out + done));
      done += take;
    }
    if (done != n)
      return Status(StatusCode::kTruncated, fmt::format("{}: the layout ends before byte {}", path_, offset + n));
    return n;
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  Status Piece(const Block& b, uint64_t in, size_t take, char* out) const {
    const std::string resource = "/_aquifer/blocks/" + b.id;
    const std::string query =
        fmt::format("crc={}&length={}&offset={}&pool={}&size={}", b.crc32c, take, in, UriEncode(b.pool, true), b.size);
    for (const auto& address : fs_.RankHolders(b.addresses)) {
      const size_t colon = address.rfind(':');
      if (colon == std::string::npos) continue;
      StorePath at = p_;
      at.host = address.substr(0, colon);
      at.port = std::atoi(address.c_str() + colon + 1);
      fs_.Started(address, +1);
      auto got = fs_.RawGet(at, resource, query, "", take, out, path_);
      fs_.Started(address, -1);
      if (got.ok() && *got == take) return Status::Ok();
    }
    // No holder answered: the node the path names fetches it, or fails.
    auto got = AQ_TRY(fs_.ReadRange(p_, b.start + in, take, out, path_));
    if (got != take) {
      return Status(StatusCode::kTruncated, fmt::format("read of {}: {} of {} bytes arrived", path_, got, take));
    }
    return Status::Ok();
  }

  StoreFs& fs_;
  StorePath p_;
  std::string path_;
  uint64_t size_;
  std::vector<Block> blocks_;
};

class StoreWriter final : public io::WritableFile {
 public:
  StoreWriter(StoreFs& fs, StorePath p, std::string path, std::string spool, std::FILE* f)
      : fs_(fs), p_(std::move(p)), path_(std::move(path)), spool_(std::move(spool)), f_(f) {}
  ~StoreWriter() override {
    if (f_) std::fclose(f_);
    ::unlink(spool_.c_str());
  }
  Status Append(std::string_view d) override {
    if (!f_) return InvalidArgument(fmt::format("'{}' is closed", path_));
    if (std::fwrite(d.data(), 1, d.size(), f_) != d.size()) return ErrnoStatus(errno, "spool", spool_);
    size_ += d.size();
    return Status::Ok();
  }
  Status Sync() override { return Status::Ok(); }  // durable once Close's PUT is acknowledged
  Status Close() override {
    if (!f_) return InvalidArgument(fmt::format("'{}' is already closed", path_));
    std::fflush(f_);
    // The payload hash is signed, so hash the spooled bytes first, a
    // piece at a time (memory stays bounded whatever the file's size).
    std::string hash;
    {
      std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> sha(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
      EVP_DigestInit_ex(sha.get(), EVP_sha256(), nullptr);
      std::rewind(f_);
      std::vector<char> buf(1 << 20);
      for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), f_)) > 0;) EVP_DigestUpdate(sha.get(), buf.data(), n);
      if (std::ferror(f_)) return ErrnoStatus(errno, "read back the spool", spool_);
      unsigned char d[EVP_MAX_MD_SIZE];
      unsigned len = 0;
      EVP_DigestFinal_ex(sha.get(), d, &len);
      hash = server::HexEncode(d, len);
    }
    std::FILE* f = f_;
    auto res = AQ_TRY(fs_.Request(p_, "PUT", "", {}, hash,
                                  [&](httplib::Client& c, const std::string& target, const httplib::Headers& hs) {
                                    std::rewind(f);
                                    return c.Put(
                                        target, hs, size_,
                                        [f](size_t offset, size_t length, httplib::DataSink& sink) {
                                          std::vector<char> buf(std::min<size_t>(length, 1 << 20));
                                          if (std::fseek(f, static_cast<long>(offset), SEEK_SET) != 0) return false;
                                          size_t n = std::fread(buf.data(), 1, buf.size(), f);
                                          return n > 0 && sink.write(buf.data(), n);
                                        },
                                        "application/octet-stream");
                                  }));
    std::fclose(f_);
    f_ = nullptr;
    if (res->status != 200) return HttpError(res, fmt::format("write {}", path_));
    return Status::Ok();
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  StoreFs& fs_;
  StorePath p_;
  std::string path_, spool_;
  std::FILE* f_;
  uint64_t size_ = 0;
};

Result<std::unique_ptr<io::RandomAccessFile>> StoreFs::OpenRead(const std::string& path, io::AccessHint) {
  StorePath p = AQ_TRY(ParseStorePath(path));
  if (p.key.empty()) return InvalidArgument(fmt::format("'{}' is a bucket, not an object", path));
  auto res =
      AQ_TRY(Request(p, "HEAD", "", {}, kEmptySha,
                     [](httplib::Client& c, const std::string& t, const httplib::Headers& h) { return c.Head(t, h); }));
  if (res->status != 200) return HttpError(res, fmt::format("open {}", path));
  uint64_t size = std::strtoull(res->get_header_value("Content-Length").c_str(), nullptr, 10);
  if (balance_ != "off" && size > 0) {
    // A cluster's node answers with the object's layout: read the blocks
    // from their holders. A single node has none: ranged GETs through it.
    const std::string resource = "/_aquifer/layout" + Resource(p);
    httplib::Headers h;
    for (auto& kv : Sign(p, "GET", resource, "", kEmptySha)) h.emplace(kv.first, kv.second);
    auto c = Take(p);
    auto lay = c->Get(resource, h);
    if (lay) Give(p, std::move(c));
    if (lay && lay->status == 200) {
      auto j = nlohmann::json::parse(lay->body, nullptr, false);
      std::vector<ClusterStoreFile::Block> blocks;
      uint64_t at = 0;
      bool usable = j.is_object() && j.value("size", uint64_t{0}) == size && j.contains("blocks");
      if (usable) {
        for (const auto& jb : j["blocks"]) {
          ClusterStoreFile::Block b;
          b.id = jb.value("id", "");
          b.pool = jb.value("pool", "");
          b.size = jb.value("size", uint64_t{0});
          b.crc32c = jb.value("crc32c", uint32_t{0});
          b.start = at;
          if (jb.contains("addresses")) b.addresses = jb["addresses"].get<std::vector<std::string>>();
          at += b.size;
          blocks.push_back(std::move(b));
        }
        usable = at == size;
      }
      if (usable) {
        return std::unique_ptr<io::RandomAccessFile>(
            std::make_unique<ClusterStoreFile>(*this, p, path, size, std::move(blocks)));
      }
    }
  }
  return std::unique_ptr<io::RandomAccessFile>(std::make_unique<StoreFile>(*this, p, path, size));
}

Result<std::unique_ptr<io::WritableFile>> StoreFs::OpenWrite(const std::string& path) {
  StorePath p = AQ_TRY(ParseStorePath(path));
  if (p.key.empty()) return InvalidArgument(fmt::format("'{}' is a bucket, not an object", path));
  const char* tmpdir = std::getenv("TMPDIR");
  std::string spool = std::string(tmpdir ? tmpdir : "/tmp") + "/aquifer-put-XXXXXX";
  int fd = ::mkstemp(spool.data());
  if (fd < 0) return ErrnoStatus(errno, "create a spool file for", path);
  std::FILE* f = ::fdopen(fd, "w+b");
  if (!f) {
    ::close(fd);
    return ErrnoStatus(errno, "open a spool file for", path);
  }
  return std::unique_ptr<io::WritableFile>(std::make_unique<StoreWriter>(*this, p, path, spool, f));
}

Result<io::FileInfo> StoreFs::Stat(const std::string& path) {
  StorePath p = AQ_TRY(ParseStorePath(path));
  if (!p.key.empty() && p.key.back() != '/') {
    auto res = AQ_TRY(
        Request(p, "HEAD", "", {}, kEmptySha,
                [](httplib::Client& c, const std::string& t, const httplib::Headers& h) { return c.Head(t, h); }));
    if (res->status == 200) {
      return io::FileInfo{path, std::strtoull(res->get_header_value("Content-Length").c_str(), nullptr, 10), false};
    }
    if (res->status != 404) return HttpError(res, fmt::format("stat {}", path));
  }
  // A bucket, or a prefix with objects below it, is a directory.
  auto list = List(path);
  if (!list.ok()) return list.status();
  if (list->empty() && !p.key.empty()) return NotFound(fmt::format("stat '{}': no such object or prefix", path));
  return io::FileInfo{path, 0, true};
}

Result<std::vector<io::FileInfo>> StoreFs::List(const std::string& dir) {
  StorePath p = AQ_TRY(ParseStorePath(dir));
  std::string prefix = p.key;
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  StorePath bucket = p;
  bucket.key.clear();
  std::vector<io::FileInfo> out;
  std::string token;
  while (true) {
    std::string query = "delimiter=%2F&list-type=2&prefix=" + UriEncode(prefix, true);
    if (!token.empty()) query = "continuation-token=" + UriEncode(token, true) + "&" + query;
    auto res = AQ_TRY(
        Request(bucket, "GET", query, {}, kEmptySha,
                [](httplib::Client& c, const std::string& t, const httplib::Headers& h) { return c.Get(t, h); }));
    if (res->status != 200) return HttpError(res, fmt::format("list {}", dir));
    const std::string& body = res->body;
    for (auto contents : Elements(body, "Contents")) {
      auto key = Elements(contents, "Key"), size = Elements(contents, "Size");
      if (key.empty()) continue;
      std::string k = XmlUnescape(key[0]);
      out.push_back({k.substr(prefix.size()),
                     size.empty() ? 0 : std::strtoull(std::string(size[0]).c_str(), nullptr, 10), false});
    }
    for (auto cp : Elements(body, "CommonPrefixes")) {
      auto pre = Elements(cp, "Prefix");
      if (pre.empty()) continue;
      std::string name = XmlUnescape(pre[0]).substr(prefix.size());
      if (!name.empty() && name.back() == '/') name.pop_back();
      out.push_back({name, 0, true});
    }
    auto truncated = Elements(body, "IsTruncated");
    auto next = Elements(body, "NextContinuationToken");
    if (truncated.empty() || truncated[0] != "true" || next.empty()) break;
    token = std::string(next[0]);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

Status StoreFs::MakeDirs(const std::string& path) {
  // Prefixes need no creating; the bucket does.
  StorePath p = AQ_TRY(ParseStorePath(path));
  p.key.clear();
  auto res = AQ_TRY(
      Request(p, "PUT", "", {}, kEmptySha, [](httplib::Client& c, const std::string& t, const httplib::Headers& h) {
        return c.Put(t, h, "", "application/xml");
      }));
  if (res->status == 200 || (res->status == 409 && ErrorCode(res->body) == "BucketAlreadyOwnedByYou")) {
    return Status::Ok();
  }
  return HttpError(res, fmt::format("create bucket for {}", path));
}

Status StoreFs::Remove(const std::string& path) {
  StorePath p = AQ_TRY(ParseStorePath(path));
  auto res = AQ_TRY(
      Request(p, "DELETE", "", {}, kEmptySha,
              [](httplib::Client& c, const std::string& t, const httplib::Headers& h) { return c.Delete(t, h); }));
  if (res->status == 204 || res->status == 200) return Status::Ok();
  return HttpError(res, fmt::format("remove {}", path));
}

class RoutingFs final : public io::FileSystem {
 public:
  RoutingFs(std::unique_ptr<io::FileSystem> local, std::unique_ptr<io::FileSystem> store)
      : local_(std::move(local)), store_(std::move(store)) {}
  Result<std::unique_ptr<io::RandomAccessFile>> OpenRead(const std::string& p, io::AccessHint h) override {
    return For(p).OpenRead(p, h);
  }
  Result<std::unique_ptr<io::WritableFile>> OpenWrite(const std::string& p) override { return For(p).OpenWrite(p); }
  Result<io::FileInfo> Stat(const std::string& p) override { return For(p).Stat(p); }
  Result<std::vector<io::FileInfo>> List(const std::string& d) override { return For(d).List(d); }
  Status MakeDirs(const std::string& p) override { return For(p).MakeDirs(p); }
  Status Remove(const std::string& p) override { return For(p).Remove(p); }
  Status Rename(const std::string& a, const std::string& b) override { return For(a).Rename(a, b); }
  Result<io::CopyMethod> Copy(const std::string& a, const std::string& b) override {
    if (IsStore(a) || IsStore(b)) return io::FileSystem::Copy(a, b);  // streams through this process
    return local_->Copy(a, b);
  }
  Status DropCache(const std::string& p) override { return For(p).DropCache(p); }

 private:
  static bool IsStore(const std::string& p) { return p.compare(0, kScheme.size(), kScheme) == 0; }
  io::FileSystem& For(const std::string& p) { return IsStore(p) ? *store_ : *local_; }
  std::unique_ptr<io::FileSystem> local_, store_;
};

}  // namespace

Result<StorePath> ParseStorePath(const std::string& path) {
  if (path.compare(0, kScheme.size(), kScheme) != 0) {
    return InvalidArgument(fmt::format("'{}' is not an aquifer://HOST:PORT/BUCKET/KEY path", path));
  }
  std::string rest = path.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  size_t colon = authority.rfind(':');
  StorePath p;
  p.host = authority.substr(0, colon);
  p.port = 80;
  if (colon != std::string::npos) {
    char* end = nullptr;
    long port = std::strtol(authority.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || port <= 0 || port > 65535) {
      return InvalidArgument(fmt::format("'{}': bad port in '{}'", path, authority));
    }
    p.port = static_cast<int>(port);
  }
  if (p.host.empty()) return InvalidArgument(fmt::format("'{}': no host", path));
  std::string rest2 = slash == std::string::npos ? "" : rest.substr(slash + 1);
  size_t s2 = rest2.find('/');
  p.bucket = rest2.substr(0, s2);
  if (s2 != std::string::npos) p.key = rest2.substr(s2 + 1);
  while (!p.key.empty() && p.key.back() == '/' && p.key.size() > 1 && p.key[p.key.size() - 2] == '/') p.key.pop_back();
  if (p.bucket.empty()) return InvalidArgument(fmt::format("'{}': no bucket", path));
  (void)UriDecode;
  return p;
}

ClientCredentials CredentialsFromEnvironment() {
  ClientCredentials c;
  if (const char* k = std::getenv("AWS_ACCESS_KEY_ID")) c.access_key = k;
  if (const char* s = std::getenv("AWS_SECRET_ACCESS_KEY")) c.secret = s;
  if (!c.access_key.empty()) return c;
  if (const char* file = std::getenv("AQUIFER_CREDENTIALS")) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      size_t hash = line.find('#');
      if (hash != std::string::npos) line.erase(hash);
      std::istringstream f(line);
      if (f >> c.access_key >> c.secret) return c;
    }
    c = {};
  }
  return c;
}

ClientOptions ClientOptionsFromEnvironment() {
  ClientOptions o;
  if (const char* v = std::getenv("AQUIFER_READAHEAD"); v != nullptr) o.read_ahead = std::string(v) == "1";
  return o;
}

std::unique_ptr<io::FileSystem> NewStoreFileSystem(ClientCredentials credentials, ClientOptions options) {
  return std::make_unique<StoreFs>(std::move(credentials), options);
}

std::unique_ptr<io::FileSystem> NewRoutingFileSystem(std::unique_ptr<io::FileSystem> local,
                                                     std::unique_ptr<io::FileSystem> store) {
  return std::make_unique<RoutingFs>(std::move(local), std::move(store));
}

}  // namespace aq::client
