// The records of the metadata, as both engines store them: block lists and
// object attributes as JSON, and the naming rules for buckets and keys.
//   blocks: [{"id": "...", "size": N, "crc32c": N, "pool": "...", "nodes": [...]}, ...]
//           erasure-coded ones add "ec": [K, M], "fcrc": [N, ...] (a checksum per fragment)
//   attrs:  {"headers": {...}, "parts": [N, ...], "upload": "...", "write": "...",
//            "checksum": {"algorithm": "...", "value": "...", "type": "...", "parts": ["...", ...]}}
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/utf8.h"
#include "store/meta_store.h"

namespace aq::store {

Status CheckWriteCondition(const WriteCondition& c, const std::string& key, const std::string* current_etag) {
  if (c.absent && current_etag != nullptr) {
    return AlreadyExists(Subject::kObject, fmt::format("'{}' exists (If-None-Match: *)", key));
  }
  if (!c.etag.empty()) {
    if (current_etag == nullptr) {
      return NotFound(Subject::kObject, fmt::format("no object '{}' (If-Match: {})", key, c.etag));
    }
    if (*current_etag != c.etag) {
      return AlreadyExists(Subject::kObject,
                           fmt::format("'{}' has ETag {}, not {} (If-Match)", key, *current_etag, c.etag));
    }
  }
  return Status::Ok();
}

std::string BlocksToJson(const std::vector<BlockRef>& blocks) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& b : blocks) {
    nlohmann::json j = {{"id", b.id}, {"size", b.size}, {"crc32c", b.crc32c}, {"pool", b.pool}};
    if (!b.nodes.empty()) j["nodes"] = b.nodes;
    if (b.erasure_coded()) {
      j["ec"] = {b.ec_k, b.ec_m};
      j["fcrc"] = b.fragment_crcs;
    }
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
      if (j.contains("ec")) {
        const auto km = j["ec"].get<std::vector<unsigned>>();
        b.fragment_crcs = j.at("fcrc").get<std::vector<uint32_t>>();
        if (km.size() != 2 || km[0] < 1 || km[0] > 255 || km[1] < 1 || km[1] > 255 ||
            b.fragment_crcs.size() != km[0] + km[1] || b.nodes.size() != km[0] + km[1]) {
          return Corruption(fmt::format("block {}: malformed erasure-code record", b.id));
        }
        b.ec_k = static_cast<uint8_t>(km[0]);
        b.ec_m = static_cast<uint8_t>(km[1]);
      }
      out.push_back(std::move(b));
    }
  } catch (const nlohmann::json::exception& e) {
    return Corruption(fmt::format("malformed block list: {}", e.what()));
  }
  return out;
}

Status ForEachObject(MetaStore& meta, const std::function<Status(ObjectMeta)>& fn, const std::atomic<bool>* stop) {
  for (const auto& bucket : AQ_TRY(meta.ListBuckets())) {
    std::string after;
    while (true) {
      auto page = AQ_TRY(meta.ListObjects({bucket.name, "", after, 1000}));
      for (const auto& listed : page.objects) {
        if (stop != nullptr && stop->load()) return Status::Ok();
        after = listed.key;
        auto o = meta.GetObject(bucket.name, listed.key);
        if (!o.ok()) continue;  // deleted meanwhile
        AQ_TRY(fn(std::move(*o)));
      }
      if (!page.truncated) break;
    }
  }
  return Status::Ok();
}

std::string FragmentId(const std::string& id, int i, int k, int m) {
  // The low 64 bits XORed with a constant per (i, K, M) (splitmix64 of
  // them): never the block's own id, never another fragment's.
  uint64_t z = ((static_cast<uint64_t>(i) + 1) | static_cast<uint64_t>(k) << 16 | static_cast<uint64_t>(m) << 32) +
               0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  if (id.size() != 32) return fmt::format("{}-{}-{}+{}", id, i, k, m);  // not a block id: stays visibly derived
  const uint64_t lo = std::strtoull(id.substr(16).c_str(), nullptr, 16);
  return fmt::format("{}{:016x}", id.substr(0, 16), lo ^ z);
}

BlockRef FragmentRef(const BlockRef& b, int i) {
  BlockRef f;
  f.id = FragmentId(b.id, i, b.ec_k, b.ec_m);
  f.size = b.FragmentSize();
  f.crc32c = static_cast<size_t>(i) < b.fragment_crcs.size() ? b.fragment_crcs[i] : 0;
  f.pool = b.pool;
  if (static_cast<size_t>(i) < b.nodes.size()) f.nodes = {b.nodes[i]};
  return f;
}

std::vector<std::pair<std::string, BlockRef>> StoredPieces(const BlockRef& b) {
  std::vector<std::pair<std::string, BlockRef>> out;
  for (size_t i = 0; i < b.nodes.size(); ++i) {
    if (b.erasure_coded()) {
      out.emplace_back(b.nodes[i], FragmentRef(b, static_cast<int>(i)));
    } else {
      BlockRef one = b;
      one.nodes = {b.nodes[i]};
      out.emplace_back(b.nodes[i], std::move(one));
    }
  }
  return out;
}

