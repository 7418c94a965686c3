#include "format/error_policy.h"

#include <fmt/format.h>

namespace aq::format {

Result<ErrorPolicy> ParseErrorPolicy(std::string_view s) {
  if (s == "fail") return ErrorPolicy::kFail;
  if (s == "skip") return ErrorPolicy::kSkip;
  return InvalidArgument(fmt::format("unknown error policy '{}' (expected fail or skip)", s));
}

}  // namespace aq::format
