// aws-chunked request bodies (Content-Encoding: aws-chunked), as AWS SDKs
// stream uploads whose length or hash is not known up front:
//
//   <hex size>[;chunk-signature=<sig>]\r\n<data>\r\n ... 0[;chunk-signature=<sig>]\r\n
//   [<trailer name>:<value>\r\n ... [x-amz-trailer-signature:<sig>\r\n]]\r\n
//
// Signed chunks chain their signatures from the request's (seed) signature,
// each over the SHA-256 of the chunk's data; a trailer carries an
// x-amz-checksum-* of the whole payload, itself signed in the signed form.
// The decoder checks all of it as the bytes stream and hands on the payload;
// a mismatch fails the upload before anything is committed.
//
// Thread safety: one decoder per body, used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "s3/auth.h"
#include "s3/checksum.h"
#include "s3/errors.h"

namespace aq::s3 {

class AwsChunkedDecoder {
 public:
  // `trailer_header` is the request's x-amz-trailer (e.g.
  // "x-amz-checksum-crc32"), required in the trailer forms.
  AwsChunkedDecoder(StreamingContext context, std::string trailer_header);

  // Consumes all of `in`, appending the payload to `out`. Errors carry an S3
  // error (see error()): malformed framing (400 IncompleteBody /
  // InvalidRequest), a chunk or trailer signature that does not match (403
  // SignatureDoesNotMatch), a trailing checksum that does not (400 BadDigest).
  Status Feed(std::string_view in, std::string* out);
  // The last chunk and the trailer were read.
  bool done() const { return state_ == State::kDone; }
  uint64_t decoded() const { return decoded_; }
  const Error& error() const { return error_; }
  // The algorithm of the trailing checksum x-amz-trailer names ("crc32";
  // "" when none), and the value the trailer carried (checked once done()).
  std::string trailer_algorithm() const { return checksum_ ? checksum_->algorithm() : std::string(); }
  const std::string& trailer_value() const { return trailer_value_; }

 private:
  enum class State { kHeader, kData, kDataEnd, kTrailer, kFinalCrlf, kDone };
  Status Fail(int status, const char* code, std::string message);
  Status HeaderLine(std::string_view line);
  Status ChunkEnd();
  Status TrailerLine(std::string_view line);

  StreamingContext c_;
  std::string trailer_header_;
  State state_ = State::kHeader;
  std::string line_;             // a header or trailer line being assembled
  uint64_t remaining_ = 0;       // data bytes left in this chunk
  std::string chunk_signature_;  // the current chunk's claimed signature
  std::string previous_;         // the signature the next one chains from
  void* sha_ = nullptr;          // EVP_MD_CTX* of the current chunk's data
  std::unique_ptr<Checksum> checksum_;
  std::string trailer_canonical_, trailer_value_, trailer_signature_;
  bool last_chunk_ = false;
  uint64_t decoded_ = 0;
  Error error_;

 public:
  ~AwsChunkedDecoder();
  AwsChunkedDecoder(const AwsChunkedDecoder&) = delete;
  AwsChunkedDecoder& operator=(const AwsChunkedDecoder&) = delete;
};

// The signature of one chunk (STRING-TO-SIGN "AWS4-HMAC-SHA256-PAYLOAD").
std::string ChunkSignature(const StreamingContext& c, const std::string& previous, const std::string& data_sha256_hex);

}  // namespace aq::s3
