#include "server/same_host.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "s3/same_host.h"

namespace aq::server {
namespace {

double Now() { return Clock::Real().Now(); }

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  for (size_t got = 0; got < bytes;) {
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  std::string hex;
  for (unsigned char c : raw) hex += fmt::format("{:02x}", c);
  return hex;
}

// An abstract socket address: NUL, then the name (no terminator).
socklen_t AbstractAddress(const std::string& name, sockaddr_un* a) {
  std::memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  std::memcpy(a->sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

void Reply(int fd, const std::string& text, const std::vector<int>& fds = {}) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  std::vector<char> control;
  if (!fds.empty()) {
    control.resize(CMSG_SPACE(sizeof(int) * fds.size()));
    m.msg_control = control.data();
    m.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  if (::sendmsg(fd, &m, MSG_NOSIGNAL) < 0) log::debug("same-host reads: reply not sent: {}", std::strerror(errno));
}

}  // namespace

SameHostReads::MemFd::~MemFd() {
  if (fd >= 0) ::close(fd);
}

Result<std::unique_ptr<SameHostReads>> SameHostReads::Start(store::BlockCache& cache, SameHostOptions options,
                                                            store::BlockStore* files, std::string node_id) {
  std::unique_ptr<SameHostReads> s(new SameHostReads(cache, options, files, std::move(node_id)));
  s->name_ = fmt::format("aquifer-{}-{}", ::getpid(), RandomHex(8));
  s->listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->listen_fd_ < 0) return IoError(fmt::format("same-host reads: socket: {}", std::strerror(errno)));
  sockaddr_un a;
  const socklen_t len = AbstractAddress(s->name_, &a);
  if (::bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(s->listen_fd_, 64) != 0) {
    return IoError(fmt::format("same-host reads: bind @{}: {}", s->name_, std::strerror(errno)));
  }
  s->stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (s->stop_fd_ < 0) return IoError(fmt::format("same-host reads: eventfd: {}", std::strerror(errno)));
  for (size_t i = 0; i < std::max<size_t>(1, options.threads); ++i)
    s->threads_.emplace_back([p = s.get()] { p->Loop(); });
  return s;
}

SameHostReads::~SameHostReads() {
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
  }
  for (auto& t : threads_) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void SameHostReads::Loop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      log::error("same-host reads: poll: {}", std::strerror(errno));
      return;
    }
    if (p[1].revents != 0) return;
    const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;  // another thread took it, or the client left
    Serve(c);
    ::close(c);
  }
}

bool SameHostReads::Resident(const std::string& id) {
  if (cache_.Contains(id)) return true;
  MutexLock lock(mu_);
  return shared_.count(id) > 0;
}

bool SameHostReads::Held(const store::BlockRef& b) const {
  if (files_ == nullptr || b.erasure_coded()) return false;
  return b.nodes.empty() || std::find(b.nodes.begin(), b.nodes.end(), node_id_) != b.nodes.end();
}

std::string SameHostReads::Grant(const store::ObjectMeta& object, uint64_t from, bool files) {
  Pending pending;
  pending.files = files && files_ != nullptr;
  s3::SameHostGrant g;
  uint64_t at = 0;
  for (const auto& b : object.blocks) {
    const uint64_t start = at;
    at += b.size;
    if (at <= from || b.size == 0 || !((pending.files && Held(b)) || Resident(b.id))) continue;
    pending.blocks.push_back(b);
    g.blocks.push_back({start, b.size});
    if (g.blocks.size() == s3::kMaxSameHostBlocks) break;
  }
  if (g.blocks.empty()) return "";
  g.socket = name_;
  g.token = RandomHex(s3::kSameHostTokenChars / 2);
  const double now = Now();
  pending.expires = now + o_.grant_ttl_s;
  MutexLock lock(mu_);
  while (!grant_order_.empty() && (grants_.size() >= o_.max_grants || !grants_.count(grant_order_.front()) ||
                                   grants_[grant_order_.front()].expires <= now)) {
    grants_.erase(grant_order_.front());
    grant_order_.pop_front();
  }
  stats_.grants++;
  stats_.granted_blocks += g.blocks.size();
  grants_[g.token] = std::move(pending);
  grant_order_.push_back(g.token);
  return s3::SameHostGrantToJson(g);
}

