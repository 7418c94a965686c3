#include "client/credentials.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "s3/auth.h"

namespace aq::client {
namespace {

std::string Trim(std::string s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

Result<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("'{}' cannot be read", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string AwsCredentialsPath() {
  if (const char* p = std::getenv("AWS_SHARED_CREDENTIALS_FILE"); p != nullptr && *p != '\0') return p;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.aws/credentials";
}

Result<ClientCredentials> FromNodeFile(const std::string& path, const std::string& source) {
  auto keys = s3::LoadCredentials(path);
  if (!keys.ok()) return keys.status();
  return ClientCredentials{(*keys)[0].access_key, (*keys)[0].secret, source};
}

}  // namespace

Result<ClientCredentials> ParseAwsCredentials(const std::string& text, const std::string& profile,
                                              const std::string& source) {
  std::istringstream in(text);
  std::string line, section;
  ClientCredentials c;
  bool found = false;
  while (std::getline(in, line)) {
    line = Trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = Trim(line.substr(1, line.size() - 2));
      if (section.rfind("profile ", 0) == 0) section = Trim(section.substr(8));
      found = found || section == profile;
      continue;
    }
    if (section != profile) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = Trim(line.substr(0, eq)), v = Trim(line.substr(eq + 1));
    if (k == "aws_access_key_id") c.access_key = v;
    if (k == "aws_secret_access_key") c.secret = v;
  }
  if (!found) return NotFound(fmt::format("{}: no profile [{}]", source, profile));
  if (c.access_key.empty() || c.secret.empty()) {
    return InvalidArgument(
        fmt::format("{}: profile [{}] lacks aws_access_key_id or aws_secret_access_key", source, profile));
  }
  c.source = fmt::format("{} [{}]", source, profile);
  return c;
}

Result<ClientCredentials> FindCredentials(const CredentialOptions& o) {
  const std::string aws_file = AwsCredentialsPath();
  if (!o.file.empty()) return FromNodeFile(o.file, fmt::format("credentials file {}", o.file));
  if (!o.profile.empty()) {
    auto text = ReadAll(aws_file);
    if (!text.ok()) return text.status().WithContext(fmt::format("profile {}", o.profile));
    return ParseAwsCredentials(*text, o.profile, aws_file);
  }
  const char* key = std::getenv("AWS_ACCESS_KEY_ID");
  const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
  if (key != nullptr && *key != '\0') {
    if (secret == nullptr || *secret == '\0') {
      return InvalidArgument("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
    }
    return ClientCredentials{key, secret, "the environment (AWS_ACCESS_KEY_ID)"};
  }
  if (const char* file = std::getenv("AQUIFER_CREDENTIALS"); file != nullptr && *file != '\0') {
    return FromNodeFile(file, fmt::format("AQUIFER_CREDENTIALS={}", file));
  }
  if (auto text = ReadAll(aws_file); text.ok()) {
    const char* profile = std::getenv("AWS_PROFILE");
    auto c = ParseAwsCredentials(*text, profile != nullptr && *profile != '\0' ? profile : "default", aws_file);
    if (c.ok() || (profile != nullptr && *profile != '\0')) return c;
  }
  return ClientCredentials{"", "", "none (requests are unsigned)"};
}

std::string CredentialsHint(const ClientCredentials& c) {
  return fmt::format(
      "keys from {}{}; keys are found in a credentials file or profile given to the client, then "
      "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, then AQUIFER_CREDENTIALS=FILE, then ~/.aws/credentials",
      c.source, c.access_key.empty() ? "" : fmt::format(", access key {}", c.access_key));
}

}  // namespace aq::client
