#include "s3/layout.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace aq::s3 {

std::string LayoutToJson(const Layout& l) {
  nlohmann::json blocks = nlohmann::json::array();
  for (const auto& b : l.blocks) {
    blocks.push_back(
        {{"id", b.id}, {"size", b.size}, {"crc32c", b.crc32c}, {"pool", b.pool}, {"addresses", b.addresses}});
  }
  nlohmann::json j = {{"size", l.size}, {"version", l.version}, {"etag", l.etag}, {"blocks", std::move(blocks)}};
  return j.dump();
}

Result<Layout> LayoutFromJson(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Corruption("an object layout that is not a JSON object");
  Layout l;
  try {
    l.size = j.at("size").get<uint64_t>();
    l.version = j.value("version", uint64_t{0});
    l.etag = j.value("etag", "");
    uint64_t sum = 0;
    for (const auto& jb : j.at("blocks")) {
      LayoutBlock b;
      b.id = jb.at("id").get<std::string>();
      b.size = jb.at("size").get<uint64_t>();
      b.crc32c = jb.at("crc32c").get<uint32_t>();
      b.pool = jb.value("pool", "");
      if (jb.contains("addresses")) b.addresses = jb["addresses"].get<std::vector<std::string>>();
      sum += b.size;
      l.blocks.push_back(std::move(b));
    }
    if (sum != l.size) return Corruption(fmt::format("a layout whose blocks hold {} bytes of {}", sum, l.size));
  } catch (const nlohmann::json::exception& e) {
    return Corruption(fmt::format("malformed object layout: {}", e.what()));
  }
  return l;
}

}  // namespace aq::s3
