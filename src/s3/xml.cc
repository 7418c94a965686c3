#include "s3/xml.h"

#include <expat.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <iterator>

#include "s3/checksum.h"
#include "s3/sigv4.h"

namespace aq::s3 {
namespace {

// Walks a document and calls `on_end(path, text)` for every element as it
// closes, with the path of element names from the root ("Delete/Object/Key")
// and the element's own character data.
class Walker {
 public:
  using OnEnd = std::function<Status(const std::string& path, const std::string& text)>;

  static Status Run(std::string_view xml, const char* what, OnEnd on_end, size_t max_text = 4096) {
    Walker w(std::move(on_end));
    w.max_text_ = max_text;
    XML_Parser p = XML_ParserCreate(nullptr);
    if (p == nullptr) return Internal("expat: out of memory");
    XML_SetUserData(p, &w);
    XML_SetElementHandler(p, &Walker::Start, &Walker::End);
    XML_SetCharacterDataHandler(p, &Walker::Text);
    XML_SetStartDoctypeDeclHandler(p, &Walker::Doctype);
    w.parser_ = p;
    const XML_Status rc = XML_Parse(p, xml.data(), static_cast<int>(xml.size()), XML_TRUE);
    Status st = w.error_;
    if (st.ok() && rc != XML_STATUS_OK) {
      st = InvalidArgument(fmt::format("malformed {} body at line {} column {}: {}", what, XML_GetCurrentLineNumber(p),
                                       XML_GetCurrentColumnNumber(p), XML_ErrorString(XML_GetErrorCode(p))));
    }
    XML_ParserFree(p);
    return st;
  }

 private:
  explicit Walker(OnEnd on_end) : on_end_(std::move(on_end)) {}

  static std::string LocalName(const XML_Char* name) {
    std::string_view n(name);
    size_t colon = n.rfind(':');  // "ns:Key" -> "Key"
    return std::string(colon == std::string_view::npos ? n : n.substr(colon + 1));
  }
  void Fail(Status s) {
    if (error_.ok()) error_ = std::move(s);
    XML_StopParser(parser_, XML_FALSE);
  }
  static void Start(void* self, const XML_Char* name, const XML_Char**) {
    auto* w = static_cast<Walker*>(self);
    if (w->stack_.size() >= 16) return w->Fail(InvalidArgument("XML body nests deeper than 16 elements"));
    w->stack_.push_back({LocalName(name), w->path_.size()});
    if (!w->path_.empty()) w->path_ += '/';
    w->path_ += w->stack_.back().name;
    w->text_.clear();
  }
  static void End(void* self, const XML_Char*) {
    auto* w = static_cast<Walker*>(self);
    if (!w->error_.ok()) return;
    Status s = w->on_end_(w->path_, w->text_);
    if (!s.ok()) return w->Fail(std::move(s));
    w->path_.resize(w->stack_.back().path_len);
    w->stack_.pop_back();
    w->text_.clear();
  }
  static void Text(void* self, const XML_Char* s, int len) {
    auto* w = static_cast<Walker*>(self);
    if (w->text_.size() + static_cast<size_t>(len) > w->max_text_) {
      return w->Fail(InvalidArgument(fmt::format("an XML element's text is longer than {} bytes", w->max_text_)));
    }
    w->text_.append(s, static_cast<size_t>(len));
  }
  static void Doctype(void* self, const XML_Char*, const XML_Char*, const XML_Char*, int) {
    static_cast<Walker*>(self)->Fail(InvalidArgument("XML body has a document type declaration"));
  }

