#include "cluster/etcd_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "s3/checksum.h"

namespace aq::cluster {
namespace {

using nlohmann::json;

// The gateway writes 64-bit integers as strings ("revision": "12").
int64_t Int(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

Result<KeyValue> ParseKv(const json& j) {
  KeyValue kv;
  kv.key = AQ_TRY(Base64Decode(j.value("key", "")));
  kv.value = AQ_TRY(Base64Decode(j.value("value", "")));
  kv.create_revision = Int(j, "create_revision");
  kv.mod_revision = Int(j, "mod_revision");
  kv.version = Int(j, "version");
  kv.lease = Int(j, "lease");
  return kv;
}

Result<std::vector<KeyValue>> ParseKvs(const json& j) {
  std::vector<KeyValue> out;
  if (auto it = j.find("kvs"); it != j.end() && it->is_array()) {
    for (const auto& kv : *it) out.push_back(AQ_TRY(ParseKv(kv)));
  }
  return out;
}

json RangeRequest(const std::string& key, const std::string& end, int64_t limit, bool keys_only) {
  json r = {{"key", Base64Encode(key)}};
  if (!end.empty()) r["range_end"] = Base64Encode(end);
  if (limit > 0) r["limit"] = std::to_string(limit);
  if (keys_only) r["keys_only"] = true;
  return r;
}

json OpJson(const TxnOp& op) {
  switch (op.kind) {
    case TxnOp::Kind::kGet: return {{"request_range", RangeRequest(op.key, op.range_end, 0, false)}};
    case TxnOp::Kind::kPut: {
      json p = {{"key", Base64Encode(op.key)}, {"value", Base64Encode(op.value)}};
      if (op.lease != 0) p["lease"] = std::to_string(op.lease);
      return {{"request_put", p}};
    }
    case TxnOp::Kind::kDelete: {
      json d = {{"key", Base64Encode(op.key)}};
      if (!op.range_end.empty()) d["range_end"] = Base64Encode(op.range_end);
      return {{"request_delete_range", d}};
    }
  }
  return {};
}

json CompareJson(const Compare& c) {
  static const char* kTargets[] = {"VERSION", "CREATE", "MOD", "VALUE"};
  static const char* kOps[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
  json j = {{"key", Base64Encode(c.key)},
            {"target", kTargets[static_cast<int>(c.target)]},
            {"result", kOps[static_cast<int>(c.op)]}};
  if (!c.range_end.empty()) j["range_end"] = Base64Encode(c.range_end);
  switch (c.target) {
    case Compare::Target::kVersion: j["version"] = std::to_string(c.number); break;
    case Compare::Target::kCreateRevision: j["create_revision"] = std::to_string(c.number); break;
    case Compare::Target::kModRevision: j["mod_revision"] = std::to_string(c.number); break;
    case Compare::Target::kValue: j["value"] = Base64Encode(c.value); break;
  }
  return j;
}

Result<json> Parse(const std::string& body, const std::string& what) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return IoError(fmt::format("etcd {}: the answer is not JSON: {}", what, body.substr(0, 200)));
  }
  return j;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) { return s3::Base64Encode(bytes); }

Result<std::string> Base64Decode(std::string_view text) {
  if (text.empty()) return std::string();
  auto out = s3::Base64Decode(text);
  if (!out.ok()) return Corruption(fmt::format("malformed base64 from etcd: {}", out.status().message()));
  return out;
}

std::string EtcdClient::PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

Result<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const std::string& url, double timeout_s) {
  std::string rest = url;
  bool tls = false;
  for (const char* scheme : {"etcd://", "http://", "etcds://", "https://"}) {
    if (rest.rfind(scheme, 0) == 0) {
      rest = rest.substr(std::strlen(scheme));
      tls = scheme[std::strlen(scheme) - 4] == 's';
      break;
    }
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  std::vector<std::string> endpoints;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(',', start);
    std::string ep = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (ep.empty() || ep.find(':') == std::string::npos) {
      return InvalidArgument(fmt::format("'{}': expected etcd://HOST:PORT[,HOST:PORT...] (etcds:// over TLS)", url));
    }
    endpoints.push_back(ep);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  auto env = [](const char* name) { return std::string(std::getenv(name) != nullptr ? std::getenv(name) : ""); };
  std::shared_ptr<http::TlsClient> client_tls;
  if (tls) {
    client_tls = AQ_TRY(http::TlsClient::Create(env("ETCDCTL_CACERT"), env("ETCDCTL_CERT"), env("ETCDCTL_KEY")));
  }
  std::unique_ptr<EtcdClient> c(new EtcdClient(std::move(endpoints), timeout_s, std::move(client_tls)));
  if (const std::string user = env("ETCDCTL_USER"); !user.empty()) {
    const size_t colon = user.find(':');
    c->user_ = user.substr(0, colon);
    c->password_ = colon == std::string::npos ? env("ETCDCTL_PASSWORD") : user.substr(colon + 1);
    AQ_TRY(c->Authenticate());
  }
  AQ_TRY(c->Revision());
  return c;
}

Status EtcdClient::Authenticate() {
  {
    MutexLock lock(mu_);
    token_.clear();
  }
  auto body = Call("/v3/auth/authenticate", json{{"name", user_}, {"password", password_}}.dump());
  if (!body.ok()) {
    // Never the password: the user and etcd's answer.
    return Status(
        body.status().code() == StatusCode::kUnavailable ? StatusCode::kUnavailable : StatusCode::kPermissionDenied,
        fmt::format("etcd user '{}' (ETCDCTL_USER): {}", user_, body.status().message()));
  }
  json j = json::parse(*body, nullptr, false);
  if (!j.is_object() || !j.contains("token") || !j["token"].is_string()) {
    return Status(StatusCode::kPermissionDenied, fmt::format("etcd user '{}': no token in the answer", user_));
  }
  MutexLock lock(mu_);
  token_ = j["token"].get<std::string>();
  return Status::Ok();
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, double timeout_s, std::shared_ptr<http::TlsClient> tls)
    : endpoints_(std::move(endpoints)) {
  http::ClientOptions o;
  o.tls = std::move(tls);
  o.connect_timeout_s = std::min(2.0, timeout_s);
  o.io_timeout_s = timeout_s;
  o.max_idle_per_host = 16;
  pool_ = std::make_unique<http::Pool>(o);
}
EtcdClient::~EtcdClient() = default;

Result<std::string> EtcdClient::Call(const std::string& path, const std::string& body) {
  Status last;
  size_t first;
  std::string token;
  {
    MutexLock lock(mu_);
    first = preferred_;
    token = token_;
  }
  bool reauthenticated = false;
  for (size_t attempt = 0; attempt < endpoints_.size(); ++attempt) {
    const size_t e = (first + attempt) % endpoints_.size();
    http::ClientRequest r;
    r.method = "POST";
    r.target = path;
    r.headers.Add("Content-Type", "application/json");
    if (!token.empty() && path != "/v3/auth/authenticate") r.headers.Add("Authorization", token);
    r.body = body;
    auto res = pool_->Send(endpoints_[e], r, 1ull << 30);
    if (!res.ok()) {
      last = res.status();
      continue;  // the next endpoint
    }
    {
      MutexLock lock(mu_);
      preferred_ = e;
    }
    if (res->status != 200) {
      json j = json::parse(res->body, nullptr, false);
      std::string msg =
          !j.is_discarded() && j.is_object() ? j.value("message", j.value("error", res->body)) : res->body;
      const std::string text = fmt::format("etcd {} {}: HTTP {}: {}", endpoints_[e], path, res->status, msg);
      // An expired token (etcd's simple tokens live minutes): a new one, once.
      if (!user_.empty() && !reauthenticated && path != "/v3/auth/authenticate" &&
          msg.find("invalid auth token") != std::string::npos) {
        reauthenticated = true;
        AQ_TRY(Authenticate());
        MutexLock lock(mu_);
        token = token_;
        --attempt;  // the same endpoint again (unsigned: wraps and the loop's ++ brings it back)
        continue;
      }
      if (msg.find("CommonName") != std::string::npos) {
        // etcd's JSON gateway (what this client speaks) refuses client
        // certificates with a CN when --client-cert-auth is on.
        return Status(StatusCode::kPermissionDenied,
                      text +
                          " (etcd's HTTP gateway takes only client certificates without a CommonName: give "
                          "ETCDCTL_CERT one whose subject has no CN, and the user with ETCDCTL_USER)");
      }
      if (res->status == 401 || res->status == 403 || msg.find("permission denied") != std::string::npos ||
          msg.find("user name is empty") != std::string::npos) {
        return Status(StatusCode::kPermissionDenied,
                      text + (user_.empty() ? " (give the etcd user with ETCDCTL_USER=NAME:PASSWORD)" : ""));
      }
      if (res->status == 400) return InvalidArgument(text);
      if (res->status >= 500) return Unavailable(text);
      return IoError(text);
    }
    return std::move(res->body);
  }
  // Nothing answered: a request that was sent may or may not have been applied.
  return Status(last.code() == StatusCode::kTimedOut ? StatusCode::kTimedOut : StatusCode::kUnavailable,
                fmt::format("etcd unreachable ({})", last.message()));
}

Result<std::optional<KeyValue>> EtcdClient::Get(const std::string& key) {
  auto kvs = AQ_TRY(Range(key, "", 0, false));
  if (kvs.empty()) return std::optional<KeyValue>();
  return std::optional<KeyValue>(std::move(kvs[0]));
}

Result<std::vector<KeyValue>> EtcdClient::Range(const std::string& start, const std::string& end, int64_t limit,
                                                bool keys_only) {
  auto body = AQ_TRY(Call("/v3/kv/range", RangeRequest(start, end, limit, keys_only).dump()));
  auto j = AQ_TRY(Parse(body, "range"));
  return ParseKvs(j);
}

Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  json r = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) r["lease"] = std::to_string(lease);
  AQ_TRY(Call("/v3/kv/put", r.dump()));
  return Status::Ok();
}

