// The HTTP layer: parsing limits, bodies (Content-Length, chunked, 100
// Continue, overruns), pipelining and responses through ServeBytes; and the
// socket server's defences (head timeout, connection limit) and client.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "http/client.h"
#include "http/message.h"
#include "http/server.h"

namespace aq::http {
namespace {

// Echoes the method, path and body back; answers HEAD without a body.
void Echo(Exchange& ex) {
  std::string body;
  char buf[7];  // small reads: the body arrives in pieces
  for (;;) {
    auto n = ex.ReadBody(buf, sizeof buf);
    if (!n.ok()) {
      ex.CloseAfter();
      (void)ex.Respond(400, {}, n.status().message());
      return;
    }
    if (*n == 0) break;
    body.append(buf, *n);
  }
  (void)ex.Respond(200, {}, ex.request().method + " " + ex.request().path + " " + body);
}

TEST(HttpParseTest, RequestHeadAndLimits) {
  Limits l;
  RequestParser p(l);
  EXPECT_EQ(p.ParseHead("GET /a?b=c HTTP/1.1\r\nHost: x\r\n").value(), 0u);  // more needed
  auto n = p.ParseHead("GET /a%20b?b=c HTTP/1.1\r\nHost: x\r\nX-Two: 1\r\nx-two: 2\r\n\r\nrest");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, std::string("GET /a%20b?b=c HTTP/1.1\r\nHost: x\r\nX-Two: 1\r\nx-two: 2\r\n\r\n").size());
  EXPECT_EQ(p.request().method, "GET");
  EXPECT_EQ(p.request().path, "/a%20b");
  EXPECT_EQ(p.request().query, "b=c");
  EXPECT_EQ(p.request().headers.Count("x-two"), 2u);
  EXPECT_EQ(p.request().headers.Get("HOST"), "x");
  EXPECT_TRUE(p.request().keep_alive);

