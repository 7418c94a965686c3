#include "http/server.h"

#include <gtest/gtest.h>

#include "io/file_system.h"
#include "server/key_table.h"
#include "server/node_stats.h"
#include "server/s3_handler.h"
#include "store/block_store.h"
#include "store/meta_store.h"
#include "store/object_store.h"

namespace aq::server {
namespace {

TEST(NodeStatsTest, CountsPerOperationAndErrorClass) {
  NodeStats s;
  s.Record(Op::kGet, 0.001, 0, 100, 200);
  s.Record(Op::kGet, 0.003, 0, 50, 404);
  s.Record(Op::kPut, 0.010, 4096, 0, 200);
  s.Record(Op::kPut, 0.010, 0, 0, 503);
  EXPECT_EQ(s.requests(Op::kGet), 2u);
  EXPECT_EQ(s.bytes_out(), 150u);
  EXPECT_EQ(s.bytes_in(), 4096u);
  EXPECT_EQ(s.client_errors(), 1u);
  EXPECT_EQ(s.server_errors(), 1u);
  s3::NodeStatsDoc doc;
  s.Fill(&doc);
  EXPECT_EQ(doc.ops.at("get").client_errors, 1u);
  EXPECT_EQ(doc.ops.at("put").server_errors, 1u);
  EXPECT_EQ(doc.errors_by_status.at("404"), 1u);
  EXPECT_EQ(doc.errors_by_status.at("503"), 1u);
  EXPECT_EQ(doc.ops.at("put").bytes_in, 4096u);
  EXPECT_GT(doc.ops.at("get").latency.p99_us, 1000);
  EXPECT_EQ(doc.ops.at("delete").requests, 0u);
  EXPECT_EQ(doc.ops.size(), kOps);
  // As /stats writes it.
  const nlohmann::json j = s3::ToJson(doc);
  EXPECT_EQ(j["ops"]["get"]["client_errors"], 1);
  EXPECT_EQ(j["errors_by_status"]["503"], 1);
}

s3::StoredKey Stored(const std::string& id, const std::string& grant_scope) {
  s3::StoredKey k;
  k.key = {id, "secret-" + id};
  k.grants.push_back(*s3::ParseScope(grant_scope, s3::kRead | s3::kList));
  return k;
}

TEST(KeyTableTest, StoredKeysComeAndGoWithoutARestart) {
  auto meta = store::OpenSqliteMetaStore(":memory:").value();
  KeyTable table({{"ADMIN", "admin-secret"}}, {"aquifer-node", "node-secret"}, meta.get(), /*refresh_s=*/0.0);
  EXPECT_EQ(table.ForKey("USER")->Find("USER"), nullptr);
  ASSERT_TRUE(meta->PutSetting(s3::kKeysSetting, s3::KeysToJson({Stored("USER", "data")})).ok());
  // A key added a moment ago is looked up at once.
  auto snap = table.ForKey("USER");
  ASSERT_NE(snap->Find("USER"), nullptr);
  EXPECT_EQ(snap->Find("USER")->kind, KeyEntry::Kind::kStored);
  EXPECT_EQ(snap->Find("USER")->credential.secret, "secret-USER");
  EXPECT_EQ(snap->Find("ADMIN")->kind, KeyEntry::Kind::kAdmin);
  EXPECT_EQ(snap->Find("aquifer-node")->kind, KeyEntry::Kind::kNode);
  // A stored record can neither demote an administrator nor become the node key.
  ASSERT_TRUE(
      meta->PutSetting(s3::kKeysSetting, s3::KeysToJson({Stored("ADMIN", "data"), Stored("aquifer-node", "data")}))
          .ok());
  snap = table.Current();
  EXPECT_EQ(snap->Find("ADMIN")->kind, KeyEntry::Kind::kAdmin);
  EXPECT_EQ(snap->Find("ADMIN")->credential.secret, "admin-secret");
  EXPECT_EQ(snap->Find("aquifer-node")->kind, KeyEntry::Kind::kNode);
  EXPECT_EQ(snap->Find("aquifer-node")->credential.secret, "node-secret");
  EXPECT_EQ(snap->Find("USER"), nullptr);  // removed
  // A snapshot held by a request stays valid while the table moves on.
  ASSERT_TRUE(meta->PutSetting(s3::kKeysSetting, s3::KeysToJson({Stored("USER", "data")})).ok());
  auto held = table.Current();
  ASSERT_TRUE(meta->PutSetting(s3::kKeysSetting, "").ok());
  EXPECT_EQ(table.Current()->Find("USER"), nullptr);
  EXPECT_EQ(held->Find("USER")->credential.access_key, "USER");
}

TEST(KeyTableTest, UnreadableKeysLeaveTheLastOnesInForce) {
  auto meta = store::OpenSqliteMetaStore(":memory:").value();
  ASSERT_TRUE(meta->PutSetting(s3::kKeysSetting, s3::KeysToJson({Stored("USER", "data")})).ok());
  KeyTable table({}, {}, meta.get(), /*refresh_s=*/0.0);
  ASSERT_NE(table.Current()->Find("USER"), nullptr);
  ASSERT_TRUE(meta->PutSetting(s3::kKeysSetting, "{damaged").ok());
  const auto* still = table.Current()->Find("USER");
  ASSERT_NE(still, nullptr);
  EXPECT_EQ(still->grants.size(), 1u);
}

TEST(KeyTableTest, NewAdminKeysTakeOverAtOnceAndStoredKeysStay) {
  auto meta = store::OpenSqliteMetaStore(":memory:").value();
  ASSERT_TRUE(meta->PutSetting(s3::kKeysSetting, s3::KeysToJson({Stored("USER", "data"), Stored("NEXT", "x")})).ok());
  // A long refresh: only SetAdminKeys changes what the table holds.
  KeyTable table({{"OLD", "old-secret"}, {"NEXT", "file-secret"}}, {"aquifer-node", "node-secret"}, meta.get(),
                 /*refresh_s=*/3600);
  auto before = table.Current();
  EXPECT_EQ(before->Find("NEXT")->kind, KeyEntry::Kind::kAdmin);
  table.SetAdminKeys({{"NEW", "new-secret"}});
  auto snap = table.Current();
  EXPECT_EQ(snap->Find("OLD"), nullptr);
  ASSERT_NE(snap->Find("NEW"), nullptr);
  EXPECT_EQ(snap->Find("NEW")->kind, KeyEntry::Kind::kAdmin);
  EXPECT_EQ(snap->Find("NEW")->credential.secret, "new-secret");
  EXPECT_EQ(snap->Find("USER")->kind, KeyEntry::Kind::kStored);
  EXPECT_EQ(snap->Find("aquifer-node")->kind, KeyEntry::Kind::kNode);
  // The stored key the old file's key hid is read again at once.
  ASSERT_NE(snap->Find("NEXT"), nullptr);
  EXPECT_EQ(snap->Find("NEXT")->kind, KeyEntry::Kind::kStored);
  EXPECT_EQ(snap->Find("NEXT")->credential.secret, "secret-NEXT");
  // A snapshot held from before keeps its keys.
  EXPECT_NE(before->Find("OLD"), nullptr);
  // A file's key of the node key's id cannot take the node key's place.
  table.SetAdminKeys({{"aquifer-node", "guess"}});
  EXPECT_EQ(table.Current()->Find("aquifer-node")->kind, KeyEntry::Kind::kNode);
  EXPECT_EQ(table.Current()->Find("aquifer-node")->credential.secret, "node-secret");
}

// A node's S3 handler over an in-memory store, driven by raw requests.
class InProcess {
 public:
  InProcess() {
    fs_ = io::NewMemFileSystem();
    meta_ = store::OpenSqliteMetaStore(":memory:").value();
    blocks_ = store::BlockStore::Open(*fs_, {{"default", "/pool", store::Media::kSsd}}).value();
    objects_ = std::make_unique<store::ObjectStore>(*meta_, *blocks_, store::ObjectStoreOptions{});
    EXPECT_TRUE(meta_->CreateBucket("bkt").ok());
    S3HandlerOptions o;
    o.anonymous = true;
    handler_ = std::make_unique<S3Handler>(*objects_, o);
  }
  std::string Send(std::string_view raw) {
    return http::ServeBytes(
        http::ServerOptions(), [this](http::Exchange& ex) { handler_->Handle(ex); }, raw);
  }
  store::ObjectStore& objects() { return *objects_; }

