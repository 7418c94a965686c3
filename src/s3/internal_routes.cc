#include "s3/internal_routes.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>

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