  struct Frame {
    std::string name;
    size_t path_len;
  };
  OnEnd on_end_;
  XML_Parser parser_ = nullptr;
  std::vector<Frame> stack_;
  std::string path_, text_;
  Status error_;
  size_t max_text_ = 4096;
};

}  // namespace

Result<std::vector<CompletedPart>> ParseCompleteMultipartUpload(std::string_view xml) {
  std::vector<CompletedPart> parts;
  CompletedPart cur;
  bool has_number = false, has_etag = false;
  bool root_ok = false;
  AQ_TRY(Walker::Run(xml, "CompleteMultipartUpload", [&](const std::string& path, const std::string& text) -> Status {
    if (path == "CompleteMultipartUpload/Part/PartNumber") {
      uint32_t n = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > 10000) {
        return InvalidArgument(fmt::format("PartNumber '{}' is not an integer in 1..10000", text));
      }
      cur.number = n;
      has_number = true;
    } else if (path == "CompleteMultipartUpload/Part/ETag") {
      cur.etag = text;
      has_etag = true;
    } else if (path.rfind("CompleteMultipartUpload/Part/Checksum", 0) == 0) {
      const std::string name = path.substr(std::string_view("CompleteMultipartUpload/Part/Checksum").size());
      auto algorithm = ParseChecksumAlgorithm(name);
      if (!algorithm.ok())
        return InvalidArgument(fmt::format("Part {}: unknown element Checksum{}", parts.size() + 1, name));
      cur.checksum_algorithm = *algorithm;
      cur.checksum = text;
    } else if (path == "CompleteMultipartUpload/Part") {
      if (!has_number || !has_etag) {
        return InvalidArgument(fmt::format("Part {} lacks a PartNumber or an ETag", parts.size() + 1));
      }
      if (parts.size() == 10000) return InvalidArgument("more than 10000 parts");
      parts.push_back(cur);
      cur = {};
      has_number = has_etag = false;
    } else if (path == "CompleteMultipartUpload") {
      root_ok = true;
    }
    return Status::Ok();
  }));
  if (!root_ok) return InvalidArgument("the body is not a CompleteMultipartUpload document");
  if (parts.empty()) return InvalidArgument("CompleteMultipartUpload names no part");
  return parts;
}

Result<DeleteObjectsRequest> ParseDeleteObjects(std::string_view xml) {
  DeleteObjectsRequest r;
  bool root_ok = false, has_key = false;
  std::string key;
  AQ_TRY(Walker::Run(xml, "Delete", [&](const std::string& path, const std::string& text) -> Status {
    if (path == "Delete/Object/Key") {
      key = text;
      has_key = true;
    } else if (path == "Delete/Object/ETag" || path == "Delete/Object/LastModifiedTime" ||
               path == "Delete/Object/Size") {
      if (r.condition.empty())
        r.condition = path.substr(path.rfind('/') + 1) + " of object " + std::to_string(r.keys.size() + 1);
    } else if (path == "Delete/Object") {
      if (!has_key) return InvalidArgument(fmt::format("Object {} has no Key", r.keys.size() + 1));
      if (r.keys.size() == 1000) return InvalidArgument("more than 1000 keys in one Delete");
      r.keys.push_back(std::move(key));
      key.clear();
      has_key = false;
    } else if (path == "Delete/Quiet") {
      if (text != "true" && text != "false") return InvalidArgument(fmt::format("Quiet '{}' is not true/false", text));
      r.quiet = text == "true";
    } else if (path == "Delete") {
      root_ok = true;
    }
    return Status::Ok();
  }));
  if (!root_ok) return InvalidArgument("the body is not a Delete document");
  if (r.keys.empty()) return InvalidArgument("Delete names no object");
  return r;
}

