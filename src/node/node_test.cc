// Nodes built in-process, read and written through the aquifer:// client
// over loopback: the round trips a client makes (one request for a small
// file, no HEAD after open, nothing past the end, listings instead of a HEAD
// per file), a read that an overwrite interrupts, and a three-node cluster
// on a real etcd through membership, failover and repair.
#include "node/node.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "client/s3_file_system.h"
#include "cluster/membership.h"
#include "cluster/repair.h"
#include "cluster/test_etcd.h"
#include "http/client.h"
#include "node/key_admin.h"
#include "s3/internal_routes.h"
#include "s3/policy.h"
#include "s3/same_host.h"
#include "server/node_stats.h"
#include "store/object_store.h"

namespace aq::node {
namespace {

namespace fs = std::filesystem;
using server::Op;

std::string Bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() /
              ("aq_node_test_" + std::to_string(getpid()) + "_" + store::NewBlockId().substr(0, 8))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& n) const { return (path_ / n).string(); }

 private:
  fs::path path_;
};

const s3::Credential kKey{"NODETESTKEY", "node-test-secret"};

NodeOptions Options(const TempDir& dir, const std::string& name) {
  NodeOptions o;
  o.data_dir = dir / name;
  o.port = 0;
  o.credentials = {kKey};
  o.block_size = 256 << 10;
  o.cache_bytes = 16 << 20;
  o.threads = 8;
  return o;
}

std::unique_ptr<io::FileSystem> Client() {
  return client::NewStoreFileSystem(client::ClientCredentials{kKey.access_key, kKey.secret, "test"});
}

Status Write(io::FileSystem& fs, const std::string& path, const std::string& data) {
  auto f = AQ_TRY(fs.OpenWrite(path));
  AQ_TRY(f->Append(data));
  return f->Close();
}

std::string ReadWhole(io::FileSystem& fs, const std::string& path, size_t piece) {
  auto f = fs.OpenRead(path, io::AccessHint::kSequential);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (!f.ok()) return "";
  std::string out((*f)->size(), '\0');
  for (uint64_t off = 0; off < out.size();) {
    auto n = (*f)->ReadAt(off, std::min<size_t>(piece, out.size() - off), out.data() + off);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    if (!n.ok() || *n == 0) break;
    off += *n;
  }
  return out;
}

struct Counts {
  uint64_t get, head, list, client_errors, server_errors;
};
Counts Snapshot(Node& n) {
  auto& s = n.stats();
  return {s.requests(Op::kGet), s.requests(Op::kHead), s.requests(Op::kList), s.client_errors(), s.server_errors()};
}

