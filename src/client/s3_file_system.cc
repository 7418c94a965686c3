#include "client/s3_file_system.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/units.h"
#include "ec/stripe_read.h"
#include "http/client.h"
#include "io/read_ahead.h"
#include "s3/checksum.h"
#include "s3/internal_routes.h"
#include "s3/layout.h"
#include "s3/plan.h"
#include "s3/same_host.h"
#include "s3/sigv4.h"
#include "s3/xml.h"

namespace aq::client {
namespace {

constexpr const char* kEmptySha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string Resource(const StorePath& p) {
  std::string path = "/" + p.bucket;
  if (!p.key.empty()) path += "/" + p.key;
  return s3::UriEncode(path, false);
}

double Now() { return Clock::Real().Now(); }

// "2026-11-23T18:10:53.000Z" (a listing's LastModified) -> seconds since the
// epoch; 0 when it is not that.
int64_t ParseIsoTime(const std::string& t) {
  std::tm tm{};
  const char* end = ::strptime(t.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return 0;
  return static_cast<int64_t>(::timegm(&tm));
}

// "bytes A-B/TOTAL" -> TOTAL
std::optional<uint64_t> RangeTotal(const std::string& content_range) {
  const size_t slash = content_range.rfind('/');
  if (slash == std::string::npos) return std::nullopt;
  uint64_t total = 0;
  auto [end, ec] =
      std::from_chars(content_range.data() + slash + 1, content_range.data() + content_range.size(), total);
  if (ec != std::errc() || end != content_range.data() + content_range.size()) return std::nullopt;
  return total;
}

class StoreFs final : public io::FileSystem {
 public:
  StoreFs(std::function<Result<ClientCredentials>()> credentials, ClientOptions o)
      : find_credentials_(std::move(credentials)), options_(std::move(o)) {}
  const ClientOptions& options() const { return options_; }

  Result<std::unique_ptr<io::RandomAccessFile>> OpenRead(const std::string& path, io::AccessHint) override;
  Result<std::unique_ptr<io::WritableFile>> OpenWrite(const std::string& path) override;
  Result<io::FileInfo> Stat(const std::string& path) override;
  Result<std::vector<io::FileInfo>> List(const std::string& dir) override;
  Result<std::vector<io::FileInfo>> ListWithSkipped(const std::string& dir, std::vector<std::string>* skipped) override;
  Status MakeDirs(const std::string& path) override;
  Status Remove(const std::string& path) override;
  // A server-side copy, then the delete of the source: the new name appears
  // whole or not at all; a failure between the two leaves both names.
  Status Rename(const std::string& from, const std::string& to) override;
  // POST /_aquifer/plan to the node each file is opened at first, in
  // order, a few thousand reads per request.
  Result<size_t> Plan(const std::string& stream, const std::vector<PlannedRead>& reads) override;
  // DELETE /_aquifer/plan?stream=: the node forgets the stream, and tells
  // the cluster's other members to.
  Status CancelPlan(const std::string& where, const std::string& stream) override;

  // One signed request to `address` (HOST:PORT). A 2xx body goes into
  // `into` when given (at most `capacity` bytes).
  Result<http::ClientResponse> CallAt(const std::string& address, const std::string& method,
                                      const std::string& raw_path, const std::string& query, http::Headers headers,
                                      const std::string& payload_hash, std::string_view body = {}, char* into = nullptr,
                                      size_t capacity = 0, uint64_t body_length = 0,
                                      std::function<Result<size_t>(uint64_t, char*, size_t)> source = nullptr);
  // The same request about `p` to any node of its cluster: the nodes the
  // path names first, then the members learned from them; a node that
  // cannot be reached, cuts its answer short or answers 5xx is passed over
  // for the next, with jittered backoff between rounds, until
  // retry_deadline_s. Past it: kUnavailable naming every node tried. A 500
  // that every node gives is the object's own failure and is returned.
  Result<http::ClientResponse> Call(const StorePath& p, const std::string& method, const std::string& raw_path,
                                    const std::string& query, http::Headers headers, const std::string& payload_hash,
                                    std::string_view body = {}, char* into = nullptr, size_t capacity = 0,
                                    uint64_t body_length = 0,
                                    std::function<Result<size_t>(uint64_t, char*, size_t)> source = nullptr);
  // The Status a failed answer means, with what the client was doing.
  Status Failure(const http::ClientResponse& res, const std::string& what);

  // In a cluster: the holders by fewest reads in flight from this client (or
  // round-robin), for one block.
  std::vector<std::string> RankHolders(const std::vector<std::string>& addresses);
  void Started(const std::string& address, int delta);
  // Whether this client sent a plan naming `path` lately (kPlannedTtlS): a
  // cluster stages a planned block on its owner, so its reads ask the
  // owner (the layout's first holder) first instead of balancing.
  bool Planned(const std::string& path);

 private:
  Result<ClientCredentials> Credentials();
  void Remember(const std::string& path, const io::FileInfo& info);
  // The nodes to ask about `p`, best first: those it names, then the
  // cluster's other members (re-learned when older than members_ttl_s or,
  // at most once a second, when `stale`); nodes that failed in the last
  // seconds go last.
  std::vector<std::string> Candidates(const StorePath& p, bool stale);
  // GET /_aquifer/cluster from the first of `from` that answers (those
  // marked down last).
  std::vector<std::string> LearnMembers(std::vector<std::string> from);
  // Requests go to other nodes first for a while: 2 s after a refusal or a
  // reset (a restart is quick), 30 s after a timeout (a node that hangs
  // costs every request sent to it the whole timeout).
  void MarkDown(const std::string& address, const Status& why);

  // The scheme every path must have once the first was seen.
  Status UseScheme(const StorePath& p);
  Result<http::Pool*> TlsPool();

  std::function<Result<ClientCredentials>()> find_credentials_;
  ClientOptions options_;
  http::Pool pool_;
  enum { kUnset, kPlain, kTls };
  std::atomic<int> scheme_{kUnset};
  std::once_flag tls_once_;
  std::unique_ptr<http::Pool> tls_pool_;  // set once by tls_once_
  Status tls_error_;
  std::once_flag credentials_once_;
  Result<ClientCredentials> credentials_ = Internal("credentials not looked up");
  Mutex balance_mu_;
  std::map<std::string, int> in_flight_ AQ_GUARDED_BY(balance_mu_);  // by node address
  uint64_t rr_ AQ_GUARDED_BY(balance_mu_) = 0;
  // Paths named by plans the nodes took up, and when (at most kMaxPlanned).
  std::unordered_map<std::string, double> planned_ AQ_GUARDED_BY(balance_mu_);
  static constexpr double kPlannedTtlS = 120;
  static constexpr size_t kMaxPlanned = 1 << 18;
  Mutex members_mu_;
  struct Members {
    std::vector<std::string> addresses;  // every live member, as the node says
    double at = -1e18;                   // when learned
    double asked = -1e18;                // when last asked
  };
  std::map<std::string, Members> members_ AQ_GUARDED_BY(members_mu_);  // by the path's named nodes
  std::map<std::string, double> down_until_ AQ_GUARDED_BY(members_mu_);
  std::atomic<uint64_t> spread_{0};  // which named node leads the next request
  Mutex listed_mu_;
  // path -> what a listing said and when: Stat's answer for listing_ttl_s.
  std::map<std::string, std::pair<io::FileInfo, double>> listed_ AQ_GUARDED_BY(listed_mu_);
};

Result<ClientCredentials> StoreFs::Credentials() {
  std::call_once(credentials_once_, [this] { credentials_ = find_credentials_(); });
  return credentials_;
}

Result<http::ClientResponse> StoreFs::CallAt(const std::string& address, const std::string& method,
                                             const std::string& raw_path, const std::string& query,
                                             http::Headers headers, const std::string& payload_hash,
                                             std::string_view body, char* into, size_t capacity, uint64_t body_length,
                                             std::function<Result<size_t>(uint64_t, char*, size_t)> source) {
  const ClientCredentials c = AQ_TRY(Credentials());
  http::ClientRequest r;
  r.method = method;
  r.target = query.empty() ? raw_path : raw_path + "?" + query;
  r.headers = std::move(headers);
  r.body = body;
  r.body_length = body_length;
  r.body_source = std::move(source);
  if (!c.access_key.empty()) {
    for (auto& [k, v] : s3::SignRequest(c.access_key, c.secret, address, method, raw_path, query, payload_hash)) {
      r.headers.Add(k, v);
    }
  }
  http::Pool* pool = &pool_;
  if (scheme_.load() == kTls) pool = AQ_TRY(TlsPool());
  if (into != nullptr) return pool->SendInto(address, r, into, capacity);
  return pool->Send(address, r);
}

Status StoreFs::UseScheme(const StorePath& p) {
  const int want = p.tls ? kTls : kPlain;
  int have = kUnset;
  if (scheme_.compare_exchange_strong(have, want) || have == want) return Status::Ok();
  return InvalidArgument(fmt::format(
      "{}{}/{}: this process already talks to the store {}; aquifer:// and aquifers:// (TLS) cannot be mixed in one "
      "process",
      p.tls ? s3::kTlsScheme : s3::kScheme, p.address(), p.bucket, have == kTls ? "over TLS" : "without TLS"));
}

Result<http::Pool*> StoreFs::TlsPool() {
  std::call_once(tls_once_, [this] {
    std::string ca = options_.ca_file;
    if (ca.empty()) ca = http::DefaultCaBundle();
    auto tls = http::TlsClient::Create(ca);
    if (!tls.ok()) {
      tls_error_ = tls.status();
      return;
    }
    http::ClientOptions o;
    o.tls = *tls;
    tls_pool_ = std::make_unique<http::Pool>(o);
  });
  if (!tls_pool_) return tls_error_;
  return tls_pool_.get();
}

std::vector<std::string> StoreFs::LearnMembers(std::vector<std::string> from) {
  {
    MutexLock lock(members_mu_);
    const double now = Now();
    std::stable_partition(from.begin(), from.end(), [&](const std::string& a) AQ_REQUIRES(members_mu_) {
      auto it = down_until_.find(a);
      return it == down_until_.end() || it->second <= now;
    });
  }
  for (const auto& a : from) {
    auto res = CallAt(a, "GET", s3::internal::ClusterPath(), "", {}, kEmptySha);
    if (!res.ok() || res->status != 200) continue;
    auto map = s3::internal::ClusterMapFromJson(res->body);
    if (!map.ok()) {
      log::debug("cluster map from {}: {}", a, map.status().message());
      continue;
    }
    std::vector<std::string> out;
    for (const auto& n : map->nodes) {
      if (n.up && !n.address.empty()) out.push_back(n.address);
    }
    return out;
  }
  return {};
}

std::vector<std::string> StoreFs::Candidates(const StorePath& p, bool stale) {
  const std::vector<std::string> named = p.addresses();
  std::string group;
  for (const auto& a : named) group += a + ",";
  const double now = Now();
  bool learn = false;
  {
    MutexLock lock(members_mu_);
    Members& m = members_[group];
    learn = now - m.at > options_.members_ttl_s || (stale && now - m.asked > 1);
    if (learn) m.asked = now;
  }
  if (learn) {
    // From the nodes the path names, then from the members known already
    // (the named ones may be the ones that are down).
    std::vector<std::string> from = named;
    {
      MutexLock lock(members_mu_);
      for (const auto& a : members_[group].addresses) {
        if (std::find(from.begin(), from.end(), a) == from.end()) from.push_back(a);
      }
    }
    auto learned = LearnMembers(std::move(from));
    MutexLock lock(members_mu_);
    Members& m = members_[group];
    if (!learned.empty() || m.addresses.empty()) {
      m.addresses = std::move(learned);
      m.at = now;
    }
  }
  MutexLock lock(members_mu_);
  std::vector<std::string> order = named;
  // Requests are spread over the nodes the path names, each leading in
  // turn (as a DNS name that resolves to each node in turn spreads clients):
  // every node's link carries a share of the opens and of the reads through
  // a node, instead of the first named node carrying them all.
  if (named.size() > 1) {
    const auto lead = static_cast<std::ptrdiff_t>(spread_.fetch_add(1, std::memory_order_relaxed) % named.size());
    std::rotate(order.begin(), order.begin() + lead, order.end());
  }
  for (const auto& a : members_[group].addresses) {
    if (std::find(order.begin(), order.end(), a) == order.end()) order.push_back(a);
  }
  // The cluster's other nodes share the load of a failover, so the order of
  // all but the named nodes is this client's own.
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  if (order.size() > named.size() + 1)
    std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(named.size()), order.end(), rng);
  std::stable_partition(order.begin(), order.end(), [&](const std::string& a) AQ_REQUIRES(members_mu_) {
    auto it = down_until_.find(a);
    return it == down_until_.end() || it->second <= now;
  });
  return order;
}

void StoreFs::MarkDown(const std::string& address, const Status& why) {
  const double seconds = why.code() == StatusCode::kTimedOut ? 30 : 2;
  bool fresh = false;
  {
    MutexLock lock(members_mu_);
    double& until = down_until_[address];
    fresh = until <= Now();
    until = Now() + seconds;
  }
  if (fresh) {
    log::warn("aquifer:// node {} did not answer ({}); requests go to other nodes first for {:.0f} s", address,
              why.message(), seconds);
  }
}

Result<http::ClientResponse> StoreFs::Call(const StorePath& p, const std::string& method, const std::string& raw_path,
                                           const std::string& query, http::Headers headers,
                                           const std::string& payload_hash, std::string_view body, char* into,
                                           size_t capacity, uint64_t body_length,
                                           std::function<Result<size_t>(uint64_t, char*, size_t)> source) {
  AQ_TRY(UseScheme(p));
  AQ_TRY(Credentials());
  const double start = Now(), deadline = start + options_.retry_deadline_s;
  std::map<std::string, std::string> tried;  // node -> why it did not answer
  std::map<std::string, int> cuts;           // node -> answers it began and cut
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  for (int round = 0;; ++round) {
    bool transient = false;  // a node that could not answer (not one that answered 500)
    std::optional<http::ClientResponse> failed;
    std::optional<Status> cut;  // a node that cut its answer twice: its verdict
    for (const auto& address : Candidates(p, round > 0)) {
      auto res =
          CallAt(address, method, raw_path, query, headers, payload_hash, body, into, capacity, body_length, source);
      if (res.ok() && res->status < 500) return res;
      if (!res.ok()) {
        // Too large an answer is the request's fault, not the node's; an
        // untrusted certificate is the client's configuration (the next
        // node's is signed by the same CA): neither is retried.
        if (res.status().code() == StatusCode::kInvalidArgument ||
            res.status().code() == StatusCode::kPermissionDenied) {
          return res.status();
        }
        tried[address] = res.status().message();
        if (res.status().code() == StatusCode::kTruncated) {
          // The node answered, then cut its answer: it is up but could not
          // finish (a block it cannot read). Asked again once; a second cut
          // is its verdict, not an outage to wait out.
          if (++cuts[address] >= 2) {
            cut = res.status();
          } else {
            transient = true;
          }
          continue;
        }
        MarkDown(address, res.status());
        transient = true;
        continue;
      }
      tried[address] = fmt::format("HTTP {}", res->status);
      if (res->status == 500) {
        failed = std::move(*res);
      } else {
        transient = true;  // 502, 503 (SlowDown, ServiceUnavailable), 504
      }
    }
    if (!transient && failed) return std::move(*failed);
    if (!transient && cut) {
      return IoError(
          fmt::format("{} /{}: {}; the node cut its answer twice: it could not read a block of the object (damaged, or "
                      "unavailable beyond its repair; the node's log names the block)",
                      method, raw_path.substr(1), cut->message()));
    }
    const double now = Now();
    if (now >= deadline) break;
    // Jittered exponential backoff: 50 ms, 100 ms, ... 2 s, never past the deadline.
    const double cap = std::min(2.0, 0.05 * std::pow(2.0, std::min(round, 6)));
    const double wait = std::min(deadline - now, std::uniform_real_distribution<double>(cap / 2, cap)(rng));
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
  std::string nodes;
  for (const auto& [a, why] : tried) nodes += fmt::format("{}{} ({})", nodes.empty() ? "" : "; ", a, why);
  return Unavailable(fmt::format("{} /{}: no node of the cluster answered within {:.0f} s: {}", method,
                                 raw_path.substr(1), Now() - start, nodes));
}

Status StoreFs::Failure(const http::ClientResponse& res, const std::string& what) {
  const auto [code, message] = s3::ParseErrorXml(res.body);
  std::string msg = fmt::format("{}: HTTP {}{}{}", what, res.status, code.empty() ? "" : " " + code,
                                message.empty() ? "" : " (" + message + ")");
  switch (res.status) {
    case 404:
      return NotFound(code == "NoSuchBucket"   ? Subject::kBucket
                      : code == "NoSuchUpload" ? Subject::kUpload
                                               : Subject::kObject,
                      msg);
    case 403: {
      auto c = Credentials();
      if (c.ok()) msg += "; " + CredentialsHint(*c);
      return Status(StatusCode::kPermissionDenied, msg);
    }
    case 409: return Status(code == "BucketNotEmpty" ? StatusCode::kNotEmpty : StatusCode::kAlreadyExists, msg);
    case 412: return Conflict(msg + ": the object changed while it was being read");
    case 501: return Unsupported(msg);
    case 503: return Unavailable(msg);
    case 507: return Status(StatusCode::kNoSpace, msg);
    default: return res.status >= 400 && res.status < 500 ? InvalidArgument(msg) : IoError(msg);
  }
}

void StoreFs::Remember(const std::string& path, const io::FileInfo& info) {
  MutexLock lock(listed_mu_);
  if (listed_.size() > 1000000) listed_.clear();
  listed_[path] = {info, Now()};
}

std::vector<std::string> StoreFs::RankHolders(const std::vector<std::string>& addresses) {
  std::vector<std::string> order = addresses;  // the node's order: the block's owner first
  MutexLock lock(balance_mu_);
  if (options_.balance == "round-robin" && !order.empty()) {
    std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(rr_++ % order.size()), order.end());
  } else if (options_.balance != "off") {
    std::stable_sort(order.begin(), order.end(),
                     [&](const std::string& a, const std::string& b)
                         AQ_REQUIRES(balance_mu_) { return in_flight_[a] < in_flight_[b]; });
  }
  return order;
}

void StoreFs::Started(const std::string& address, int delta) {
  MutexLock lock(balance_mu_);
  in_flight_[address] += delta;
}

bool StoreFs::Planned(const std::string& path) {
  MutexLock lock(balance_mu_);
  auto it = planned_.find(path);
  return it != planned_.end() && Now() - it->second < kPlannedTtlS;
}

// A file opened for reading: its first bytes (from the open), the ETag the
// rest is read at, and on a cluster its layout.
class StoreFile final : public io::RandomAccessFile {
 public:
  StoreFile(StoreFs& fs, StorePath p, std::string path, uint64_t size, std::string etag, std::string head,
            std::optional<s3::Layout> layout, std::optional<s3::SameHostGrant> grant)
      : fs_(fs),
        p_(std::move(p)),
        path_(std::move(path)),
        size_(size),
        etag_(std::move(etag)),
        head_(std::move(head)),
        layout_(std::move(layout)),
        planned_(layout_ && fs_.Planned(path_)),
        grant_(std::move(grant)) {
    if (layout_) {
      uint64_t at = 0;
      for (const auto& b : layout_->blocks) {
        starts_.push_back(at);
        at += b.size;
      }
    }
  }
  ~StoreFile() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (ahead_.valid()) ahead_.wait();  // it writes into ahead_buf_
    for (const auto& b : shared_) {
      if (b.fd >= 0) ::close(b.fd);
    }
  }