Result<AccessControlPolicy> ParseAccessControlPolicy(std::string_view xml) {
  AccessControlPolicy p;
  AclGrant grant;
  bool root = false, has_permission = false;
  constexpr std::string_view kGrant = "AccessControlPolicy/AccessControlList/Grant";
  AQ_TRY(Walker::Run(xml, "AccessControlPolicy", [&](const std::string& path, const std::string& text) -> Status {
    if (path == "AccessControlPolicy") {
      root = true;
    } else if (path == "AccessControlPolicy/Owner/ID") {
      p.owner_id = text;
    } else if (path == "AccessControlPolicy/Owner" || path == "AccessControlPolicy/Owner/DisplayName" ||
               path == "AccessControlPolicy/AccessControlList") {
    } else if (path == kGrant) {
      if (!has_permission) return InvalidArgument(fmt::format("grant {} has no Permission", p.grants.size() + 1));
      if (grant.id.empty() && grant.uri.empty() && grant.email.empty()) {
        return InvalidArgument(fmt::format("grant {} names no grantee (ID, URI or EmailAddress)", p.grants.size() + 1));
      }
      if (p.grants.size() == 100) return InvalidArgument("more than 100 grants");
      p.grants.push_back(std::move(grant));
      grant = AclGrant();
      has_permission = false;
    } else if (path.compare(0, kGrant.size(), kGrant) == 0) {
      const std::string part = path.substr(kGrant.size());
      if (part == "/Grantee/ID") {
        grant.id = text;
      } else if (part == "/Grantee/URI") {
        grant.uri = text;
      } else if (part == "/Grantee/EmailAddress") {
        grant.email = text;
      } else if (part == "/Permission") {
        static const char* const kPermissions[] = {"FULL_CONTROL", "READ", "WRITE", "READ_ACP", "WRITE_ACP"};
        if (std::find(std::begin(kPermissions), std::end(kPermissions), text) == std::end(kPermissions)) {
          return InvalidArgument(fmt::format("Permission '{}' is not an S3 permission", text));
        }
        grant.permission = text;
        has_permission = true;
      } else if (part != "/Grantee" && part != "/Grantee/DisplayName") {
        return InvalidArgument(fmt::format("unexpected element {} in an AccessControlPolicy", path));
      }
    } else {
      return InvalidArgument(fmt::format("unexpected element {} in an AccessControlPolicy", path));
    }
    return Status::Ok();
  }));
  if (!root) return InvalidArgument("not an AccessControlPolicy");
  return p;
}

bool OwnerOnly(const AccessControlPolicy& policy) {
  if (policy.owner_id.empty()) return false;
  for (const auto& g : policy.grants) {
    if (g.id != policy.owner_id || !g.uri.empty() || !g.email.empty()) return false;
  }
  return true;
}

Result<std::vector<LifecycleRule>> ParseLifecycle(std::string_view xml) {
  std::vector<LifecycleRule> rules;
  LifecycleRule rule;
  bool root = false, has_status = false, has_action = false, has_days = false, has_prefix = false;
  constexpr std::string_view kRule = "LifecycleConfiguration/Rule/";
  AQ_TRY(Walker::Run(xml, "LifecycleConfiguration", [&](const std::string& path, const std::string& text) -> Status {
    const std::string what = fmt::format("rule {}", rules.size() + 1);
    if (path == "LifecycleConfiguration") {
      root = true;
      return Status::Ok();
    }
    if (path == "LifecycleConfiguration/Rule") {
      if (!has_status) return InvalidArgument(what + " has no Status");
      if (!has_action) return InvalidArgument(what + " names no action (AbortIncompleteMultipartUpload)");
      if (rules.size() == 1000) return InvalidArgument("more than 1000 lifecycle rules");
      for (const auto& r : rules) {
        if (!rule.id.empty() && r.id == rule.id)
          return InvalidArgument(fmt::format("two rules have the ID '{}'", r.id));
      }
      rules.push_back(std::move(rule));
      rule = LifecycleRule();
      has_status = has_action = has_days = has_prefix = false;
      return Status::Ok();
    }
    if (path.compare(0, kRule.size(), kRule) != 0) {
      return InvalidArgument(fmt::format("unexpected element {} in a LifecycleConfiguration", path));
    }
    const std::string part = path.substr(kRule.size());
    if (part == "ID") {
      if (text.size() > 255) return InvalidArgument(what + ": the ID is over 255 characters");
      rule.id = text;
    } else if (part == "Prefix" || part == "Filter/Prefix") {
      if (has_prefix) return InvalidArgument(what + " has two prefixes");
      has_prefix = true;
      rule.prefix = text;
    } else if (part == "Filter") {
    } else if (part == "Status") {
      if (text != "Enabled" && text != "Disabled") {
        return InvalidArgument(fmt::format("{}: Status '{}' is neither Enabled nor Disabled", what, text));
      }
      has_status = true;
      rule.enabled = text == "Enabled";
    } else if (part == "AbortIncompleteMultipartUpload/DaysAfterInitiation") {
      uint32_t days = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), days);
      if (ec != std::errc() || end != text.data() + text.size() || days == 0) {
        return InvalidArgument(fmt::format("{}: DaysAfterInitiation '{}' is not a positive integer", what, text));
      }
      rule.abort_days = days;
      has_days = true;
    } else if (part == "AbortIncompleteMultipartUpload") {
      if (!has_days) return InvalidArgument(what + ": AbortIncompleteMultipartUpload has no DaysAfterInitiation");
      has_action = true;
    } else {
      const std::string element = part.substr(0, part.find('/'));
      if (element == "Filter") {
        return Unsupported(fmt::format("{}: the lifecycle filter {} is not implemented (only Prefix)", what, part));
      }
      return Unsupported(fmt::format(
          "{}: the lifecycle action {} is not implemented (only AbortIncompleteMultipartUpload)", what, element));
    }
    return Status::Ok();
  }));
  if (!root) return InvalidArgument("the body is not a LifecycleConfiguration");
  if (rules.empty()) return InvalidArgument("a LifecycleConfiguration needs at least one Rule");
  return rules;
}