std::string AttrsToJson(const ObjectAttrs& a) {
  nlohmann::json j = nlohmann::json::object();
  if (!a.headers.empty()) j["headers"] = a.headers;
  if (!a.part_sizes.empty()) j["parts"] = a.part_sizes;
  if (!a.upload_id.empty()) j["upload"] = a.upload_id;
  if (!a.write_id.empty()) j["write"] = a.write_id;
  if (!a.checksum.empty()) {
    nlohmann::json c = {{"algorithm", a.checksum.algorithm}, {"value", a.checksum.value}, {"type", a.checksum.type}};
    if (!a.checksum.parts.empty()) c["parts"] = a.checksum.parts;
    j["checksum"] = std::move(c);
  }
  // Never throws: bytes that are not UTF-8 (refused by the protocol layers
  // before they get here) would be replaced, not end the process.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<ObjectAttrs> AttrsFromJson(const std::string& text) {
  ObjectAttrs a;
  if (text.empty()) return a;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Corruption(fmt::format("object attributes are not a JSON object: {}", text.substr(0, 80)));
  }
  try {
    if (j.contains("headers")) a.headers = j["headers"].get<std::map<std::string, std::string>>();
    if (j.contains("parts")) a.part_sizes = j["parts"].get<std::vector<uint64_t>>();
    a.upload_id = j.value("upload", "");
    a.write_id = j.value("write", "");
    if (j.contains("checksum")) {
      const auto& c = j["checksum"];
      a.checksum.algorithm = c.at("algorithm").get<std::string>();
      a.checksum.value = c.at("value").get<std::string>();
      a.checksum.type = c.value("type", "FULL_OBJECT");
      if (c.contains("parts")) a.checksum.parts = c["parts"].get<std::vector<std::string>>();
    }
  } catch (const nlohmann::json::exception& e) {
    return Corruption(fmt::format("malformed object attributes: {}", e.what()));
  }
  return a;
}

Status CheckBucketName(const std::string& n) {
  auto bad = [&](const char* why) {
    return Status(StatusCode::kInvalidArgument, Subject::kBucket, fmt::format("bucket name '{}': {}", n, why));
  };
  if (n.size() < 3 || n.size() > 63) return bad("must be 3 to 63 characters");
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) {
      return bad("only lowercase letters, digits, '.' and '-'");
    }
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(n.front()) || !alnum(n.back())) return bad("must start and end with a letter or digit");
  if (n.find("..") != std::string::npos) return bad("no two adjacent periods");
  // Four dot-separated numbers read as an IP address (S3 refuses them).
  int parts = 0;
  bool numeric = true;
  for (size_t start = 0; start <= n.size();) {
    size_t dot = n.find('.', start);
    if (dot == std::string::npos) dot = n.size();
    const std::string_view p(n.data() + start, dot - start);
    numeric = numeric && !p.empty() && p.size() <= 3 &&
              std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
    ++parts;
    start = dot + 1;
  }
  if (numeric && parts == 4) return bad("must not be formatted as an IP address");
  if (n.rfind("xn--", 0) == 0) return bad("must not start with 'xn--'");
  if (n.size() >= 8 && n.compare(n.size() - 8, 8, "-s3alias") == 0) return bad("must not end with '-s3alias'");
  return Status::Ok();
}

Status CheckObjectKey(const std::string& key) {
  auto bad = [&](StatusCode code, std::string why) { return Status(code, Subject::kObject, std::move(why)); };
  if (key.empty()) return bad(StatusCode::kInvalidArgument, "an object key must not be empty");
  if (key.size() > 1024) {
    return bad(StatusCode::kUnsupported, fmt::format("an object key of {} bytes; the limit is 1024", key.size()));
  }
  for (size_t i = 0; i < key.size();) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      return bad(
          StatusCode::kInvalidArgument,
          fmt::format("object key has control character 0x{:02x} at byte {} (not representable in XML 1.0)", c, i));
    }
    const size_t n = Utf8Sequence(key, i);
    if (n == 0) return bad(StatusCode::kInvalidArgument, fmt::format("object key is not valid UTF-8 at byte {}", i));
    i += n;
  }
  size_t start = 0;
  while (start <= key.size()) {
    size_t slash = key.find('/', start);
    if (slash == std::string::npos) slash = key.size();
    std::string_view seg(key.data() + start, slash - start);
    if (seg == "." || seg == "..") {
      return bad(StatusCode::kInvalidArgument, fmt::format("object key '{}': no '.' or '..' path segments", key));
    }
    start = slash + 1;
  }
  return Status::Ok();
}

}  // namespace aq::store
