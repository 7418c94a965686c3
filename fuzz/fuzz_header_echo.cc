// Response splitting: every value a request can have echoed into a response
// header — the response-* overrides of GET and HEAD, and the headers a PUT
// stores and GET returns (Content-Type, Content-Disposition, Cache-Control,
// Content-Language, Content-Encoding, Expires, x-amz-meta-*) — set to the
// fuzzer's bytes, through the S3 handler over an in-memory store. Whatever
// the bytes, the response head has only the status line and well-formed
// fields whose names the node itself sends: an injected field, a bare CR or
// LF, or a body in the head is a finding.
//
// Input: byte 0 picks what carries the value, the rest is the value.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "http/server.h"
#include "io/file_system.h"
#include "s3/sigv4.h"
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
    objects = std::make_unique<aq::store::ObjectStore>(*meta, *blocks, aq::store::ObjectStoreOptions{});
    (void)meta->CreateBucket("bkt");
    aq::server::S3HandlerOptions so;
    so.anonymous = true;
    handler = std::make_unique<aq::server::S3Handler>(*objects, so);
    (void)Send("PUT /bkt/obj HTTP/1.1\r\nContent-Length: 1\r\n\r\nx");
  }
  std::string Send(std::string_view raw) {
    return aq::http::ServeBytes(
        http, [this](aq::http::Exchange& ex) { handler->Handle(ex); }, raw);
  }
  std::unique_ptr<aq::io::FileSystem> fs;
  std::unique_ptr<aq::store::MetaStore> meta;
  std::unique_ptr<aq::store::BlockStore> blocks;
  std::unique_ptr<aq::store::ObjectStore> objects;
  std::unique_ptr<aq::server::S3Handler> handler;
  aq::http::ServerOptions http;
};

const char* const kOverrides[] = {
    "response-content-type",  "response-content-language",    "response-expires",
    "response-cache-control", "response-content-disposition", "response-content-encoding"};
const char* const kStored[] = {"Content-Type",     "Content-Disposition", "Cache-Control",
                               "Content-Language", "Content-Encoding",    "Expires",
                               "x-amz-meta-f"};

// Every response head in `out` (several when requests were pipelined) holds
// only fields the node sends, each on its own line.
void CheckHeads(const std::string& out) {
  static const std::set<std::string> kNames = {"content-type",
                                               "content-length",
                                               "content-disposition",
                                               "cache-control",
                                               "content-language",
                                               "content-encoding",
                                               "expires",
                                               "x-amz-meta-f",
                                               "etag",
                                               "last-modified",
                                               "accept-ranges",
                                               "x-amz-request-id",
                                               "x-amz-id-2",
                                               "date",
                                               "server",
                                               "connection",
                                               "content-range",
                                               "x-amz-mp-parts-count",
                                               "retry-after",
                                               "x-amz-version-id",
                                               "location",
                                               "x-amz-bucket-region",
                                               "x-amz-checksum-crc32",
                                               "x-amz-checksum-crc32c",
                                               "x-amz-checksum-crc64nvme",
                                               "x-amz-checksum-sha1",
                                               "x-amz-checksum-sha256",
                                               "x-amz-checksum-type",
                                               "x-aquifer-layout"};
  size_t at = 0;
  while ((at = out.find("HTTP/1.1 ", at)) != std::string::npos) {
    const size_t end = out.find("\r\n\r\n", at);
    if (end == std::string::npos) __builtin_trap();  // a head that never ends
    std::string_view head(out.data() + at, end - at);
    size_t line_start = head.find("\r\n") + 2;
    while (line_start < head.size()) {
      size_t line_end = head.find("\r\n", line_start);
      if (line_end == std::string_view::npos) line_end = head.size();
      std::string_view line = head.substr(line_start, line_end - line_start);
      if (line.find('\r') != std::string_view::npos || line.find('\n') != std::string_view::npos) __builtin_trap();
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) __builtin_trap();  // a line that is no field
      std::string name(line.substr(0, colon));
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!kNames.count(name)) __builtin_trap();  // a field the node does not send: injected
      line_start = line_end + 2;
    }
    at = end + 4;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Node* node = new Node();
  if (size == 0) return 0;
  const std::string value(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t pick = data[0] % (std::size(kOverrides) + std::size(kStored));
  if (pick < std::size(kOverrides)) {
    // As a client would send it: percent-encoded, so any byte reaches the handler.
    const std::string q = std::string(kOverrides[pick]) + "=" + aq::s3::UriEncode(value, true);
    CheckHeads(node->Send("GET /bkt/obj?" + q + " HTTP/1.1\r\n\r\n"));
    CheckHeads(node->Send("HEAD /bkt/obj?" + q + " HTTP/1.1\r\n\r\n"));
    return 0;
  }
  // A stored header: the value as raw bytes in the header line (less CR and
  // LF, which would make it another request, not another value), then read back.
  std::string raw;
  for (char c : value) {
    if (c != '\r' && c != '\n') raw += c;
  }
  const std::string put = std::string("PUT /bkt/f HTTP/1.1\r\n") + kStored[pick - std::size(kOverrides)] + ": " + raw +
                          "\r\nContent-Length: 1\r\n\r\nx";
  CheckHeads(node->Send(put));
  CheckHeads(node->Send("GET /bkt/f HTTP/1.1\r\n\r\n"));
  return 0;
}
