// Logging: a thin layer over spdlog so the rest of the code base names one
// place. Logs go to stderr; results go to stdout.
//
// Thread safety: spdlog's default logger is thread-safe.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace aq::log {

// level: "trace", "debug", "info", "warn", "error", "off".
void Init(std::string_view level);

using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::warn;

}  // namespace aq::log
