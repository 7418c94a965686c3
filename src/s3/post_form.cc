#include "s3/post_form.h"

#include <fmt/format.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "http/message.h"

namespace aq::s3 {
namespace {

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

// The value of `param` (name="..." or name=token) in a header's parameters.
std::optional<std::string> HeaderParam(std::string_view header, std::string_view param) {
  size_t i = 0;
  while (i < header.size()) {
    size_t semi = header.find(';', i);
    std::string_view part = header.substr(i, semi == std::string_view::npos ? std::string_view::npos : semi - i);
    i = semi == std::string_view::npos ? header.size() : semi + 1;
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos) continue;
    if (!http::EqualsIgnoreCase(Trim(part.substr(0, eq)), param)) continue;
    std::string value = Trim(part.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"') {
      // A quoted string may hold ';': take it from the header up to its closing quote.
      const size_t open = header.find('"', static_cast<size_t>(part.data() - header.data()) + eq);
      std::string out;
      size_t j = open + 1;
      for (; j < header.size() && header[j] != '"'; ++j) {
        if (header[j] == '\\' && j + 1 < header.size()) ++j;
        out += header[j];
      }
      return out;
    }
    return value;
  }
  return std::nullopt;
}

Error Denied(std::string message) { return {403, "AccessDenied", "Invalid according to Policy: " + message}; }
Error BadPolicy(std::string message) { return {400, "InvalidPolicyDocument", "Invalid Policy: " + message}; }

// "2026-11-27T12:00:00Z" or with fractional seconds ("...00.000Z").
std::optional<int64_t> ParseIsoTime(const std::string& s) {
  std::tm tm{};
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return std::nullopt;
  if (*end == '.') {
    ++end;
    while (*end >= '0' && *end <= '9') ++end;
  }
  if (std::string_view(end) != "Z") return std::nullopt;
  return static_cast<int64_t>(timegm(&tm));
}

bool Exempt(const std::string& field) {
  return field == "policy" || field == "signature" || field == "x-amz-signature" || field == "awsaccesskeyid" ||
         field == "file" || field.rfind("x-ignore-", 0) == 0;
}

}  // namespace

Result<std::string> FormBoundary(std::string_view content_type) {
  const size_t semi = content_type.find(';');
  if (!http::EqualsIgnoreCase(Trim(content_type.substr(0, semi)), "multipart/form-data")) {
    return InvalidArgument("the body is not multipart/form-data");
  }
  auto b = HeaderParam(semi == std::string_view::npos ? "" : content_type.substr(semi + 1), "boundary");
  if (!b || b->empty() || b->size() > 200) {
    return InvalidArgument("multipart/form-data without a boundary (or one over 200 characters)");
  }
  return *b;
}

FormReader::FormReader(std::string boundary, size_t fields_limit)
    : delimiter_("\r\n--" + std::move(boundary)), limit_(fields_limit) {}

