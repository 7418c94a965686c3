// How a warm block should reach the socket: the ways a node can send bytes
// it holds in RAM, over loopback TCP to a reader in another thread, against
// the peer a reader compares us with: pread of the same bytes from the page
// cache (a file on tmpfs).
//
//   local      pread from a tmpfs file into the reader's buffer (the peer)
//   send       send() from a user-space buffer (what the node does today:
//              one copy into the socket, one out of it at the reader)
//   sendfile   sendfile() from a memfd (page-cache pages, no user-space copy
//              on the sending side)
//   splice     vmsplice() the user buffer into a pipe, splice() to the socket
//   zerocopy   send(MSG_ZEROCOPY) from the user buffer, completions reaped
//              from the error queue
//
// Each mode moves --gib GiB in --block-KiB requests, --repeats times; prints
// the median GB/s and its ratio to local.
//
// usage: build/zero_copy_bench [--gib 2] [--block-kib 1024] [--repeats 3]
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

namespace {

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

// A connected loopback TCP pair: {sender, receiver}.
std::pair<int, int> Connect() {
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(ls, 1) != 0) Die("listen");
  socklen_t len = sizeof a;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  int c = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) Die("connect");
  int s = ::accept(ls, nullptr, nullptr);
  ::close(ls);
  return {s, c};
}

// Receives `total` bytes in `block`-sized reads.
void Receive(int fd, uint64_t total, size_t block) {
  std::vector<char> buf(block);
  uint64_t got = 0;
  while (got < total) {
    ssize_t n = ::recv(fd, buf.data(), std::min<uint64_t>(block, total - got), 0);
    if (n <= 0) Die("recv");
    got += static_cast<uint64_t>(n);
  }
}

uint32_t Reap(int fd);

// Sends all of it; `done` counts MSG_ZEROCOPY completions reaped on the way
// (ENOBUFS: too many sends in flight, reap some).
void SendAll(int fd, const char* p, size_t n, int flags, uint32_t* done = nullptr) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, flags);
    if (w < 0) {
      if (errno == ENOBUFS && done != nullptr) {
        *done += Reap(fd);
        continue;
      }
      Die("send");
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Reaps the MSG_ZEROCOPY completions queued now; returns how many sends
// they cover (each notification is a range of send ids).
uint32_t Reap(int fd) {
  uint32_t n = 0;
  while (true) {
    char control[128];
    msghdr m{};
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    if (::recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return n;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
      auto* e = reinterpret_cast<sock_extended_err*>(CMSG_DATA(c));
      if (e->ee_origin == SO_EE_ORIGIN_ZEROCOPY) n += e->ee_data - e->ee_info + 1;
    }
  }
}

double Seconds(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  double gib = 2;
  size_t block = 1 << 20;
  int repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--gib")
      gib = std::atof(argv[i + 1]);
    else if (a == "--block-kib")
      block = static_cast<size_t>(std::atol(argv[i + 1])) << 10;
    else if (a == "--repeats")
      repeats = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: zero_copy_bench [--gib 2] [--block-kib 1024] [--repeats 3]\n");
      return 2;
    }
  }
  const size_t cache = 64u << 20;  // the "blocks in RAM": 64 MiB, sent round and round
  const uint64_t total = static_cast<uint64_t>(gib * (1ull << 30)) / block * block;

  std::vector<char> ram(cache);
  for (size_t i = 0; i < cache; ++i) ram[i] = static_cast<char>(i * 131);
  int mfd = ::memfd_create("aq-blocks", 0);
  if (mfd < 0 || ::pwrite(mfd, ram.data(), cache, 0) != static_cast<ssize_t>(cache)) Die("memfd");
  const std::string shm = "/dev/shm/aq-zero-copy-bench";
  int tfd = ::open(shm.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (tfd < 0 || ::pwrite(tfd, ram.data(), cache, 0) != static_cast<ssize_t>(cache)) Die("tmpfs");
  ::unlink(shm.c_str());

  struct Mode {
    const char* name;
    std::function<void(int)> send;  // sends `total` bytes on the socket
  };
  std::vector<Mode> modes = {
      {"send",
       [&](int s) {
         for (uint64_t off = 0; off < total; off += block) SendAll(s, ram.data() + off % cache, block, MSG_NOSIGNAL);
       }},
      {"sendfile",
       [&](int s) {
         for (uint64_t off = 0; off < total; off += block) {
           off_t o = static_cast<off_t>(off % cache);
           size_t left = block;
           while (left > 0) {
             ssize_t w = ::sendfile(s, mfd, &o, left);
             if (w <= 0) Die("sendfile");
             left -= static_cast<size_t>(w);
           }
         }
       }},
      {"splice",
       [&](int s) {
         int p[2];
         if (::pipe(p) != 0) Die("pipe");
         ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
         for (uint64_t off = 0; off < total; off += block) {
           const char* base = ram.data() + off % cache;
           size_t done = 0;
           while (done < block) {
             iovec v{const_cast<char*>(base + done), block - done};
             ssize_t in = ::vmsplice(p[1], &v, 1, 0);
             if (in <= 0) Die("vmsplice");
             size_t moved = 0;
             while (moved < static_cast<size_t>(in)) {
               ssize_t out = ::splice(p[0], nullptr, s, nullptr, static_cast<size_t>(in) - moved, SPLICE_F_MOVE);
               if (out <= 0) Die("splice");
               moved += static_cast<size_t>(out);
             }
             done += static_cast<size_t>(in);
           }
         }
         ::close(p[0]);
         ::close(p[1]);
       }},
      {"zerocopy",
       [&](int s) {
         int one = 1;
         if (::setsockopt(s, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) != 0) Die("SO_ZEROCOPY");
         uint32_t sent = 0, done = 0;
         for (uint64_t off = 0; off < total; off += block) {
           SendAll(s, ram.data() + off % cache, block, MSG_NOSIGNAL | MSG_ZEROCOPY, &done);
           ++sent;
           done += Reap(s);
         }
         // The buffers may be reused only once every send completed.
         while (done < sent) done += Reap(s);
       }},
  };

  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<char> buf(block);
  std::vector<double> local;
  for (int r = 0; r < repeats; ++r) {
    local.push_back(static_cast<double>(total) / 1e9 / Seconds([&] {
                      for (uint64_t off = 0; off < total; off += block) {
                        if (::pread(tfd, buf.data(), block, static_cast<off_t>(off % cache)) !=
                            static_cast<ssize_t>(block)) {
                          Die("pread");
                        }
                      }
                    }));
  }
  const double base = median(local);
  std::printf("zero_copy_bench: %.1f GiB in %zu KiB requests, medians of %d, loopback TCP, reader in another thread\n",
              gib, block >> 10, repeats);
  std::printf("  %-9s %8.2f GB/s  (pread from the page cache: the peer)\n", "local", base);
  std::fflush(stdout);
  for (const auto& m : modes) {
    std::vector<double> rates;
    for (int r = 0; r < repeats; ++r) {
      auto [s, c] = Connect();
      std::thread reader([&, c = c] { Receive(c, total, block); });
      const double t = Seconds([&] {
        m.send(s);
        reader.join();
      });
      rates.push_back(static_cast<double>(total) / 1e9 / t);
      ::close(s);
      ::close(c);
    }
    const double g = median(rates);
    std::printf("  %-9s %8.2f GB/s  %.2fx local\n", m.name, g, g / base);
    std::fflush(stdout);
  }
  return 0;
}