// Key administration against a node's metadata: grants joined per scope,
// revokes exact, unknown keys and scopes named, a failed first step storing
// nothing, and administrators at once never losing each other's changes.
TEST(KeyAdminTest, KeysAndGrantsChangeAsAskedAndNamedErrorsChangeNothing) {
  TempDir dir;
  auto open = [&] { return KeyAdmin(store::OpenSqliteMetaStore(dir / "meta.db").value()); };
  auto admin = open();
  EXPECT_TRUE(admin.List().value().empty());
  const s3::Grant ro = s3::ParseScope("imagenet/train/", s3::ParseActions("ro").value()).value();
  const s3::Grant write = s3::ParseScope("imagenet/train/", s3::ParseActions("write").value()).value();
  const s3::Grant scratch = s3::ParseScope("scratch", s3::ParseActions("rw").value()).value();
  auto a = admin.Add("trainer", {ro, write, scratch});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->grants.size(), 2u);  // ro and write on one scope joined
  EXPECT_EQ(DescribeGrants(a->grants), "read,write,list on imagenet/train/; read,write,delete,list on scratch");
  EXPECT_EQ(admin.MissingBuckets(a->grants), (std::vector<std::string>{"imagenet", "scratch"}));
  // A first step that fails stores nothing.
  auto failed = admin.Add("x", {}, [](const s3::StoredKey&) { return IoError("disk full"); });
  EXPECT_EQ(failed.status().code(), StatusCode::kIoError);
  ASSERT_EQ(admin.List().value().size(), 1u);
  const std::string id = a->key.access_key;
  EXPECT_EQ(admin.List().value()[0].key.secret, a->key.secret);
  // Revoke takes exactly the actions asked on exactly the scope.
  auto now = admin.Revoke(id, write);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(DescribeGrants(*now), "read,list on imagenet/train/; read,write,delete,list on scratch");
  const s3::Grant wider = s3::ParseScope("imagenet", s3::kAllActions).value();
  EXPECT_EQ(admin.Revoke(id, wider).status().code(), StatusCode::kNotFound);  // no grant on that scope
  now = admin.Revoke(id, s3::ParseScope("scratch", s3::kAllActions).value());
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(DescribeGrants(*now), "read,list on imagenet/train/");  // a grant left with nothing goes
  now = admin.Grant(id, write);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->size(), 1u);
  EXPECT_EQ(open().List().value()[0].grants, *now);  // what another administrator reads
  // Unknown keys are named.
  for (const Status& s : std::vector<Status>{admin.Remove("AKNOPE"), admin.Grant("AKNOPE", ro).status(),
                                             admin.Revoke("AKNOPE", ro).status()}) {
    EXPECT_EQ(s.code(), StatusCode::kNotFound);
    EXPECT_NE(s.message().find("AKNOPE"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(admin.Remove(id).ok());
  EXPECT_TRUE(admin.List().value().empty());
  // Four administrators at once, each adding keys and granting to them:
  // every key and every grant is there afterwards.
  std::vector<std::thread> admins;
  std::vector<std::vector<std::string>> ids(4);
  for (int t = 0; t < 4; ++t) {
    admins.emplace_back([&, t] {
      auto mine = open();
      for (int i = 0; i < 8; ++i) {
        auto k = mine.Add("a" + std::to_string(t) + "-" + std::to_string(i), {ro});
        if (!k.ok()) continue;
        ids[t].push_back(k->key.access_key);
        (void)mine.Grant(k->key.access_key, scratch);
      }
    });
  }
  for (auto& th : admins) th.join();
  const auto keys = admin.List().value();
  EXPECT_EQ(keys.size(), 32u);
  for (const auto& k : keys) EXPECT_EQ(k.grants.size(), 2u) << k.name;
  for (const auto& mine : ids) EXPECT_EQ(mine.size(), 8u);
}

TEST(NodeTest, OptionsAreCheckedWithoutNamingFlags) {
  NodeOptions o;
  o.credentials = {};
  Status s = o.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().find("--"), std::string::npos) << s.message();
  o.anonymous = true;
  o.block_size = 100;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  o.block_size = 4096;
  o.etcd = "http://x";
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
}

std::unique_ptr<io::FileSystem> RemoteClient() {  // as from another host: every byte through the socket
  client::ClientOptions co;
  co.same_host = false;
  return client::NewStoreFileSystem(client::ClientCredentials{kKey.access_key, kKey.secret, "test"}, co);
}

TEST(NodeTest, ClientRoundTripsCostOneRequestPerSmallFile) {
  TempDir dir;
  auto node = Node::Start(Options(dir, "n"));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  Node& n = **node;
  auto fs = RemoteClient();
  const std::string base = "aquifer://" + n.address() + "/data";
  ASSERT_TRUE(fs->MakeDirs(base).ok());
  const std::string small = Bytes(100'000, 1), big = Bytes(20'000'000, 2);
  ASSERT_TRUE(Write(*fs, base + "/small.jpg", small).ok());
  ASSERT_TRUE(Write(*fs, base + "/big.rec", big).ok());
  ASSERT_TRUE(Write(*fs, base + "/empty", "").ok());

  // A whole-file read of a small object: exactly one request, a GET.
  Counts c0 = Snapshot(n);
  EXPECT_EQ(ReadWhole(*fs, base + "/small.jpg", 1 << 20), small);
  Counts c1 = Snapshot(n);
  EXPECT_EQ(c1.get - c0.get, 1u);
  EXPECT_EQ(c1.head - c0.head, 0u);
  // An empty object: one GET, no error.
  EXPECT_EQ(ReadWhole(*fs, base + "/empty", 1 << 20), "");
  Counts c2 = Snapshot(n);
  EXPECT_EQ(c2.get - c1.get, 1u);
  // 20 MB in 1 MiB reads: the open brings the first MiB, then one ranged GET
  // per read; no HEAD, nothing asked past the end.
  EXPECT_EQ(ReadWhole(*fs, base + "/big.rec", 1 << 20), big);
  Counts c3 = Snapshot(n);
  EXPECT_EQ(c3.get - c2.get, (big.size() + (1 << 20) - 1) / (1 << 20));
  EXPECT_EQ(c3.head - c2.head, 0u);
  // On the node's machine, the rest comes from the node's block files: the
  // open is the only request.
  auto local = Client();
  EXPECT_EQ(ReadWhole(*local, base + "/small.jpg", 1 << 20), small);  // the client learns the node
  c3 = Snapshot(n);
  EXPECT_EQ(ReadWhole(*local, base + "/big.rec", 1 << 20), big);
  Counts c3b = Snapshot(n);
  EXPECT_EQ(c3b.get - c3.get, 1u);
  c3 = c3b;
  // A folder walk of 1,000 objects: list pages only; Stat answers from them.
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(Write(*fs, base + "/walk/img-" + std::to_string(i), std::to_string(i)).ok());
  }
  Counts c4 = Snapshot(n);
  auto entries = fs->List(base + "/walk");
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), 1000u);
  for (const auto& e : *entries) {
    auto st = fs->Stat(base + "/walk/" + e.name);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->size, e.size);
  }
  Counts c5 = Snapshot(n);
  EXPECT_EQ(c5.list - c4.list, 1u);
  EXPECT_EQ(c5.get - c4.get, 0u);
  EXPECT_EQ(c5.head - c4.head, 0u);
  // A directory's Stat is a listing, not a failing HEAD.
  auto st = fs->Stat(base + "/walk");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->is_dir);
  EXPECT_EQ(fs->Stat(base + "/nothing-here").status().code(), StatusCode::kNotFound);
  Counts c6 = Snapshot(n);
  EXPECT_EQ(c6.client_errors, 0u) << "a clean run counts no client error";
  EXPECT_EQ(c6.server_errors, 0u);
}

