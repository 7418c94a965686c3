#include "s3/chunked.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <charconv>

#include "http/message.h"
#include "s3/sigv4.h"

namespace aq::s3 {
namespace {

constexpr size_t kMaxLine = 4096;
constexpr uint64_t kMaxChunk = 1ull << 30;
constexpr const char* kEmptySha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

EVP_MD_CTX* Ctx(void* p) { return static_cast<EVP_MD_CTX*>(p); }

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

std::string ChunkSignature(const StreamingContext& c, const std::string& previous, const std::string& data_sha) {
  const std::string sts =
      "AWS4-HMAC-SHA256-PAYLOAD\n" + c.amz_date + "\n" + c.scope + "\n" + previous + "\n" + kEmptySha + "\n" + data_sha;
  return HmacHex(c.signing_key, sts);
}

AwsChunkedDecoder::AwsChunkedDecoder(StreamingContext context, std::string trailer_header)
    : c_(std::move(context)), trailer_header_(http::ToLower(Trim(trailer_header))), sha_(EVP_MD_CTX_new()) {
  previous_ = c_.seed_signature;
  if (c_.trailer && !trailer_header_.empty()) {
    auto cs = Checksum::Make(ChecksumAlgorithmOfHeader(trailer_header_));
    if (cs.ok()) checksum_ = std::move(*cs);
  }
}

AwsChunkedDecoder::~AwsChunkedDecoder() { EVP_MD_CTX_free(Ctx(sha_)); }

Status AwsChunkedDecoder::Fail(int status, const char* code, std::string message) {
  error_ = {status, code, message};
  return InvalidArgument(std::move(message));
}

Status AwsChunkedDecoder::HeaderLine(std::string_view line) {
  const size_t semi = line.find(';');
  std::string_view size_text = line.substr(0, semi);
  uint64_t size = 0;
  auto [end, ec] = std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
  if (size_text.empty() || ec != std::errc() || end != size_text.data() + size_text.size()) {
    return Fail(400, "IncompleteBody", fmt::format("aws-chunked: malformed chunk header '{}'", line.substr(0, 80)));
  }
  if (size > kMaxChunk) return Fail(400, "InvalidRequest", "aws-chunked: a chunk over 1 GiB");
  chunk_signature_.clear();
  if (semi != std::string_view::npos) {
    std::string_view ext = line.substr(semi + 1);
    constexpr std::string_view kSig = "chunk-signature=";
    if (ext.substr(0, kSig.size()) == kSig) chunk_signature_ = std::string(ext.substr(kSig.size()));
  }
  if (c_.signed_chunks && chunk_signature_.size() != 64) {
    return Fail(403, "SignatureDoesNotMatch", "aws-chunked: a chunk without its chunk-signature");
  }
  remaining_ = size;
  last_chunk_ = size == 0;
  EVP_DigestInit_ex(Ctx(sha_), EVP_sha256(), nullptr);
  if (size == 0) return ChunkEnd();
  state_ = State::kData;
  return Status::Ok();
}

// The chunk's data has passed: check its signature.
Status AwsChunkedDecoder::ChunkEnd() {
  if (c_.signed_chunks) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(Ctx(sha_), d, &len);
    const std::string expect = ChunkSignature(c_, previous_, HexEncode(d, len));
    if (!SameSignature(expect, chunk_signature_)) {
      return Fail(
          403, "SignatureDoesNotMatch",
          fmt::format("aws-chunked: the signature of the chunk ending at payload byte {} does not match", decoded_));
    }
    previous_ = expect;
  }
  if (last_chunk_) {
    state_ = c_.trailer ? State::kTrailer : State::kFinalCrlf;
  } else {
    state_ = State::kDataEnd;
  }
  return Status::Ok();
}

Status AwsChunkedDecoder::TrailerLine(std::string_view line) {
  if (line.empty()) {
    // The end of the trailer: verify what it said.
    if (!trailer_header_.empty()) {
      if (trailer_value_.empty()) {
        return Fail(400, "InvalidRequest", fmt::format("aws-chunked: the trailer lacks {}", trailer_header_));
      }
      if (checksum_ && checksum_->Base64() != trailer_value_) {
        return Fail(400, "BadDigest",
                    fmt::format("the {} trailer does not match the payload received", trailer_header_));
      }
    }
    if (c_.signed_chunks) {
      const std::string sts = "AWS4-HMAC-SHA256-TRAILER\n" + c_.amz_date + "\n" + c_.scope + "\n" + previous_ + "\n" +
                              Sha256Hex(trailer_canonical_);
      if (!SameSignature(HmacHex(c_.signing_key, sts), trailer_signature_)) {
        return Fail(403, "SignatureDoesNotMatch", "aws-chunked: the trailer signature does not match");
      }
    }
    state_ = State::kDone;
    return Status::Ok();
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) {
    return Fail(400, "IncompleteBody", fmt::format("aws-chunked: malformed trailer '{}'", line.substr(0, 80)));
  }
  const std::string name = http::ToLower(Trim(line.substr(0, colon)));
  const std::string value = Trim(line.substr(colon + 1));
  if (name == "x-amz-trailer-signature") {
    trailer_signature_ = value;
    return Status::Ok();
  }
  trailer_canonical_ += name + ":" + value + "\n";
  if (name == trailer_header_) trailer_value_ = value;
  return Status::Ok();
}

Status AwsChunkedDecoder::Feed(std::string_view in, std::string* out) {
  while (!in.empty()) {
    switch (state_) {
      case State::kHeader:
      case State::kTrailer: {
        const size_t nl = in.find('\n');
        line_.append(in.substr(0, nl == std::string_view::npos ? in.size() : nl + 1));
        in.remove_prefix(nl == std::string_view::npos ? in.size() : nl + 1);
        if (line_.size() > kMaxLine) return Fail(400, "InvalidRequest", "aws-chunked: a line over 4 KiB");
        if (line_.empty() || line_.back() != '\n') break;
        if (line_.size() < 2 || line_[line_.size() - 2] != '\r') {
          return Fail(400, "IncompleteBody", "aws-chunked: a line not ended by CRLF");
        }
        std::string line = line_.substr(0, line_.size() - 2);
        line_.clear();
        AQ_TRY(state_ == State::kHeader ? HeaderLine(line) : TrailerLine(line));
        break;
      }
      case State::kData: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, in.size()));
        std::string_view data = in.substr(0, take);
        out->append(data);
        if (c_.signed_chunks) EVP_DigestUpdate(Ctx(sha_), data.data(), data.size());
        if (checksum_) checksum_->Update(data);
        decoded_ += take;
        remaining_ -= take;
        in.remove_prefix(take);
        if (remaining_ == 0) AQ_TRY(ChunkEnd());
        break;
      }
      case State::kDataEnd:
      case State::kFinalCrlf: {
        line_ += in.front();
        in.remove_prefix(1);
        if (line_.size() < 2) break;
        if (line_ != "\r\n") return Fail(400, "IncompleteBody", "aws-chunked: chunk data not followed by CRLF");
        line_.clear();
        state_ = state_ == State::kDataEnd ? State::kHeader : State::kDone;
        break;
      }
      case State::kDone: return Fail(400, "InvalidRequest", "aws-chunked: bytes after the end of the payload");
    }
  }
  return Status::Ok();
}

}  // namespace aq::s3
