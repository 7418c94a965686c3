// Object operations: GetObject / HeadObject (ranges, parts, conditions,
// response overrides), PutObject (every digest a client may send checked as
// the body streams), CopyObject and DeleteObject.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "common/clock.h"
#include "common/log.h"
#include "s3/checksum.h"
#include "s3/chunked.h"
#include "s3/metadata.h"
#include "s3/same_host.h"
#include "s3/sigv4.h"
#include "s3/xml.h"
#include "server/s3_handler.h"

namespace aq::server {
namespace {

// The stored headers a GET returns, with the spelling clients expect.
const std::pair<const char*, const char*> kStored[] = {
    {"content-type", "Content-Type"},
    {"content-encoding", "Content-Encoding"},
    {"content-disposition", "Content-Disposition"},
    {"content-language", "Content-Language"},
    {"cache-control", "Cache-Control"},
    {"expires", "Expires"},
};

constexpr uint64_t kMaxUserMetadata = 2048;  // S3's limit on x-amz-meta-* names and values together

std::string Unquote(std::string_view e) {
  while (!e.empty() && e.front() == ' ') e.remove_prefix(1);
  while (!e.empty() && e.back() == ' ') e.remove_suffix(1);
  if (e.substr(0, 2) == "W/") e.remove_prefix(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return std::string(e);
}

// Whether an If-Match / If-None-Match list names this ETag ("*" names any).
bool EtagListMatches(const std::string& list, const std::string& etag) {
  const std::string want = Unquote(etag);
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string one = Unquote(std::string_view(list).substr(start, comma - start));
    if (one == "*" || one == want) return true;
    start = comma + 1;
  }
  return false;
}

// RFC 7232's order: If-Match, If-Unmodified-Since (only without If-Match),
// If-None-Match, If-Modified-Since (only without If-None-Match). Returns 0
// to go on, 412, or 304 (when `not_modified` may be answered; else 412).
int Preconditions(const std::string& if_match, const std::string& if_unmodified, const std::string& if_none_match,
                  const std::string& if_modified, const std::string& etag, int64_t mtime, bool not_modified) {
  if (!if_match.empty()) {
    if (!EtagListMatches(if_match, etag)) return 412;
  } else if (!if_unmodified.empty()) {
    auto t = http::ParseHttpDate(if_unmodified);
    if (t && mtime > *t) return 412;
  }
  if (!if_none_match.empty()) {
    if (EtagListMatches(if_none_match, etag)) return not_modified ? 304 : 412;
  } else if (!if_modified.empty()) {
    auto t = http::ParseHttpDate(if_modified);
    if (t && mtime <= *t) return not_modified ? 304 : 412;
  }
  return 0;
}

s3::Error KeyError(const Status& s) {
  if (s.code() == StatusCode::kUnsupported) return {400, "KeyTooLongError", s.message()};
  return {400, "InvalidArgument", s.message()};
}

s3::Error BodyError(const Status& s) {
  if (s.code() == StatusCode::kTimedOut) {
    return {400, "RequestTimeout",
            fmt::format("Your socket connection to the server was not read from or written to within the timeout "
                        "period ({})",
                        s.message())};
  }
  return {400, "IncompleteBody", s.message()};
}

// Range: bytes=A-B | A- | -N. Several ranges or a malformed header are
// ignored (the whole object), as S3 does; `unsatisfiable` when it starts
// past the end.
struct Range {
  bool present = false, unsatisfiable = false;
  uint64_t start = 0, length = 0;
};
Range ParseRange(const std::string& header, uint64_t size) {
  Range r;
  std::string_view h = header;
  constexpr std::string_view kUnit = "bytes=";
  if (h.substr(0, kUnit.size()) != kUnit) return r;
  h.remove_prefix(kUnit.size());
  if (h.find(',') != std::string_view::npos) return r;
  const size_t dash = h.find('-');
  if (dash == std::string_view::npos) return r;
  auto number = [](std::string_view s) -> std::optional<uint64_t> {
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return v;
  };
  std::string_view a = h.substr(0, dash), b = h.substr(dash + 1);
  if (a.empty()) {
    auto n = number(b);
    if (!n) return r;
    r.present = true;
    if (*n == 0 || size == 0) {
      r.unsatisfiable = true;
      return r;
    }
    r.length = std::min(*n, size);
    r.start = size - r.length;
    return r;
  }
  auto first = number(a);
  if (!first) return r;
  std::optional<uint64_t> last;
  if (!b.empty()) {
    last = number(b);
    if (!last || *last < *first) return r;
  }
  r.present = true;
  if (*first >= size) {
    r.unsatisfiable = true;
    return r;
  }
  r.start = *first;
  r.length = (last ? std::min(*last + 1, size) : size) - *first;
  return r;
}

}  // namespace

bool S3Handler::StoredHeaders(S3Request& r, std::map<std::string, std::string>* out) {
  uint64_t user = 0;
  for (const auto& [name, value] : r.req.headers.fields()) {
    const std::string lower = http::ToLower(name);
    const bool stored =
        lower.rfind("x-amz-meta-", 0) == 0 ||
        std::any_of(std::begin(kStored), std::end(kStored), [&](const auto& k) { return lower == k.first; });
    if (lower.rfind("x-amz-meta-", 0) == 0) {
      // Text: RFC 2047 words decoded, UTF-8 kept, ISO-8859-1 converted (s3/metadata.h).
      auto text = s3::MetadataValueIn(value);
      if (!text.ok()) {
        SendError(r, {400, "InvalidArgument", fmt::format("the header {}: {}", name, text.status().message())});
        return false;
      }
      user += lower.size() - 11 + text->size();
      (*out)[lower] = std::move(*text);
      continue;
    }
    // S3 keeps the other stored headers as US-ASCII; anything else is refused, not mangled.
    if (stored && std::any_of(value.begin(), value.end(), [](char c) {
          const auto u = static_cast<unsigned char>(c);
          return (u < 0x20 && u != '\t') || u > 0x7e;
        })) {
      SendError(r,
                {400, "InvalidArgument",
                 fmt::format("the header {} holds bytes that are not printable US-ASCII; S3 metadata must be", name)});
      return false;
    }
    for (const auto& [stored, spelled] : kStored) {
      if (lower != stored) continue;
      std::string v = value;
      if (lower == "content-encoding" && http::ToLower(v).find("aws-chunked") != std::string::npos) {
        // aws-chunked describes this request's framing, not the object
        // (a value without it is kept as sent, spaces and all).
        std::string kept;
        size_t start = 0;
        while (start <= v.size()) {
          size_t comma = v.find(',', start);
          if (comma == std::string::npos) comma = v.size();
          std::string one = std::string(std::string_view(v).substr(start, comma - start));
          while (!one.empty() && one.front() == ' ') one.erase(0, 1);
          while (!one.empty() && one.back() == ' ') one.pop_back();
          if (!one.empty() && !http::EqualsIgnoreCase(one, "aws-chunked")) kept += (kept.empty() ? "" : ", ") + one;
          start = comma + 1;
        }
        v = kept;
      }
      if (!v.empty()) (*out)[lower] = v;
    }
  }
  if (user > kMaxUserMetadata) {
    SendError(r, {400, "MetadataTooLarge",
                  fmt::format("Your metadata headers are {} bytes; the limit is {}", user, kMaxUserMetadata)});
    return false;
  }
  return true;
}

// Long by design: S3's GET in the order the protocol decides it (object,
// part number, conditions, range, response overrides, availability before the
// status line, then the streamed body), each step a refusal point.
void S3Handler::GetObject(S3Request& r) {
  const bool head = r.req.method == "HEAD";
  if (r.Has("versionId") && r.Param("versionId") != "null") {
    return SendError(r, {400, "InvalidArgument", "Invalid version id specified (the bucket is not versioned)"});
  }
  // The layout stays readable to the end of this response, whatever
  // overwrites or deletes come meanwhile.
  auto held = objects_.HeadHeld(r.bucket, r.key);
  if (!held.ok()) return SendStatus(r, held.status(), Subject::kObject);
  auto pin = std::move(held->pin);
  auto object = std::make_shared<store::ObjectMeta>(std::move(held->meta));
  const store::ObjectMeta& o = *object;
  const int64_t mtime = o.mtime_ns / 1000000000;
  http::Headers h;
  h.Add("ETag", o.etag);
  h.Add("Last-Modified", http::HttpDate(mtime));
  h.Add("Accept-Ranges", "bytes");
  h.Add("x-amz-request-id", r.request_id);
  h.Add("x-amz-id-2", r.request_id);
  const auto& rh = r.req.headers;
  const int pre = Preconditions(rh.Get("If-Match"), rh.Get("If-Unmodified-Since"), rh.Get("If-None-Match"),
                                rh.Get("If-Modified-Since"), o.etag, mtime, true);
  if (pre == 412) {
    return SendError(r, {412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold"});
  }
  if (pre == 304) return SendEmpty(r, 304, std::move(h));

  uint64_t start = 0, length = o.size;
  int status = 200;
  if (r.Has("partNumber")) {
    const std::string p = r.Param("partNumber");
    uint32_t n = 0;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), n);
    if (ec != std::errc() || end != p.data() + p.size() || n < 1 || n > store::kMaxPartNumber) {
      return SendError(r, {400, "InvalidArgument", fmt::format("partNumber '{}' is not an integer in 1..10000", p)});
    }
    if (rh.Has("Range"))
      return SendError(r, {400, "InvalidRequest", "Cannot specify both Range header and partNumber"});
    const std::vector<uint64_t> parts = o.attrs.part_sizes.empty() ? std::vector<uint64_t>{o.size} : o.attrs.part_sizes;
    if (n > parts.size()) {
      return SendError(r, {416, "InvalidPartNumber",
                           fmt::format("The requested partnumber {} is not satisfiable (the object has {} parts)", n,
                                       parts.size())});
    }
    for (uint32_t i = 0; i + 1 < n; ++i) start += parts[i];
    length = parts[n - 1];
    if (!o.attrs.part_sizes.empty()) h.Add("x-amz-mp-parts-count", std::to_string(parts.size()));
    status = 206;
    h.Add("Content-Range", fmt::format("bytes {}-{}/{}", start, start + length - (length > 0 ? 1 : 0), o.size));
  } else if (rh.Has("Range")) {
    // The aquifer:// client opens a file with a GET of its first bytes; an
    // empty object then answers 200 with nothing, not S3's 416.
    const bool opening = rh.Has("x-aquifer-open");
    Range range = ParseRange(rh.Get("Range"), o.size);
    if (range.unsatisfiable && !(opening && o.size == 0)) {
      return SendError(r, {416, "InvalidRange",
                           fmt::format("The requested range '{}' is not satisfiable: the object has {} bytes",
                                       rh.Get("Range"), o.size)});
    }
    if (range.present) {
      start = range.start;
      length = range.length;
      // In a cluster the client reads the rest from the blocks' holders:
      // the open brings at most the first block, so this node fetches at
      // most one block from a peer to answer it.
      if (opening && o_.open_first_block && start == 0 && !o.blocks.empty() && o.blocks[0].size > 0 &&
          length < o.size) {
        length = std::min(length, o.blocks[0].size);
      }
      status = 206;
      h.Add("Content-Range", fmt::format("bytes {}-{}/{}", start, start + length - 1, o.size));
    }
  }
  // The stored checksum, when asked for, of what the answer holds: the
  // whole object, or a part of one (a COMPOSITE object's part's own).
  if (ChecksumModeEnabled(r) && !o.attrs.checksum.empty()) {
    if (!r.Has("partNumber") && status == 200) {
      AddChecksumHeaders(o.attrs.checksum, o.attrs.checksum.value, &h);
    } else if (r.Has("partNumber") && o.attrs.part_sizes.empty() && length == o.size) {
      AddChecksumHeaders(o.attrs.checksum, o.attrs.checksum.value, &h);
    } else if (r.Has("partNumber") && o.attrs.checksum.parts.size() == o.attrs.part_sizes.size()) {
      const size_t n = std::strtoul(r.Param("partNumber").c_str(), nullptr, 10);
      if (n >= 1 && n <= o.attrs.checksum.parts.size()) {
        AddChecksumHeaders(o.attrs.checksum, o.attrs.checksum.parts[n - 1], &h);
      }
    }
  }
  bool has_type = false;
  for (const auto& [name, value] : o.attrs.headers) {
    std::string spelled = name;
    for (const auto& [stored, s] : kStored) {
      if (name == stored) spelled = s;
    }
    has_type = has_type || name == "content-type";
    h.Add(spelled, name.rfind("x-amz-meta-", 0) == 0 ? s3::MetadataValueOut(value) : value);
  }
  if (!has_type) h.Add("Content-Type", "binary/octet-stream");
  // An aquifer:// client opening the object learns its layout with its first
  // bytes (or, when the layout is large, that it should fetch it).
  if (rh.Has("x-aquifer-open") && o_.internal.cluster != nullptr && length < o.size) {
    std::string layout = s3::LayoutToJson(o_.internal.cluster->LayoutOf(o));
    h.Add("x-aquifer-layout", layout.size() <= 8192 ? std::move(layout) : std::string("fetch"));
  }
  // A client on this machine reads the rest of what is in RAM from shared
  // memory, and (if it asks: "2") what this node holds from its block files
  // (s3/same_host.h), instead of through this socket.
  bool files_granted = false;  // the client reads the rest from the block files: no read-ahead for it here
  if (o_.same_host != nullptr && !head && length < o.size && rh.Has(s3::kSameHostHeader) &&
      s3::IsLoopbackHost(std::string_view(r.ex.peer()).substr(0, r.ex.peer().rfind(':')))) {
    const bool files = rh.Get(s3::kSameHostHeader) == s3::kSameHostFiles;
    std::string grant = o_.same_host->Grant(o, start + length, files);
    files_granted = files && !grant.empty();
    if (!grant.empty()) h.Add(s3::kSameHostHeader, std::move(grant));
  }
  // response-content-type=... and the like replace what is stored.
  for (const auto& [param, value] : r.query) {
    if (param.rfind("response-", 0) != 0) continue;
    const std::string name = param.substr(9);
    for (const auto& [stored, spelled] : kStored) {
      if (name == stored) h.Set(spelled, value);
    }
  }
  // Nothing is promised that cannot be sent: a block no holder can serve
  // now is an error before the head, not a body cut short.
  if (length > 0 && !objects_.Available(o, start, length)) {
    return SendError(r, {503, "ServiceUnavailable",
                         "a block of this object cannot be read now (its holders are down or it is missing); retry"});
  }
  if (head || length == 0) {
    (void)r.ex.Begin(status, std::move(h), length);
    return;
  }
  // With stream prefetch, the request is one stream over the object (or the
  // continuation of the reader's previous request): while a block is on the
  // wire, the next ones are read.
  std::shared_ptr<store::ReadStream> stream;
  store::Prefetcher* prefetch = objects_.prefetcher();
  if (prefetch != nullptr && !files_granted) stream = prefetch->Begin(object, start, length);
  uint64_t sent_to = start;
  bool began = false, client_gone = false;
  auto sink = [&](std::string_view bytes) -> Status {
    if (!began) {
      began = true;
      if (Status b = r.ex.Begin(status, h, length); !b.ok()) {
        client_gone = true;
        return b;
      }
    }
    link_.Acquire(bytes.size());
    if (Status w = r.ex.Write(bytes); !w.ok()) {
      client_gone = true;
      return w;
    }
    sent_to += bytes.size();
    return Status::Ok();
  };
  Status s = objects_.Read(o, start, length, sink, stream.get());
  if (prefetch != nullptr && stream) prefetch->End(std::move(stream), sent_to);
  // The head is out and a block failed part way (its holder died, the
  // cluster map is settling, etcd is slow): the rest is read again, from
  // other replicas or fragments, and the same body continues. Damage that
  // does not heal in a few tries, or a deadline, ends it.
  const double give_up = Clock::Real().Now() + o_.resume_deadline_s;
  for (int attempt = 0; !s.ok() && began && !client_gone && sent_to < start + length; ++attempt) {
    const bool damage = s.code() == StatusCode::kCorruption || s.code() == StatusCode::kNotFound;
    if ((damage && attempt >= 2) || Clock::Real().Now() >= give_up) break;
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1000, 50 << attempt)));
    log::info("request {} GET {}/{}: a block failed at byte {} ({}); continuing from other holders", r.request_id,
              r.bucket, r.key, sent_to, s.message());
    s = objects_.Read(o, sent_to, start + length - sent_to, sink, nullptr);
    if (s.ok() && o_.stats != nullptr) o_.stats->BodyResumed();
  }
  if (s.ok()) return;
  if (!began) {                               // nothing sent yet: a clean error
    if (s.code() == StatusCode::kNotFound) {  // the object exists; a block of it does not
      return SendError(r, {500, "InternalError", s.message()});
    }
    return SendStatus(r, s, Subject::kObject);
  }
  if (client_gone) return;  // the client left; nothing to tell it
  // The head is out and the body cannot be finished: the connection is
  // reset, so no client takes the bytes it got for the whole object.
  r.ex.Abort();
  if (o_.stats != nullptr) o_.stats->BodyCut();
  log::warn("request {} GET {}/{}: response reset at byte {} of {}: {}", r.request_id, r.bucket, r.key, sent_to,
            start + length, s.message());
}

