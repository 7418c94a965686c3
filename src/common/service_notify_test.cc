#include "common/service_notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace aq {
namespace {

// NOTIFY_SOCKET set for one test, restored after.
class ScopedNotifySocket {
 public:
  explicit ScopedNotifySocket(const char* value) {
    if (const char* old = std::getenv("NOTIFY_SOCKET")) old_ = old, had_ = true;
    if (value) {
      ::setenv("NOTIFY_SOCKET", value, 1);
    } else {
      ::unsetenv("NOTIFY_SOCKET");
    }
  }
  ~ScopedNotifySocket() {
    if (had_) {
      ::setenv("NOTIFY_SOCKET", old_.c_str(), 1);
    } else {
      ::unsetenv("NOTIFY_SOCKET");
    }
  }

 private:
  std::string old_;
  bool had_ = false;
};

// A service manager's end: a datagram socket bound to `name` (a path, or
// "@name" in the abstract namespace).
int Bind(const std::string& name) {
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, name.data(), name.size());
  if (name[0] == '@') a.sun_path[0] = '\0';
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + (name[0] == '/' ? 1 : 0));
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), len), 0) << std::strerror(errno);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string Receive(int fd) {
  char buf[4096];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  return n < 0 ? std::string("(nothing: ") + std::strerror(errno) + ")" : std::string(buf, static_cast<size_t>(n));
}

TEST(ServiceNotify, WithoutASocketNothingIsSentAndAllIsWell) {
  ScopedNotifySocket unset(nullptr);
  EXPECT_TRUE(NotifyServiceManager("READY=1").ok());
  ScopedNotifySocket empty("");
  EXPECT_TRUE(NotifyServiceManager("READY=1").ok());
}

TEST(ServiceNotify, SendsOneDatagramToAPath) {
  char dir[] = "/tmp/aq_notify_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/notify";
  const int fd = Bind(path);
  ScopedNotifySocket set(path.c_str());
  ASSERT_TRUE(NotifyServiceManager("READY=1\nSTATUS=serving on 127.0.0.1:9000").ok());
  EXPECT_EQ(Receive(fd), "READY=1\nSTATUS=serving on 127.0.0.1:9000");
  ASSERT_TRUE(NotifyServiceManager("STOPPING=1").ok());
  EXPECT_EQ(Receive(fd), "STOPPING=1");
  ::close(fd);
  ::unlink(path.c_str());
  ::rmdir(dir);
}

TEST(ServiceNotify, SendsToAnAbstractName) {
  const std::string name = "@aq-notify-test-" + std::to_string(::getpid());
  const int fd = Bind(name);
  ScopedNotifySocket set(name.c_str());
  ASSERT_TRUE(NotifyServiceManager("READY=1").ok());
  EXPECT_EQ(Receive(fd), "READY=1");
  ::close(fd);
}

TEST(ServiceNotify, SaysWhatIsWrongWithTheSocket) {
  {
    ScopedNotifySocket set("/nonexistent/aq-notify");
    const Status s = NotifyServiceManager("READY=1");
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("/nonexistent/aq-notify"), std::string::npos) << s.ToString();
  }
  {
    ScopedNotifySocket set("vsock:2:1234");
    const Status s = NotifyServiceManager("READY=1");
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  }
  {
    const std::string longer(200, 'x');
    ScopedNotifySocket set(("/" + longer).c_str());
    EXPECT_EQ(NotifyServiceManager("READY=1").code(), StatusCode::kInvalidArgument);
  }
}

TEST(ServiceNotify, ReloadingCarriesTheMonotonicClock) {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const std::string m = ReloadingMessage();
  ASSERT_EQ(m.rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u) << m;
  const unsigned long long usec = std::stoull(m.substr(m.find('=', 12) + 1));
  const unsigned long long before = static_cast<unsigned long long>(ts.tv_sec) * 1000000ull + ts.tv_nsec / 1000;
  EXPECT_GE(usec, before);
  EXPECT_LT(usec - before, 5000000ull);
}

}  // namespace
}  // namespace aq
