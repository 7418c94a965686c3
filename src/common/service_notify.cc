#include "common/service_notify.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace aq {

Status NotifyServiceManager(std::string_view state) {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env == nullptr || env[0] == '\0') return Status::Ok();
  const std::string where(env);
  if (where[0] != '/' && where[0] != '@') {
    return Unsupported(fmt::format("NOTIFY_SOCKET '{}': only AF_UNIX paths and @abstract names are spoken", where));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (where.size() >= sizeof(addr.sun_path)) {
    return InvalidArgument(fmt::format("NOTIFY_SOCKET '{}': longer than a socket path may be", where));
  }
  std::memcpy(addr.sun_path, where.data(), where.size());
  if (where[0] == '@') addr.sun_path[0] = '\0';  // the abstract namespace
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + where.size() + (where[0] == '/' ? 1 : 0));
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return IoError(fmt::format("NOTIFY_SOCKET '{}': socket: {}", where, std::strerror(errno)));
  ssize_t sent;
  do {
    sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&addr), len);
  } while (sent < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (sent < 0) return IoError(fmt::format("NOTIFY_SOCKET '{}': {}", where, std::strerror(err)));
  if (static_cast<size_t>(sent) != state.size()) {
    return IoError(fmt::format("NOTIFY_SOCKET '{}': {} of {} bytes sent", where, sent, state.size()));
  }
  return Status::Ok();
}

std::string ReloadingMessage() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t usec = static_cast<uint64_t>(ts.tv_sec) * 1000000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
  return fmt::format("RELOADING=1\nMONOTONIC_USEC={}", usec);
}

}  // namespace aq