Result<int64_t> EtcdClient::Delete(const std::string& key, const std::string& range_end) {
  json r = {{"key", Base64Encode(key)}};
  if (!range_end.empty()) r["range_end"] = Base64Encode(range_end);
  auto j = AQ_TRY(Parse(AQ_TRY(Call("/v3/kv/deleterange", r.dump())), "delete"));
  return Int(j, "deleted");
}

Result<TxnResult> EtcdClient::Txn(const std::vector<Compare>& compares, const std::vector<TxnOp>& success,
                                  const std::vector<TxnOp>& failure) {
  json r = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const auto& c : compares) r["compare"].push_back(CompareJson(c));
  for (const auto& op : success) r["success"].push_back(OpJson(op));
  for (const auto& op : failure) r["failure"].push_back(OpJson(op));
  auto j = AQ_TRY(Parse(AQ_TRY(Call("/v3/kv/txn", r.dump())), "txn"));
  TxnResult t;
  t.succeeded = j.value("succeeded", false);
  if (j.contains("header")) t.revision = Int(j["header"], "revision");
  if (auto it = j.find("responses"); it != j.end() && it->is_array()) {
    for (const auto& resp : *it) {
      if (auto range = resp.find("response_range"); range != resp.end()) t.ranges.push_back(AQ_TRY(ParseKvs(*range)));
    }
  }
  return t;
}