Status FormReader::PartHeaders(std::string_view block) {
  name_.clear();
  value_.clear();
  std::optional<std::string> filename;
  bool disposition = false;
  while (!block.empty()) {
    const size_t eol = block.find("\r\n");
    std::string_view line = block.substr(0, eol);
    block = eol == std::string_view::npos ? std::string_view() : block.substr(eol + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return InvalidArgument("a form part's header line has no ':'");
    if (!http::EqualsIgnoreCase(Trim(line.substr(0, colon)), "Content-Disposition")) continue;
    const std::string_view value = line.substr(colon + 1);
    auto name = HeaderParam(value, "name");
    if (!name) return InvalidArgument("a form part's Content-Disposition has no name");
    name_ = http::ToLower(*name);
    filename = HeaderParam(value, "filename");
    disposition = true;
  }
  if (!disposition) return InvalidArgument("a form part has no Content-Disposition");
  if (name_ == "file") {
    file_seen_ = in_file_part_ = true;
    filename_ = filename.value_or("");
  }
  return Status::Ok();
}

Status FormReader::Feed(std::string_view in, std::string* file) {
  buf_.append(in);
  size_t pos = 0;
  auto rest = [&] { return std::string_view(buf_).substr(pos); };
  for (;;) {
    if (state_ == State::kEpilogue) {
      pos = buf_.size();  // what follows the closing boundary is dropped
      break;
    }
    if (state_ == State::kPreamble) {
      // The body starts with "--boundary" (a preamble before it is allowed).
      const std::string first = delimiter_.substr(2);
      const size_t at = rest().find(first);
      if (at == std::string_view::npos) {
        if (buf_.size() - pos > limit_) return InvalidArgument("no form boundary where the body begins");
        break;
      }
      pos += at + first.size();
      state_ = State::kAfterDelimiter;
      continue;
    }
    if (state_ == State::kAfterDelimiter) {
      if (rest().size() < 2) break;
      if (rest().substr(0, 2) == "--") {
        state_ = State::kEpilogue;
        continue;
      }
      // Optional whitespace (transport padding), then CRLF.
      const size_t eol = rest().find("\r\n");
      if (eol == std::string_view::npos) {
        if (rest().size() > 256) return InvalidArgument("a form boundary is not followed by a line end");
        break;
      }
      pos += eol + 2;
      state_ = State::kHeaders;
      continue;
    }
    if (state_ == State::kHeaders) {
      const size_t end = rest().find("\r\n\r\n");
      const bool empty = rest().substr(0, 2) == "\r\n";
      if (!empty && end == std::string_view::npos) {
        if (rest().size() > 8192) return InvalidArgument("a form part's headers exceed 8 KiB");
        break;
      }
      AQ_TRY(PartHeaders(empty ? std::string_view() : rest().substr(0, end)));
      pos += empty ? 2 : end + 4;
      state_ = State::kValue;
      continue;
    }
    // kValue: bytes up to the next delimiter.
    const size_t at = rest().find(delimiter_);
    const bool found = at != std::string_view::npos;
    const size_t take = found ? at : (rest().size() >= delimiter_.size() ? rest().size() - delimiter_.size() + 1 : 0);
    std::string_view data = rest().substr(0, take);
    if (in_file_part_) {
      file->append(data);
    } else if (!file_seen_) {
      field_bytes_ += data.size();
      if (field_bytes_ > limit_) {
        return Unsupported(fmt::format("the form's fields before the file exceed {} bytes", limit_));
      }
      value_.append(data);
    }
    pos += take;
    if (!found) break;
    pos += delimiter_.size();
    if (!file_seen_) fields_.emplace(name_, value_);  // fields after the file are read, not kept
    in_file_part_ = false;
    state_ = State::kAfterDelimiter;
  }
  buf_.erase(0, pos);
  return Status::Ok();
}

std::optional<Error> CheckPostPolicy(std::string_view json, const std::map<std::string, std::string>& fields,
                                     const std::string& bucket, int64_t now_s, PostLimits* limits) {
  auto doc = nlohmann::json::parse(json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return BadPolicy("the policy is not a JSON object");
  // Names are case-sensitive: "EXPIRATION" is not "expiration".
  if (!doc.contains("expiration") || !doc["expiration"].is_string()) {
    return BadPolicy("Policy missing expiration.");
  }
  const auto expires = ParseIsoTime(doc["expiration"].get<std::string>());
  if (!expires) return BadPolicy("Invalid 'expiration' value: '" + doc["expiration"].get<std::string>() + "'");
  if (*expires < now_s) return Denied("Policy expired.");
  if (!doc.contains("conditions") || !doc["conditions"].is_array()) {
    return BadPolicy("Policy missing conditions (a list).");
  }
  std::map<std::string, bool> covered;  // form fields some condition names
  auto value_of = [&](const std::string& field) -> std::optional<std::string> {
    if (field == "bucket") return bucket;
    auto it = fields.find(field);
    if (it == fields.end()) return std::nullopt;
    return it->second;
  };
  auto text = [](const nlohmann::json& v) -> std::optional<std::string> {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    return std::nullopt;
  };
  for (const auto& c : doc["conditions"]) {
    std::string op, field, want;
    if (c.is_object()) {
      if (c.size() != 1) {
        return BadPolicy("Invalid Simple-Condition: Simple-Conditions must have exactly one property specified.");
      }
      op = "eq";
      field = http::ToLower(c.begin().key());
      if (!field.empty() && field[0] == '$') field.erase(0, 1);
      auto v = text(c.begin().value());
      if (!v) return BadPolicy("Invalid Simple-Condition: the value of '" + c.begin().key() + "' is not a string");
      want = *v;
    } else if (c.is_array() && !c.empty() && c[0].is_string() &&
               http::EqualsIgnoreCase(c[0].get<std::string>(), "content-length-range")) {
      if (c.size() != 3 || !c[1].is_number_integer() || !c[2].is_number_integer() || c[1].get<int64_t>() < 0 ||
          c[2].get<int64_t>() < c[1].get<int64_t>()) {
        return BadPolicy("Invalid content-length-range: it takes two integers, 0 <= min <= max");
      }
      limits->min_size = c[1].get<uint64_t>();
      limits->max_size = c[2].get<uint64_t>();
      continue;
    } else if (c.is_array() && c.size() == 3 && c[0].is_string() && c[1].is_string()) {
      op = http::ToLower(c[0].get<std::string>());
      if (op != "eq" && op != "starts-with") {
        return BadPolicy("Invalid Condition: unknown operation '" + c[0].get<std::string>() + "'");
      }
      field = c[1].get<std::string>();
      if (field.empty() || field[0] != '$') {
        return BadPolicy("Invalid Condition: the field '" + field + "' must start with '$'");
      }
      field = http::ToLower(field.substr(1));
      auto v = text(c[2]);
      if (!v) return BadPolicy("Invalid Condition: the value for '" + field + "' is not a string");
      want = *v;
    } else {
      return BadPolicy("Invalid Condition: " + c.dump().substr(0, 200));
    }
    covered[field] = true;
    const auto got = value_of(field);
    if (!got) return Denied(fmt::format("Policy Condition failed: [\"{}\", \"${}\", \"{}\"]", op, field, want));
    bool holds = op == "eq" ? *got == want : got->compare(0, want.size(), want) == 0;
    if (op == "starts-with" && field == "content-type") {
      // Each of a list of types must start with the prefix.
      holds = true;
      for (size_t i = 0; i <= got->size();) {
        const size_t comma = got->find(',', i);
        const std::string one = Trim(std::string_view(*got).substr(i, comma - i));
        holds = holds && one.compare(0, want.size(), want) == 0;
        if (comma == std::string::npos) break;
        i = comma + 1;
      }
    }
    if (!holds) return Denied(fmt::format("Policy Condition failed: [\"{}\", \"${}\", \"{}\"]", op, field, want));
  }
  for (const auto& [name, value] : fields) {
    if (!Exempt(name) && !covered.count(name)) return Denied("Extra input fields: " + name);
  }
  return std::nullopt;
}

}  // namespace aq::s3