  Result<size_t> ReadAt(uint64_t offset, size_t n, void* buf) const override {
    if (offset >= size_ || n == 0) return size_t{0};
    n = static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
    char* out = static_cast<char*>(buf);
    size_t done = 0;
    if (offset < head_.size()) {  // what the open already brought
      done = static_cast<size_t>(std::min<uint64_t>(n, head_.size() - offset));
      std::memcpy(out, head_.data() + offset, done);
      if (done == n) return n;
    }
    offset += done;
    out += done;
    const size_t rest = n - done;
    AQ_TRY(grant_ ? ReadSameHost(offset, rest, out) : ReadRemote(offset, rest, out));
    return n;
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  std::string version() const override { return etag_; }

 private:
  // Through the node (or, on a cluster, the blocks' holders).
  Status ReadRemote(uint64_t offset, size_t n, char* out) const {
    if (layout_) return ReadBlocks(offset, n, out);
    if (!fs_.options().read_ahead) return Fetch(offset, n, out);
    return ReadAhead(offset, n, out);
  }

  // The granted blocks from their descriptors, the rest through the node.
  Status ReadSameHost(uint64_t offset, size_t n, char* out) const {
    std::call_once(shared_once_, [this] { TakeSharedBlocks(); });
    const auto& blocks = grant_->blocks;
    size_t done = 0;
    while (done < n) {
      const uint64_t at = offset + done;
      auto it = std::upper_bound(blocks.begin(), blocks.end(), at,
                                 [](uint64_t a, const s3::SameHostBlock& b) { return a < b.offset; });
      const size_t next = static_cast<size_t>(it - blocks.begin());  // first block starting past `at`
      if (next > 0 && at < blocks[next - 1].offset + blocks[next - 1].size && shared_[next - 1].fd >= 0) {
        const auto& b = blocks[next - 1];
        const size_t take = static_cast<size_t>(std::min<uint64_t>(n - done, b.offset + b.size - at));
        if (shared_[next - 1].file) {
          AQ_TRY(ReadBlockFile(next - 1, at - b.offset, take, out + done));
        } else {
          AQ_TRY(PreadAll(shared_[next - 1].fd, at - b.offset, take, out + done, at));
        }
        done += take;
        continue;
      }
      // Up to the next block held here (or the end), through the node.
      uint64_t until = offset + n;
      for (size_t i = next; i < blocks.size(); ++i) {
        if (shared_[i].fd >= 0) {
          until = std::min(until, blocks[i].offset);
          break;
        }
      }
      const size_t take = static_cast<size_t>(until - at);
      AQ_TRY(ReadRemote(at, take, out + done));
      done += take;
    }
    return Status::Ok();
  }

  // n bytes at `from` of a shared descriptor (`at`: where in the object, for errors).
  Status PreadAll(int fd, uint64_t from, size_t n, char* out, uint64_t at) const {
    for (size_t got = 0; got < n;) {
      const ssize_t r = ::pread(fd, out + got, n - got, static_cast<off_t>(from + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        return IoError(fmt::format("read {} at offset {} from the node's shared block: {}", path_, at + got,
                                   r < 0 ? std::strerror(errno) : "it ended early"));
      }
      got += static_cast<size_t>(r);
    }
    return Status::Ok();
  }

  // [in, in + n) of granted block `i`, passed as the node's block file: the
  // whole block is read and checked against its CRC32C before any of it is
  // used (straight into `out` when the read covers it, else into a buffer
  // that serves the following reads of the same block). A block that fails
  // its check is read through the node, whose read reports the damage and
  // repairs what it can.
  Status ReadBlockFile(size_t i, uint64_t in, size_t n, char* out) const {
    const s3::SameHostBlock& b = grant_->blocks[i];
    const Shared& f = shared_[i];
    if (in + n == b.size) {
      // Reaching the block's end: the next block files' pages (up to
      // kFileReadAhead bytes past it) are read ahead while this one is
      // checked and used. Pages already in memory cost a lookup.
      uint64_t ahead = 0;
      for (size_t j = i + 1; j < shared_.size() && ahead < kFileReadAhead; ++j) {
        if (!shared_[j].file) continue;
        (void)::posix_fadvise(shared_[j].fd, static_cast<off_t>(shared_[j].data_offset),
                              static_cast<off_t>(grant_->blocks[j].size), POSIX_FADV_WILLNEED);
        ahead += grant_->blocks[j].size;
      }
    }
    auto failed = [&]() -> Status {
      log::warn("read {}: the node's block file for bytes {}-{} failed its CRC32C check; reading them through the node",
                path_, b.offset, b.offset + b.size - 1);
      return ReadRemote(b.offset + in, n, out);
    };
    if (in == 0 && n == b.size) {
      AQ_TRY(PreadAll(f.fd, f.data_offset, n, out, b.offset));
      return crc32c::Value(out, n) == f.crc32c ? Status::Ok() : failed();
    }
    std::lock_guard<std::mutex> lock(block_mu_);
    if (block_index_ != i) {
      block_index_ = SIZE_MAX;
      block_buf_.resize(b.size);
      AQ_TRY(PreadAll(f.fd, f.data_offset, b.size, block_buf_.data(), b.offset));
      if (crc32c::Value(block_buf_) != f.crc32c) return failed();
      block_index_ = i;
    }
    std::memcpy(out, block_buf_.data() + in, n);
    return Status::Ok();
  }

  // How far past a block file being read the next ones are read ahead.
  static constexpr uint64_t kFileReadAhead = 16ull << 20;

  // Presents the grant's token on the node's socket and keeps the
  // descriptors it passes back (s3/same_host.h). Any failure leaves the
  // blocks to the node.
  void TakeSharedBlocks() const {
    const auto& blocks = grant_->blocks;
    shared_.assign(blocks.size(), Shared{});
    const int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) return;
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, grant_->socket.data(), grant_->socket.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + grant_->socket.size());
    timeval tv{5, 0};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const std::string request = grant_->token + "\n";
    std::string text(s3::kMaxSameHostAnswer + 1, '\0');
    std::vector<char> control(CMSG_SPACE(sizeof(int) * s3::kMaxSameHostBlocks));
    iovec iov{text.data(), text.size()};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control.data();
    m.msg_controllen = control.size();
    ssize_t got = -1;
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), len) == 0 &&
        ::send(s, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
      got = ::recvmsg(s, &m, MSG_CMSG_CLOEXEC);
    }
    const int connect_errno = errno;
    ::close(s);
    std::vector<int> fds;
    if (got > 0) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const size_t at = fds.size();
        fds.resize(at + count);
        std::memcpy(fds.data() + at, CMSG_DATA(c), count * sizeof(int));
      }
    }
    text.resize(got > 0 ? static_cast<size_t>(got) : 0);
    Result<std::vector<s3::SameHostPiece>> pieces = IoError(std::strerror(connect_errno));
    if (got >= 0) pieces = s3::SameHostAnswerFromText(text, blocks.size(), fs_.options().same_host_files);
    if (pieces.ok() &&
        ((m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0 || s3::SameHostDescriptors(*pieces) != fds.size())) {
      pieces =
          InvalidArgument(fmt::format("{} descriptors passed for the answer '{}'", fds.size(), text.substr(0, 80)));
    }
    if (!pieces.ok()) {
      for (int fd : fds) ::close(fd);
      log::debug("open {}: same-host blocks not taken ({}); reading through the node", path_,
                 pieces.status().message());
      return;
    }
    for (size_t i = 0, f = 0; i < blocks.size(); ++i) {
      const s3::SameHostPiece& p = (*pieces)[i];
      if (p.form == s3::SameHostForm::kNone) continue;
      const int fd = fds[f++];
      const bool file = p.form == s3::SameHostForm::kFile;
      struct stat st {};
      const uint64_t want = blocks[i].size + (file ? p.data_offset : 0);
      if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != want) {
        ::close(fd);  // not the block promised: read through the node
        continue;
      }
      shared_[i] = Shared{fd, file, p.data_offset, p.crc32c};
    }
  }

  // Sequential readers: the next range is fetched while the caller works.
  Status ReadAhead(uint64_t offset, size_t n, char* out) const {
    const ClientOptions& o = fs_.options();
    std::unique_lock<std::mutex> lock(mu_);
    const bool sequential = sequential_.Observe(offset, n);  // exactly where the last read ended
    next_ = offset + n;
    size_t done = 0;
    if (ahead_.valid() && ahead_offset_ == offset) {
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
      ahead_ = std::async(std::launch::async, [this, at = next_, len]() -> Result<size_t> {
        AQ_TRY(Fetch(at, len, ahead_buf_.data()));
        return len;
      });
    }
    return Status::Ok();
  }

  // Exactly n bytes at offset through the node, in parallel ranges when n is large.
  Status Fetch(uint64_t offset, size_t n, char* out) const {
    const ClientOptions& o = fs_.options();
    if (n <= o.parallel_chunk || o.max_parallel <= 1) return FetchOne(offset, n, out);
    const size_t chunks = static_cast<size_t>((n + o.parallel_chunk - 1) / o.parallel_chunk);
    std::vector<Status> results(chunks);
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t c; (c = next++) < chunks;) {
        const uint64_t at = c * o.parallel_chunk;
        const size_t len = static_cast<size_t>(std::min<uint64_t>(o.parallel_chunk, n - at));
        results[c] = FetchOne(offset + at, len, out + at);
      }
    };
    std::vector<std::future<void>> helpers;
    for (size_t i = 1; i < std::min(chunks, o.max_parallel); ++i)
      helpers.push_back(std::async(std::launch::async, worker));
    worker();
    for (auto& h : helpers) h.wait();
    for (auto& st : results) AQ_TRY(std::move(st));
    return Status::Ok();
  }

  // `via`: the node asked (any node serves any object); default the path's.
  Status FetchOne(uint64_t offset, size_t n, char* out, const std::string& via = "") const {
    http::Headers h;
    h.Add("Range", fmt::format("bytes={}-{}", offset, offset + n - 1));
    if (!etag_.empty()) h.Add("If-Match", etag_);
    auto res = AQ_TRY(via.empty() ? fs_.Call(p_, "GET", Resource(p_), "", std::move(h), kEmptySha, {}, out, n)
                                  : fs_.CallAt(via, "GET", Resource(p_), "", std::move(h), kEmptySha, {}, out, n));
    if (res.status != 206 && res.status != 200) return fs_.Failure(res, fmt::format("read {}", path_));
    if (res.received != n) {
      return Truncated(fmt::format("read at offset {} of {}: {} of {} bytes arrived", offset, path_, res.received, n));
    }
    return Status::Ok();
  }

  // A cluster: each block's piece from its holders.
  Status ReadBlocks(uint64_t offset, size_t n, char* out) const {
    size_t done = 0;
    auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
    size_t i = static_cast<size_t>(it - starts_.begin()) - 1;
    for (; i < layout_->blocks.size() && done < n; ++i) {
      const auto& b = layout_->blocks[i];
      const uint64_t in = offset + done - starts_[i];
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n - done, b.size - in));
      AQ_TRY(Piece(b, starts_[i], in, take, out + done));
      done += take;
    }
    if (done != n) return Truncated(fmt::format("{}: the layout ends before byte {}", path_, offset + n));
    return Status::Ok();
  }

  Status Piece(const s3::LayoutBlock& b, uint64_t start, uint64_t in, size_t take, char* out) const {
    if (!b.fragments.empty()) return FragmentPieces(b, start, in, take, out);
    const s3::internal::BlockTarget t{
        .id = b.id, .pool = b.pool, .crc32c = b.crc32c, .size = b.size, .sliced = true, .offset = in, .length = take};
    const std::string resource = t.Path(), query = t.Query();
    for (const auto& address : planned_ ? b.addresses : fs_.RankHolders(b.addresses)) {
      fs_.Started(address, +1);
      auto got = fs_.CallAt(address, "GET", resource, query, {}, kEmptySha, {}, out, take);
      fs_.Started(address, -1);
      if (got.ok() && got->status == 200 && got->received == take) return Status::Ok();
    }
    // No holder answered: the node the path names fetches it, or fails.
    return FetchOne(start + in, take, out);
  }

  // An erasure-coded block: the slices of its data fragments that hold the
  // range, from their holders in parallel; a slice that cannot be read is
  // rebuilt from the same range of K other fragments, fetched from their
  // holders (the one degraded-read path, ec/stripe_read.h). Only when fewer
  // than K answer does a node read the block for us.
  Status FragmentPieces(const s3::LayoutBlock& b, uint64_t start, uint64_t in, size_t take, char* out) const {
    const uint64_t frag = b.fragments[0].size;
    const int n = static_cast<int>(b.fragments.size());
    std::vector<ec::Slice> slices;
    for (uint64_t at = in; at < in + take;) {
      const int i = static_cast<int>(at / frag);
      if (i >= b.k) return FetchOne(start + in, take, out);
      const uint64_t off = at - static_cast<uint64_t>(i) * frag;
      const size_t len = static_cast<size_t>(std::min<uint64_t>(frag - off, in + take - at));
      slices.push_back({i, off, len, out + (at - in)});
      at += len;
    }
    auto codec = ec::Codec::Get({b.k, n - b.k});
    if (!codec.ok()) return DegradedFetch(b, start, in, take, out);
    ec::StripeIo io;
    io.fetch = [&](int index, uint64_t offset, size_t len, char* into) -> Status {
      const auto& f = b.fragments[index];
      const s3::internal::BlockTarget t{.id = f.id,
                                        .pool = b.pool,
                                        .crc32c = f.crc32c,
                                        .size = f.size,
                                        .sliced = true,
                                        .offset = offset,
                                        .length = len};
      const std::string resource = t.Path(), query = t.Query();
      Status last = Unavailable(fmt::format("fragment {} of block {}: no holder listed", index, b.id));
      for (const auto& address : f.addresses) {
        fs_.Started(address, +1);
        auto got = fs_.CallAt(address, "GET", resource, query, {}, kEmptySha, {}, into, len);
        fs_.Started(address, -1);
        if (got.ok() && got->status == 200 && got->received == len) return Status::Ok();
        last =
            got.ok()
                ? Unavailable(fmt::format("fragment {} of block {}: {} answered {}", index, b.id, address, got->status))
                : got.status();
      }
      return last;
    };
    if (!ec::ReadStripeSlices(**codec, slices, io).ok()) return DegradedFetch(b, start, in, take, out);
    return Status::Ok();
  }

  // A node reads (and reconstructs) the block: one of its live holders,
  // by the block's id so such blocks spread over the nodes, else the node
  // the path names.
  Status DegradedFetch(const s3::LayoutBlock& b, uint64_t start, uint64_t in, size_t take, char* out) const {
    std::vector<std::string> holders;
    for (const auto& f : b.fragments) {
      if (!f.addresses.empty()) holders.push_back(f.addresses[0]);
    }
    const std::string via = holders.empty() ? std::string() : holders[std::hash<std::string>()(b.id) % holders.size()];
    if (!via.empty() && FetchOne(start + in, take, out, via).ok()) return Status::Ok();
    return FetchOne(start + in, take, out);
  }

  StoreFs& fs_;
  StorePath p_;
  std::string path_;
  uint64_t size_;
  std::string etag_, head_;
  std::optional<s3::Layout> layout_;
  const bool planned_;            // read planned blocks from their owner, where they are staged
  std::vector<uint64_t> starts_;  // each block's first byte in the object
  // Same-host reads: what the node granted, and the descriptor of each
  // granted block (-1: read through the node), taken at the first read past
  // head_; the last block file read in part, checked whole.
  struct Shared {
    int fd = -1;
    bool file = false;  // a block file (checked as read), else a sealed memfd
    uint64_t data_offset = 0;
    uint32_t crc32c = 0;
  };
  std::optional<s3::SameHostGrant> grant_;
  mutable std::once_flag shared_once_;
  mutable std::vector<Shared> shared_;
  mutable std::mutex block_mu_;
  mutable size_t block_index_ = SIZE_MAX;  // guarded by block_mu_
  mutable std::string block_buf_;          // guarded by block_mu_
  mutable std::mutex mu_;
  mutable uint64_t next_ = 0;  // where the last read ended
  mutable io::SequentialDetector sequential_{0, 1};
  mutable uint64_t ahead_offset_ = 0;
  mutable std::string ahead_buf_;
  mutable std::future<Result<size_t>> ahead_;
};

