// Where a client's keys come from, in the order AWS tools look (and one
// place documents it, docs/cli.md "Credentials"):
//   1. --credentials FILE (a node's credentials file: "KEY SECRET" lines,
//      the first used) or --profile NAME (a section of ~/.aws/credentials);
//   2. the environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY;
//   3. AQUIFER_CREDENTIALS, naming a credentials file;
//   4. ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE overrides the path),
//      section [default] or the one AWS_PROFILE names.
// None found: requests go unsigned (a node serving --anonymous accepts them).
// The source is kept, so that a refused request can say which keys it used
// (never the secret) and how to give others.
//
// Thread safety: pure functions of the environment and files.
#pragma once

#include <string>

#include "common/status.h"

namespace aq::client {

struct ClientCredentials {
  std::string access_key, secret;  // empty = unsigned
  std::string source;              // "AWS_ACCESS_KEY_ID", "~/.aws/credentials [default]", ...
};

struct CredentialOptions {
  std::string file;     // --credentials FILE
  std::string profile;  // --profile NAME
};

// The keys to use. Errors: a file or profile named explicitly that cannot
// be read or does not hold keys.
Result<ClientCredentials> FindCredentials(const CredentialOptions& options = {});

// What a 403 adds: the keys used and how to set others.
std::string CredentialsHint(const ClientCredentials& c);

// ~/.aws/credentials-style text: the keys of one [section].
Result<ClientCredentials> ParseAwsCredentials(const std::string& text, const std::string& profile,
                                              const std::string& source);

}  // namespace aq::client
