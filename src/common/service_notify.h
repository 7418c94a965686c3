// Telling a service manager how the process is doing: systemd's notify
// protocol (sd_notify(3)), which `Type=notify` units wait on. A message is
// newline-separated VARIABLE=VALUE assignments ("READY=1",
// "RELOADING=1", "STOPPING=1", "STATUS=free text") sent as one datagram to
// the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or an abstract name
// written with a leading '@'). Without $NOTIFY_SOCKET nothing is sent: the
// same binary runs under systemd and from a shell.
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace aq {

// Sends `state` to the service manager. Ok (and nothing sent) when
// $NOTIFY_SOCKET is unset or empty; an error naming the socket when it
// cannot be reached or is of a kind this does not speak (vsock).
Status NotifyServiceManager(std::string_view state);

// "RELOADING=1" with the MONOTONIC_USEC= systemd expects with it
// (CLOCK_MONOTONIC now, in microseconds).
std::string ReloadingMessage();

}  // namespace aq