  l.max_fields = 3;
  RequestParser many(l);
  auto r = many.ParseHead("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n");
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  l = Limits();
  l.max_head_bytes = 64;
  RequestParser big(l);
  EXPECT_EQ(big.ParseHead("GET / HTTP/1.1\r\nA: " + std::string(100, 'x')).status().code(), StatusCode::kUnsupported);
  for (const char* bad :
       {"GET / HTTP/1.1\r\nBad Header\r\n\r\n", "NOT HTTP\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "GET relative HTTP/1.1\r\n\r\n"}) {
    RequestParser q{Limits()};
    EXPECT_EQ(q.ParseHead(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(HttpParseTest, Dates) {
  EXPECT_EQ(HttpDate(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT").value(), 784111777);
  EXPECT_EQ(ParseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT").value(), 784111777);
  EXPECT_EQ(ParseHttpDate("Sun Nov  6 08:49:37 1994").value(), 784111777);
  EXPECT_FALSE(ParseHttpDate("yesterday").has_value());
}

TEST(HttpServeTest, BodiesAndPipelining) {
  ServerOptions o;
  // Content-Length body, then a chunked one, then a bodyless one: pipelined.
  std::string out = ServeBytes(o, Echo,
                               "PUT /a HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world"
                               "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                               "5\r\nchunk\r\n3;ext=1\r\ned!\r\n0\r\nTrailer: x\r\n\r\n"
                               "\r\nGET /c HTTP/1.1\r\n\r\n");
  EXPECT_NE(out.find("PUT /a hello world"), std::string::npos) << out;
  EXPECT_NE(out.find("POST /b chunked!"), std::string::npos) << out;
  EXPECT_NE(out.find("GET /c "), std::string::npos) << out;
  EXPECT_EQ(out.find("Connection: close"), std::string::npos);
  // 100 Continue is sent before the body is read.
  out = ServeBytes(o, Echo, "PUT /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(out.rfind("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200", 0), 0u) << out;
  // Without a body too (botocore sends Expect for empty uploads and takes any
  // other first line for an early final answer), and the connection stays open.
  out = ServeBytes(o, Echo,
                   "PUT /z HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n"
                   "PUT /y HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(out.rfind("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200", 0), 0u) << out;
  EXPECT_NE(out.find("PUT /y ok"), std::string::npos) << out;
  EXPECT_EQ(out.find("Connection: close"), std::string::npos) << out;
  // A body longer than its Content-Length is refused, not taken as a prefix.
  out = ServeBytes(o, Echo, "PUT /o HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello and more bytes");
  EXPECT_NE(out.find("HTTP/1.1 400"), std::string::npos) << out;
  EXPECT_NE(out.find("longer than its Content-Length"), std::string::npos) << out;
  // A body cut short.
  out = ServeBytes(o, Echo, "PUT /s HTTP/1.1\r\nContent-Length: 50\r\n\r\nshort");
  EXPECT_NE(out.find("HTTP/1.1 400"), std::string::npos) << out;
  EXPECT_NE(out.find("5 of 50"), std::string::npos) << out;
  // Malformed chunk framing.
  out = ServeBytes(o, Echo, "PUT /m HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nxx\r\n0\r\n\r\n");
  EXPECT_NE(out.find("HTTP/1.1 400"), std::string::npos) << out;
  // HEAD: the length of what GET would send, no body.
  out = ServeBytes(o, Echo, "HEAD /h HTTP/1.1\r\n\r\n");
  EXPECT_NE(out.find("Content-Length: 8\r\n"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 4), "\r\n\r\n") << out;
  // HTTP/1.0 closes; a malformed head is 400 and closes.
  EXPECT_NE(ServeBytes(o, Echo, "GET /x HTTP/1.0\r\n\r\n").find("Connection: close"), std::string::npos);
  out = ServeBytes(o, Echo, "GARBAGE\r\n\r\nGET /never HTTP/1.1\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(out.find("/never"), std::string::npos);
  // A head that never ends.
  EXPECT_NE(ServeBytes(o, Echo, "GET /x HTTP/1.1\r\nA: 1\r\n").find("408"), std::string::npos);
}

TEST(HttpServeTest, StreamedResponsesMustBeWhole) {
  ServerOptions o;
  auto handler = [](Exchange& ex) {
    ASSERT_TRUE(ex.Begin(200, {}, 10).ok());
    ASSERT_TRUE(ex.Write("12345").ok());
    EXPECT_FALSE(ex.Write("too many bytes").ok());  // over the announced length
  };
  // The response is short of its Content-Length: the connection closes, so
  // the client sees the cut; the next request is not served on it.
  std::string out = ServeBytes(o, handler, "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
  EXPECT_EQ(out.find("HTTP/1.1 200"), out.rfind("HTTP/1.1 200")) << out;
}

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(HttpServerTest, SlowHeadsAreCutAndOthersServed) {
  ServerOptions o;
  o.threads = 2;
  o.header_timeout_s = 1;
  auto server = Server::Start(o, Echo);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  // More trickling clients than threads: none holds a thread.
  std::vector<int> slow;
  for (int i = 0; i < 20; ++i) {
    slow.push_back(Connect(port));
    ASSERT_EQ(::send(slow.back(), "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL), 16);
  }
  Pool pool;
  ClientRequest r;
  r.method = "PUT";
  r.target = "/fast";
  r.body = "quick";
  auto res = pool.Send("127.0.0.1:" + std::to_string(port), r);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "PUT /fast quick");
  for (int fd : slow) {
    const std::string got = ReadAll(fd);  // cut at the head timeout
    EXPECT_NE(got.find("408"), std::string::npos) << got;
    ::close(fd);
  }
  EXPECT_EQ((*server)->Stats().header_timeouts, 20u);
}

TEST(HttpServerTest, ConnectionsPastTheLimitAreRefused) {
  ServerOptions o;
  o.max_connections = 4;
  auto server = Server::Start(o, Echo);
  ASSERT_TRUE(server.ok());
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    // Each connection is served once (so the server surely holds it) and stays open.
    held.push_back(Connect((*server)->port()));
    ASSERT_EQ(::send(held.back(), "GET / HTTP/1.1\r\n\r\n", 18, MSG_NOSIGNAL), 18);
    char buf[256];
    ASSERT_GT(::recv(held.back(), buf, sizeof buf, 0), 0);
  }
  int extra = Connect((*server)->port());
  EXPECT_NE(ReadAll(extra).find("503"), std::string::npos);
  ::close(extra);
  for (int fd : held) ::close(fd);
  EXPECT_EQ((*server)->Stats().refused_overload, 1u);
}

TEST(HttpServerTest, ClientReceivesIntoBufferAndRetriesStaleConnections) {
  ServerOptions o;
  o.idle_timeout_s = 0.3;
  auto server = Server::Start(o, [](Exchange& ex) { (void)ex.Respond(200, {}, std::string(100000, 'z')); });
  ASSERT_TRUE(server.ok());
  Pool pool;
  const std::string at = "127.0.0.1:" + std::to_string((*server)->port());
  std::string buf(100000, '\0');
  ClientRequest r;
  auto a = pool.SendInto(at, r, buf.data(), buf.size());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->received, 100000u);
  EXPECT_EQ(buf, std::string(100000, 'z'));
  // The pooled connection idles out on the server: wait until the server
  // says it closed it, so the next request really meets a stale connection
  // and must go on a fresh one without an error.
  ASSERT_TRUE((*server)->WaitForIdleClosed(1, 20));
  ASSERT_EQ((*server)->Stats().idle_closed, 1u);
  auto b = pool.Send(at, r);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->status, 200);
  EXPECT_EQ((*server)->Stats().accepted, 2u);  // the retry opened a new connection
  // Too small a buffer is an error, not an overflow.
  std::string small(10, '\0');
  EXPECT_FALSE(pool.SendInto(at, r, small.data(), small.size()).ok());
  // Nothing listening: Unavailable.
  (*server)->Stop();
  EXPECT_EQ(pool.Send(at, r).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace aq::http