 private:
  std::unique_ptr<io::FileSystem> fs_;
  std::unique_ptr<store::MetaStore> meta_;
  std::unique_ptr<store::BlockStore> blocks_;
  std::unique_ptr<store::ObjectStore> objects_;
  std::unique_ptr<S3Handler> handler_;
};

// Found by fuzz_s3_request: a stored header with bytes that are not UTF-8
// made the metadata record's JSON serializer throw and ended the process.
// User metadata is text (UTF-8, ISO-8859-1 or RFC 2047 words in; RFC 2047
// out, as S3); the other stored headers stay US-ASCII, refused otherwise.
TEST(S3HandlerTest, NonAsciiMetadataIsTextOtherHeadersStayAscii) {
  InProcess node;
  const std::string bad = node.Send(
      "PUT /bkt/a HTTP/1.1\r\nContent-Encoding: x\xff\xfe\xb1y\r\nx-amz-meta-n: plain\r\n"
      "Content-Length: 3\r\n\r\nabc");
  EXPECT_EQ(bad.rfind("HTTP/1.1 400", 0), 0u) << bad;
  EXPECT_NE(bad.find("US-ASCII"), std::string::npos) << bad;
  EXPECT_EQ(node.objects().Head("bkt", "a").status().code(), StatusCode::kNotFound);
  const std::pair<const char*, const char*> cases[] = {
      {"caf\xc3\xa9", "caf\xc3\xa9"},                              // UTF-8 (curl)
      {"caf\xe9", "caf\xc3\xa9"},                                  // ISO-8859-1 (boto3 through http.client)
      {"=?UTF-8?B?Y2Fmw6k=?=", "caf\xc3\xa9"},                     // RFC 2047, B
      {"=?iso-8859-1?Q?caf=E9?= au lait", "caf\xc3\xa9 au lait"},  // RFC 2047, Q, then text
      {"plain", "plain"},
  };
  for (const auto& [sent, stored] : cases) {
    const std::string reply = node.Send(std::string("PUT /bkt/m HTTP/1.1\r\nx-amz-meta-n: ") + sent +
                                        "\r\nContent-Encoding: deflate, gzip\r\nContent-Length: 3\r\n\r\nabc");
    ASSERT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << sent << ": " << reply;
    const auto meta = node.objects().Head("bkt", "m").value();
    EXPECT_EQ(meta.attrs.headers.at("x-amz-meta-n"), stored) << sent;
    EXPECT_EQ(meta.attrs.headers.at("content-encoding"), "deflate, gzip");  // as sent, space and all
    const std::string head = node.Send("HEAD /bkt/m HTTP/1.1\r\n\r\n");
    const std::string expect = std::string(stored) == "plain" ? "x-amz-meta-n: plain\r\n"
                               : std::string(stored).find("au lait") != std::string::npos
                                   ? "x-amz-meta-n: =?UTF-8?B?Y2Fmw6kgYXUgbGFpdA==?=\r\n"
                                   : "x-amz-meta-n: =?UTF-8?B?Y2Fmw6k=?=\r\n";
    EXPECT_NE(head.find(expect), std::string::npos) << sent << ": " << head;
  }
  for (const char* refused : {"a\x01b", "=?UTF-8?B?AQ==?="}) {  // a control character, sent or encoded
    const std::string reply =
        node.Send(std::string("PUT /bkt/c HTTP/1.1\r\nx-amz-meta-n: ") + refused + "\r\nContent-Length: 1\r\n\r\nx");
    EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  }
  EXPECT_EQ(node.objects().Head("bkt", "c").status().code(), StatusCode::kNotFound);
}

// Response splitting: a response-* override is a response header, so CR,
// LF or another control character in it is refused with 400 (one case per
// parameter, encoded as a client would send it), and a well-formed one
// still replaces the stored value.
TEST(S3HandlerTest, ResponseOverridesCannotInjectHeaders) {
  InProcess node;
  ASSERT_EQ(node.Send("PUT /bkt/o HTTP/1.1\r\nContent-Length: 1\r\n\r\nx").rfind("HTTP/1.1 200", 0), 0u);
  for (const char* param : {"response-content-type", "response-content-language", "response-expires",
                            "response-cache-control", "response-content-disposition", "response-content-encoding"}) {
    for (const char* evil : {"text/html%0d%0aSet-Cookie:%20s=evil", "a%0aX-Evil:%201", "a%0dX-Evil:%201", "a%00b",
                             "a%0d%0a%0d%0a<html>body</html>", "a%7fb"}) {
      const std::string reply = node.Send(std::string("GET /bkt/o?") + param + "=" + evil + " HTTP/1.1\r\n\r\n");
      EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << param << "=" << evil << ": " << reply;
      EXPECT_EQ(reply.find("Set-Cookie"), std::string::npos) << reply;
      EXPECT_EQ(reply.find("X-Evil"), std::string::npos) << reply;
      EXPECT_EQ(reply.find("<html>"), std::string::npos) << reply;
    }
    const std::string ok = node.Send(std::string("GET /bkt/o?") + param + "=fine%20value%09tab HTTP/1.1\r\n\r\n");
    EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << param << ": " << ok;
    EXPECT_NE(ok.find(": fine value\ttab\r\n"), std::string::npos) << param << ": " << ok;
  }
}

// The last line of defence: whatever path carries a line break into a
// response header, the head never holds it.
TEST(HttpMessageTest, ASerializedHeadNeverHoldsALineBreakFromAField) {
  http::Headers h;
  h.Add("Content-Type", "text/plain\r\nSet-Cookie: s=evil");
  h.Add("X-Ok", "value");
  h.Add("X-Bad\r\nName", "v");
  const std::string head = http::SerializeHead(200, h);
  EXPECT_EQ(head.find("Set-Cookie"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Bad"), std::string::npos) << head;
  EXPECT_NE(head.find("X-Ok: value\r\n"), std::string::npos) << head;
  EXPECT_TRUE(http::ValidFieldValue("text/plain; charset=utf-8\tok"));
  EXPECT_FALSE(http::ValidFieldValue("a\nb"));
  EXPECT_FALSE(http::ValidFieldValue(std::string("a\0b", 3)));
}

TEST(S3HandlerTest, RefusesUnimplementedSubresourcesBeforeTheBody) {
  InProcess node;
  ASSERT_EQ(node.Send("PUT /bkt/k HTTP/1.1\r\nContent-Length: 4\r\n\r\ndata").rfind("HTTP/1.1 200", 0), 0u);
  for (const char* sub : {"retention", "legal-hold", "torrent", "select&select-type=2", "restore", "policy=1"}) {
    const std::string reply =
        node.Send(std::string("PUT /bkt/k?") + sub + " HTTP/1.1\r\nContent-Length: 9\r\n\r\nnew bytes");
    EXPECT_EQ(reply.rfind("HTTP/1.1 501", 0), 0u) << sub << ": " << reply;
  }
  auto meta = node.objects().Head("bkt", "k").value();
  EXPECT_EQ(meta.size, 4u);
}

// Conditional deletes were ignored: a DELETE with a wrong If-Match, or a
// DeleteObjects entry naming a wrong ETag, deleted the object anyway. They
// are refused (501) and nothing is deleted.
TEST(S3HandlerTest, ConditionalDeletesAreRefusedAndDeleteNothing) {
  InProcess node;
  ASSERT_EQ(node.Send("PUT /bkt/k HTTP/1.1\r\nContent-Length: 4\r\n\r\ndata").rfind("HTTP/1.1 200", 0), 0u);
  for (const char* h : {"If-Match: \"0123\"", "If-None-Match: *", "x-amz-if-match-size: 3",
                        "x-amz-if-match-last-modified-time: Wed, 01 Jan 2020 00:00:00 GMT"}) {
    const std::string reply = node.Send(std::string("DELETE /bkt/k HTTP/1.1\r\n") + h + "\r\n\r\n");
    EXPECT_EQ(reply.rfind("HTTP/1.1 501", 0), 0u) << h << ": " << reply;
    EXPECT_NE(reply.find("conditional deletes"), std::string::npos) << reply;
  }
  for (const char* cond :
       {"<ETag>\"0123\"</ETag>", "<Size>3</Size>", "<LastModifiedTime>2020-01-01T00:00:00Z</LastModifiedTime>"}) {
    const std::string body =
        std::string("<Delete><Object><Key>other</Key></Object><Object><Key>k</Key>") + cond + "</Object></Delete>";
    const std::string reply =
        node.Send("POST /bkt?delete HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    EXPECT_EQ(reply.rfind("HTTP/1.1 501", 0), 0u) << cond << ": " << reply;
    EXPECT_NE(reply.find("nothing was deleted"), std::string::npos) << reply;
  }
  EXPECT_EQ(node.objects().Head("bkt", "k")->size, 4u);
  const std::string plain = node.Send("DELETE /bkt/k HTTP/1.1\r\n\r\n");
  EXPECT_EQ(plain.rfind("HTTP/1.1 204", 0), 0u) << plain;
  EXPECT_EQ(node.objects().Head("bkt", "k").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace aq::server
