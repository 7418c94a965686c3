// aquifer key add|list|rm|grant|revoke: users' keys and what each may do
// (s3/policy.h), kept with the metadata: a single node's under --data, a
// cluster's in etcd (--meta). Every node reads them again within seconds,
// so a new key works and a removed one stops working without a restart.
// The changes themselves are node::KeyAdmin's; this file parses the flags
// and prints.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "node/key_admin.h"
#include "node/metadata.h"
#include "s3/auth.h"
#include "s3/policy.h"

namespace aq::cli {
namespace {

using node::DescribeGrants;
using node::KeyAdmin;

struct KeyFlags {
  std::string data = "aquifer-data";
  std::string meta;
  std::string key, name, actions, scope, out;
  std::vector<std::string> grants;  // ACTIONS:SCOPE
};

// "ACTIONS:SCOPE" as --grant takes it.
Result<s3::Grant> ParseGrantFlag(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    return InvalidArgument(fmt::format("--grant '{}': expected ACTIONS:SCOPE, e.g. ro:imagenet/train/", text));
  }
  const uint8_t actions = AQ_TRY(s3::ParseActions(text.substr(0, colon)));
  return s3::ParseScope(text.substr(colon + 1), actions);
}

std::string CreatedAt(int64_t ns) {
  if (ns <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

nlohmann::json KeyJson(const s3::StoredKey& k) {
  nlohmann::json grants = nlohmann::json::array();
  for (const auto& g : k.grants) {
    grants.push_back({{"scope", s3::ScopeToString(g)}, {"actions", s3::ActionsToString(g.actions)}});
  }
  return {{"access_key", k.key.access_key}, {"name", k.name}, {"created_ns", k.created_ns}, {"grants", grants}};
}

Result<KeyAdmin> Open(Globals& g, const KeyFlags& f) {
  return KeyAdmin(AQ_TRY(node::OpenMetaStore(*g.fs, f.data, f.meta)));
}

// A note when a grant names a bucket that does not exist (yet): allowed, a
// key may be prepared for a bucket, but a typo would grant nothing.
void NoteMissingBuckets(KeyAdmin& admin, const std::vector<s3::Grant>& grants) {
  for (const auto& b : admin.MissingBuckets(grants))
    std::fprintf(stderr, "note: there is no bucket '%s' yet; the grant applies once it exists\n", b.c_str());
}

Status Add(Globals& g, const KeyFlags& f) {
  std::vector<s3::Grant> grants;
  for (const auto& text : f.grants) grants.push_back(AQ_TRY(ParseGrantFlag(text)));
  auto admin = AQ_TRY(Open(g, f));
  bool wrote = false;
  auto k = admin.Add(f.name, grants, [&](const s3::StoredKey& k) -> Status {
    if (f.out.empty()) return Status::Ok();
    // The file first: a key whose secret was never written anywhere is no use.
    AQ_TRY(s3::CreateCredentialsFile(f.out, {k.key}, "aquifer key " + (k.name.empty() ? k.key.access_key : k.name)));
    wrote = true;
    return Status::Ok();
  });
  if (!k.ok()) {
    if (wrote) (void)g.fs->Remove(f.out);
    return k.status();
  }
  NoteMissingBuckets(admin, k->grants);
  if (g.json) {
    auto j = KeyJson(*k);
    if (f.out.empty()) j["secret"] = k->key.secret;
    if (!f.out.empty()) j["credentials_file"] = f.out;
    std::printf("%s\n", j.dump(1).c_str());
    return Status::Ok();
  }
  const std::string named = k->name.empty() ? "" : " (" + k->name + ")";
  if (!f.out.empty()) {
    std::printf("key %s%s written to %s (mode 0600); it may do %s\n", k->key.access_key.c_str(), named.c_str(),
                f.out.c_str(), DescribeGrants(k->grants).c_str());
    std::printf("use it: aquifer --credentials %s ..., or AQUIFER_CREDENTIALS=%s\n", f.out.c_str(), f.out.c_str());
  } else {
    std::fprintf(stderr, "key %s%s may do %s; its secret is shown once, here:\n", k->key.access_key.c_str(),
                 named.c_str(), DescribeGrants(k->grants).c_str());
    std::printf("%s %s\n", k->key.access_key.c_str(), k->key.secret.c_str());
  }
  return Status::Ok();
}

Status List(Globals& g, const KeyFlags& f) {
  const auto keys = AQ_TRY(AQ_TRY(Open(g, f)).List());
  if (g.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& k : keys) j.push_back(KeyJson(k));
    std::printf("%s\n", j.dump(1).c_str());
    return Status::Ok();
  }
  if (keys.empty()) {
    std::printf("no stored keys: only the node's credentials file's keys (administrators) are accepted\n");
    return Status::Ok();
  }
  std::printf("%-22s %-20s %-20s %s\n", "KEY", "NAME", "CREATED", "MAY");
  for (const auto& k : keys) {
    std::printf("%-22s %-20s %-20s %s\n", k.key.access_key.c_str(), k.name.empty() ? "-" : k.name.c_str(),
                CreatedAt(k.created_ns).c_str(), DescribeGrants(k.grants).c_str());
  }
  std::printf("(the keys of the node's credentials file may do everything; they are not listed here)\n");
  return Status::Ok();
}

Status Remove(Globals& g, const KeyFlags& f) {
  AQ_TRY(AQ_TRY(Open(g, f)).Remove(f.key));
  std::printf("key %s removed; nodes refuse it within seconds\n", f.key.c_str());
  return Status::Ok();
}

Status GrantCmd(Globals& g, const KeyFlags& f) {
  const s3::Grant grant = AQ_TRY(s3::ParseScope(f.scope, AQ_TRY(s3::ParseActions(f.actions))));
  auto admin = AQ_TRY(Open(g, f));
  const auto now = AQ_TRY(admin.Grant(f.key, grant));
  NoteMissingBuckets(admin, {grant});
  std::printf("key %s may now do %s\n", f.key.c_str(), DescribeGrants(now).c_str());
  return Status::Ok();
}

Status Revoke(Globals& g, const KeyFlags& f) {
  const uint8_t actions = f.actions.empty() ? s3::kAllActions : AQ_TRY(s3::ParseActions(f.actions));
  const s3::Grant scope = AQ_TRY(s3::ParseScope(f.scope, actions));
  const auto now = AQ_TRY(AQ_TRY(Open(g, f)).Revoke(f.key, scope));
  std::printf("key %s may now do %s\n", f.key.c_str(), DescribeGrants(now).c_str());
  return Status::Ok();
}

}  // namespace

void RegisterKeyCommands(CLI::App& app, Globals& g) {
  auto* group = app.add_subcommand(
      "key", "Users' keys and what each may do (read, write, delete, list, admin) on which buckets and key prefixes");
  group->require_subcommand(1);
  group->footer(
      "Actions: read (GET/HEAD objects, copy from), write (PUT, copy to, multipart), delete, list (the listed "
      "prefix must lie in the scope), admin (create/delete the bucket, lifecycle); ro = read,list; rw = "
      "read,write,delete,list; all.\nScopes: '*' (every bucket), BUCKET, BUCKET/PREFIX.\nThe keys of a node's "
      "credentials file are its administrators (every action); the cluster's node key serves node-to-node "
      "traffic only.");
  auto* f = g.Own<KeyFlags>();
  auto where = [f](CLI::App* c) {
    c->add_option("--data", f->data, "The node's data directory (aquifer serve --data)")->capture_default_str();
    c->add_option("--meta", f->meta, "A cluster's etcd (etcd://HOST:PORT): keys every node accepts");
  };
  auto* add = group->add_subcommand("add", "Create a key: a new id and secret, with what it may do");
  add->add_option("name", f->name, "Who or what the key is for (free text, shown by key list)");
  add->add_option("--grant", f->grants, "ACTIONS:SCOPE, e.g. ro:imagenet or rw:scratch/run1/ (repeatable)");
  add->add_option("--out", f->out,
                  "Write the key to this new credentials file (mode 0600) instead of printing its secret");
  where(add);
  AddOutputFlags(add, g, false);
  add->callback([f, &g] {
    if (Status s = Add(g, *f); !s.ok()) Fail(g, s);
  });
  auto* list = group->add_subcommand("list", "The stored keys and what each may do (never their secrets)");
  where(list);
  AddOutputFlags(list, g, false);
  list->callback([f, &g] {
    if (Status s = List(g, *f); !s.ok()) Fail(g, s);
  });
  auto* rm = group->add_subcommand("rm", "Remove a key: nodes refuse it within seconds");
  rm->add_option("key", f->key, "Access key id")->required();
  where(rm);
  rm->callback([f, &g] {
    if (Status s = Remove(g, *f); !s.ok()) Fail(g, s);
  });
  auto* grant = group->add_subcommand("grant", "Let a key do ACTIONS on SCOPE (added to what it may already do)");
  grant->add_option("key", f->key, "Access key id")->required();
  grant->add_option("actions", f->actions, "read, write, delete, list, admin (comma-separated); ro, rw, all")
      ->required();
  grant->add_option("scope", f->scope, "'*', BUCKET or BUCKET/PREFIX")->required();
  where(grant);
  grant->callback([f, &g] {
    if (Status s = GrantCmd(g, *f); !s.ok()) Fail(g, s);
  });
  auto* revoke = group->add_subcommand("revoke", "Take back a key's grant on SCOPE (all its actions, or --actions)");
  revoke->add_option("key", f->key, "Access key id")->required();
  revoke->add_option("scope", f->scope, "The scope as granted: '*', BUCKET or BUCKET/PREFIX")->required();
  revoke->add_option("--actions", f->actions, "Only these actions (default: all)");
  where(revoke);
  revoke->callback([f, &g] {
    if (Status s = Revoke(g, *f); !s.ok()) Fail(g, s);
  });
}

}  // namespace aq::cli
