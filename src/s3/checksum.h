// The checksums S3 clients attach to uploads: Content-MD5 (base64 MD5 of
// the body) and the x-amz-checksum-{crc32,crc32c,sha1,sha256} values (base64
// of the big-endian digest), sent as a header or as an aws-chunked trailer.
// A Checksum is fed the body as it streams and compared at its end.
//
// Thread safety: one Checksum per body, used by one thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace aq::s3 {

class Checksum {
 public:
  // "md5", "crc32", "crc32c", "sha1", "sha256"; InvalidArgument otherwise.
  static Result<std::unique_ptr<Checksum>> Make(std::string_view algorithm);
  virtual ~Checksum() = default;
  virtual void Update(std::string_view data) = 0;
  // Base64 of the digest.
  virtual std::string Base64() = 0;
};

// The algorithm an x-amz-checksum-* header names ("crc32" for
// "x-amz-checksum-crc32"), or "" for any other header.
std::string ChecksumAlgorithmOfHeader(std::string_view header_name);

std::string Base64Encode(std::string_view bytes);
// Strict base64 (padding required); InvalidArgument on anything else.
Result<std::string> Base64Decode(std::string_view text);

}  // namespace aq::s3
