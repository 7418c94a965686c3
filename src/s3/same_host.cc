#include "s3/same_host.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace aq::s3 {

std::string SameHostGrantToJson(const SameHostGrant& grant) {
  nlohmann::json blocks = nlohmann::json::array();
  for (const auto& b : grant.blocks) blocks.push_back({b.offset, b.size});
  return nlohmann::json{{"socket", grant.socket}, {"token", grant.token}, {"blocks", std::move(blocks)}}.dump();
}

Result<SameHostGrant> SameHostGrantFromJson(std::string_view json, uint64_t object_size) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, false);
  auto bad = [](const std::string& why) { return InvalidArgument("same-host grant: " + why); };
  if (doc.is_discarded() || !doc.is_object()) return bad("not a JSON object");
  for (const char* field : {"socket", "token"}) {
    if (!doc.contains(field) || !doc[field].is_string()) return bad(fmt::format("no '{}' string", field));
  }
  SameHostGrant g;
  g.socket = doc["socket"].get<std::string>();
  g.token = doc["token"].get<std::string>();
  if (g.socket.empty() || g.socket.size() > 100) return bad("the socket name is not 1 to 100 characters");
  for (char c : g.socket) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return bad("the socket name has a character outside [A-Za-z0-9._-]");
  }
  if (g.token.size() != kSameHostTokenChars) return bad("the token is not 32 hex digits");
  for (char c : g.token) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return bad("the token is not 32 lowercase hex digits");
  }
  if (!doc.contains("blocks") || !doc["blocks"].is_array()) return bad("no 'blocks' array");
  const auto& blocks = doc["blocks"];
  if (blocks.empty() || blocks.size() > kMaxSameHostBlocks) {
    return bad(fmt::format("{} blocks, not 1 to {}", blocks.size(), kMaxSameHostBlocks));
  }
  uint64_t end = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto& b = blocks[i];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_unsigned() || !b[1].is_number_unsigned()) {
      return bad(fmt::format("block {} is not [offset, size] (unsigned integers)", i));
    }
    SameHostBlock sb{b[0].get<uint64_t>(), b[1].get<uint64_t>()};
    if (sb.size == 0 || sb.offset < end || sb.offset > object_size || sb.size > object_size - sb.offset) {
      return bad(fmt::format("block {} ({} bytes at {}) is empty, out of order or past the object's {} bytes", i,
                             sb.size, sb.offset, object_size));
    }
    end = sb.offset + sb.size;
    g.blocks.push_back(sb);
  }
  return g;
}

bool IsLoopbackHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") return true;
  const std::string h(host);
  in_addr a4{};
  if (::inet_pton(AF_INET, h.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (::inet_pton(AF_INET6, h.c_str(), &a6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace aq::s3