// A file being written: spooled to an unlinked local file (a process killed
// mid-write leaves nothing behind), and stored whole on Close or never.
// Small files go as one PUT at Close. Past multipart_threshold the file
// becomes a multipart upload whose parts are sent in the background, up to
// max_parallel at a time, as soon as the writer has filled them, so a
// large sequential write is mostly sent by the time it closes. A write
// that goes back into a part already sent (zip's local headers, HDF5's
// superblock) marks it to be sent again at Close; the upload completes
// only at Close, so a reader never sees the file until it is whole.
class StoreWriter final : public io::WritableFile {
 public:
  StoreWriter(StoreFs& fs, StorePath p, std::string path, int fd)
      : fs_(fs), p_(std::move(p)), path_(std::move(path)), fd_(fd) {}
  ~StoreWriter() override {
    Drain();
    if (!upload_.empty()) Abort();
    if (fd_ >= 0) ::close(fd_);
  }
  // A failed append (a full spool disk, a part the store refused) fails the
  // file for good: Close then sends nothing, so a later close can never
  // store the part before the failure as if it were the whole.
  Status Append(std::string_view d) override { return WriteAt(size_, d); }

  Status WriteAt(uint64_t offset, std::string_view d) override {
    AQ_TRY(Usable());
    for (size_t done = 0; done < d.size();) {
      ssize_t w = ::pwrite(fd_, d.data() + done, d.size() - done, static_cast<off_t>(offset + done));
      if (w < 0) {
        if (errno == EINTR) continue;
        return Fail(ErrnoStatus(errno, "spool", path_));
      }
      done += static_cast<size_t>(w);
    }
    if (!d.empty()) Touched(offset, offset + d.size());
    size_ = std::max<uint64_t>(size_, offset + d.size());
    return SendFilled();
  }

