#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace aq::log {

void Init(std::string_view level) {
  auto logger = spdlog::stderr_color_mt("aquifer");
  logger->set_pattern("%^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
}

}  // namespace aq::log