// Long by design: one loop over the body's framings (Content-Length, chunked,
// aws-chunked with per-chunk signatures and trailers) with the digests checked
// as bytes arrive; splitting it would spread one state machine over calls.
bool S3Handler::ReceiveBody(S3Request& r, store::ObjectWriter& w, std::string store_algorithm) {
  const auto& hs = r.req.headers;
  const std::string& hash = r.auth.payload_hash;
  const bool aws_chunked = r.auth.streaming.has_value();
  // "Content-Encoding: gzip, aws-chunked" on a body signed as a plain one
  // (no STREAMING-* payload hash): S3 reads the body as it is signed and
  // stores the encoding without aws-chunked (StoredHeaders), and so does
  // the node.
  if (!r.req.content_length && !r.req.chunked) {
    SendError(r, {411, "MissingContentLength", "You must provide the Content-Length HTTP header."});
    return false;
  }
  std::optional<uint64_t> expected = r.req.content_length;
  if (aws_chunked) {
    const std::string d = hs.Get("x-amz-decoded-content-length");
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), n);
    if (d.empty() || ec != std::errc() || end != d.data() + d.size()) {
      SendError(r, {411, "MissingContentLength", "aws-chunked uploads need x-amz-decoded-content-length"});
      return false;
    }
    expected = n;
  } else if (r.req.chunked) {
    expected.reset();
  }
  if (expected && *expected > o_.max_object_bytes) {
    SendError(r, {400, "EntityTooLarge",
                  fmt::format("Your proposed upload of {} bytes exceeds the maximum allowed size of {} bytes",
                              *expected, o_.max_object_bytes)});
    return false;
  }
  // Every digest the client sent, computed as the bytes pass.
  std::unique_ptr<s3::Checksum> md5, sha256;
  std::string md5_expected;
  if (hs.Has("Content-MD5")) {
    auto raw = s3::Base64Decode(hs.Get("Content-MD5"));
    if (!raw.ok() || raw->size() != 16) {
      SendError(r, {400, "InvalidDigest", "The Content-MD5 you specified is not a base64 MD5 (16 bytes)"});
      return false;
    }
    md5 = s3::Checksum::Make("md5").value();
    md5_expected = hs.Get("Content-MD5");
  }
  if (!aws_chunked && hash.size() == 64) sha256 = s3::Checksum::Make("sha256").value();
  std::vector<std::pair<std::string, std::unique_ptr<s3::Checksum>>> checksums;  // header value, running sum
  for (const auto& [name, value] : hs.fields()) {
    const std::string algorithm = s3::ChecksumAlgorithmOfHeader(name);
    if (algorithm.empty()) continue;
    checksums.emplace_back(value, s3::Checksum::Make(algorithm).value());
  }
  // A presigned URL carries the headers it signed in its query (the AWS SDK
  // for JavaScript v3 puts x-amz-checksum-crc32 there): checked the same.
  if (r.auth.presigned) {
    for (const auto& [name, value] : r.query) {
      const std::string algorithm = s3::ChecksumAlgorithmOfHeader(name);
      if (algorithm.empty() || hs.Has(name)) continue;
      checksums.emplace_back(value, s3::Checksum::Make(algorithm).value());
    }
  }
  std::unique_ptr<s3::AwsChunkedDecoder> decoder;
  if (aws_chunked) decoder = std::make_unique<s3::AwsChunkedDecoder>(*r.auth.streaming, hs.Get("x-amz-trailer"));
  // The checksum stored with the bytes: the caller's algorithm (a part's
  // upload's), else the one x-amz-sdk-checksum-algorithm names, else the
  // client's (header, query or trailer), else CRC64NVME, as S3 does. A value
  // the client sent is the one stored once it has been checked.
  if (store_algorithm.empty()) {
    std::string named = hs.Get("x-amz-sdk-checksum-algorithm");
    if (named.empty() && r.auth.presigned) named = r.Param("x-amz-sdk-checksum-algorithm");
    if (!named.empty()) {
      auto a = s3::ParseChecksumAlgorithm(named);
      if (!a.ok()) {
        SendError(r,
                  {400, "InvalidRequest",
                   fmt::format("Value for x-amz-sdk-checksum-algorithm header is invalid: {}", a.status().message())});
        return false;
      }
      store_algorithm = *a;
    } else if (!checksums.empty()) {
      store_algorithm = checksums.front().second->algorithm();
    } else if (decoder && !decoder->trailer_algorithm().empty()) {
      store_algorithm = decoder->trailer_algorithm();
    } else {
      store_algorithm = "crc64nvme";
    }
  }
  const bool by_trailer = decoder && decoder->trailer_algorithm() == store_algorithm;
  s3::Checksum* stored = nullptr;
  for (auto& [v, c] : checksums) {
    if (c->algorithm() == store_algorithm) stored = c.get();
  }
  std::unique_ptr<s3::Checksum> own;
  if (stored == nullptr && !by_trailer) {
    own = s3::Checksum::Make(store_algorithm).value();
    stored = own.get();
  }
  std::string raw(1 << 20, '\0'), decoded;
  uint64_t total = 0;
  for (;;) {
    auto n = r.ex.ReadBody(raw.data(), raw.size());
    if (!n.ok()) {
      SendError(r, BodyError(n.status()));
      return false;
    }
    if (*n == 0) break;
    std::string_view data(raw.data(), *n);
    if (decoder) {
      decoded.clear();
      if (!decoder->Feed(data, &decoded).ok()) {
        SendError(r, decoder->error());
        return false;
      }
      data = decoded;
    }
    total += data.size();
    if (total > o_.max_object_bytes || (expected && total > *expected)) {
      SendError(r, {400, expected && total > *expected ? "IncompleteBody" : "EntityTooLarge",
                    fmt::format("the body holds more than {} bytes",
                                expected ? std::min(*expected, o_.max_object_bytes) : o_.max_object_bytes)});
      return false;
    }
    if (md5) md5->Update(data);
    if (sha256) sha256->Update(data);
    for (auto& [v, c] : checksums) c->Update(data);
    if (own) own->Update(data);
    if (Status s = w.Write(data); !s.ok()) {
      SendStatus(r, s, Subject::kObject);
      return false;
    }
  }
  if (decoder && !decoder->done()) {
    SendError(r, {400, "IncompleteBody", "the aws-chunked body ended before its final chunk"});
    return false;
  }
  if (expected && total != *expected) {
    SendError(r, {400, "IncompleteBody",
                  fmt::format("You did not provide the number of bytes specified: {} of {}", total, *expected)});
    return false;
  }
  if (sha256) {
    auto digest = s3::Base64Decode(sha256->Base64());
    const std::string hex = s3::HexEncode(reinterpret_cast<const unsigned char*>(digest->data()), digest->size());
    if (hex != hash) {
      SendError(r, {400, "XAmzContentSHA256Mismatch",
                    "The provided 'x-amz-content-sha256' header does not match what was computed."});
      return false;
    }
  }
  if (md5 && md5->Base64() != md5_expected) {
    SendError(r, {400, "BadDigest", "The Content-MD5 you specified did not match what we received."});
    return false;
  }
  std::string stored_value;
  for (auto& [v, c] : checksums) {
    const std::string got = c->Base64();
    if (got != v) {
      SendError(r, {400, "BadDigest", "The checksum you specified (x-amz-checksum-*) did not match what we received."});
      return false;
    }
    if (c.get() == stored) stored_value = got;
  }
  if (own) stored_value = own->Base64();
  if (by_trailer && stored == nullptr) stored_value = decoder->trailer_value();
  w.set_checksum({store_algorithm, stored_value, "FULL_OBJECT", {}});
  return true;
}