  Status Truncate(uint64_t to) override {
    AQ_TRY(Usable());
    while (!flight_.empty()) AQ_TRY(Land());  // no part in flight reads past the new end
    if (::ftruncate(fd_, static_cast<off_t>(to)) != 0) return Fail(ErrnoStatus(errno, "truncate the spool of", path_));
    Touched(std::min(to, size_), std::max(to, size_));
    size_ = to;
    return Status::Ok();
  }

  Status Sync() override { return Status::Ok(); }  // durable once Close's upload is acknowledged

  Status Close() override {
    if (fd_ < 0) return InvalidArgument(fmt::format("'{}' is already closed", path_));
    Status s = failed_.ok()
                   ? Finish()
                   : Status(failed_.code(), fmt::format("{} not stored: a write failed: {}", path_, failed_.message()));
    Drain();
    if (!s.ok() && !upload_.empty()) Abort();
    ::close(fd_);
    fd_ = -1;
    return s;
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  // A part of a multipart upload: sent (its length and ETag), in flight,
  // or to be sent again because a write went back into it.
  struct Part {
    uint64_t sent_length = 0;
    std::string etag;
    bool dirty = false;
  };
  using Sent = std::pair<uint64_t, Result<std::string>>;  // part index, ETag

  Status Usable() const {
    if (fd_ < 0) return InvalidArgument(fmt::format("'{}' is closed", path_));
    return failed_;
  }
  Status Fail(Status s) {
    if (failed_.ok()) failed_ = s;
    return failed_;
  }
  uint64_t PartSize() const { return std::max<uint64_t>(fs_.options().part_size, 1); }

  // Bytes [from, to) changed: a part sent (or in flight) with any of them
  // goes again.
  void Touched(uint64_t from, uint64_t to) {
    if (parts_.empty() || from >= to) return;
    for (auto it = parts_.lower_bound(from / PartSize()); it != parts_.end() && it->first * PartSize() < to; ++it) {
      it->second.dirty = true;
    }
  }

  // The spool's bytes [offset, offset + n) into out.
  Result<size_t> ReadSpool(uint64_t offset, char* out, size_t n) const {
    for (;;) {
      ssize_t r = ::pread(fd_, out, n, static_cast<off_t>(offset));
      if (r >= 0) return static_cast<size_t>(r);
      if (errno != EINTR) return ErrnoStatus(errno, "read back the spool of", path_);
    }
  }
  // Checksums of a range of the spool, base64 as S3 headers carry them, in
  // one pass over it, a piece at a time (memory stays bounded).
  Result<std::vector<std::string>> Sums(std::initializer_list<const char*> algorithms, uint64_t offset,
                                        uint64_t n) const {
    std::vector<std::unique_ptr<s3::Checksum>> sums;
    for (const char* a : algorithms) sums.push_back(s3::Checksum::Make(a).value());
    std::string buf(1 << 20, '\0');
    for (uint64_t done = 0; done < n;) {
      const size_t got = AQ_TRY(ReadSpool(offset + done, buf.data(), std::min<uint64_t>(buf.size(), n - done)));
      if (got == 0) return IoError(fmt::format("the spool of {} ended early", path_));
      for (auto& sum : sums) sum->Update(std::string_view(buf.data(), got));
      done += got;
    }
    std::vector<std::string> out;
    for (auto& sum : sums) out.push_back(sum->Base64());
    return out;
  }
  // Every body carries its CRC32C, which the node checks and stores as the
  // object's checksum (for a multipart upload, each part's, combined into
  // the whole's: FULL_OBJECT): a hardware CRC pass on each side, where a
  // checksum the node picked itself (CRC64NVME) would cost it a slower one.
  // Over TLS, whose records already authenticate every byte, the body goes
  // as UNSIGNED-PAYLOAD (as current AWS SDKs send over HTTPS): no SHA-256
  // pass on either side. So it does to a node on this machine's loopback,
  // where no network lies between the two to change it (the CRC32C still
  // catches damage). Elsewhere over plain HTTP the body is signed. Unless
  // asked for MD5 ETags, the node is spared its MD5 pass (s3::kEtagHeader).
  Result<http::ClientResponse> Send(const std::string& method, const std::string& query, uint64_t offset, uint64_t n) {
    http::Headers h;
    if (!fs_.options().md5_etags) h.Add(s3::kEtagHeader, s3::kUniqueEtag);
    std::string hash = "UNSIGNED-PAYLOAD";
    if (p_.tls || s3::IsLoopbackHost(p_.host)) {
      h.Add("x-amz-checksum-crc32c", AQ_TRY(Sums({"crc32c"}, offset, n))[0]);
    } else {  // the CRC and the signature's SHA-256 in one read of the range
      const auto sums = AQ_TRY(Sums({"crc32c", "sha256"}, offset, n));
      h.Add("x-amz-checksum-crc32c", sums[0]);
      const std::string raw = AQ_TRY(s3::Base64Decode(sums[1]));
      hash = s3::HexEncode(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
    }
    return fs_.Call(p_, method, Resource(p_), query, std::move(h), hash, {}, nullptr, 0, n,
                    [this, offset](uint64_t at, char* out, size_t len) { return ReadSpool(offset + at, out, len); });
  }
  Status PutWhole() {
    auto res = AQ_TRY(Send("PUT", "", 0, size_));
    if (res.status != 200) return fs_.Failure(res, fmt::format("write {}", path_));
    return Status::Ok();
  }

  Status Begin() {
    const std::string what = fmt::format("write {}", path_);
    http::Headers sum;
    sum.Add("x-amz-checksum-algorithm", "CRC32C");
    sum.Add("x-amz-checksum-type", "FULL_OBJECT");
    auto created = AQ_TRY(fs_.Call(p_, "POST", Resource(p_), "uploads=", std::move(sum), kEmptySha));
    if (created.status != 200) return fs_.Failure(created, what);
    std::string id;
    AQ_TRY(s3::WalkXml(created.body, "InitiateMultipartUploadResult", [&](const std::string& p, const std::string& t) {
      if (p == "InitiateMultipartUploadResult/UploadId") id = t;
      return Status::Ok();
    }));
    if (id.empty()) return IoError(fmt::format("{}: the node gave no upload id", what));
    upload_ = "uploadId=" + s3::UriEncode(id, true);
    return Status::Ok();
  }
  void Abort() {
    (void)fs_.Call(p_, "DELETE", Resource(p_), upload_, {}, kEmptySha);
    upload_.clear();
  }

  // Part i (bytes [i * part, ...) up to `length`) sent in the background.
  // At most max_parallel parts are in flight: the writer waits for the
  // oldest beyond that (memory and connections stay bounded).
  Status Launch(uint64_t i, uint64_t length) {
    while (flight_.size() >= std::max<size_t>(fs_.options().max_parallel, 1)) AQ_TRY(Land());
    Part& part = parts_[i];
    part.dirty = false;
    part.sent_length = length;
    part.etag.clear();
    flight_.push_back(std::async(std::launch::async, [this, i, length]() -> Sent {
      auto res = Send("PUT", fmt::format("partNumber={}&{}", i + 1, upload_), i * PartSize(), length);
      if (!res.ok()) return {i, res.status()};
      if (res->status != 200) return {i, fs_.Failure(*res, fmt::format("write {} (part {})", path_, i + 1))};
      return {i, res->headers.Get("ETag")};
    }));
    return Status::Ok();
  }
  // Waits for the oldest part in flight.
  Status Land() {
    Sent got = flight_.front().get();
    flight_.pop_front();
    Part& part = parts_[got.first];
    if (!got.second.ok()) {
      // Written into while it was being sent (its bytes no longer match the
      // hash the request was signed with): it goes again at Close anyway.
      if (part.dirty) return Status::Ok();
      return Fail(got.second.status());
    }
    part.etag = *got.second;
    return Status::Ok();
  }
  void Drain() {
    while (!flight_.empty()) (void)Land();
  }

  // Past the threshold, every part the writer has filled and not sent (or
  // sent and written into since, while it is still filling the file) goes.
  Status SendFilled() {
    if (size_ <= fs_.options().multipart_threshold) return Status::Ok();
    if (upload_.empty()) AQ_TRY(Begin());
    const uint64_t part = PartSize();
    for (uint64_t i = 0; (i + 1) * part <= size_; ++i) {
      auto it = parts_.find(i);
      if (it != parts_.end()) continue;  // sent once; a rewrite goes at Close
      AQ_TRY(Launch(i, part));
    }
    return Status::Ok();
  }

  Status Finish() {
    if (upload_.empty() && size_ <= fs_.options().multipart_threshold) return PutWhole();
    if (upload_.empty()) AQ_TRY(Begin());
    const uint64_t part = PartSize();
    const uint64_t count = std::max<uint64_t>(1, (size_ + part - 1) / part);
    while (!flight_.empty()) AQ_TRY(Land());
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t length = std::min(part, size_ - i * part);
      auto it = parts_.find(i);
      if (it == parts_.end() || it->second.dirty || it->second.sent_length != length) AQ_TRY(Launch(i, length));
    }
    while (!flight_.empty()) AQ_TRY(Land());
    std::string complete = "<CompleteMultipartUpload>";
    for (uint64_t i = 0; i < count; ++i) {
      complete +=
          fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", i + 1, s3::XmlText(parts_[i].etag));
    }
    complete += "</CompleteMultipartUpload>";
    const std::string what = fmt::format("write {}", path_);
    auto done = AQ_TRY(fs_.Call(p_, "POST", Resource(p_), upload_, {}, s3::Sha256Hex(complete), complete));
    if (done.status != 200 || done.body.find("<Error>") != std::string::npos) return fs_.Failure(done, what);
    upload_.clear();  // complete: nothing to abort
    return Status::Ok();
  }

  StoreFs& fs_;
  StorePath p_;
  std::string path_;
  int fd_;
  uint64_t size_ = 0;
  Status failed_;
  std::string upload_;                    // "uploadId=…" once the file is a multipart upload
  std::map<uint64_t, Part> parts_;        // by index (part number - 1)
  std::deque<std::future<Sent>> flight_;  // parts being sent, oldest first
};

Result<std::unique_ptr<io::RandomAccessFile>> StoreFs::OpenRead(const std::string& path, io::AccessHint) {
  StorePath p = AQ_TRY(ParseStorePath(path));
  AQ_TRY(UseScheme(p));
  if (p.key.empty()) return InvalidArgument(fmt::format("'{}' is a bucket, not an object", path));
  // One GET: the first bytes, the size (Content-Range), the ETag and, from a
  // cluster, the layout. A small object is read whole here.
  std::string head(options_.open_bytes, '\0');
  http::Headers h;
  h.Add("Range", fmt::format("bytes=0-{}", options_.open_bytes - 1));
  h.Add("x-aquifer-open", "1");
  const bool same_host = options_.same_host && s3::IsLoopbackHost(p.host);
  if (same_host) h.Add(s3::kSameHostHeader, options_.same_host_files ? s3::kSameHostFiles : s3::kSameHostMemfds);
  auto res = AQ_TRY(Call(p, "GET", Resource(p), "", std::move(h), kEmptySha, {}, head.data(), head.size()));
  if (res.status != 200 && res.status != 206) return Failure(res, fmt::format("open {}", path));
  uint64_t size = res.received;
  if (res.status == 206) {
    auto total = RangeTotal(res.headers.Get("Content-Range"));
    if (!total)
      return IoError(fmt::format("open {}: malformed Content-Range '{}'", path, res.headers.Get("Content-Range")));
    size = *total;
  }
  head.resize(res.received);
  std::optional<s3::Layout> layout;
  const std::string lh = res.headers.Get("x-aquifer-layout");
  if (options_.balance != "off" && !lh.empty() && size > head.size()) {
    Result<s3::Layout> l = Internal("");
    if (lh == "fetch") {
      const std::string resource = s3::internal::LayoutPath(Resource(p));
      auto got = Call(p, "GET", resource, "", {}, kEmptySha);
      l = !got.ok()            ? got.status()
          : got->status != 200 ? Failure(*got, fmt::format("layout of {}", path))
                               : s3::LayoutFromJson(got->body);
    } else {
      l = s3::LayoutFromJson(lh);
    }
    // Only a layout of this very version is used (else: reads through the node).
    if (l.ok() && l->size == size && l->etag == res.headers.Get("ETag")) layout = std::move(*l);
  }
  std::optional<s3::SameHostGrant> grant;
  if (const std::string gh = res.headers.Get(s3::kSameHostHeader); same_host && !gh.empty()) {
    auto g = s3::SameHostGrantFromJson(gh, size);
    if (g.ok()) {
      grant = std::move(*g);
    } else {
      log::debug("open {}: {}; reading through the node", path, g.status().message());
    }
  }
  return std::unique_ptr<io::RandomAccessFile>(std::make_unique<StoreFile>(
      *this, p, path, size, res.headers.Get("ETag"), std::move(head), std::move(layout), std::move(grant)));
}

Status StoreFs::CancelPlan(const std::string& where, const std::string& stream) {
  const StorePath p = AQ_TRY(ParseStorePath(where));
  AQ_TRY(UseScheme(p));
  auto res = AQ_TRY(Call(p, "DELETE", s3::internal::PlanPath(), s3::internal::PlanQuery(stream), {}, kEmptySha));
  if (res.status == 204 || res.status == 200) return Status::Ok();
  if (res.status == 404 || res.status == 405 || res.status == 501) return Status::Ok();  // a store without staging
  return Failure(res, fmt::format("cancel the read plan '{}'", stream));
}

Result<size_t> StoreFs::Plan(const std::string& stream, const std::vector<PlannedRead>& reads) {
  constexpr size_t kPerRequest = 8192;
  // Runs of consecutive reads that go to the same node, each sent as one
  // or more requests, in the order given.
  size_t taken = 0;
  std::optional<StorePath> first;
  std::vector<s3::PlanRead> batch;
  std::vector<const std::string*> paths;  // the batch's
  auto send = [&]() -> Status {
    if (batch.empty()) return Status::Ok();
    const std::string body = s3::PlanToJson(batch);
    batch.clear();
    std::vector<const std::string*> sent;
    sent.swap(paths);
    http::Headers h;
    h.Add("Content-Type", "application/json");
    auto res = AQ_TRY(Call(*first, "POST", s3::internal::PlanPath(), s3::internal::PlanQuery(stream), std::move(h),
                           s3::Sha256Hex(body), body));
    if (res.status == 200) {
      auto doc = nlohmann::json::parse(res.body, nullptr, false);
      if (doc.is_object() && doc.contains("queued") && doc["queued"].is_number_unsigned()) {
        const size_t queued = doc["queued"].get<size_t>();
        taken += queued;
        if (queued > 0) {
          const double now = Now();
          MutexLock lock(balance_mu_);
          if (planned_.size() + sent.size() > kMaxPlanned) {
            std::erase_if(planned_, [&](const auto& e) { return now - e.second >= kPlannedTtlS; });
            if (planned_.size() + sent.size() > kMaxPlanned) planned_.clear();
          }
          for (const std::string* path : sent) planned_[*path] = now;
        }
      }
      return Status::Ok();
    }
    if (res.status == 404 || res.status == 405 || res.status == 501) return Status::Ok();  // a node without staging
    return Failure(res, fmt::format("send a read plan of {} reads", reads.size()));
  };
  for (const auto& r : reads) {
    StorePath p = AQ_TRY(ParseStorePath(r.path));
    AQ_TRY(UseScheme(p));
    if (p.key.empty()) return InvalidArgument(fmt::format("plan: '{}' is a bucket, not an object", r.path));
    if (first && (first->address() != p.address() || batch.size() >= kPerRequest)) AQ_TRY(send());
    if (batch.empty()) first = p;
    batch.push_back({p.bucket, p.key, r.offset, r.length});
    paths.push_back(&r.path);
  }
  AQ_TRY(send());
  return taken;
}

Result<std::unique_ptr<io::WritableFile>> StoreFs::OpenWrite(const std::string& path) {
  StorePath p = AQ_TRY(ParseStorePath(path));
  AQ_TRY(UseScheme(p));
  if (p.key.empty()) return InvalidArgument(fmt::format("'{}' is a bucket, not an object", path));
  const char* tmpdir = std::getenv("TMPDIR");
  std::string spool = std::string(tmpdir ? tmpdir : "/tmp") + "/aquifer-put-XXXXXX";
  int fd = ::mkostemp(spool.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "create a spool file for", path);
  ::unlink(spool.c_str());  // held by its descriptor only: nothing is left behind by a killed writer
  return std::unique_ptr<io::WritableFile>(std::make_unique<StoreWriter>(*this, p, path, fd));
}

Result<io::FileInfo> StoreFs::Stat(const std::string& path) {
  StorePath p = AQ_TRY(ParseStorePath(path));
  AQ_TRY(UseScheme(p));
  {
    MutexLock lock(listed_mu_);
    auto it = listed_.find(path);
    if (it != listed_.end() && Now() - it->second.second < options_.listing_ttl_s) {
      io::FileInfo info = it->second.first;
      info.name = path;
      return info;
    }
  }
  if (p.key.empty()) {  // a bucket: it exists when it can be listed
    AQ_TRY(List(path));
    return io::FileInfo{path, 0, true};
  }
  // One listing answers both questions without a failing request: the key
  // itself sorts first when it is an object, and KEY/ is a common prefix
  // when it is a directory.
  std::string key = p.key;
  while (!key.empty() && key.back() == '/') key.pop_back();
  StorePath bucket = p;
  bucket.key.clear();
  auto list = [&](const std::string& prefix, int max) -> Result<s3::ListResult> {
    const std::string query = fmt::format("delimiter=%2F&encoding-type=url&list-type=2&max-keys={}&prefix={}", max,
                                          s3::UriEncode(prefix, true));
    auto res = AQ_TRY(Call(p, "GET", Resource(bucket), query, {}, kEmptySha));
    if (res.status != 200) return Failure(res, fmt::format("stat {}", path));
    return s3::ParseListResult(res.body);
  };
  auto page = AQ_TRY(list(key, 100));
  if (!page.objects.empty() && page.objects[0].key == key && p.key.back() != '/') {
    const auto& o = page.objects[0];
    return io::FileInfo{path, o.size, false, ParseIsoTime(o.last_modified), o.etag};
  }
  for (const auto& cp : page.prefixes) {
    if (cp == key + "/") return io::FileInfo{path, 0, true};
  }
  if (page.truncated) {  // KEY/ may sort past the first page
    auto below = AQ_TRY(list(key + "/", 1));
    if (!below.prefixes.empty() || !below.objects.empty()) return io::FileInfo{path, 0, true};
  }
  return NotFound(Subject::kObject, fmt::format("stat '{}': no such object or prefix", path));
}

Result<std::vector<io::FileInfo>> StoreFs::List(const std::string& dir) {
  std::vector<std::string> skipped;
  auto out = AQ_TRY(ListWithSkipped(dir, &skipped));
  if (!skipped.empty()) {
    log::warn(
        "list {}: {} key(s) or prefix(es) left out: an empty, '.' or '..' path segment is no file name (first: {})",
        dir, skipped.size(), skipped.front());
  }
  return out;
}

Result<std::vector<io::FileInfo>> StoreFs::ListWithSkipped(const std::string& dir, std::vector<std::string>* skipped) {
  auto nameable = [](const std::string& name) { return !name.empty() && name != "." && name != ".."; };
  StorePath p = AQ_TRY(ParseStorePath(dir));
  AQ_TRY(UseScheme(p));
  std::string prefix = p.key;
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  StorePath bucket = p;
  bucket.key.clear();
  std::string base = dir;
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::vector<io::FileInfo> out;
  std::string token;
  for (;;) {
    std::string query = "delimiter=%2F&encoding-type=url&list-type=2&prefix=" + s3::UriEncode(prefix, true);
    if (!token.empty()) query = "continuation-token=" + s3::UriEncode(token, true) + "&" + query;
    auto res = AQ_TRY(Call(p, "GET", Resource(bucket), query, {}, kEmptySha));
    if (res.status != 200) return Failure(res, fmt::format("list {}", dir));
    auto page = s3::ParseListResult(res.body);
    if (!page.ok()) return page.status().WithContext(fmt::format("list {}", dir));
    for (const auto& o : page->objects) {
      if (o.key.size() <= prefix.size()) continue;  // the prefix's own marker object
      const std::string name = o.key.substr(prefix.size());
      if (!nameable(name)) {
        if (skipped != nullptr) skipped->push_back(base + "/" + name);
        continue;
      }
      io::FileInfo info{name, o.size, false, ParseIsoTime(o.last_modified), o.etag};
      Remember(base + "/" + name, info);
      out.push_back(std::move(info));
    }
    for (const auto& cp : page->prefixes) {
      std::string name = cp.substr(prefix.size());
      if (!name.empty() && name.back() == '/') name.pop_back();
      if (nameable(name)) {
        out.push_back({name, 0, true});
      } else if (skipped != nullptr) {
        skipped->push_back(base + "/" + cp.substr(prefix.size()));  // "a//": every key below it
      }
    }
    if (!page->truncated || page->next_token.empty()) break;
    token = page->next_token;
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

Status StoreFs::MakeDirs(const std::string& path) {
  // Prefixes need no creating; the bucket does (again is fine).
  StorePath p = AQ_TRY(ParseStorePath(path));
  AQ_TRY(UseScheme(p));
  p.key.clear();
  auto res = AQ_TRY(Call(p, "PUT", Resource(p), "", {}, kEmptySha));
  if (res.status == 200 || (res.status == 409 && s3::ParseErrorXml(res.body).first == "BucketAlreadyOwnedByYou")) {
    return Status::Ok();
  }
  // Other S3 stores answer a PUT of an existing bucket 409
  // BucketAlreadyExists (not ...OwnedByYou), and a key without the right to
  // create buckets 403, although the bucket is there to write in: one that
  // answers HEAD is.
  if (res.status == 409 || res.status == 403) {
    auto head = AQ_TRY(Call(p, "HEAD", Resource(p), "", {}, kEmptySha));
    if (head.status == 200) return Status::Ok();
  }
  return Failure(res, fmt::format("create bucket for {}", path));
}

Status StoreFs::Rename(const std::string& from, const std::string& to) {
  StorePath a = AQ_TRY(ParseStorePath(from));
  AQ_TRY(UseScheme(a));
  StorePath b = AQ_TRY(ParseStorePath(to));
  AQ_TRY(UseScheme(b));
  if (a.key.empty() || b.key.empty())
    return InvalidArgument(fmt::format("rename {} -> {}: buckets are not renamed", from, to));
  if (a.address() != b.address()) {
    return InvalidArgument(fmt::format("rename {} -> {}: not on the same node", from, to));
  }
  http::Headers h;
  h.Add("x-amz-copy-source", s3::UriEncode("/" + a.bucket + "/" + a.key, false));
  auto res = AQ_TRY(Call(b, "PUT", Resource(b), "", std::move(h), kEmptySha));
  // CopyObject can fail after its 200 status line: the body says.
  if (res.status != 200 || res.body.find("<Error>") != std::string::npos) {
    return Failure(res, fmt::format("rename {} -> {} (copy)", from, to));
  }
  {
    MutexLock lock(listed_mu_);
    listed_.erase(to);
  }
  return Remove(from).WithContext(fmt::format("rename {} -> {}: copied; removing the old name", from, to));
}

Status StoreFs::Remove(const std::string& path) {
  StorePath p = AQ_TRY(ParseStorePath(path));
  AQ_TRY(UseScheme(p));
  auto res = AQ_TRY(Call(p, "DELETE", Resource(p), "", {}, kEmptySha));
  if (res.status == 204 || res.status == 200) {
    MutexLock lock(listed_mu_);
    listed_.erase(path);
    return Status::Ok();
  }
  return Failure(res, fmt::format("remove {}", path));
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
  Result<std::vector<io::FileInfo>> ListWithSkipped(const std::string& d, std::vector<std::string>* s) override {
    return For(d).ListWithSkipped(d, s);
  }
  Status MakeDirs(const std::string& p) override { return For(p).MakeDirs(p); }
  Status Remove(const std::string& p) override { return For(p).Remove(p); }
  Status Rename(const std::string& a, const std::string& b) override { return For(a).Rename(a, b); }
  Result<io::CopyMethod> Copy(const std::string& a, const std::string& b) override {
    if (s3::IsStoreUrl(a) || s3::IsStoreUrl(b)) return io::FileSystem::Copy(a, b);  // streams through this process
    return local_->Copy(a, b);
  }
  Status DropCache(const std::string& p) override { return For(p).DropCache(p); }
  Result<size_t> Plan(const std::string& stream, const std::vector<PlannedRead>& reads) override {
    std::vector<PlannedRead> store, local;
    for (const auto& r : reads) (s3::IsStoreUrl(r.path) ? store : local).push_back(r);
    size_t n = 0;
    if (!store.empty()) n += AQ_TRY(store_->Plan(stream, store));
    if (!local.empty()) n += AQ_TRY(local_->Plan(stream, local));
    return n;
  }

  Status CancelPlan(const std::string& where, const std::string& stream) override {
    return For(where).CancelPlan(where, stream);
  }

 private:
  io::FileSystem& For(const std::string& p) { return s3::IsStoreUrl(p) ? *store_ : *local_; }
  std::unique_ptr<io::FileSystem> local_, store_;
};

}  // namespace

ClientOptions ClientOptionsFromEnvironment() {
  ClientOptions o;
  if (const char* v = std::getenv("AQUIFER_READAHEAD"); v != nullptr) o.read_ahead = std::string(v) == "1";
  if (const char* v = std::getenv("AQUIFER_SAME_HOST"); v != nullptr) o.same_host = std::string(v) != "0";
  if (const char* v = std::getenv("AQUIFER_SAME_HOST_FILES"); v != nullptr) o.same_host_files = std::string(v) != "0";
  if (const char* v = std::getenv("AQUIFER_MD5_ETAG"); v != nullptr) o.md5_etags = std::string(v) == "1";
  if (const char* b = std::getenv("AQUIFER_BALANCE"); b != nullptr && *b != '\0') o.balance = b;
  // Writes: the multipart part size (S3's 5 MiB at least) and the size past
  // which a write becomes a multipart upload.
  auto bytes = [](const char* name, uint64_t min, uint64_t& into) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return;
    auto n = units::ParseBytes(v);
    if (n.ok() && *n >= min) {
      into = *n;
    } else {
      log::warn("{}={}: not a size of at least {} bytes; using {}", name, v, min, into);
    }
  };
  bytes("AQUIFER_PART_SIZE", 5ull << 20, o.part_size);
  bytes("AQUIFER_MULTIPART_THRESHOLD", 5ull << 20, o.multipart_threshold);
  if (const char* v = std::getenv("AQUIFER_PARALLEL"); v != nullptr && *v != '\0') {
    const long n = std::strtol(v, nullptr, 10);
    if (n >= 1 && n <= 64) {
      o.max_parallel = static_cast<size_t>(n);
    } else {
      log::warn("AQUIFER_PARALLEL={}: not a count from 1 to 64; using {}", v, o.max_parallel);
    }
  }
  if (const char* d = std::getenv("AQUIFER_RETRY_DEADLINE"); d != nullptr && *d != '\0') {
    char* end = nullptr;
    const double v = std::strtod(d, &end);
    if (end != d && *end == '\0' && v >= 0) {
      o.retry_deadline_s = v;
    } else {
      log::warn("AQUIFER_RETRY_DEADLINE={}: not a number of seconds; using {}", d, o.retry_deadline_s);
    }
  }
  return o;
}

std::unique_ptr<io::FileSystem> NewStoreFileSystem(std::function<Result<ClientCredentials>()> credentials,
                                                   ClientOptions options) {
  return std::make_unique<StoreFs>(std::move(credentials), std::move(options));
}

std::unique_ptr<io::FileSystem> NewStoreFileSystem(ClientCredentials credentials, ClientOptions options) {
  return NewStoreFileSystem([c = std::move(credentials)]() -> Result<ClientCredentials> { return c; },
                            std::move(options));
}

std::unique_ptr<io::FileSystem> NewRoutingFileSystem(std::unique_ptr<io::FileSystem> local,
                                                     std::unique_ptr<io::FileSystem> store) {
  return std::make_unique<RoutingFs>(std::move(local), std::move(store));
}

}  // namespace aq::client
