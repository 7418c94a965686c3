// Any bytes as a CompleteMultipartUpload, Delete, LifecycleConfiguration or
// AccessControlPolicy request body: parsed or
// refused with an error, never a crash; what parses obeys the documented
// limits.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "s3/xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view xml(reinterpret_cast<const char*>(data), size);
  auto parts = aq::s3::ParseCompleteMultipartUpload(xml);
  if (parts.ok()) {
    if (parts->empty() || parts->size() > 10000) __builtin_trap();
    for (const auto& p : *parts) {
      if (p.number < 1 || p.number > 10000) __builtin_trap();
    }
  }
  auto del = aq::s3::ParseDeleteObjects(xml);
  if (del.ok() && (del->keys.empty() || del->keys.size() > 1000)) __builtin_trap();
  auto rules = aq::s3::ParseLifecycle(xml);
  if (rules.ok()) {
    if (rules->empty() || rules->size() > 1000) __builtin_trap();
    for (const auto& r : *rules) {
      if (r.abort_days == 0 || r.id.size() > 255) __builtin_trap();
    }
  }
  auto acl = aq::s3::ParseAccessControlPolicy(xml);
  if (acl.ok()) {
    if (acl->grants.size() > 100) __builtin_trap();
    for (const auto& g : acl->grants) {
      if (g.permission.empty() || (g.id.empty() && g.uri.empty() && g.email.empty())) __builtin_trap();
    }
    (void)aq::s3::OwnerOnly(*acl);
  }
  return 0;
}
