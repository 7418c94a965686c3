#include "s3/checksum.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <zlib.h>

#include "common/crc32c.h"
#include "http/message.h"

namespace aq::s3 {
namespace {

class Digest final : public Checksum {
 public:
  explicit Digest(const EVP_MD* md) : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    EVP_DigestInit_ex(ctx_.get(), md, nullptr);
  }
  void Update(std::string_view d) override { EVP_DigestUpdate(ctx_.get(), d.data(), d.size()); }
  std::string Base64() override {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(ctx_.get(), out, &len);
    return Base64Encode(std::string_view(reinterpret_cast<char*>(out), len));
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

std::string BigEndian32(uint32_t v) {
  std::string s(4, '\0');
  s[0] = static_cast<char>(v >> 24);
  s[1] = static_cast<char>(v >> 16);
  s[2] = static_cast<char>(v >> 8);
  s[3] = static_cast<char>(v);
  return s;
}

class Crc32 final : public Checksum {
 public:
  void Update(std::string_view d) override {
    crc_ = static_cast<uint32_t>(::crc32(crc_, reinterpret_cast<const Bytef*>(d.data()), static_cast<uInt>(d.size())));
  }
  std::string Base64() override { return Base64Encode(BigEndian32(crc_)); }

 private:
  uint32_t crc_ = 0;
};

class Crc32c final : public Checksum {
 public:
  void Update(std::string_view d) override { crc_ = crc32c::Extend(crc_, d.data(), d.size()); }
  std::string Base64() override { return Base64Encode(BigEndian32(crc_)); }

 private:
  uint32_t crc_ = 0;
};

}  // namespace

Result<std::unique_ptr<Checksum>> Checksum::Make(std::string_view a) {
  if (a == "md5") return std::unique_ptr<Checksum>(std::make_unique<Digest>(EVP_md5()));
  if (a == "sha1") return std::unique_ptr<Checksum>(std::make_unique<Digest>(EVP_sha1()));
  if (a == "sha256") return std::unique_ptr<Checksum>(std::make_unique<Digest>(EVP_sha256()));
  if (a == "crc32") return std::unique_ptr<Checksum>(std::make_unique<Crc32>());
  if (a == "crc32c") return std::unique_ptr<Checksum>(std::make_unique<Crc32c>());
  return InvalidArgument(fmt::format("checksum algorithm '{}' is not one of crc32, crc32c, sha1, sha256", a));
}

std::string ChecksumAlgorithmOfHeader(std::string_view name) {
  constexpr std::string_view kPrefix = "x-amz-checksum-";
  if (name.size() <= kPrefix.size() || !http::EqualsIgnoreCase(name.substr(0, kPrefix.size()), kPrefix)) return "";
  std::string a = http::ToLower(name.substr(kPrefix.size()));
  if (a == "crc32" || a == "crc32c" || a == "sha1" || a == "sha256") return a;
  return "";
}

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) {
    return InvalidArgument(fmt::format("'{}' is not base64", text.substr(0, 64)));
  }
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/' && c != '=') {
      return InvalidArgument(fmt::format("'{}' is not base64", text.substr(0, 64)));
    }
  }
  std::string out(3 * text.size() / 4, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return InvalidArgument(fmt::format("'{}' is not base64", text.substr(0, 64)));
  size_t pad = 0;
  if (text.back() == '=') ++pad;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

}  // namespace aq::s3
