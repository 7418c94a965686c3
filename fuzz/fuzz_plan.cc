// Read plans (POST /_aquifer/plan) and nodes' shares of them (?pieces=1),
// cluster maps, block inventories and block requests' parameters (s3/internal_routes.h):
// any bytes parse to a value or an error, and a parsed one survives
// formatting unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "s3/internal_routes.h"
#include "s3/plan.h"
#include "s3/sigv4.h"

namespace {

// The input as a block request: its first line the key, the rest a query
// string, split and decoded as the handler receives it.
void BlockTarget(std::string_view text) {
  const size_t nl = text.find('\n');
  const std::string key(text.substr(0, nl));
  const std::string query(nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1));
  std::vector<std::pair<std::string, std::string>> params;
  for (size_t at = 0; at <= query.size();) {
    const size_t amp = std::min(query.find('&', at), query.size());
    const std::string part = query.substr(at, amp - at);
    const size_t eq = part.find('=');
    params.emplace_back(aq::s3::UriDecode(part.substr(0, eq)),
                        eq == std::string::npos ? "" : aq::s3::UriDecode(part.substr(eq + 1)));
    at = amp + 1;
  }
  auto t = aq::s3::internal::ParseBlockTarget(key, params);
  if (!t.ok()) return;
  if (!aq::s3::internal::IsBlockId(t->id)) __builtin_trap();
  std::vector<std::pair<std::string, std::string>> again;
  const std::string q = t->Query();
  for (size_t at = 0; at <= q.size();) {
    const size_t amp = std::min(q.find('&', at), q.size());
    const std::string part = q.substr(at, amp - at);
    const size_t eq = part.find('=');
    again.emplace_back(aq::s3::UriDecode(part.substr(0, eq)), aq::s3::UriDecode(part.substr(eq + 1)));
    at = amp + 1;
  }
  auto u = aq::s3::internal::ParseBlockTarget("blocks/" + t->id, again);
  if (!u.ok() || u->id != t->id || u->pool != t->pool || u->crc32c != t->crc32c || u->size != t->size ||
      u->sliced != t->sliced || u->offset != t->offset || u->length != t->length) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  BlockTarget(text);
  if (auto map = aq::s3::internal::ClusterMapFromJson(text); map.ok()) {
    auto again = aq::s3::internal::ClusterMapFromJson(aq::s3::internal::ClusterMapToJson(*map));
    if (!again.ok() || again->nodes.size() != map->nodes.size()) __builtin_trap();
    // A single node's map (no self) is written without replicas.
    if (again->self != map->self || (!map->self.empty() && again->replicas != map->replicas)) __builtin_trap();
    for (size_t i = 0; i < map->nodes.size(); ++i) {
      const auto &a = map->nodes[i], &b = again->nodes[i];
      if (a.id != b.id || a.address != b.address || a.state != b.state || a.up != b.up) __builtin_trap();
    }
  }
  if (auto ids = aq::s3::internal::InventoryFromJson(text); ids.ok()) {
    auto again = aq::s3::internal::InventoryFromJson(aq::s3::internal::InventoryToJson(*ids));
    if (!again.ok() || *again != *ids) __builtin_trap();
  }
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
