// Read plans (POST /_aquifer/plan) and nodes' shares of them (?pieces=1):
// any bytes parse to a plan or an error, and a parsed one survives
// formatting unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "s3/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto pieces = aq::s3::PiecesFromJson(text); pieces.ok()) {
    auto again = aq::s3::PiecesFromJson(aq::s3::PiecesToJson(*pieces));
    if (!again.ok() || again->size() != pieces->size()) __builtin_trap();
    for (size_t i = 0; i < pieces->size(); ++i) {
      const auto &a = (*pieces)[i], &b = (*again)[i];
      if (a.id != b.id || a.pool != b.pool || a.size != b.size || a.crc32c != b.crc32c) __builtin_trap();
    }
  }
  auto plan = aq::s3::PlanFromJson(text);
  if (!plan.ok()) return 0;
  auto again = aq::s3::PlanFromJson(aq::s3::PlanToJson(*plan));
  if (!again.ok() || again->size() != plan->size()) __builtin_trap();
  for (size_t i = 0; i < plan->size(); ++i) {
    const auto &a = (*plan)[i], &b = (*again)[i];
    if (a.bucket != b.bucket || a.key != b.key || a.offset != b.offset || a.length != b.length) __builtin_trap();
  }
  return 0;
}
