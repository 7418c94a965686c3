// TLS connections end to end over a socket pair: bodies of every size
// around the record and batch boundaries arrive whole and in order
// (writes larger than a record leave through the batching filter), small
// writes still go out at once, and a writer whose peer stops reading gets
// its timeout instead of a hang or a torn stream.
#include "http/tls.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

namespace aq::http {
namespace {

namespace fs = std::filesystem;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("aq_tls_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    cert_ = (dir_ / "cert.pem").string();
    key_ = (dir_ / "key.pem").string();
    // openssl's command line makes the certificate, as the integration
    // tests do: a self-signed one for 127.0.0.1, so it is its own CA.
    const std::string cmd =
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
        "-addext subjectAltName=IP:127.0.0.1 -keyout '" +
        key_ + "' -out '" + cert_ + "' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "openssl's command line could not make a certificate";
    fs::permissions(key_, fs::perms::owner_read | fs::perms::owner_write);
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0);
    auto server = TlsServer::Load(cert_, key_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = *server;
    auto client = TlsClient::Create(cert_);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = *client;
    auto accepted = server_->Accept(fds_[0]);
    ASSERT_TRUE(accepted.ok());
    server_conn_ = std::move(*accepted);
    std::thread handshake([&] { server_step_ = server_conn_->Handshake(); });
    auto connected = client_->Connect(fds_[1], "127.0.0.1", "test");
    handshake.join();
    ASSERT_TRUE(connected.ok()) << connected.status().ToString();
    ASSERT_EQ(server_step_, TlsConn::Step::kDone) << server_conn_->LastError();
    client_conn_ = std::move(*connected);
    // A write left in a buffer fails the test instead of hanging it.
    timeval tv{10, 0};
    ASSERT_EQ(::setsockopt(fds_[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  }
  void TearDown() override {
    server_conn_.reset();
    client_conn_.reset();
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Reads exactly n bytes on the client side.
  std::string ReadExactly(size_t n) {
    std::string got(n, '\0');
    size_t at = 0;
    while (at < n) {
      auto r = client_conn_->Read(got.data() + at, n - at);
      if (!r.ok() || *r == 0) {
        ADD_FAILURE() << "read stopped at " << at << " of " << n;
        got.resize(at);
        return got;
      }
      at += *r;
    }
    return got;
  }

  fs::path dir_;
  std::string cert_, key_;
  int fds_[2] = {-1, -1};
  std::shared_ptr<TlsServer> server_;
  std::shared_ptr<TlsClient> client_;
  std::unique_ptr<TlsConn> server_conn_, client_conn_;
  TlsConn::Step server_step_ = TlsConn::Step::kError;
};

std::string Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

TEST_F(TlsTest, WritesOfEverySizeArriveWholeAndInOrder) {
  // Around a record (16 KiB), several records, around the batch (1 MiB)
  // and several batches; small writes between the large ones.
  const size_t sizes[] = {
      1, 16383, 16384, 16385, 100000, (1u << 20) - 1, (1u << 20), (1u << 20) + 1, 7, 3000000, (4u << 20) + 12345, 5};
  std::string sent;
  std::thread writer([&] {
    uint32_t seed = 1;
    for (size_t n : sizes) {
      const std::string body = Random(n, seed++);
      sent += body;
      const Status s = server_conn_->Write(body);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  });
  size_t total = 0;
  for (size_t n : sizes) total += n;
  const std::string got = ReadExactly(total);
  writer.join();
  ASSERT_EQ(got.size(), sent.size());
  EXPECT_TRUE(got == sent) << "the bytes differ";
}

TEST_F(TlsTest, ASmallWriteIsSentAtOnce) {
  // Nothing waits in a buffer for a later write or a flush: the reader gets
  // a short reply as soon as it is written.
  ASSERT_TRUE(server_conn_->Write("HTTP/1.1 200 OK\r\n\r\n").ok());
  EXPECT_EQ(ReadExactly(19), "HTTP/1.1 200 OK\r\n\r\n");
  ASSERT_TRUE(server_conn_->Write(Random(40000, 9)).ok());  // a batched one between
  EXPECT_EQ(ReadExactly(40000), Random(40000, 9));
  ASSERT_TRUE(server_conn_->Write("x").ok());
  EXPECT_EQ(ReadExactly(1), "x");
}

TEST_F(TlsTest, AWriterWhosePeerStopsReadingTimesOut) {
  timeval tv{0, 200 * 1000};
  ASSERT_EQ(::setsockopt(fds_[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), 0);
  // The client reads nothing: 64 MiB cannot fit in the socket's buffers.
  const Status s = server_conn_->Write(std::string(64 << 20, 'a'));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kTimedOut) << s.ToString();
}

}  // namespace
}  // namespace aq::http
