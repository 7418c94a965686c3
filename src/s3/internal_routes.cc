#include "s3/internal_routes.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>

#include "s3/sigv4.h"

namespace aq::s3::internal {
namespace {

template <typename T>
std::optional<T> Unsigned(const std::string& v) {
  T out{};
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return out;
}

}  // namespace

bool IsBlockId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (const unsigned char c : id) {
    if (!std::isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

std::string BlockTarget::Query() const {
  if (sliced) {
    return fmt::format("crc={}&length={}&offset={}&pool={}&size={}", crc32c, length, offset, UriEncode(pool, true),
                       size);
  }
  return fmt::format("crc={}&pool={}&size={}", crc32c, UriEncode(pool, true), size);
}

Result<BlockTarget> ParseBlockTarget(std::string_view key,
                                     const std::vector<std::pair<std::string, std::string>>& query) {
  if (!key.starts_with(kBlocksPrefix)) return InvalidArgument(fmt::format("'{}' is not a block", key));
  BlockTarget t;
  t.id = std::string(key.substr(kBlocksPrefix.size()));
  if (!IsBlockId(t.id)) return InvalidArgument("a block id is 1 to 128 of [0-9A-Za-z._-]");
  std::optional<std::string> crc, size, offset, length;
  for (const auto& [name, value] : query) {
    if (name == "crc") crc = value;
    if (name == "size") size = value;
    if (name == "pool") t.pool = value;
    if (name == "offset") offset = value;
    if (name == "length") length = value;
  }
  const auto c = crc ? Unsigned<uint32_t>(*crc) : std::nullopt;
  const auto n = size ? Unsigned<uint64_t>(*size) : std::nullopt;
  if (!c || !n) return InvalidArgument("a block request needs crc, pool and size");
  t.crc32c = *c;
  t.size = *n;
  if (offset || length) {
    const auto o = offset ? Unsigned<uint64_t>(*offset) : std::nullopt;
    const auto l = length ? Unsigned<uint64_t>(*length) : std::nullopt;
    if (!o || !l) return InvalidArgument("offset and length must be integers");
    t.sliced = true;
    t.offset = *o;
    t.length = *l;
  }
  return t;
}

std::string PlanQuery(std::string_view stream, bool pieces) {
  return (pieces ? "pieces=1&stream=" : "stream=") + UriEncode(stream, true);
}

std::string ClusterMapToJson(const ClusterMapDoc& map) {
  nlohmann::json j = {{"nodes", nlohmann::json::array()}};
  if (!map.self.empty()) {
    j["replicas"] = map.replicas;
    j["self"] = map.self;
  }
  for (const auto& n : map.nodes) {
    j["nodes"].push_back({{"id", n.id}, {"address", n.address}, {"state", n.state}, {"up", n.up}});
  }
  return j.dump();
}

Result<ClusterMapDoc> ClusterMapFromJson(std::string_view json) {
  const auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object() || !j.contains("nodes") || !j["nodes"].is_array()) {
    return Corruption(R"(a cluster map is {"nodes": [{"id", "address", "state", "up"}, ...]})");
  }
  ClusterMapDoc map;
  auto field = [](const nlohmann::json& o, const char* name, auto* out, const std::string& where) -> Status {
    using T = std::remove_pointer_t<decltype(out)>;
    if (!o.contains(name) || o[name].is_null()) return Status::Ok();
    const auto& v = o[name];
    bool ok;
    if constexpr (std::is_same_v<T, std::string>) {
      ok = v.is_string();
    } else if constexpr (std::is_same_v<T, bool>) {
      ok = v.is_boolean();
    } else {
      ok = v.is_number_unsigned();
    }
    if (!ok) return Corruption(fmt::format("cluster map: {}{} is {}", where, name, v.type_name()));
    *out = v.get<T>();
    return Status::Ok();
  };
  AQ_TRY(field(j, "replicas", &map.replicas, ""));
  AQ_TRY(field(j, "self", &map.self, ""));
  const auto& nodes = j["nodes"];
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string where = fmt::format("nodes[{}].", i);
    if (!nodes[i].is_object()) return Corruption(fmt::format("cluster map: nodes[{}] is not an object", i));
    ClusterMapDoc::Member m;
    AQ_TRY(field(nodes[i], "id", &m.id, where));
    AQ_TRY(field(nodes[i], "address", &m.address, where));
    AQ_TRY(field(nodes[i], "state", &m.state, where));
    AQ_TRY(field(nodes[i], "up", &m.up, where));
    map.nodes.push_back(std::move(m));
  }
  return map;
}

std::string InventoryToJson(const std::vector<std::string>& ids) { return nlohmann::json(ids).dump(); }

Result<std::vector<std::string>> InventoryFromJson(std::string_view json) {
  const auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_array()) return Corruption("a block inventory is a JSON array of block ids");
  std::vector<std::string> ids;
  ids.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string() || !IsBlockId(j[i].get_ref<const std::string&>())) {
      return Corruption(fmt::format("block inventory: element {} is not a block id", i));
    }
    ids.push_back(j[i].get<std::string>());
  }
  return ids;
}

}  // namespace aq::s3::internal