bool ChecksumModeEnabled(const S3Request& r) {
  std::string mode = r.req.headers.Get("x-amz-checksum-mode");
  if (mode.empty() && r.auth.presigned) mode = r.Param("x-amz-checksum-mode");
  return http::EqualsIgnoreCase(mode, "ENABLED");
}

void AddChecksumHeaders(const store::ObjectChecksum& c, const std::string& value, http::Headers* h) {
  if (c.empty() || value.empty()) return;
  h->Add(s3::ChecksumHeader(c.algorithm), value);
  h->Add("x-amz-checksum-type", c.type);
}

bool WriteConditionOf(S3Request& r, store::WriteCondition* c) {
  const auto& hs = r.req.headers;
  auto trimmed = [](std::string v) {
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
    size_t i = 0;
    while (i < v.size() && (v[i] == ' ' || v[i] == '\t')) ++i;
    return v.substr(i);
  };
  if (hs.Has("If-None-Match")) {
    if (trimmed(hs.Get("If-None-Match")) != "*") {
      SendError(r, {501, "NotImplemented", "If-None-Match on a write takes only '*' (create if absent)"});
      return false;
    }
    c->absent = true;
  }
  if (hs.Has("If-Match")) {
    std::string v = trimmed(hs.Get("If-Match"));
    if (v.empty() || v == "*" || v.find(',') != std::string::npos) {
      SendError(r, {501, "NotImplemented", "If-Match on a write takes one ETag"});
      return false;
    }
    if (v.front() != '"') v = "\"" + v + "\"";
    c->etag = v;
  }
  if (c->absent && !c->etag.empty()) {
    SendError(r, {400, "InvalidArgument", "If-None-Match: * and If-Match together can never both hold"});
    return false;
  }
  return true;
}

