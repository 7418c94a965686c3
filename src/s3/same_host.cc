#include "s3/same_host.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
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

std::string SameHostAnswerToText(const std::vector<SameHostPiece>& pieces) {
  std::string text = "OK ";
  for (const auto& p : pieces) text += static_cast<char>(p.form);
  for (const auto& p : pieces) {
    if (p.form == SameHostForm::kFile) text += fmt::format("\n{} {:08x}", p.data_offset, p.crc32c);
  }
  return text;
}

Result<std::vector<SameHostPiece>> SameHostAnswerFromText(std::string_view text, size_t blocks, bool files) {
  auto bad = [](const std::string& why) { return InvalidArgument("same-host answer: " + why); };
  if (text.rfind("ERR ", 0) == 0) {
    return Unavailable(fmt::format("same-host answer: the node refused: {}", text.substr(4, 200)));
  }
  if (text.rfind("OK ", 0) != 0) return bad("neither 'OK ' nor 'ERR '");
  text.remove_prefix(3);
  const std::string_view forms = text.substr(0, text.find('\n'));
  if (forms.size() != blocks) return bad(fmt::format("{} blocks answered, {} granted", forms.size(), blocks));
  text.remove_prefix(forms.size());
  std::vector<SameHostPiece> pieces(blocks);
  for (size_t i = 0; i < blocks; ++i) {
    const char c = forms[i];
    if (c != '0' && c != '1' && !(c == 'f' && files)) {
      return bad(fmt::format("block {}: form '{}' is not 0, 1{}", i, c, files ? " or f" : ""));
    }
    pieces[i].form = static_cast<SameHostForm>(c);
    if (c != 'f') continue;
    // "\n" OFFSET " " CRC
    if (text.empty() || text[0] != '\n') return bad(fmt::format("block {}: no line for its file", i));
    text.remove_prefix(1);
    const size_t space = text.find(' ');
    const std::string_view offset = text.substr(0, space);
    if (space == std::string_view::npos || offset.empty() || offset.size() > 4 ||
        offset.find_first_not_of("0123456789") != std::string_view::npos) {
      return bad(fmt::format("block {}: the file's data offset is not a number of at most 4 digits", i));
    }
    uint64_t at = 0;
    for (char d : offset) at = at * 10 + static_cast<uint64_t>(d - '0');
    if (at > kMaxSameHostDataOffset) return bad(fmt::format("block {}: data offset {} is past any header", i, at));
    text.remove_prefix(space + 1);
    const std::string_view crc = text.substr(0, 8);
    if (crc.size() != 8 || crc.find_first_not_of("0123456789abcdef") != std::string_view::npos) {
      return bad(fmt::format("block {}: the CRC32C is not 8 lowercase hex digits", i));
    }
    uint32_t v = 0;
    for (char d : crc) v = v << 4 | static_cast<uint32_t>(d <= '9' ? d - '0' : d - 'a' + 10);
    text.remove_prefix(8);
    pieces[i].data_offset = at;
    pieces[i].crc32c = v;
  }
  if (!text.empty()) return bad("more lines than block files");
  return pieces;
}

size_t SameHostDescriptors(const std::vector<SameHostPiece>& pieces) {
  return static_cast<size_t>(std::count_if(pieces.begin(), pieces.end(),
                                           [](const SameHostPiece& p) { return p.form != SameHostForm::kNone; }));
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
