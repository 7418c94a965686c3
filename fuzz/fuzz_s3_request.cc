// Any bytes as what a client sends to the node: parsed by the HTTP layer
// and, when they make requests, handled by the S3 handler over a real
// in-memory store (anonymous access, a bucket and an object present) —
// answered or refused, never a crash, a hang or a leak. The store is made
// once per process; what the inputs write into it stays, as it would on a
// node.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "http/server.h"
#include "io/file_system.h"
#include "server/s3_handler.h"
#include "store/block_store.h"
#include "store/meta_store.h"
#include "store/object_store.h"

namespace {

struct Node {
  Node() {
    fs = aq::io::NewMemFileSystem();
    meta = aq::store::OpenSqliteMetaStore(":memory:").value();
    blocks = aq::store::BlockStore::Open(*fs, {{"default", "/pool", aq::store::Media::kSsd}}).value();
    aq::store::ObjectStoreOptions o;
    o.block_size = 4096;
    objects = std::make_unique<aq::store::ObjectStore>(*meta, *blocks, o);
    (void)meta->CreateBucket("bkt");
    auto w = objects->Put("bkt", "obj").value();
    (void)w->Write(std::string(10000, 'x'));
    (void)w->Commit();
    aq::server::S3HandlerOptions so;
    so.anonymous = true;
    so.max_object_bytes = 1 << 20;
    so.min_part_bytes = 16;
    handler = std::make_unique<aq::server::S3Handler>(*objects, so);
    http.threads = 1;
    http.io_timeout_s = 0.01;
    http.body_grace_s = 0;
  }
  std::unique_ptr<aq::io::FileSystem> fs;
  std::unique_ptr<aq::store::MetaStore> meta;
  std::unique_ptr<aq::store::BlockStore> blocks;
  std::unique_ptr<aq::store::ObjectStore> objects;
  std::unique_ptr<aq::server::S3Handler> handler;
  aq::http::ServerOptions http;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Node* node = new Node();  // lives for the process, as a node would
  std::string_view raw(reinterpret_cast<const char*>(data), size);
  const std::string out = aq::http::ServeBytes(
      node->http, [](aq::http::Exchange& ex) { node->handler->Handle(ex); }, raw);
  // Whatever came in, whatever went out is HTTP responses (or nothing).
  if (!out.empty() && out.compare(0, 9, "HTTP/1.1 ") != 0) __builtin_trap();
  return 0;
}