void SendWriteFailure(S3Request& r, const Status& s, const store::WriteCondition& c, Subject subject) {
  if (!c.none() && s.code() == StatusCode::kAlreadyExists && s.subject() == Subject::kObject) {
    return SendError(r, {412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold"});
  }
  if (!c.none() && s.code() == StatusCode::kConflict) {
    return SendError(r, {409, "ConditionalRequestConflict",
                         "A conflicting operation occurred: complete the multipart upload again"});
  }
  SendStatus(r, s, subject);
}

// The condition against the object as it is now (before the body is read).
Status CheckNow(store::ObjectStore& objects, const S3Request& r, const store::WriteCondition& c) {
  if (c.none()) return Status::Ok();
  auto meta = objects.Head(r.bucket, r.key);
  if (!meta.ok() && !(meta.status().code() == StatusCode::kNotFound && meta.status().subject() != Subject::kBucket)) {
    return meta.status();
  }
  return store::CheckWriteCondition(c, r.key, meta.ok() ? &meta->etag : nullptr);
}

void S3Handler::PutObject(S3Request& r) {
  if (Status s = store::CheckObjectKey(r.key); !s.ok()) return SendError(r, KeyError(s));
  store::ObjectAttrs attrs;
  if (!StoredHeaders(r, &attrs.headers)) return;
  // The object's size, for tiering policies on size (a bad value is refused later, by ReceiveBody).
  uint64_t size = store::ObjectStore::kUnknownSize;
  if (const std::string d = r.req.headers.Get("x-amz-decoded-content-length"); !d.empty()) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(d.c_str(), &end, 10);
    if (end == d.c_str() + d.size()) size = v;
  } else if (r.req.content_length && !r.req.chunked) {
    size = *r.req.content_length;
  }
  store::WriteCondition condition;
  if (!WriteConditionOf(r, &condition)) return;
  if (Status s = CheckNow(objects_, r, condition); !s.ok()) return SendWriteFailure(r, s, condition, Subject::kBucket);
  auto writer = objects_.Put(r.bucket, r.key, std::move(attrs), size);
  if (!writer.ok()) return SendStatus(r, writer.status(), Subject::kBucket);
  (*writer)->set_condition(condition);
  if (r.req.headers.Get(s3::kEtagHeader) == s3::kUniqueEtag) (*writer)->set_unique_etag();
  if (!ReceiveBody(r, **writer)) return;  // the writer's blocks go with it
  auto meta = (*writer)->Commit();
  if (!meta.ok()) return SendWriteFailure(r, meta.status(), condition, Subject::kObject);
  http::Headers h;
  h.Add("ETag", meta->etag);
  // The checksums the client sent (all were checked), and the one stored.
  const std::string stored = s3::ChecksumHeader(meta->attrs.checksum.algorithm);
  for (const auto& [name, value] : r.req.headers.fields()) {
    if (!s3::ChecksumAlgorithmOfHeader(name).empty() && !http::EqualsIgnoreCase(name, stored)) h.Add(name, value);
  }
  AddChecksumHeaders(meta->attrs.checksum, meta->attrs.checksum.value, &h);
  SendEmpty(r, 200, std::move(h));
}

bool S3Handler::CopySource(S3Request& r, store::ObjectMeta* source) {
  std::string spec = r.req.headers.Get("x-amz-copy-source");
  std::string version;
  if (size_t q = spec.find('?'); q != std::string::npos) {
    for (const auto& [k, v] : s3::ParseQuery(spec.substr(q + 1))) {
      if (k == "versionId") version = v;
    }
    spec.erase(q);
  }
  if (!version.empty() && version != "null") {
    SendError(r, {400, "InvalidArgument", "Invalid version id specified in x-amz-copy-source"});
    return false;
  }
  std::string path = s3::UriDecode(spec);
  if (!path.empty() && path[0] == '/') path.erase(0, 1);
  const size_t slash = path.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == path.size()) {
    SendError(r, {400, "InvalidArgument", "x-amz-copy-source must be BUCKET/KEY"});
    return false;
  }
  if (!May(r, s3::kRead, path.substr(0, slash), path.substr(slash + 1))) {
    Deny(r, "the key may not read the copy's source " + path);
    return false;
  }
  auto meta = objects_.Head(path.substr(0, slash), path.substr(slash + 1));
  if (!meta.ok()) {
    SendStatus(r, meta.status(), Subject::kObject);
    return false;
  }
  const auto& hs = r.req.headers;
  const int pre =
      Preconditions(hs.Get("x-amz-copy-source-if-match"), hs.Get("x-amz-copy-source-if-unmodified-since"),
                    hs.Get("x-amz-copy-source-if-none-match"), hs.Get("x-amz-copy-source-if-modified-since"),
                    meta->etag, meta->mtime_ns / 1000000000, false);
  if (pre != 0) {
    SendError(r, {412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold"});
    return false;
  }
  *source = std::move(*meta);
  return true;
}

void S3Handler::CopyObject(S3Request& r) {
  if (Status s = store::CheckObjectKey(r.key); !s.ok()) return SendError(r, KeyError(s));
  if (r.req.headers.Has("x-amz-copy-source-range")) {
    return SendError(r, {400, "InvalidArgument", "x-amz-copy-source-range is only for UploadPartCopy"});
  }
  const std::string directive = r.req.headers.Has("x-amz-metadata-directive")
                                    ? r.req.headers.Get("x-amz-metadata-directive")
                                    : std::string("COPY");
  if (directive != "COPY" && directive != "REPLACE") {
    return SendError(r, {400, "InvalidArgument", "x-amz-metadata-directive must be COPY or REPLACE"});
  }
  store::ObjectMeta source;
  if (!CopySource(r, &source)) return;
  if (source.bucket == r.bucket && source.key == r.key && directive == "COPY") {
    return SendError(r, {400, "InvalidRequest",
                         "This copy request is illegal because it is trying to copy an object to itself without "
                         "changing the object's metadata, storage class, website redirect location or encryption "
                         "attributes."});
  }
  store::ObjectAttrs attrs;
  if (directive == "COPY") {
    attrs.headers = source.attrs.headers;
  } else if (!StoredHeaders(r, &attrs.headers)) {
    return;
  }
  // The copy's checksum, computed over the bytes copied: in the algorithm
  // the request names, else the source's, else CRC64NVME.
  std::string algorithm = source.attrs.checksum.empty() ? "crc64nvme" : source.attrs.checksum.algorithm;
  if (r.req.headers.Has("x-amz-checksum-algorithm")) {
    auto a = s3::ParseChecksumAlgorithm(r.req.headers.Get("x-amz-checksum-algorithm"));
    if (!a.ok()) return SendError(r, {400, "InvalidRequest", a.status().message()});
    algorithm = *a;
  }
  auto writer = objects_.Put(r.bucket, r.key, std::move(attrs), source.size);
  if (!writer.ok()) return SendStatus(r, writer.status(), Subject::kBucket);
  std::shared_ptr<s3::Checksum> sum = s3::Checksum::Make(algorithm).value();
  (*writer)->set_tap([sum](std::string_view d) { sum->Update(d); });
  if (Status s = objects_.CopyInto(source, 0, source.size, **writer); !s.ok()) {
    return SendStatus(r, s, Subject::kObject);
  }
  (*writer)->set_checksum({algorithm, sum->Base64(), "FULL_OBJECT", {}});
  auto meta = (*writer)->Commit();
  if (!meta.ok()) return SendStatus(r, meta.status(), Subject::kObject);
  const auto& c = meta->attrs.checksum;
  SendXml(r, fmt::format("<CopyObjectResult xmlns=\"{}\"><LastModified>{}</LastModified><ETag>{}</ETag>"
                         "<{}>{}</{}><ChecksumType>{}</ChecksumType></CopyObjectResult>",
                         kXmlns, IsoTime(meta->mtime_ns), s3::XmlText(meta->etag), s3::ChecksumElement(c.algorithm),
                         c.value, s3::ChecksumElement(c.algorithm), c.type));
}

// GetObjectAttributes: what x-amz-object-attributes asks for (ETag,
// Checksum, ObjectParts, StorageClass, ObjectSize) in one document; a
// multipart object's parts page by x-amz-part-number-marker and
// x-amz-max-parts (1000 at most), each with its size and checksum.
void S3Handler::ObjectAttributes(S3Request& r) {
  if (r.Has("versionId") && r.Param("versionId") != "null") {
    return SendError(r, {400, "InvalidArgument", "Invalid version id specified (the bucket is not versioned)"});
  }
  const auto& hs = r.req.headers;
  std::set<std::string> wanted;
  const std::string names = hs.Get("x-amz-object-attributes");
  for (std::string_view list = names; !list.empty();) {
    const size_t comma = list.find(',');
    std::string name(list.substr(0, comma));
    while (!name.empty() && name.back() == ' ') name.pop_back();
    while (!name.empty() && name.front() == ' ') name.erase(0, 1);
    if (name != "ETag" && name != "Checksum" && name != "ObjectParts" && name != "StorageClass" &&
        name != "ObjectSize") {
      return SendError(r, {400, "InvalidArgument", fmt::format("Invalid attribute name specified: '{}'", name)});
    }
    wanted.insert(name);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  if (wanted.empty()) {
    return SendError(r, {400, "InvalidArgument", "x-amz-object-attributes must name at least one attribute"});
  }
  uint32_t marker = 0, max_parts = 1000;
  for (auto [name, out] :
       {std::pair<const char*, uint32_t*>{"x-amz-part-number-marker", &marker}, {"x-amz-max-parts", &max_parts}}) {
    if (!hs.Has(name)) continue;
    const std::string v = hs.Get(name);
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
      return SendError(r, {400, "InvalidArgument", fmt::format("{} '{}' must be a non-negative integer", name, v)});
    }
  }
  max_parts = std::min<uint32_t>(max_parts, 1000);
  auto meta = objects_.Head(r.bucket, r.key);
  if (!meta.ok()) return SendStatus(r, meta.status(), Subject::kObject);
  const store::ObjectMeta& o = *meta;
  const store::ObjectChecksum& c = o.attrs.checksum;
  std::string xml = fmt::format("<GetObjectAttributesResponse xmlns=\"{}\">", kXmlns);
  if (wanted.count("ETag")) {
    std::string etag = o.etag;
    if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
    xml += "<ETag>" + s3::XmlText(etag) + "</ETag>";
  }
  const std::string element = c.empty() ? "" : s3::ChecksumElement(c.algorithm);
  if (wanted.count("Checksum") && !c.empty()) {
    xml += fmt::format("<Checksum><{}>{}</{}><ChecksumType>{}</ChecksumType></Checksum>", element, c.value, element,
                       c.type);
  }
  if (wanted.count("ObjectParts") && !o.attrs.part_sizes.empty()) {
    const auto& sizes = o.attrs.part_sizes;
    std::string items;
    uint32_t count = 0, last = marker;
    bool truncated = false;
    for (uint32_t n = marker + 1; n <= sizes.size(); ++n) {
      if (count == max_parts) {
        truncated = true;
        break;
      }
      std::string sum;
      if (c.parts.size() == sizes.size()) sum = fmt::format("<{}>{}</{}>", element, c.parts[n - 1], element);
      items += fmt::format("<Part><PartNumber>{}</PartNumber><Size>{}</Size>{}</Part>", n, sizes[n - 1], sum);
      last = n;
      ++count;
    }
    xml += fmt::format(
        "<ObjectParts><PartsCount>{}</PartsCount><PartNumberMarker>{}</PartNumberMarker>"
        "<NextPartNumberMarker>{}</NextPartNumberMarker><MaxParts>{}</MaxParts><IsTruncated>{}</IsTruncated>{}"
        "</ObjectParts>",
        sizes.size(), marker, last, max_parts, truncated ? "true" : "false", items);
  }
  if (wanted.count("StorageClass")) xml += "<StorageClass>STANDARD</StorageClass>";
  if (wanted.count("ObjectSize")) xml += fmt::format("<ObjectSize>{}</ObjectSize>", o.size);
  http::Headers h;
  h.Add("Last-Modified", http::HttpDate(o.mtime_ns / 1000000000));
  SendXml(r, xml + "</GetObjectAttributesResponse>", 200, std::move(h));
}

void S3Handler::ObjectTagging(S3Request& r) {
  auto meta = objects_.Head(r.bucket, r.key);
  if (!meta.ok()) return SendStatus(r, meta.status(), Subject::kObject);
  if (r.req.method == "GET") {
    return SendXml(r, fmt::format("<Tagging xmlns=\"{}\"><TagSet></TagSet></Tagging>", kXmlns));
  }
  if (r.req.method == "DELETE") return SendEmpty(r, 204);
  std::string body;
  if (!ReadSmallBody(r, &body, 64 << 10)) return;
  size_t tags = 0;
  Status s = s3::WalkXml(body, "Tagging", [&](const std::string& path, const std::string&) {
    if (path == "Tagging/TagSet/Tag") ++tags;
    return Status::Ok();
  });
  if (!s.ok()) return SendError(r, {400, "MalformedXML", s.message()});
  if (tags > 0) {
    return SendError(r, {501, "NotImplemented",
                         "object tags are not kept by this node; nothing was changed (an empty tag set is accepted)"});
  }
  SendEmpty(r, 200);
}

void S3Handler::Acl(S3Request& r) {
  if (!r.key.empty()) {
    auto meta = objects_.Head(r.bucket, r.key);
    if (!meta.ok()) return SendStatus(r, meta.status(), Subject::kObject);
  } else if (auto page = objects_.meta().ListObjects({r.bucket, "", "", 0}); !page.ok()) {
    return SendStatus(r, page.status(), Subject::kBucket);
  }
  if (r.req.method == "GET") {
    // The requester's own permissions, in ACL terms: FULL_CONTROL for the
    // node's administrators; for a user's key READ (an object: read it; a
    // bucket: list it) and WRITE (a bucket: write objects in it).
    std::vector<std::string> permissions;
    if (r.who == nullptr || r.who->kind != KeyEntry::Kind::kStored) {
      permissions.push_back("FULL_CONTROL");
    } else if (!r.key.empty()) {
      if (s3::Allows(r.who->grants, s3::kRead, r.bucket, r.key)) permissions.push_back("READ");
    } else {
      if (s3::AllowsSome(r.who->grants, s3::kList, r.bucket)) permissions.push_back("READ");
      if (s3::AllowsSome(r.who->grants, s3::kWrite, r.bucket)) permissions.push_back("WRITE");
    }
    std::string grants;
    for (const auto& p : permissions) {
      grants += fmt::format(
          "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:type=\"CanonicalUser\">"
          "<ID>aquifer</ID><DisplayName>aquifer</DisplayName></Grantee><Permission>{}</Permission></Grant>",
          p);
    }
    return SendXml(r,
                   fmt::format("<AccessControlPolicy xmlns=\"{}\"><Owner><ID>aquifer</ID><DisplayName>aquifer"
                               "</DisplayName></Owner><AccessControlList>{}</AccessControlList></AccessControlPolicy>",
                               kXmlns, grants));
  }
  std::string body;
  if (!ReadSmallBody(r, &body, 64 << 10)) return;
  const std::string canned = r.req.headers.Get("x-amz-acl");
  // A policy that grants only its owner (what a GET ?acl here answers, and
  // what tools copy from object to object) is 'private': accepted as is.
  bool owner_only = body.empty();
  if (!body.empty()) {
    auto policy = s3::ParseAccessControlPolicy(body);
    if (!policy.ok()) return SendError(r, {400, "MalformedACLError", policy.status().message()});
    owner_only = s3::OwnerOnly(*policy);
  }
  if (!owner_only || (!canned.empty() && canned != "private")) {
    return SendError(r, {501, "NotImplemented",
                         "access control lists are not kept by this node (a key's permissions are its grants: "
                         "aquifer key grant); only 'private' (the canned ACL, or a policy granting its owner "
                         "alone) is accepted; nothing was changed"});
  }
  SendEmpty(r, 200);
}

void S3Handler::DeleteObject(S3Request& r) {
  if (r.Has("versionId") && r.Param("versionId") != "null") {
    return SendError(r, {400, "InvalidArgument", "Invalid version id specified (the bucket is not versioned)"});
  }
  Status s = objects_.Delete(r.bucket, r.key);
  // S3 answers 204 whether or not the key existed; a missing bucket is an error.
  if (!s.ok() && !(s.code() == StatusCode::kNotFound && s.subject() != Subject::kBucket)) {
    return SendStatus(r, s, Subject::kObject);
  }
  SendEmpty(r, 204);
}

}  // namespace aq::server
