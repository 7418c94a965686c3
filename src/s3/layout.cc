#include "s3/layout.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace aq::s3 {

std::string LayoutToJson(const Layout& l) {
  nlohmann::json blocks = nlohmann::json::array();
  for (const auto& b : l.blocks) {
    nlohmann::json jb = {
        {"id", b.id}, {"size", b.size}, {"crc32c", b.crc32c}, {"pool", b.pool}, {"addresses", b.addresses}};
    if (!b.fragments.empty()) {
      jb["k"] = b.k;
      jb["fragments"] = nlohmann::json::array();
      for (const auto& f : b.fragments) {
        jb["fragments"].push_back({{"id", f.id}, {"size", f.size}, {"crc32c", f.crc32c}, {"addresses", f.addresses}});
      }
    }
    blocks.push_back(std::move(jb));
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
      if (jb.contains("fragments")) {
        b.k = jb.at("k").get<int>();
        for (const auto& jf : jb["fragments"]) {
          LayoutFragment f;
          f.id = jf.at("id").get<std::string>();
          f.size = jf.at("size").get<uint64_t>();
          f.crc32c = jf.at("crc32c").get<uint32_t>();
          if (jf.contains("addresses")) f.addresses = jf["addresses"].get<std::vector<std::string>>();
          if (!b.fragments.empty() && f.size != b.fragments[0].size) {
            return Corruption(fmt::format("layout of block {}: fragments of different sizes", b.id));
          }
          b.fragments.push_back(std::move(f));
        }
        const uint64_t frag = b.fragments.empty() ? 0 : b.fragments[0].size;
        const uint64_t k = b.k > 0 ? static_cast<uint64_t>(b.k) : 0;
        // K data + M >= 1 parity fragments of F bytes; K of them hold a
        // block of more than (K-1)F and at most KF bytes.
        if (k < 2 || k > 32 || b.fragments.size() <= k || b.fragments.size() > k + 16 || frag == 0 ||
            b.size > frag * k || b.size <= frag * (k - 1)) {
          return Corruption(fmt::format("layout of block {}: {} fragments, {} of them data, do not hold its {} bytes",
                                        b.id, b.fragments.size(), b.k, b.size));
        }
      }
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
