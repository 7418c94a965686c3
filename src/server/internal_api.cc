// The node-to-node API (internal_api.h).
#include "server/internal_api.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "s3/internal_routes.h"
#include "s3/plan.h"
#include "server/s3_handler.h"

namespace aq::server {
void InternalApi::Plan(S3Request& r) {
  store::Stager* stager = objects_.stager();
  const std::string stream = r.Param("stream");
  const bool pieces = r.Has("pieces");  // a node's share: the stream names its key too
  if (stream.empty() || stream.size() > (pieces ? 512 : 256)) {
    return SendError(r, {400, "InvalidArgument", "a plan needs ?stream=ID (1 to 256 characters)"});
  }
  if (pieces) return PlanPieces(r, stream);
  const std::string id = r.auth.access_key + "/" + stream;
  if (r.req.method == "DELETE") {
    if (stager != nullptr) {
      if (o_.cluster != nullptr) {
        o_.cluster->CancelPlan(id);
      } else {
        stager->Cancel(id);
      }
    }
    return SendEmpty(r, 204);
  }
  if (r.req.method != "POST") return SendError(r, {405, "MethodNotAllowed", "POST or DELETE a plan"});
  std::string body;
  if (!ReadSmallBody(r, &body, s3::kMaxPlanBytes)) return;
  // Checked whole before anything is staged: a malformed plan stages nothing.
  auto wants = s3::PlanFromJson(body);
  if (!wants.ok()) return SendError(r, {400, "MalformedPlan", std::string(wants.status().message())});
  uint64_t objects = 0, missing = 0, denied = 0, planned = 0;
  size_t queued = 0;
  const bool staging = stager != nullptr;
  std::vector<store::BlockRef> blocks;
  std::vector<store::BlockSpan> spans;  // of each block, the bytes to be read
  // Staged in growing runs (16, 32, ... 1024 reads): the first reads are
  // staging while the rest are looked up (each a metadata read, etcd's
  // round trip in a cluster), so readers starting at once do not overtake
  // their own plan.
  auto flush = [&] {
    planned += blocks.size();
    if (staging && !blocks.empty())
      queued += o_.cluster != nullptr ? o_.cluster->RoutePlan(id, blocks, spans) : stager->Plan(id, blocks);
    blocks.clear();
    spans.clear();
  };
  size_t run = 16, in_run = 0;
  for (const auto& w : *wants) {
    if (in_run == run) {
      flush();
      run = std::min<size_t>(run * 2, 1024);
      in_run = 0;
    }
    ++in_run;
    if (!May(r, s3::kRead, w.bucket, w.key)) {
      ++denied;
      continue;
    }
    auto meta = objects_.Head(w.bucket, w.key);
    if (!meta.ok()) {
      ++missing;
      continue;
    }
    ++objects;
    // The blocks holding [offset, offset + length).
    const uint64_t end = w.length > meta->size - std::min(w.offset, meta->size) ? meta->size : w.offset + w.length;
    uint64_t at = 0;
    for (const auto& b : meta->blocks) {
      if (at + b.size > w.offset && at < end) {
        const uint64_t from = std::max(at, w.offset), to = std::min(at + b.size, end);
        blocks.push_back(b);
        spans.push_back({from - at, to - from});
      }
      at += b.size;
    }
  }
  flush();
  nlohmann::json out = {{"objects", objects}, {"missing", missing}, {"denied", denied},
                        {"blocks", planned},  {"queued", queued},   {"staging", staging}};
  http::Headers h;
  h.Add("Content-Type", "application/json");
  (void)r.ex.Respond(200, std::move(h), out.dump());
}

// Another node's share of a plan it was sent: pieces this node holds, in
// order. Only the cluster's nodes pass shares (a user's key could name any
// block id; the node key has already checked each object's grant).
void InternalApi::PlanPieces(S3Request& r, const std::string& stream) {
  if (!FromNode(r)) {
    return SendError(r, {403, "AccessDenied", "only the cluster's nodes may pass a plan's pieces"});
  }
  store::Stager* stager = objects_.stager();
  if (r.req.method == "DELETE") {
    if (stager != nullptr) stager->Cancel(stream);
    return SendEmpty(r, 204);
  }
  if (r.req.method != "POST") return SendError(r, {405, "MethodNotAllowed", "POST or DELETE a plan"});
  std::string body;
  if (!ReadSmallBody(r, &body, s3::kMaxPlanBytes)) return;
  auto pieces = s3::PiecesFromJson(body);
  if (!pieces.ok()) return SendError(r, {400, "MalformedPlan", std::string(pieces.status().message())});
  std::vector<store::BlockRef> refs;
  refs.reserve(pieces->size());
  for (auto& p : *pieces) {
    store::BlockRef ref;
    ref.id = std::move(p.id);
    ref.pool = std::move(p.pool);
    ref.size = p.size;
    ref.crc32c = p.crc32c;
    refs.push_back(std::move(ref));
  }
  const size_t queued = stager != nullptr ? stager->Plan(stream, refs) : 0;
  http::Headers h;
  h.Add("Content-Type", "application/json");
  (void)r.ex.Respond(
      200, std::move(h),
      nlohmann::json{{"pieces", refs.size()}, {"queued", queued}, {"staging", stager != nullptr}}.dump());
}

bool InternalApi::FromNode(const S3Request& r) const {
  return !o_.node_credential.access_key.empty() && r.auth.access_key == o_.node_credential.access_key;
}

std::optional<std::string> InternalApi::Authorize(const S3Request& r) const {
  if (r.who == nullptr) return std::nullopt;  // unsigned on an --anonymous node
  const bool admin = r.who->kind == KeyEntry::Kind::kAdmin;
  const auto& g = r.who->grants;
  auto reads_something = [&] {
    if (admin) return true;
    for (const auto& x : g) {
      if (x.actions & s3::kRead) return true;
    }
    return false;
  };
  if (r.who->kind == KeyEntry::Kind::kNode) return std::nullopt;
  if (r.key == s3::internal::kCluster) return std::nullopt;
  if (r.key == s3::internal::kPlan) {
    // Each object of a plan is checked on its own; a key that may read
    // nothing is refused before its body (up to 8 MiB) is read.
    if (reads_something()) return std::nullopt;
    return "the key may read no object, so it has nothing to plan";
  }
  if (r.key.starts_with(s3::internal::kLayoutPrefix)) {
    const std::string path = r.key.substr(s3::internal::kLayoutPrefix.size());
    const size_t slash = path.find('/');
    if (admin || slash == std::string::npos) return std::nullopt;  // 400 follows a malformed one
    if (s3::Allows(g, s3::kRead, path.substr(0, slash), path.substr(slash + 1))) return std::nullopt;
    return "the key may not read " + path;
  }
  if (r.key.starts_with(s3::internal::kBlocksPrefix) && r.req.method == "GET") {
    if (reads_something()) return std::nullopt;
    return "the key may read no object";
  }
  return "only the cluster's nodes may use this";
}

void InternalApi::Handle(S3Request& r) {
  const std::string& m = r.req.method;
  if (r.key == s3::internal::kCluster && m == "GET") {
    // A single node is a cluster of one that names no other member.
    http::Headers h;
    h.Add("Content-Type", "application/json");
    (void)r.ex.Respond(200, std::move(h),
                       s3::internal::ClusterMapToJson(o_.cluster != nullptr ? o_.cluster->ClusterMap()
                                                                            : s3::internal::ClusterMapDoc{}));
    return;
  }
  if (r.key == s3::internal::kPlan) return Plan(r);
  if (r.key.starts_with(s3::internal::kLayoutPrefix) && m == "GET") {
    if (o_.cluster == nullptr) return SendError(r, {404, "NoSuchKey", "this node is not in a cluster"});
    const std::string path = r.key.substr(s3::internal::kLayoutPrefix.size());
    const size_t slash = path.find('/');
    if (slash == std::string::npos) return SendError(r, {400, "InvalidArgument", "layout/BUCKET/KEY"});
    auto meta = objects_.Head(path.substr(0, slash), path.substr(slash + 1));
    if (!meta.ok()) return SendStatus(r, meta.status(), Subject::kObject);
    http::Headers h;
    h.Add("Content-Type", "application/json");
    (void)r.ex.Respond(200, std::move(h), s3::LayoutToJson(o_.cluster->LayoutOf(*meta)));
    return;
  }
  if (o_.node_blocks == nullptr) return SendError(r, {404, "NoSuchKey", "no such internal resource"});
  if (r.key == s3::internal::kInventory && m == "GET") {
    auto ids = o_.node_blocks->store().List();
    if (!ids.ok()) return SendStatus(r, ids.status(), Subject::kBlock);
    http::Headers h;
    h.Add("Content-Type", "application/json");
    (void)r.ex.Respond(200, std::move(h), s3::internal::InventoryToJson(*ids));
    return;
  }
  if (!r.key.starts_with(s3::internal::kBlocksPrefix)) {
    return SendError(r, {404, "NoSuchKey", "no such internal resource"});
  }
  Block(r);
}

// GET, PUT or DELETE of a piece this node holds.
void InternalApi::Block(S3Request& r) {
  const std::string& m = r.req.method;
  if ((m == "PUT" || m == "DELETE") && !FromNode(r)) {
    return SendError(r, {403, "AccessDenied", "only the cluster's nodes may store or remove replicas"});
  }
  auto target = s3::internal::ParseBlockTarget(r.key, r.query);
  if (!target.ok()) return SendError(r, {400, "InvalidArgument", std::string(target.status().message())});
  store::BlockRef ref;
  ref.id = target->id;
  ref.pool = target->pool;
  ref.crc32c = target->crc32c;
  ref.size = target->size;
  auto fail = [&](const Status& s) {
    if (s.code() == StatusCode::kCorruption) return SendError(r, {500, "BlockCorrupt", s.message()});
    if (s.code() == StatusCode::kInvalidArgument) return SendError(r, {400, "InvalidArgument", s.message()});
    SendStatus(r, s, Subject::kBlock);
  };
  if (m == "GET") {
    auto block = o_.block_reads != nullptr ? o_.block_reads->Read(ref) : o_.node_blocks->Read(ref);
    if (!block.ok()) return fail(block.status());
    std::shared_ptr<const std::string> bytes = *block;
    // A slice of the block (offset, length) for clients reading ranges.
    uint64_t from = 0, len = bytes->size();
    if (target->sliced) {
      from = target->offset;
      len = target->length;
      if (from > bytes->size() || len > bytes->size() - from) {
        return SendError(r, {416, "InvalidRange", "the slice is outside the block"});
      }
    }
    http::Headers h;
    h.Add("Content-Type", "application/octet-stream");
    if (!r.ex.Begin(200, std::move(h), len).ok()) return;
    for (uint64_t off = 0; off < len;) {
      const uint64_t n = std::min<uint64_t>(len - off, 1 << 20);
      link_.Acquire(n);
      if (!r.ex.Write(std::string_view(bytes->data() + from + off, n)).ok()) return;
      off += n;
    }
    return;
  }
  if (m == "DELETE") {
    Status s = o_.node_blocks->Remove(ref);
    if (!s.ok()) return fail(s);
    return SendEmpty(r, 204);
  }
  if (m == "PUT") {
    if (ref.size > o_.max_block_bytes) {
      return SendError(r, {400, "EntityTooLarge", "a block larger than the node accepts"});
    }
    std::string body;
    body.reserve(ref.size);
    char buf[256 << 10];
    for (;;) {
      auto n = r.ex.ReadBody(buf, sizeof buf);
      if (!n.ok()) return SendError(r, {400, "IncompleteBody", n.status().message()});
      if (*n == 0) break;
      if (body.size() + *n > ref.size) return SendError(r, {400, "IncompleteBody", "more bytes than the block's size"});
      body.append(buf, *n);
    }
    if (body.size() != ref.size) {
      return SendError(r, {400, "IncompleteBody", fmt::format("{} of {} block bytes", body.size(), ref.size)});
    }
    auto written = o_.node_blocks->store().WriteWithId(ref.id, ref.pool, body);
    if (!written.ok()) return fail(written.status());
    if (written->crc32c != ref.crc32c) {
      (void)o_.node_blocks->Remove(*written);
      return SendError(r, {400, "BadDigest", "the block's bytes do not match its checksum"});
    }
    return SendEmpty(r, 200);
  }
  SendError(r, {405, "MethodNotAllowed", "not a block operation"});
}

}  // namespace aq::server