// A reader's plan through the aquifer:// client: what it may read is staged
// and then served from RAM; what it may not read, what does not exist and
// a malformed plan stage nothing.
TEST(NodeTest, ReadPlansStageWhatTheKeyMayReadAndNothingElse) {
  TempDir dir;
  NodeOptions o = Options(dir, "n");
  o.anonymous = true;  // the malformed plans below go unsigned
  auto node = Node::Start(o);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  Node& n = **node;
  store::Stager* stager = n.objects().stager();
  ASSERT_NE(stager, nullptr);
  auto admin = Client();
  const std::string root = "aquifer://" + n.address();
  std::vector<io::FileSystem::PlannedRead> plan;
  std::vector<std::string> data;
  for (const std::string bucket : {"data", "other"}) {
    ASSERT_TRUE(admin->MakeDirs(root + "/" + bucket).ok());
    for (int i = 0; i < 5; ++i) {
      const std::string path = root + "/" + bucket + "/dir é/" + std::to_string(i) + ".jpg";
      data.push_back(Bytes(100'000, 10 + static_cast<uint32_t>(data.size())));
      ASSERT_TRUE(Write(*admin, path, data.back()).ok());
      plan.push_back({path});
    }
  }
  plan.push_back({root + "/data/no-such-file"});
  // A key that may read bucket "data" only.
  s3::StoredKey user;
  user.key = {"PLANUSER", "plan-user-secret"};
  user.grants.push_back(*s3::ParseScope("data", s3::kRead | s3::kList));
  ASSERT_TRUE(n.meta().PutSetting(s3::kKeysSetting, s3::KeysToJson({user})).ok());
  auto fs = client::NewStoreFileSystem(client::ClientCredentials{"PLANUSER", "plan-user-secret", "test"});
  auto idle = [](const store::StagerStats& s) {
    return s.queued == 0 && s.reading == 0 && s.staged + s.shared + s.resident + s.skipped >= s.planned;
  };

  auto taken = fs->Plan("rank0", plan);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(*taken, 5u);  // "other" is not the key's to read; the missing file has no blocks
  ASSERT_TRUE(stager->WaitUntil(idle, std::chrono::seconds(10)));
  EXPECT_EQ(stager->Stats().planned, 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(ReadWhole(*fs, plan[i].path, 1 << 20), data[i]);
  auto s = stager->Stats();
  EXPECT_EQ(s.hits + s.late_hits + s.resident, 5u);
  EXPECT_EQ(s.bytes_held, 0u);
  EXPECT_FALSE(ReadWhole(*admin, plan[5].path, 1 << 20).empty());  // (the other bucket is there)

  // A range stages only the blocks it covers (blocks of 256 KiB here).
  const std::string big = Bytes(1'000'000, 99);
  ASSERT_TRUE(Write(*admin, root + "/data/big.rec", big).ok());
  taken = fs->Plan("rank0", {{root + "/data/big.rec", 300'000, 100'000}});
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(*taken, 1u);

  // Malformed plans: refused whole, nothing staged.
  const uint64_t planned = stager->Stats().planned;
  http::Pool pool;
  auto post = [&](const std::string& target, const std::string& body) {
    http::ClientRequest r;
    r.method = "POST";
    r.target = target;
    r.body = body;
    auto res = pool.Send(n.address(), r);
    EXPECT_TRUE(res.ok());
    return res.ok() ? *res : http::ClientResponse{};
  };
  for (const std::string body :
       {"{", "[]", R"({"reads": 3})", R"({"reads": [{"bucket": 1, "key": "x"}]})",
        R"({"reads": [{"bucket": "data", "key": "dir é/0.jpg"}, {"bucket": "data", "key": "x", "offset": -1}]})",
        R"({"reads": [{"bucket": "data", "key": "dir é/0.jpg", "length": "all"}]})"}) {
    auto res = post(s3::internal::PlanPath() + "?stream=x", body);
    EXPECT_EQ(res.status, 400) << body;
    EXPECT_NE(res.body.find("MalformedPlan"), std::string::npos) << res.body;
  }
  EXPECT_EQ(post(s3::internal::PlanPath(), R"({"reads": []})").status, 400);  // no stream
  EXPECT_EQ(stager->Stats().planned, planned);
  // Unsigned on an anonymous node: allowed, and a stream can be cancelled.
  auto ok = post(s3::internal::PlanPath() + "?stream=x", R"({"reads": [{"bucket": "other", "key": "dir é/1.jpg"}]})");
  EXPECT_EQ(ok.status, 200);
  EXPECT_NE(ok.body.find(R"("queued":1)"), std::string::npos) << ok.body;
}

// Presents `token` on the node's same-host socket; the answer's text and
// the descriptors that came with it.
std::pair<std::string, std::vector<int>> Present(const std::string& socket, const std::string& message) {
  const int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, socket.data(), socket.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + socket.size());
  EXPECT_EQ(::connect(s, reinterpret_cast<sockaddr*>(&a), len), 0) << std::strerror(errno);
  EXPECT_EQ(::send(s, message.data(), message.size(), MSG_NOSIGNAL), static_cast<ssize_t>(message.size()));
  char text[512];
  std::vector<char> control(CMSG_SPACE(sizeof(int) * 256));
  iovec iov{text, sizeof text};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control.data();
  m.msg_controllen = control.size();
  const ssize_t got = ::recvmsg(s, &m, MSG_CMSG_CLOEXEC);
  ::close(s);
  std::vector<int> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); got > 0 && c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const size_t at = fds.size();
    fds.resize(at + count);
    std::memcpy(fds.data() + at, CMSG_DATA(c), count * sizeof(int));
  }
  return {got > 0 ? std::string(text, static_cast<size_t>(got)) : "", fds};
}

// A node for the same-host tests (raw requests go unsigned, only what is
// read is in RAM) holding 2,000,000 bytes at data/KEY: 8 blocks of 256 KiB,
// the last one short.
struct SameHostNode {
  std::unique_ptr<Node> node;
  std::unique_ptr<io::FileSystem> admin = Client();
  std::string root, path, v1 = Bytes(2'000'000, 1);
  static SameHostNode Start(NodeOptions o, const std::string& key) {
    o.anonymous = true;
    o.prefetch_window = 0;
    SameHostNode s;
    auto node = Node::Start(o);
    EXPECT_TRUE(node.ok()) << node.status().ToString();
    if (!node.ok()) return s;
    s.node = std::move(*node);
    s.root = "aquifer://" + s.node->address();
    s.path = s.root + "/data/" + key;
    EXPECT_TRUE(s.admin->MakeDirs(s.root + "/data").ok());
    EXPECT_TRUE(Write(*s.admin, s.path, s.v1).ok());
    return s;
  }
};