Status WalkXml(std::string_view xml, const char* what,
               const std::function<Status(const std::string& path, const std::string& text)>& on_end, size_t max_text) {
  return Walker::Run(xml, what, on_end, max_text);
}

std::string XmlText(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 16);
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\t': out += "&#x9;"; break;
      case '\n': out += "&#xA;"; break;
      case '\r': out += "&#xD;"; break;
      default: out += c;
    }
  }
  return out;
}

Result<ListResult> ParseListResult(std::string_view xml) {
  ListResult r;
  ListedObject cur;
  bool url = false, root_ok = false;
  AQ_TRY(WalkXml(
      xml, "ListBucketResult",
      [&](const std::string& path, const std::string& text) -> Status {
        if (path == "ListBucketResult/Contents/Key") {
          cur.key = text;
        } else if (path == "ListBucketResult/Contents/Size") {
          uint64_t n = 0;
          auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
          if (ec != std::errc() || end != text.data() + text.size()) {
            return InvalidArgument(fmt::format("listing: Size '{}' is not a number", text));
          }
          cur.size = n;
        } else if (path == "ListBucketResult/Contents/ETag") {
          cur.etag = text;
        } else if (path == "ListBucketResult/Contents/LastModified") {
          cur.last_modified = text;
        } else if (path == "ListBucketResult/Contents") {
          r.objects.push_back(std::move(cur));
          cur = {};
        } else if (path == "ListBucketResult/CommonPrefixes/Prefix") {
          r.prefixes.push_back(text);
        } else if (path == "ListBucketResult/IsTruncated") {
          r.truncated = text == "true";
        } else if (path == "ListBucketResult/NextContinuationToken") {
          r.next_token = text;
        } else if (path == "ListBucketResult/NextMarker") {
          r.next_marker = text;
        } else if (path == "ListBucketResult/EncodingType") {
          url = text == "url";
        } else if (path == "ListBucketResult") {
          root_ok = true;
        }
        return Status::Ok();
      },
      1 << 16));
  if (!root_ok) return InvalidArgument("the answer is not a ListBucketResult document");
  if (url) {
    for (auto& o : r.objects) o.key = UriDecode(o.key);
    for (auto& p : r.prefixes) p = UriDecode(p);
    r.next_marker = UriDecode(r.next_marker);
  }
  return r;
}

std::pair<std::string, std::string> ParseErrorXml(std::string_view xml) {
  std::string code, message;
  (void)WalkXml(xml, "Error", [&](const std::string& path, const std::string& text) -> Status {
    if (path == "Error/Code") code = text;
    if (path == "Error/Message") message = text;
    return Status::Ok();
  });
  return {code, message};
}

}  // namespace aq::s3
