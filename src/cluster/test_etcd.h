// Test support: a real etcd on 127.0.0.1 in a temporary directory, started
// once per test binary (tests that need it skip, saying why, when etcd is not
// installed), and a free TCP port.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "cluster/etcd_client.h"

namespace aq::cluster {

inline int FreePort() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

// A real etcd on 127.0.0.1 in a temporary directory, for one test binary.
class Etcd {
 public:
  static Etcd& Get() {
    static Etcd e;
    return e;
  }
  bool ok() const { return client_ != nullptr; }
  const std::string& why() const { return why_; }
  std::string url() const { return "etcd://127.0.0.1:" + std::to_string(client_port_); }
  std::shared_ptr<EtcdClient> client() { return client_; }
  ~Etcd() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  Etcd() {
    if (::access("/usr/bin/etcd", X_OK) != 0) {
      why_ = "etcd is not installed (scripts/install-deps.sh installs etcd-server)";
      return;
    }
    dir_ = std::filesystem::temp_directory_path() / ("aq_etcd_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    client_port_ = FreePort();
    const int peer = FreePort();
    const std::string c = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string p = "http://127.0.0.1:" + std::to_string(peer);
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string log = (dir_ / "etcd.log").string();
      FILE* f = std::freopen(log.c_str(), "w", stderr);
      (void)f;
      ::execl("/usr/bin/etcd", "etcd", "--data-dir", (dir_ / "data").c_str(), "--listen-client-urls", c.c_str(),
              "--advertise-client-urls", c.c_str(), "--listen-peer-urls", p.c_str(), "--initial-advertise-peer-urls",
              p.c_str(), "--initial-cluster", ("default=" + p).c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 100; ++i) {
      auto r = EtcdClient::Connect(url());
      if (r.ok()) {
        client_ = std::move(*r);
        return;
      }
      why_ = r.status().ToString();
      // etcd is another process with no readiness signal but its port:
      // poll it (up to 10 s) until it answers.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  int client_port_ = 0;
  std::shared_ptr<EtcdClient> client_;
  std::string why_;
};

}  // namespace aq::cluster