Result<int64_t> EtcdClient::LeaseGrant(int64_t ttl_seconds) {
  auto j = AQ_TRY(Parse(AQ_TRY(Call("/v3/lease/grant", json{{"TTL", std::to_string(ttl_seconds)}}.dump())), "lease"));
  if (j.contains("error") && !j["error"].get<std::string>().empty()) {
    return IoError(fmt::format("etcd lease grant: {}", j["error"].get<std::string>()));
  }
  const int64_t id = Int(j, "ID");
  if (id == 0) return IoError("etcd lease grant: no lease id in the answer");
  return id;
}

Result<int64_t> EtcdClient::LeaseKeepAlive(int64_t id) {
  auto j = AQ_TRY(Parse(AQ_TRY(Call("/v3/lease/keepalive", json{{"ID", std::to_string(id)}}.dump())), "keepalive"));
  // The gateway streams the answer: {"result": {...}}.
  const json& r = j.contains("result") ? j["result"] : j;
  return Int(r, "TTL");
}

Status EtcdClient::LeaseRevoke(int64_t id) {
  AQ_TRY(Call("/v3/lease/revoke", json{{"ID", std::to_string(id)}}.dump()));
  return Status::Ok();
}

Result<int64_t> EtcdClient::Revision() {
  // The maintenance status: it needs no key permission, so an etcd user
  // limited to aquifer's prefix may ask it.
  auto j = AQ_TRY(Parse(AQ_TRY(Call("/v3/maintenance/status", "{}")), "status"));
  return j.contains("header") ? Int(j["header"], "revision") : 0;
}

}  // namespace aq::cluster