std::shared_ptr<SameHostReads::MemFd> SameHostReads::Shared(const std::string& id) {
  MutexLock lock(mu_);
  auto it = shared_.find(id);
  if (it == shared_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

std::shared_ptr<SameHostReads::MemFd> SameHostReads::Share(const std::string& id, uint64_t size) {
  // The cache hears of the read either way, as it would of one over HTTP.
  std::shared_ptr<const std::string> bytes = cache_.Get(id);
  {
    MutexLock lock(mu_);
    if (auto it = shared_.find(id); it != shared_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  if (!bytes || bytes->size() != size) return nullptr;
  auto m = std::make_shared<MemFd>();
  m->size = size;
  m->fd = ::memfd_create("aquifer-block", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (m->fd < 0) {
    log::warn("same-host reads: memfd_create: {}", std::strerror(errno));
    return nullptr;
  }
  for (uint64_t done = 0; done < size;) {
    const ssize_t n = ::pwrite(m->fd, bytes->data() + done, size - done, static_cast<off_t>(done));
    if (n <= 0) {
      log::warn("same-host reads: filling a memfd of {} bytes: {}", size, std::strerror(errno));
      return nullptr;
    }
    done += static_cast<uint64_t>(n);
  }
  if (::fcntl(m->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    log::warn("same-host reads: sealing a memfd: {}", std::strerror(errno));
    return nullptr;
  }
  MutexLock lock(mu_);
  if (auto it = shared_.find(id); it != shared_.end()) return it->second->second;  // made meanwhile
  stats_.created++;
  lru_.emplace_front(id, m);
  shared_[id] = lru_.begin();
  shared_bytes_ += size;
  while (shared_bytes_ > o_.memory_bytes && lru_.size() > 1) {
    shared_bytes_ -= lru_.back().second->size;
    shared_.erase(lru_.back().first);
    lru_.pop_back();
    stats_.evicted++;
  }
  return m;
}

void SameHostReads::Serve(int fd) {
  // A client that connects and says nothing holds this thread for at most this.
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  char buf[128];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  auto refuse = [&](const std::string& why) {
    {
      MutexLock lock(mu_);
      stats_.refused++;
    }
    Reply(fd, "ERR " + why);
  };
  if (n != static_cast<ssize_t>(s3::kSameHostTokenChars + 1) || buf[s3::kSameHostTokenChars] != '\n') {
    return refuse("expected a token and a newline");
  }
  const std::string token(buf, s3::kSameHostTokenChars);
  Pending pending;
  bool known = false;
  {
    MutexLock lock(mu_);
    auto it = grants_.find(token);
    if (it != grants_.end()) {
      known = it->second.expires > Now();
      if (known) pending = std::move(it->second);
      grants_.erase(it);
    }
    if (!known) stats_.refused++;
  }
  if (!known) return Reply(fd, "ERR unknown, used or expired token");
  std::vector<s3::SameHostPiece> pieces(pending.blocks.size());
  std::vector<std::shared_ptr<MemFd>> held;
  std::vector<int> fds, files;  // files: descriptors of block files, closed once sent
  for (size_t i = 0; i < pending.blocks.size(); ++i) {
    // A memfd already made costs nothing more; else the block's file (no
    // copy in the node); else a memfd made from the RAM cache.
    const store::BlockRef& b = pending.blocks[i];
    std::shared_ptr<MemFd> m = Shared(b.id);
    if (!m && pending.files && Held(b)) {
      auto f = files_->OpenPlain(b);
      if (f.ok() && *f) {
        pieces[i] = {s3::SameHostForm::kFile, (*f)->data_offset, b.crc32c};
        fds.push_back((*f)->fd);
        files.push_back((*f)->fd);
        continue;
      }
      // Gone (moved, reclaimed) or damaged: the client reads it through the
      // node, whose read says which and repairs what it can. Compressed, or
      // in a pool read otherwise: the same.
      if (!f.ok()) log::debug("same-host reads: block {} not passed as a file: {}", b.id, f.status().message());
    }
    if (!m) m = Share(b.id, b.size);
    if (!m) continue;
    pieces[i].form = s3::SameHostForm::kMemfd;
    fds.push_back(m->fd);
    held.push_back(std::move(m));
  }
  {
    MutexLock lock(mu_);
    stats_.fetches++;
    stats_.blocks_sent += held.size();
    stats_.files_sent += files.size();
    stats_.blocks_gone += pending.blocks.size() - fds.size();
  }
  Reply(fd, s3::SameHostAnswerToText(pieces), fds);
  for (int f : files) ::close(f);
}

SameHostStats SameHostReads::Stats() const {
  MutexLock lock(mu_);
  SameHostStats s = stats_;
  s.shared = lru_.size();
  s.shared_bytes = shared_bytes_;
  return s;
}

}  // namespace aq::server
