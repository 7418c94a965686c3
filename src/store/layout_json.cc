// Block lists as JSON: [{"id": "...", "size": N, "crc32c": N, "pool": "...", "nodes": [...]}, ...].
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "store/meta_store.h"

namespace aq::store {

std::string BlocksToJson(const std::vector<BlockRef>& blocks) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& b : blocks) {
    nlohmann::json j = {{"id", b.id}, {"size", b.size}, {"crc32c", b.crc32c}, {"pool", b.pool}};
    if (!b.nodes.empty()) j["nodes"] = b.nodes;
    a.push_back(std::move(j));
  }
  return a.dump();
}

Result<std::vector<BlockRef>> BlocksFromJson(const std::string& text) {
  auto a = nlohmann::json::parse(text, nullptr, false);
  if (a.is_discarded() || !a.is_array())
    return Corruption(fmt::format("block list is not a JSON array: {}", text.substr(0, 80)));
  std::vector<BlockRef> out;
  try {
    for (const auto& j : a) {
      BlockRef b;
      b.id = j.at("id").get<std::string>();
      b.size = j.at("size").get<uint64_t>();
      b.crc32c = j.at("crc32c").get<uint32_t>();
      b.pool = j.at("pool").get<std::string>();
      if (j.contains("nodes")) b.nodes = j["nodes"].get<std::vector<std::string>>();
      out.push_back(std::move(b));
    }
  } catch (const nlohmann::json::exception& e) {
    return Corruption(fmt::format("malformed block list: {}", e.what()));
  }
  return out;
}

}  // namespace aq::store
