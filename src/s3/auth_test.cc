// Request authentication (header, presigned, Date-only) and aws-chunked
// decoding, checked against AWS's published streaming example (its seed and
// chunk signatures), not only against our own signer.
#include "s3/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "common/utf8.h"
#include "s3/checksum.h"
#include "s3/chunked.h"
#include "s3/endpoint.h"
#include "s3/errors.h"
#include "s3/layout.h"
#include "s3/metadata.h"
#include "s3/sigv4.h"
#include "s3/xml.h"

namespace aq::s3 {
namespace {

const Credential kAws{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"};
constexpr int64_t k20130524 = 1369353600;  // 2013-05-24T00:00:00Z

AuthOptions Options(int64_t now) {
  AuthOptions o;
  o.now_unix = now;
  o.lookup = [](const std::string& key) -> const Credential* { return key == kAws.access_key ? &kAws : nullptr; };
  return o;
}

http::Request Parse(const std::string& raw) {
  http::RequestParser p{http::Limits()};
  auto n = p.ParseHead(raw);
  EXPECT_TRUE(n.ok() && *n > 0) << n.status().ToString();
  return p.request();
}

// AWS's "Example: PUT Object" for Signature V4 streaming (sigv4-streaming).
http::Request AwsStreamingExample() {
  return Parse(
      "PUT /examplebucket/chunkObject.txt HTTP/1.1\r\n"
      "Host: s3.amazonaws.com\r\n"
      "x-amz-date: 20130524T000000Z\r\n"
      "x-amz-storage-class: REDUCED_REDUNDANCY\r\n"
      "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
      "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
      "x-amz-decoded-content-length;x-amz-storage-class,"
      "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9\r\n"
      "x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD\r\n"
      "Content-Encoding: aws-chunked\r\n"
      "x-amz-decoded-content-length: 66560\r\n"
      "Content-Length: 66824\r\n\r\n");
}

std::string AwsStreamingBody() {
  return "10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n" +
         std::string(65536, 'a') +
         "\r\n400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n" +
         std::string(1024, 'a') +
         "\r\n0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n";
}

TEST(AuthTest, AwsStreamingExampleSeedAndChunks) {
  auto a = Authenticate(AwsStreamingExample(), Options(k20130524));
  ASSERT_TRUE(a.ok) << a.error.code << ": " << a.error.message;
  ASSERT_TRUE(a.result.streaming.has_value());
  EXPECT_EQ(a.result.streaming->seed_signature, "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9");
  const std::string body = AwsStreamingBody();
  // Any slicing of the body decodes the same, down to a byte at a time.
  for (size_t slice : {body.size(), size_t{70000}, size_t{4096}, size_t{7}, size_t{1}}) {
    AwsChunkedDecoder d(*a.result.streaming, "");
    std::string out;
    for (size_t i = 0; i < body.size(); i += slice) {
      ASSERT_TRUE(d.Feed(std::string_view(body).substr(i, slice), &out).ok())
          << "slice " << slice << ": " << d.error().message;
    }
    EXPECT_TRUE(d.done());
    EXPECT_EQ(out, std::string(66560, 'a'));
  }
  // One byte changed in the second chunk: its signature no longer matches.
  std::string bad = body;
  bad[body.find("400;") + 100] = 'b';
  AwsChunkedDecoder d(*a.result.streaming, "");
  std::string out;
  EXPECT_FALSE(d.Feed(bad, &out).ok());
  EXPECT_EQ(d.error().code, "SignatureDoesNotMatch");
  // Without the final chunk the body is not done.
  AwsChunkedDecoder e(*a.result.streaming, "");
  ASSERT_TRUE(e.Feed(body.substr(0, body.find("0;chunk")), &out).ok());
  EXPECT_FALSE(e.done());
  // Skewed clock: refused.
  EXPECT_EQ(Authenticate(AwsStreamingExample(), Options(k20130524 + 3600)).error.code, "RequestTimeTooSkewed");
}

TEST(AuthTest, HeaderSignedByOurSignerVerifies) {
  auto headers = SignRequest(kAws.access_key, kAws.secret, "127.0.0.1:9000", "GET", "/bkt/a%20b", "list-type=2",
                             "UNSIGNED-PAYLOAD");
  std::string raw = "GET /bkt/a%20b?list-type=2 HTTP/1.1\r\nHost: 127.0.0.1:9000\r\n";
  for (const auto& [k, v] : headers) raw += k + ": " + v + "\r\n";
  auto a = Authenticate(Parse(raw + "\r\n"), Options(0));
  EXPECT_TRUE(a.ok) << a.error.message;
  EXPECT_EQ(a.result.access_key, kAws.access_key);
  // Another host than the one signed: refused.
  std::string moved = raw;
  moved.replace(moved.find("127.0.0.1:9000"), 14, "127.0.0.1:9001");
  EXPECT_EQ(Authenticate(Parse(moved + "\r\n"), Options(0)).error.code, "SignatureDoesNotMatch");
  // No Authorization, no anonymous access.
  EXPECT_EQ(Authenticate(Parse("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), Options(0)).error.status, 403);
}

TEST(AuthTest, PresignedUrls) {
  const int64_t now = 1700000000;
  const std::string q = PresignQuery(kAws.access_key, kAws.secret, "h:1", "GET", "/bkt/key",
                                     "response-content-type=text%2Fplain", 60, now);
  const std::string raw = "GET /bkt/key?" + q + " HTTP/1.1\r\nHost: h:1\r\n\r\n";
  auto a = Authenticate(Parse(raw), Options(now + 30));
  EXPECT_TRUE(a.ok) << a.error.message;
  EXPECT_TRUE(a.result.presigned);
  auto late = Authenticate(Parse(raw), Options(now + 61));
  EXPECT_EQ(late.error.code, "AccessDenied");
  EXPECT_NE(late.error.message.find("expired"), std::string::npos);
  std::string other = raw;
  other.replace(other.find("/bkt/key"), 8, "/bkt/kez");
  EXPECT_EQ(Authenticate(Parse(other), Options(now)).error.code, "SignatureDoesNotMatch");
}

// AWS's Signature Version 2 examples ("Signing and authenticating REST
// requests"), as path-style requests: the header form and a query-string URL.
TEST(AuthTest, SignatureVersion2HeaderAndQuery) {
  const int64_t t = 1175024202;  // Tue, 27 Mar 2007 19:36:42 GMT
  const std::string get = "GET /awsexamplebucket1/photos/puppy.jpg HTTP/1.1\r\nHost: s3.us-west-1.amazonaws.com\r\n";
  auto a = Authenticate(Parse(get + "Date: Tue, 27 Mar 2007 19:36:42 +0000\r\n"
                                    "Authorization: AWS AKIAIOSFODNN7EXAMPLE:qgk2+6Sv9/oM7G3qLEjTH1a1l1g=\r\n\r\n"),
                        Options(t + 60));
  EXPECT_TRUE(a.ok) << a.error.code << ": " << a.error.message;
  EXPECT_EQ(a.result.access_key, kAws.access_key);
  auto wrong = Authenticate(Parse(get + "Date: Tue, 27 Mar 2007 19:36:43 +0000\r\n"
                                        "Authorization: AWS AKIAIOSFODNN7EXAMPLE:qgk2+6Sv9/oM7G3qLEjTH1a1l1g=\r\n\r\n"),
                            Options(t + 60));
  EXPECT_EQ(wrong.error.code, "SignatureDoesNotMatch");
  auto skewed =
      Authenticate(Parse(get + "Date: Tue, 27 Mar 2007 19:36:42 +0000\r\n"
                               "Authorization: AWS AKIAIOSFODNN7EXAMPLE:qgk2+6Sv9/oM7G3qLEjTH1a1l1g=\r\n\r\n"),
                   Options(t + 3600));
  EXPECT_EQ(skewed.error.code, "RequestTimeTooSkewed");
  EXPECT_EQ(Authenticate(Parse(get + "Date: Tue, 27 Mar 2007 19:36:42 +0000\r\nAuthorization: AWS nocolon\r\n\r\n"),
                         Options(t))
                .error.code,
            "AuthorizationHeaderMalformed");
  const std::string url =
      "GET /johnsmith/photos/puppy.jpg?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&"
      "Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D&Expires=1175139620 HTTP/1.1\r\nHost: s3.amazonaws.com\r\n\r\n";
  auto q = Authenticate(Parse(url), Options(1175139620 - 100));
  EXPECT_TRUE(q.ok) << q.error.code << ": " << q.error.message;
  EXPECT_TRUE(q.result.presigned);
  auto late = Authenticate(Parse(url), Options(1175139620 + 1));
  EXPECT_EQ(late.error.code, "AccessDenied");
  EXPECT_NE(late.error.message.find("expired"), std::string::npos);
  std::string other = url;
  other.replace(other.find("puppy"), 5, "kitty");
  EXPECT_EQ(Authenticate(Parse(other), Options(1175139620 - 100)).error.code, "SignatureDoesNotMatch");
}

TEST(AuthTest, DateHeaderOnlyAndHostMustBeSigned) {
  // A request timed by the Date header, signed the SigV4 way.
  SigV4Request r;
  r.method = "GET";
  r.raw_path = "/bkt/obj";
  r.payload_hash = Sha256Hex("");
  r.headers = {{"date", "Fri, 24 May 2013 00:00:00 GMT"}, {"host", "h"}, {"x-amz-content-sha256", r.payload_hash}};
  const std::vector<std::string> names = {"date", "host", "x-amz-content-sha256"};
  SigV4Authorization auth{kAws.access_key, "20130524", "us-east-1", "s3", names, ""};
  const std::string sig =
      Signature(kAws.secret, auth,
                StringToSign("20130524T000000Z", "20130524/us-east-1/s3/aws4_request", CanonicalRequest(r, names)));
  const std::string raw =
      "GET /bkt/obj HTTP/1.1\r\nHost: h\r\nDate: Fri, 24 May 2013 00:00:00 GMT\r\n"
      "x-amz-content-sha256: " +
      r.payload_hash + "\r\nAuthorization: AWS4-HMAC-SHA256 Credential=" + kAws.access_key +
      "/20130524/us-east-1/s3/aws4_request, SignedHeaders=date;host;x-amz-content-sha256, "
      "Signature=" +
      sig + "\r\n\r\n";
  auto a = Authenticate(Parse(raw), Options(k20130524));
  EXPECT_TRUE(a.ok) << a.error.message;
  // The same without host among the signed headers: refused whatever the signature.
  std::string unsigned_host = raw;
  unsigned_host.replace(unsigned_host.find("date;host;"), 10, "date;");
  EXPECT_EQ(Authenticate(Parse(unsigned_host), Options(k20130524)).error.code, "AuthorizationHeaderMalformed");
}

// `serve --credentials FILE` on a new machine: the file is made once, even
// when three nodes start on it at the same moment, and is private.
TEST(AuthTest, MissingCredentialsFileIsCreatedOnceForEveryone) {
  char tmpl[] = "/tmp/aq_keys_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/keys";
  std::vector<std::thread> threads;
  std::vector<Result<std::vector<Credential>>> got(8, Status::Ok());
  // One byte per thread: std::vector<bool> packs its elements into shared
  // words, and eight threads setting their bits at once lose each other's.
  std::vector<char> created(8, 0);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      bool c = false;
      got[i] = LoadOrCreateCredentials(path, &c);
      created[i] = c ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::count(created.begin(), created.end(), 1), 1);
  for (const auto& g : got) {
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_EQ(g->size(), 1u);
    EXPECT_EQ((*g)[0].access_key, (*got[0])[0].access_key);
    EXPECT_EQ((*g)[0].secret.size(), 40u);
  }
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  bool again = true;
  EXPECT_EQ((*LoadOrCreateCredentials(path, &again))[0].access_key, (*got[0])[0].access_key);
  EXPECT_FALSE(again);
  ::unlink(path.c_str());
  ::rmdir(tmpl);
}

TEST(ChunkedTest, UnsignedWithTrailingChecksum) {
  StreamingContext c;
  c.trailer = true;
  auto crc = Checksum::Make("crc32").value();
  crc->Update("hello world");
  const std::string body = "5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:" + crc->Base64() + "\r\n\r\n";
  AwsChunkedDecoder d(c, "x-amz-checksum-crc32");
  std::string out;
  ASSERT_TRUE(d.Feed(body, &out).ok()) << d.error().message;
  EXPECT_TRUE(d.done());
  EXPECT_EQ(out, "hello world");
  std::string wrong = body;
  wrong.replace(wrong.find("hello"), 5, "HELLO");
  AwsChunkedDecoder e(c, "x-amz-checksum-crc32");
  out.clear();
  EXPECT_FALSE(e.Feed(wrong, &out).ok());
  EXPECT_EQ(e.error().code, "BadDigest");
  for (const char* bad : {"zz\r\n", "5\r\nhelloXX", "5\nhello\r\n", "0\r\nno-colon\r\n\r\n"}) {
    AwsChunkedDecoder f(c, "x-amz-checksum-crc32");
    EXPECT_FALSE(f.Feed(bad, &out).ok()) << bad;
  }
}

TEST(S3Test, MetadataValuesAreTextInAndMailSafeOut) {
  EXPECT_EQ(MetadataValueIn("plain value").value(), "plain value");
  EXPECT_EQ(MetadataValueIn("caf\xc3\xa9").value(), "caf\xc3\xa9");
  EXPECT_EQ(MetadataValueIn("caf\xe9").value(), "caf\xc3\xa9");  // not UTF-8: ISO-8859-1
  EXPECT_EQ(MetadataValueIn("=?utf-8?b?Y2Fmw6k=?=").value(), "caf\xc3\xa9");
  EXPECT_EQ(MetadataValueIn("=?UTF-8?Q?a_b=3F?= =?UTF-8?B?Yw==?=").value(), "a b?c");  // space between words dropped
  EXPECT_EQ(MetadataValueIn("x =?UTF-8?B?Yw==?= y").value(), "x c y");
  EXPECT_EQ(MetadataValueIn("=?UTF-8?B?not base64!?=").value(), "=?UTF-8?B?not base64!?=");  // not a word: text
  EXPECT_EQ(MetadataValueIn("=?koi8-r?B?Yw==?=").value(), "=?koi8-r?B?Yw==?=");              // unknown charset
  EXPECT_EQ(MetadataValueIn("=?UTF-8?B?/w==?=").value(), "=?UTF-8?B?/w==?=");                // not UTF-8 inside
  EXPECT_FALSE(MetadataValueIn("a\nb").ok());
  EXPECT_FALSE(MetadataValueIn("=?UTF-8?Q?a=0Ab?=").ok());  // a control character, encoded
  EXPECT_EQ(MetadataValueOut("plain"), "plain");
  EXPECT_EQ(MetadataValueOut("caf\xc3\xa9"), "=?UTF-8?B?Y2Fmw6k=?=");
  EXPECT_EQ(MetadataValueIn(MetadataValueOut("\xe6\x97\xa5\xe6\x9c\xac")).value(), "\xe6\x97\xa5\xe6\x9c\xac");
  EXPECT_TRUE(IsUtf8("\xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsUtf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
}

TEST(S3Test, ChecksumsAndBase64) {
  auto crc = Checksum::Make("crc32").value();
  crc->Update("123456789");
  EXPECT_EQ(Base64Decode(crc->Base64()).value(), std::string("\xcb\xf4\x39\x26", 4));  // the CRC-32 check value
  auto crcc = Checksum::Make("crc32c").value();
  crcc->Update("123456789");
  EXPECT_EQ(Base64Decode(crcc->Base64()).value(), std::string("\xe3\x06\x92\x83", 4));  // CRC-32C's
  EXPECT_EQ(Base64Encode("any carnal pleas"), "YW55IGNhcm5hbCBwbGVhcw==");
  EXPECT_FALSE(Base64Decode("not base64!").ok());
  EXPECT_FALSE(Base64Decode("abc").ok());
  EXPECT_FALSE(Checksum::Make("md4").ok());
  EXPECT_EQ(ChecksumAlgorithmOfHeader("X-Amz-Checksum-SHA256"), "sha256");
  EXPECT_EQ(ChecksumAlgorithmOfHeader("x-amz-checksum-algorithm"), "");
}

// CRC64NVME's check value, and whole-object CRCs combined from any split of
// the bytes (how a multipart object's FULL_OBJECT checksum is made), checked
// against the CRC of the whole computed in one pass.
TEST(S3Test, Crc64NvmeAndCombinedCrcs) {
  auto c = Checksum::Make("crc64nvme").value();
  c->Update("123456789");
  EXPECT_EQ(Base64Decode(c->Base64()).value(), std::string("\xae\x8b\x14\x86\x0a\x79\x98\x88", 8));
  EXPECT_EQ(Crc64Nvme(0, "", 0), 0u);
  EXPECT_EQ(ChecksumAlgorithmOfHeader("x-amz-checksum-CRC64NVME"), "crc64nvme");
  EXPECT_EQ(ParseChecksumAlgorithm("CRC64NVME").value(), "crc64nvme");
  EXPECT_FALSE(ParseChecksumAlgorithm("MD5").ok());
  EXPECT_EQ(ChecksumElement("crc32c"), "ChecksumCRC32C");
  std::string data(100000, '\0');
  uint32_t x = 12345;
  for (char& ch : data) {
    x = x * 1103515245 + 12345;
    ch = static_cast<char>(x >> 16);
  }
  for (const char* algorithm : {"crc32", "crc32c", "crc64nvme"}) {
    auto sum = [&](std::string_view d) {
      auto k = Checksum::Make(algorithm).value();
      k->Update(d);
      return k->Base64();
    };
    const std::string whole = sum(data);
    for (size_t cut : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{65537}, data.size()}) {
      const std::string_view a = std::string_view(data).substr(0, cut), b = std::string_view(data).substr(cut);
      EXPECT_EQ(CombineCrc(algorithm, sum(a), sum(b), b.size()).value(), whole) << algorithm << " cut at " << cut;
    }
    // Byte at a time and in odd pieces: the same value.
    auto k = Checksum::Make(algorithm).value();
    for (size_t i = 0; i < data.size(); i += 13) k->Update(std::string_view(data).substr(i, 13));
    EXPECT_EQ(k->Base64(), whole) << algorithm;
  }
  // The carry-less multiplication path against the tables: every length
  // around its 64-byte steps and 128-byte threshold, at every alignment, and
  // extended piece by piece.
  for (size_t offset = 0; offset < 16; ++offset) {
    for (size_t len = 0; len < 600; ++len) {
      const char* p = data.data() + offset;
      ASSERT_EQ(Crc64Nvme(0, p, len), Crc64NvmePortable(0, p, len)) << "length " << len << " offset " << offset;
    }
  }
  for (size_t len : {size_t{4096}, size_t{65536}, size_t{99999}}) {
    EXPECT_EQ(Crc64Nvme(0x0123456789abcdefULL, data.data() + 1, len),
              Crc64NvmePortable(0x0123456789abcdefULL, data.data() + 1, len));
  }
  EXPECT_FALSE(CombineCrc("sha256", "", "", 1).ok());
  EXPECT_FALSE(CombineCrc("crc32", "AAAAAAAAAAA=", "AAAAAA==", 1).ok());  // 8 bytes for a 4-byte CRC
}

TEST(S3Test, ErrorsMapByCodeAndSubject) {
  EXPECT_EQ(ErrorFor(NotFound(Subject::kBucket, "x")).code, "NoSuchBucket");
  EXPECT_EQ(ErrorFor(NotFound(Subject::kUpload, "x")).code, "NoSuchUpload");
  EXPECT_EQ(ErrorFor(NotFound("x"), Subject::kObject).code, "NoSuchKey");
  EXPECT_EQ(ErrorFor(NotEmpty("x")).code, "BucketNotEmpty");
  EXPECT_EQ(ErrorFor(Unavailable("etcd down")).status, 503);
  EXPECT_EQ(ErrorFor(TimedOut("slow")).status, 503);
  const Error e = ErrorFor(IoError("read '/data/pool/ab/abcd' failed"));
  EXPECT_EQ(e.status, 500);
  const std::string xml = ErrorXml(e, "/b/k", "REQ123");
  EXPECT_EQ(xml.find("/data/pool"), std::string::npos) << "a server path in a 500's body: " << xml;
  EXPECT_NE(xml.find("<RequestId>REQ123</RequestId>"), std::string::npos);
  EXPECT_NE(e.detail.find("/data/pool"), std::string::npos);  // ... but kept for the log
}

TEST(S3Test, XmlAndListings) {
  EXPECT_EQ(XmlText("a<b>&\"'\t\n\r"), "a&lt;b&gt;&amp;&quot;&apos;&#x9;&#xA;&#xD;");
  auto l = ParseListResult(
      "<?xml version=\"1.0\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
      "<Contents><Key>a%20b%2Bc</Key><Size>12</Size><ETag>&quot;e&quot;</ETag></Contents>"
      "<CommonPrefixes><Prefix>d%2F</Prefix></CommonPrefixes>"
      "<NextContinuationToken>tok</NextContinuationToken></ListBucketResult>");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->objects.size(), 1u);
  EXPECT_EQ(l->objects[0].key, "a b+c");
  EXPECT_EQ(l->objects[0].size, 12u);
  EXPECT_EQ(l->objects[0].etag, "\"e\"");
  EXPECT_EQ(l->prefixes, std::vector<std::string>{"d/"});
  EXPECT_TRUE(l->truncated);
  EXPECT_EQ(l->next_token, "tok");
  EXPECT_FALSE(ParseListResult("<Error><Code>X</Code></Error>").ok());
  EXPECT_FALSE(ParseListResult("<ListBucketResult><Contents><Size>x</Size></Contents></ListBucketResult>").ok());
  EXPECT_EQ(ParseErrorXml("<Error><Code>NoSuchKey</Code><Message>m</Message></Error>").first, "NoSuchKey");
}

// s3://BUCKET/KEY at the endpoint the AWS settings name, in the AWS CLI's
// order: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, then the profile's
// endpoint_url in the config file (its s3 sub-section first).
TEST(EndpointTest, S3UrlsTakeTheEndpointFromTheAwsSettings) {
  char dir[] = "/tmp/aq_endpoint_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string config = std::string(dir) + "/config";
  for (const char* v : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_PROFILE"}) ::unsetenv(v);
  ::setenv("AWS_CONFIG_FILE", config.c_str(), 1);
  auto none = ParseStoreUrl("s3://b/k");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("AWS_ENDPOINT_URL"), std::string::npos) << none.status().ToString();
  {
    std::ofstream f(config);
    f << "[default]\nregion = eu-west-1\nendpoint_url = http://top:9000\n"
         "s3 =\n  endpoint_url = https://store.example:8443/\n  addressing_style = path\n"
         "[profile lab]\n# a comment\nendpoint_url = http://10.0.0.5\n";
  }
  auto u = ParseStoreUrl("s3://bkt/a/b");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->address(), "store.example:8443");
  EXPECT_EQ(u->bucket, "bkt");
  EXPECT_EQ(u->key, "a/b");
  ::setenv("AWS_PROFILE", "lab", 1);
  u = ParseStoreUrl("s3://bkt/");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(u->address(), "10.0.0.5:80");
  ::setenv("AWS_PROFILE", "absent", 1);
  EXPECT_FALSE(ParseStoreUrl("s3://bkt/").ok());
  ::setenv("AWS_ENDPOINT_URL", "http://[::1]:9000", 1);
  u = ParseStoreUrl("s3://bkt/k");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->address(), "[::1]:9000");
  ::setenv("AWS_ENDPOINT_URL_S3", "https://s3only", 1);
  EXPECT_EQ(ParseStoreUrl("s3://bkt/k")->address(), "s3only:443");
  for (const char* bad : {"ftp://x", "http://h/path", "https://"}) {
    ::setenv("AWS_ENDPOINT_URL_S3", bad, 1);
    EXPECT_FALSE(ParseStoreUrl("s3://bkt/k").ok()) << bad;
  }
  EXPECT_TRUE(IsStoreUrl("s3://bkt"));
  for (const char* v : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_CONFIG_FILE"}) ::unsetenv(v);
  std::filesystem::remove_all(dir);
}

TEST(S3Test, EndpointsAndLayouts) {
  EXPECT_EQ(ParseHostPort("127.0.0.1:9000")->port, 9000);
  EXPECT_EQ(ParseHostPort("[::1]:80")->host, "::1");
  EXPECT_EQ(ParseHostPort("[::1]:80")->ToString(), "[::1]:80");
  EXPECT_TRUE(ParseHostPort("h:0").ok());
  EXPECT_FALSE(ParseHostPort("h:0", false).ok());
  for (const char* bad : {"h", "h:", ":1", "h:70000", "h:1x"}) {
    auto r = ParseHostPort(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().find("--"), std::string::npos);
  }
  auto u = ParseStoreUrl("aquifer://h:1/bkt/a/b//").value();
  EXPECT_EQ(u.bucket, "bkt");
  EXPECT_EQ(u.key, "a/b/");
  EXPECT_EQ(u.address(), "h:1");
  EXPECT_FALSE(ParseStoreUrl("aquifer://h:1/").ok());
  // Several nodes of one cluster: the first is asked first.
  auto many = ParseStoreUrl("aquifer://h:1,[::1]:2,g/bkt/k").value();
  EXPECT_EQ(many.address(), "h:1");
  EXPECT_EQ(many.addresses(), (std::vector<std::string>{"h:1", "[::1]:2", "g:80"}));
  EXPECT_EQ(many.key, "k");
  EXPECT_FALSE(ParseStoreUrl("aquifer://h:1,/bkt").ok());
  EXPECT_FALSE(ParseStoreUrl("aquifer://h:1,h:x/bkt").ok());
  Layout l{300, 7, "\"x\"", {{"a", "p", 100, 1, {"n1:1", "n2:2"}}, {"b", "p", 200, 2, {}}}};
  auto back = LayoutFromJson(LayoutToJson(l)).value();
  EXPECT_EQ(back.blocks[0].addresses, l.blocks[0].addresses);
  EXPECT_EQ(back.version, 7u);
  l.size = 301;
  EXPECT_EQ(LayoutFromJson(LayoutToJson(l)).status().code(), StatusCode::kCorruption);
  // An erasure-coded block: K data + M parity fragments, K of F bytes
  // holding more than (K-1)F and at most KF bytes.
  LayoutBlock ecb{"c", "p", 10, 3, {}, 4, {}};
  ecb.fragments = {{"f0", 3, 0, {"h:1"}}, {"f1", 3, 0, {}}, {"f2", 3, 0, {}}, {"f3", 3, 0, {}}, {"p0", 3, 0, {}}};
  Layout e{10, 1, "", {ecb}};
  auto eb = LayoutFromJson(LayoutToJson(e));
  ASSERT_TRUE(eb.ok()) << eb.status().message();
  ASSERT_EQ(eb->blocks[0].fragments.size(), 5u);
  EXPECT_EQ(eb->blocks[0].k, 4);
  EXPECT_EQ(eb->blocks[0].fragments[0].addresses, std::vector<std::string>{"h:1"});
  e.blocks[0].k = 3;  // 3 x 3 bytes cannot hold 10
  EXPECT_EQ(LayoutFromJson(LayoutToJson(e)).status().code(), StatusCode::kCorruption);
  e.blocks[0].k = 5;  // no parity fragment
  EXPECT_EQ(LayoutFromJson(LayoutToJson(e)).status().code(), StatusCode::kCorruption);
  e.blocks[0].k = 4;
  e.blocks[0].fragments[1].size = 4;  // fragments of different sizes
  EXPECT_EQ(LayoutFromJson(LayoutToJson(e)).status().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace aq::s3
