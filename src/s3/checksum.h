// The checksums S3 clients attach to uploads: Content-MD5 (base64 MD5 of
// the body) and the x-amz-checksum-{crc32,crc32c,crc64nvme,sha1,sha256}
// values (base64 of the big-endian digest), sent as a header or as an
// aws-chunked trailer. A Checksum is fed the body as it streams and compared
// at its end. The node stores one with every object (store::ObjectAttrs)
// and returns it when asked (x-amz-checksum-mode: ENABLED).
//
// CRC64NVME is the CRC-64 of NVMe (reflected polynomial 0x9a6c9329ac4bc9b5,
// initial value and final xor all ones), the default of current AWS SDKs.
//
// Thread safety: one Checksum per body, used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace aq::s3 {

// A request header by which a writer that does not need S3's MD5 ETag (the
// aquifer:// client, which sends every body's CRC32C) asks, with the value
// kUniqueEtag, for an ETag unique per write instead: the node then makes
// no MD5 pass over the body (store::ObjectWriter::set_unique_etag).
// Other clients, and copies, get the MD5 ETag as S3 makes it.
inline constexpr const char* kEtagHeader = "x-aquifer-etag";
inline constexpr const char* kUniqueEtag = "unique";

class Checksum {
 public:
  // "md5", "crc32", "crc32c", "crc64nvme", "sha1", "sha256"; InvalidArgument
  // otherwise.
  static Result<std::unique_ptr<Checksum>> Make(std::string_view algorithm);
  virtual ~Checksum() = default;
  virtual void Update(std::string_view data) = 0;
  // Base64 of the digest.
  virtual std::string Base64() = 0;
  // The name Make was given.
  const std::string& algorithm() const { return algorithm_; }

 private:
  std::string algorithm_;
};

// The algorithm an x-amz-checksum-* header names ("crc32" for
// "x-amz-checksum-crc32"), or "" for any other header.
std::string ChecksumAlgorithmOfHeader(std::string_view header_name);

// The algorithm S3 spells "CRC32", "CRC32C", "CRC64NVME", "SHA1" or "SHA256"
// (x-amz-checksum-algorithm, x-amz-sdk-checksum-algorithm; any case), in the
// lower case Make takes; InvalidArgument for any other.
Result<std::string> ParseChecksumAlgorithm(std::string_view name);
// "x-amz-checksum-crc32" for "crc32".
std::string ChecksumHeader(std::string_view algorithm);
// "ChecksumCRC32" for "crc32": the element XML answers carry it in.
std::string ChecksumElement(std::string_view algorithm);
// crc32, crc32c and crc64nvme: their whole-object value follows from the
// parts' (CombineCrc), so a multipart object can carry it.
bool IsCrc(std::string_view algorithm);
// The CRC of the bytes A then B, from the base64 CRCs of A and of B and the
// length of B (the zlib crc32_combine method, for any of the three).
Result<std::string> CombineCrc(std::string_view algorithm, std::string_view a, std::string_view b, uint64_t b_length);
// CRC64NVME of data, extending `crc` (0 for none): carry-less multiplication
// (PCLMULQDQ) where the CPU has it, tables otherwise.
uint64_t Crc64Nvme(uint64_t crc, const void* data, size_t n);
uint64_t Crc64NvmePortable(uint64_t crc, const void* data, size_t n);  // the tables only

std::string Base64Encode(std::string_view bytes);
// Strict base64 (padding required); InvalidArgument on anything else.
Result<std::string> Base64Decode(std::string_view text);

}  // namespace aq::s3