TEST(NodeTest, SameHostReadsShareSealedBlocksAndNeverMixVersions) {
  TempDir dir;
  NodeOptions o = Options(dir, "n");
  o.same_host_memory = 1'000'000;  // under four blocks of 256 KiB: the table must evict
  SameHostNode t = SameHostNode::Start(o, "shard é 0.tfrecord");
  ASSERT_NE(t.node, nullptr);
  Node& n = *t.node;
  server::SameHostReads* sh = n.same_host();
  ASSERT_NE(sh, nullptr);
  auto& admin = t.admin;
  const std::string &root = t.root, &path = t.path, &v1 = t.v1;

  client::ClientOptions co;
  co.open_bytes = 100'000;
  co.same_host_files = false;  // memfds only (block files: the next test)
  auto fs = client::NewStoreFileSystem(client::ClientCredentials{kKey.access_key, kKey.secret, "test"}, co);
  co.same_host = false;
  auto off = client::NewStoreFileSystem(client::ClientCredentials{kKey.access_key, kKey.secret, "test"}, co);
  // Cold: the blocks come through the node (and stay in its RAM).
  EXPECT_EQ(ReadWhole(*fs, path, 300'000), v1);
  const uint64_t sent0 = sh->Stats().blocks_sent;
  // Warm: the 8 blocks past the open's bytes (the first in part) come from
  // shared memory, in pieces that straddle blocks.
  EXPECT_EQ(ReadWhole(*fs, path, 300'000), v1);
  EXPECT_EQ(ReadWhole(*fs, path, 77'777), v1);
  auto s = sh->Stats();
  EXPECT_EQ(s.blocks_sent - sent0, 16u);
  EXPECT_EQ(s.blocks_gone, 0u);
  EXPECT_LE(s.shared_bytes, o.same_host_memory);  // made for each read, evicted beyond the bound
  EXPECT_GT(s.evicted, 0u);
  // A client that does not ask gets no grant and reads the same bytes.
  const uint64_t grants = s.grants;
  EXPECT_EQ(ReadWhole(*off, path, 300'000), v1);
  EXPECT_EQ(sh->Stats().grants, grants);

  // Overwritten while open: the blocks already shared are the old version's;
  // those read through the node are pinned to the old ETag. Either way the
  // reader gets the old bytes whole or an error, never a mix. Here only the
  // first half of the file is in RAM when it is opened.
  const std::string path2 = root + "/data/half.rec";
  ASSERT_TRUE(Write(*admin, path2, v1).ok());
  ASSERT_NE(n.cache(), nullptr);
  auto half = n.objects().Head("data", "half.rec");
  ASSERT_TRUE(half.ok());
  for (const auto& b : half->blocks) n.cache()->Erase(b.id);
  {
    auto f = fs->OpenRead(path2, io::AccessHint::kSequential);
    ASSERT_TRUE(f.ok());
    std::string part(1'000'000, '\0');
    ASSERT_TRUE((*f)->ReadAt(0, part.size(), part.data()).ok());  // first half cached now
  }
  auto f = fs->OpenRead(path2, io::AccessHint::kSequential);
  ASSERT_TRUE(f.ok());
  char byte = 0;
  ASSERT_TRUE((*f)->ReadAt(200'000, 1, &byte).ok());  // takes the shared blocks
  ASSERT_TRUE(Write(*admin, path2, Bytes(2'000'000, 2)).ok());
  std::string got(v1.size(), '\0');
  auto r = (*f)->ReadAt(0, got.size(), got.data());
  ASSERT_FALSE(r.ok());  // the second half, through the node, is of a version that is gone
  EXPECT_EQ(r.status().code(), StatusCode::kConflict) << r.status().ToString();
  EXPECT_EQ(got.substr(0, 1 << 20), v1.substr(0, 1 << 20));  // the shared half: the old version, whole

  // The socket: a token is good once; anything else is refused.
  http::Pool pool;
  http::ClientRequest req;
  req.method = "GET";
  req.target = "/data/shard%20%C3%A9%200.tfrecord";
  req.headers.Add("Range", "bytes=0-99");
  req.headers.Add(s3::kSameHostHeader, "1");
  auto res = pool.Send(n.address(), req);
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(res->status, 206);
  auto grant = s3::SameHostGrantFromJson(res->headers.Get(s3::kSameHostHeader), v1.size());
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  EXPECT_EQ(grant->blocks.size(), 8u);  // every block past byte 100, all in RAM
  const uint64_t refused = sh->Stats().refused;
  for (const std::string bad : {std::string("hello\n"), std::string(32, 'f') + "\n", grant->token,
                                grant->token + "\n\n", std::string(500, 'x')}) {
    auto [text, fds] = Present(grant->socket, bad);
    EXPECT_EQ(text.rfind("ERR ", 0), 0u) << text;
    EXPECT_TRUE(fds.empty());
  }
  EXPECT_EQ(sh->Stats().refused, refused + 5);
  auto [text, fds] = Present(grant->socket, grant->token + "\n");
  EXPECT_EQ(text, "OK 11111111");
  ASSERT_EQ(fds.size(), 8u);
  // Sealed: no client can change what the node and other clients read.
  EXPECT_LT(::pwrite(fds[0], "x", 1, 0), 0);
  EXPECT_LT(::ftruncate(fds[0], 0), 0);
  std::string first(grant->blocks[0].size, '\0');
  EXPECT_EQ(::pread(fds[0], first.data(), first.size(), 0), static_cast<ssize_t>(first.size()));
  EXPECT_EQ(first, v1.substr(grant->blocks[0].offset, first.size()));
  for (int fd : fds) ::close(fd);
  EXPECT_EQ(Present(grant->socket, grant->token + "\n").first.rfind("ERR ", 0), 0u);  // used
  // A request for the whole object, or without the header, is not granted.
  req.headers = {};
  req.headers.Add(s3::kSameHostHeader, "1");
  EXPECT_EQ(pool.Send(n.address(), req)->headers.Get(s3::kSameHostHeader), "");
  req.headers = {};
  req.headers.Add("Range", "bytes=0-99");
  EXPECT_EQ(pool.Send(n.address(), req)->headers.Get(s3::kSameHostHeader), "");
}

// (From the node's own machine the reader holds the old version's block
// files and reads it whole: SameHostReadsTakeBlockFilesCheckedWhole...)
TEST(NodeTest, AFileOverwrittenWhileReadIsAConflictNotAMix) {
  TempDir dir;
  auto node = Node::Start(Options(dir, "n"));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  auto fs = RemoteClient();
  const std::string path = "aquifer://" + (*node)->address() + "/data/f";
  ASSERT_TRUE(fs->MakeDirs(path).ok());
  ASSERT_TRUE(Write(*fs, path, Bytes(3 << 20, 3)).ok());
  auto f = fs->OpenRead(path, io::AccessHint::kSequential).value();
  ASSERT_TRUE(Write(*fs, path, Bytes(3 << 20, 4)).ok());
  std::string buf(1 << 20, '\0');
  auto r = f->ReadAt(2 << 20, buf.size(), buf.data());
  EXPECT_EQ(r.status().code(), StatusCode::kConflict) << r.status().ToString();
}

// A large write is sent part by part while it is written; a write back into
// a part already sent (zip's headers) sends that part again; the object
// appears at Close, whole, or never.
TEST(NodeTest, LargeWritesStreamTheirPartsAndSeekBackWritesAreSentAgain) {
  TempDir dir;
  auto node = Node::Start(Options(dir, "n"));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  Node& n = **node;
  client::ClientOptions co;
  co.multipart_threshold = 5 << 20;
  co.part_size = 5 << 20;
  co.max_parallel = 3;
  auto fs = client::NewStoreFileSystem(client::ClientCredentials{kKey.access_key, kKey.secret, "test"}, co);
  const std::string base = "aquifer://" + n.address() + "/ckpt";
  ASSERT_TRUE(fs->MakeDirs(base).ok());

  std::string want = Bytes(23 << 20, 5);
  auto f = fs->OpenWrite(base + "/model.pt").value();
  const uint64_t puts = n.stats().requests(Op::kPut);
  for (size_t at = 0; at < want.size(); at += 1 << 20) {
    ASSERT_TRUE(f->Append(std::string_view(want).substr(at, 1 << 20)).ok());
  }
  EXPECT_GE(n.stats().requests(Op::kPut) - puts, 2u);  // parts left before Close
  EXPECT_EQ(fs->Stat(base + "/model.pt").status().code(), StatusCode::kNotFound);
  // Back into part 1 and across parts 2 and 3, then a hole past the end.
  ASSERT_TRUE(f->WriteAt(100, "HEADER").ok());
  want.replace(100, 6, "HEADER");
  const std::string across(1 << 20, 'x');
  ASSERT_TRUE(f->WriteAt((10 << 20) - 512, across).ok());
  want.replace((10 << 20) - 512, across.size(), across);
  ASSERT_TRUE(f->WriteAt(want.size() + 1000, "tail").ok());
  want += std::string(1000, '\0') + "tail";
  ASSERT_TRUE(f->Close().ok());
  EXPECT_EQ(ReadWhole(*fs, base + "/model.pt", 4 << 20), want);

  // Shortened below what was sent: the parts past the end are dropped.
  f = fs->OpenWrite(base + "/short").value();
  ASSERT_TRUE(f->Append(Bytes(16 << 20, 6)).ok());
  ASSERT_TRUE(f->Truncate(7 << 20).ok());
  Status closed = f->Close();
  ASSERT_TRUE(closed.ok()) << closed.ToString();
  EXPECT_EQ(ReadWhole(*fs, base + "/short", 4 << 20), Bytes(16 << 20, 6).substr(0, 7 << 20));

  // A writer dropped without Close stores nothing, and leaves no upload and
  // no spool behind.
  f = fs->OpenWrite(base + "/torn").value();
  ASSERT_TRUE(f->Append(Bytes(12 << 20, 7)).ok());
  f.reset();
  EXPECT_EQ(fs->Stat(base + "/torn").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadWhole(*fs, base + "/model.pt", 4 << 20).size(), want.size());
  const char* tmp = std::getenv("TMPDIR");
  for (const auto& e : fs::directory_iterator(tmp ? tmp : "/tmp")) {
    EXPECT_EQ(e.path().filename().string().rfind("aquifer-put-", 0), std::string::npos) << e.path();
  }
}

// Polls `done` for up to `seconds` of real time (the node's threads run
// meanwhile); whether it came true.
bool Eventually(const std::function<bool()>& done, double seconds = 10) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// The node's timers run on its clock: with a ManualClock, an abandoned
// multipart upload is aborted when the clock passes its expiry and the
// scrubber's passes come a day apart on that clock, in a second of a test.
TEST(NodeTest, TimersRunOnTheNodesClock) {
  TempDir dir;
  ManualClock clock(1000, Clock::Real().WallNanos());
  NodeOptions o = Options(dir, "n");
  o.clock = &clock;
  o.upload_expiry_s = 3600;
  o.scrub_interval_s = 86400;
  auto node = Node::Start(o);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  Node& n = **node;
  auto fs = Client();
  const std::string base = "aquifer://" + n.address() + "/data";
  ASSERT_TRUE(fs->MakeDirs(base).ok());
  ASSERT_TRUE(Write(*fs, base + "/kept", Bytes(600'000, 3)).ok());
  auto upload = n.objects().CreateUpload("data", "abandoned");
  ASSERT_TRUE(upload.ok()) << upload.status().ToString();
  auto upload_alive = [&] { return n.objects().GetUpload(upload->id, "data", "abandoned").ok(); };
  auto passes = [&] { return n.scrubber()->Stats().passes; };

  EXPECT_EQ(passes(), 0u) << "the first pass is due 5 s after the start, on the node's clock";
  EXPECT_TRUE(upload_alive());

  clock.Advance(6);
  EXPECT_TRUE(Eventually([&] { return passes() == 1; })) << passes();
  EXPECT_TRUE(upload_alive()) << "an hour has not passed";

  clock.Advance(2 * 3600);
  EXPECT_TRUE(Eventually([&] { return !upload_alive(); })) << "the upload outlived its expiry";
  EXPECT_EQ(passes(), 1u) << "the next pass is a day after the first";

  clock.Advance(86400);
  EXPECT_TRUE(Eventually([&] { return passes() == 2; })) << passes();
  EXPECT_EQ(ReadWhole(*fs, base + "/kept", 1 << 20), Bytes(600'000, 3));
  EXPECT_EQ(n.scrubber()->Stats().corrupt, 0u);
}

TEST(NodeTest, SameHostReadsTakeBlockFilesCheckedWholeAndNeverMixVersions) {
  TempDir dir;
  NodeOptions o = Options(dir, "n");
  o.reclaim_delay_s = 0;  // an overwritten version's blocks go at once
  SameHostNode t = SameHostNode::Start(o, "ckpt é.pt");
  ASSERT_NE(t.node, nullptr);
  Node& n = *t.node;
  server::SameHostReads* sh = n.same_host();
  ASSERT_NE(sh, nullptr);
  auto& admin = t.admin;
  const std::string &root = t.root, &path = t.path, &v1 = t.v1;
  auto meta = n.objects().Head("data", "ckpt é.pt");
  ASSERT_TRUE(meta.ok());
  const std::vector<store::BlockRef> blocks = meta->blocks;
  ASSERT_EQ(blocks.size(), 8u);

  client::ClientOptions co;
  co.open_bytes = 100'000;
  auto fs = client::NewStoreFileSystem(client::ClientCredentials{kKey.access_key, kKey.secret, "test"}, co);
  // Every block past the open's bytes is read from its file, in pieces that
  // straddle blocks and in whole blocks; even the first, which the open read
  // through the node into RAM (a file costs the node no copy; a memfd would).
  for (const auto& b : blocks) n.cache()->Erase(b.id);
  EXPECT_EQ(ReadWhole(*fs, path, 300'000), v1);
  EXPECT_EQ(ReadWhole(*fs, path, 256 << 10), v1);
  auto s = sh->Stats();
  EXPECT_EQ(s.files_sent, 16u);
  EXPECT_EQ(s.blocks_sent, 0u);
  EXPECT_EQ(s.blocks_gone, 0u);

  // The socket passes each file read-only, with where its bytes start and
  // their checksum; a client that asked for memfds only is passed none.
  http::Pool pool;
  http::ClientRequest req;
  req.method = "GET";
  req.target = "/data/ckpt%20%C3%A9.pt";
  req.headers.Add("Range", "bytes=0-99");
  req.headers.Add(s3::kSameHostHeader, s3::kSameHostFiles);
  auto res = pool.Send(n.address(), req);
  ASSERT_TRUE(res.ok());
  auto grant = s3::SameHostGrantFromJson(res->headers.Get(s3::kSameHostHeader), v1.size());
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  ASSERT_EQ(grant->blocks.size(), 8u);
  for (const auto& b : blocks) n.cache()->Erase(b.id);
  auto [text, fds] = Present(grant->socket, grant->token + "\n");
  auto pieces = s3::SameHostAnswerFromText(text, 8, true);
  ASSERT_TRUE(pieces.ok()) << text;
  ASSERT_EQ(fds.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    ASSERT_EQ((*pieces)[i].form, s3::SameHostForm::kFile) << text;
    EXPECT_EQ((*pieces)[i].crc32c, blocks[i].crc32c);
    EXPECT_EQ(::fcntl(fds[i], F_GETFL) & O_ACCMODE, O_RDONLY);
    EXPECT_LT(::pwrite(fds[i], "x", 1, 0), 0);
    EXPECT_LT(::ftruncate(fds[i], 0), 0);
    std::string bytes(blocks[i].size, '\0');
    EXPECT_EQ(::pread(fds[i], bytes.data(), bytes.size(), static_cast<off_t>((*pieces)[i].data_offset)),
              static_cast<ssize_t>(bytes.size()));
    EXPECT_EQ(bytes, v1.substr(grant->blocks[i].offset, bytes.size()));
    ::close(fds[i]);
  }
  req.headers = {};
  req.headers.Add("Range", "bytes=0-99");
  req.headers.Add(s3::kSameHostHeader, s3::kSameHostMemfds);
  for (const auto& b : blocks) n.cache()->Erase(b.id);
  EXPECT_EQ(pool.Send(n.address(), req)->headers.Get(s3::kSameHostHeader), "");  // nothing in RAM

  // A flipped byte in a block file: the reader's check catches it and reads
  // the block through the node, whose own check refuses it. Damage is an
  // error, never bytes.
  {
    const std::string file = n.blocks().PathOf(blocks[3]);
    const int fd = ::open(file.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << file;
    char c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, 1000), 1);
    c = static_cast<char>(c ^ 0x20);
    ASSERT_EQ(::pwrite(fd, &c, 1, 1000), 1);
    for (size_t piece : {size_t{256} << 10, size_t{100'000}}) {
      for (const auto& b : blocks) n.cache()->Erase(b.id);
      auto f = fs->OpenRead(path, io::AccessHint::kSequential);
      ASSERT_TRUE(f.ok());
      std::string got(v1.size(), '\0');
      Status st = Status::Ok();
      for (uint64_t at = 0; at < got.size() && st.ok(); at += piece) {
        const size_t want = std::min<size_t>(piece, got.size() - at);
        auto r = (*f)->ReadAt(at, want, got.data() + at);
        st = r.ok() ? Status::Ok() : r.status();
      }
      EXPECT_FALSE(st.ok()) << piece << ": the damaged block was returned";
    }
    c = static_cast<char>(c ^ 0x20);
    ASSERT_EQ(::pwrite(fd, &c, 1, 1000), 1);
    ::close(fd);
  }

  // Overwritten and its blocks removed while open: the reader holds the old
  // version's files and reads it whole.
  auto f = fs->OpenRead(path, io::AccessHint::kSequential);
  ASSERT_TRUE(f.ok());
  char byte = 0;
  ASSERT_TRUE((*f)->ReadAt(200'000, 1, &byte).ok());  // takes the files
  const std::string v2 = Bytes(2'000'000, 2);
  ASSERT_TRUE(Write(*admin, path, v2).ok());
  EXPECT_TRUE(Eventually([&] {
    return std::none_of(blocks.begin(), blocks.end(), [&](const store::BlockRef& b) { return n.blocks().Has(b); });
  })) << "the old version's blocks were not reclaimed";
  std::string got(v1.size(), '\0');
  auto r = (*f)->ReadAt(0, got.size(), got.data());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(got, v1);
  EXPECT_EQ(ReadWhole(*fs, path, 300'000), v2);

  // A compressing pool's compressed blocks are read through the node.
  TempDir dir2;
  NodeOptions oz = Options(dir2, "z");
  auto zpool = store::ParsePool("fast=" + (dir2 / "fast") + ",compress=zstd");
  ASSERT_TRUE(zpool.ok());
  oz.pools.push_back(*zpool);
  auto z = Node::Start(oz);
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  const std::string zroot = "aquifer://" + (*z)->address();
  ASSERT_TRUE(admin->MakeDirs(zroot + "/data").ok());
  const std::string text_bytes = [] {
    std::string t;
    while (t.size() < 2'000'000) t += fmt::format("step {} loss {:.4f}\n", t.size(), 1.0 / (1 + t.size()));
    return t;
  }();
  ASSERT_TRUE(Write(*admin, zroot + "/data/log.txt", text_bytes).ok());
  EXPECT_EQ(ReadWhole(*fs, zroot + "/data/log.txt", 300'000), text_bytes);
  EXPECT_EQ((*z)->same_host()->Stats().files_sent, 0u);
}

TEST(NodeTest, StopsCleanlyAndRestartsWithItsData) {
  TempDir dir;
  const std::string data = Bytes(700'000, 5);
  std::string address;
  {
    auto node = Node::Start(Options(dir, "n"));
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    auto fs = Client();
    const std::string path = "aquifer://" + (*node)->address() + "/data/keep";
    ASSERT_TRUE(fs->MakeDirs(path).ok());
    ASSERT_TRUE(Write(*fs, path, data).ok());
    (*node)->Stop();
  }
  auto node = Node::Start(Options(dir, "n"));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  auto fs = Client();
  EXPECT_EQ(ReadWhole(*fs, "aquifer://" + (*node)->address() + "/data/keep", 1 << 20), data);
}

// Two nodes on one data directory would collect each other's blocks as
// garbage at start-up: the second is refused, naming the first.
TEST(NodeTest, ADataDirectoryServesOneNodeAtATime) {
  TempDir dir;
  auto first = Node::Start(Options(dir, "n"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  NodeOptions o = Options(dir, "n");
  o.port = 0;
  auto second = Node::Start(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kConflict);
  EXPECT_NE(second.status().message().find("in use by another node"), std::string::npos) << second.status().ToString();
  EXPECT_NE(second.status().message().find(std::to_string(getpid())), std::string::npos) << "names the holder";
  (*first)->Stop();
  first->reset();
  auto third = Node::Start(o);  // free again once the first is gone
  EXPECT_TRUE(third.ok()) << third.status().ToString();
}

// Three in-process nodes on the shared test etcd (its cluster keeps 2
// replicas), named PREFIX-N1..N3, repair only when a test runs it, each
// with the others in its map.
std::vector<std::unique_ptr<Node>> StartCluster(const TempDir& dir, const std::string& prefix,
                                                std::vector<std::string> names, bool anonymous = false) {
  std::vector<std::unique_ptr<Node>> nodes;
  for (const auto& name : names) {
    NodeOptions o = Options(dir, name);
    o.etcd = cluster::Etcd::Get().url();
    o.replicas = 2;
    o.anonymous = anonymous;
    o.node_id = prefix + "-" + name;
    o.repair_interval_s = 3600;  // repair runs when the test says
    auto n = Node::Start(o);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    if (!n.ok()) return {};
    nodes.push_back(std::move(*n));
  }
  for (auto& n : nodes) EXPECT_TRUE(n->membership()->Refresh().ok());
  return nodes;
}

TEST(NodeTest, ThreeNodeClusterFailsOverAndRepairs) {
  auto& etcd = cluster::Etcd::Get();
  if (!etcd.ok()) GTEST_SKIP() << etcd.why();
  TempDir dir;
  auto nodes = StartCluster(dir, "inproc", {"c1", "c2", "c3"});
  ASSERT_EQ(nodes.size(), 3u);
  auto fs = Client();
  const std::string data = Bytes(2'000'000, 6);
  const std::string via0 = "aquifer://" + nodes[0]->address() + "/inproc/obj";
  ASSERT_TRUE(fs->MakeDirs(via0).ok());
  ASSERT_TRUE(Write(*fs, via0, data).ok());
  for (auto& n : nodes) {
    EXPECT_EQ(ReadWhole(*fs, "aquifer://" + n->address() + "/inproc/obj", 1 << 20), data) << n->node_id();
  }
  // The third node leaves (its lease revoked): reads go on from the replicas left.
  nodes[2]->Stop();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(nodes[i]->membership()->Refresh().ok());
  EXPECT_EQ(ReadWhole(*fs, via0, 1 << 20), data);
  // Repair restores two live replicas of every block on the two nodes left.
  for (int pass = 0; pass < 4; ++pass) {
    for (int i = 0; i < 2; ++i) (void)nodes[i]->repairer()->RunPass();
  }
  auto meta = nodes[0]->meta().GetObject("inproc", "obj");
  ASSERT_TRUE(meta.ok());
  for (const auto& b : meta->blocks) {
    EXPECT_EQ(b.nodes.size(), 2u);
    for (const auto& holder : b.nodes) EXPECT_NE(holder, "inproc-c3") << b.id;
  }
  EXPECT_EQ(ReadWhole(*fs, "aquifer://" + nodes[1]->address() + "/inproc/obj", 1 << 20), data);
}

// A copy the layout no longer names (a rebalance leaves one until garbage
// collection) serves a GET when the named holders are down; and with no copy
// anywhere the answer comes at once as unavailable, never as a stall.
TEST(NodeTest, AStrayCopyServesAReadWhenTheNamedHoldersAreDown) {
  auto& etcd = cluster::Etcd::Get();
  if (!etcd.ok()) GTEST_SKIP() << etcd.why();
  TempDir dir;
  auto nodes = StartCluster(dir, "stray", {"s1", "s2", "s3"});
  ASSERT_EQ(nodes.size(), 3u);
  auto fs = Client();
  const std::string data = Bytes(200'000, 8);  // one block
  ASSERT_TRUE(fs->MakeDirs("aquifer://" + nodes[0]->address() + "/stray/x").ok());
  // Four one-block objects, each on two of the three nodes: two share
  // their pair of holders.
  std::map<std::vector<std::string>, std::vector<store::ObjectMeta>> by_holders;
  for (int i = 0; i < 4; ++i) {
    const std::string key = "o" + std::to_string(i);
    ASSERT_TRUE(Write(*fs, "aquifer://" + nodes[0]->address() + "/stray/" + key, data).ok());
    auto m = nodes[0]->meta().GetObject("stray", key).value();
    ASSERT_EQ(m.blocks.size(), 1u);
    auto holders = m.blocks[0].nodes;
    std::sort(holders.begin(), holders.end());
    by_holders[holders].push_back(m);
  }
  auto pair = std::find_if(by_holders.begin(), by_holders.end(), [](const auto& e) { return e.second.size() >= 2; });
  ASSERT_NE(pair, by_holders.end());
  const store::ObjectMeta kept = pair->second[0], lost = pair->second[1];
  Node* left = nullptr;
  for (auto& n : nodes) {
    if (std::find(pair->first.begin(), pair->first.end(), n->node_id()) == pair->first.end()) left = n.get();
  }
  ASSERT_NE(left, nullptr);
  // The stray copy: the block's bytes in the third node's pool, by its id.
  const auto& ref = kept.blocks[0];
  ASSERT_TRUE(left->blocks().WriteWithId(ref.id, ref.pool, data).ok());
  for (auto& n : nodes) {
    if (n.get() != left) n->Stop();
  }
  ASSERT_TRUE(left->membership()->Refresh().ok());
  const std::string via = "aquifer://" + left->address() + "/stray/";
  EXPECT_EQ(ReadWhole(*fs, via + kept.key, 1 << 20), data);
  // No copy of the other anywhere reachable: 503 at once, not a stall.
  client::ClientOptions co;
  co.retry_deadline_s = 0;
  auto quick = client::NewStoreFileSystem(client::ClientCredentials{kKey.access_key, kKey.secret, "test"}, co);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = quick->OpenRead(via + lost.key, io::AccessHint::kSequential);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(r.ok());
  if (!r.ok()) EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_LT(took, 1.0);
}

TEST(NodeTest, ClusterOpensBringOneBlockAndSpreadOverTheNamedNodes) {
  auto& etcd = cluster::Etcd::Get();
  if (!etcd.ok()) GTEST_SKIP() << etcd.why();
  TempDir dir;
  auto nodes = StartCluster(dir, "spread", {"s1", "s2", "s3"}, /*anonymous=*/true);  // the raw request goes unsigned
  ASSERT_EQ(nodes.size(), 3u);
  auto fs = Client();
  const std::string data = Bytes(3'000'000, 7);  // 12 blocks of 256 KiB
  const std::string all =
      "aquifer://" + nodes[0]->address() + "," + nodes[1]->address() + "," + nodes[2]->address() + "/spread/obj";
  ASSERT_TRUE(fs->MakeDirs(all).ok());
  ASSERT_TRUE(Write(*fs, all, data).ok());

  // An open asks for 1 MiB; a cluster node answers with the first block only.
  http::Pool pool;
  http::ClientRequest req;
  req.method = "GET";
  req.target = "/spread/obj";
  req.headers.Add("Range", "bytes=0-1048575");
  req.headers.Add("x-aquifer-open", "1");
  auto res = pool.Send(nodes[1]->address(), req);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 206);
  EXPECT_EQ(res->headers.Get("Content-Range"), "bytes 0-262143/3000000");
  EXPECT_EQ(res->body, data.substr(0, 256 << 10));
  EXPECT_FALSE(res->headers.Get("x-aquifer-layout").empty());
  // A plain ranged GET is answered as asked.
  req.headers = {};
  req.headers.Add("Range", "bytes=0-1048575");
  res = pool.Send(nodes[1]->address(), req);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->body.size(), 1u << 20);

  // Requests through a path naming the three nodes go to each in turn: 9
  // reads of a small object (each one GET, its open) are 3 per node.
  const std::string small_path = all.substr(0, all.size() - 3) + "small";
  const std::string small = Bytes(100'000, 8);
  ASSERT_TRUE(Write(*fs, small_path, small).ok());
  std::vector<Counts> before;
  for (auto& n : nodes) before.push_back(Snapshot(*n));
  for (int i = 0; i < 9; ++i) EXPECT_EQ(ReadWhole(*fs, small_path, 1 << 20), small);
  for (size_t i = 0; i < nodes.size(); ++i) {
    // 3 opens each (the block's owner also answers the others' block reads;
    // without spreading, one node would have all 9 opens and one none).
    EXPECT_GE(Snapshot(*nodes[i]).get - before[i].get, 3u) << nodes[i]->node_id();
  }
  EXPECT_EQ(ReadWhole(*fs, all, 1 << 20), data);
}

}  // namespace
}  // namespace aq::node
