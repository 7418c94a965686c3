#include "s3/sigv4.h"

#include <gtest/gtest.h>

namespace aq::s3 {
namespace {

TEST(SigV4Test, UriEncoding) {
  EXPECT_EQ(UriEncode("a b/c~d_e.f-g", false), "a%20b/c~d_e.f-g");
  EXPECT_EQ(UriEncode("a/b", true), "a%2Fb");
  EXPECT_EQ(UriEncode("\xc3\xa9", false), "%C3%A9");
  EXPECT_EQ(UriDecode("a%20b%2fc%zz"), "a b/c%zz");  // a bad escape is kept as is
}

TEST(SigV4Test, ParsesAuthorization) {
  auto a = ParseAuthorization(
      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20130524/us-east-1/s3/aws4_request, "
      "SignedHeaders=host;range;x-amz-date,Signature=abc123");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->access_key, "AKIDEXAMPLE");
  EXPECT_EQ(a->date, "20130524");
  EXPECT_EQ(a->region, "us-east-1");
  EXPECT_EQ(a->service, "s3");
  EXPECT_EQ(a->signed_headers, (std::vector<std::string>{"host", "range", "x-amz-date"}));
  EXPECT_EQ(a->signature, "abc123");
  EXPECT_FALSE(ParseAuthorization("AWS AKID:sig").ok());  // Signature V2
  EXPECT_FALSE(ParseAuthorization("AWS4-HMAC-SHA256 Credential=a/b/c, SignedHeaders=host, Signature=x").ok());
  EXPECT_FALSE(ParseAuthorization("AWS4-HMAC-SHA256 garbage").ok());
}

// The GET Object example of Amazon's Signature Version 4 documentation.
TEST(SigV4Test, AmazonsGetObjectExample) {
  SigV4Request r;
  r.method = "GET";
  r.raw_path = "/test.txt";
  r.headers = {{"host", "examplebucket.s3.amazonaws.com"},
               {"range", "bytes=0-9"},
               {"x-amz-content-sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
               {"x-amz-date", "20130524T000000Z"}};
  r.payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  std::vector<std::string> signed_headers = {"host", "range", "x-amz-content-sha256", "x-amz-date"};
  std::string canonical = CanonicalRequest(r, signed_headers);
  EXPECT_EQ(canonical,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  SigV4Authorization a;
  a.access_key = "AKIAIOSFODNN7EXAMPLE";
  a.date = "20130524";
  a.region = "us-east-1";
  a.service = "s3";
  std::string sts = StringToSign("20130524T000000Z", "20130524/us-east-1/s3/aws4_request", canonical);
  EXPECT_EQ(Signature("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", a, sts),
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_TRUE(SameSignature("abc", "abc"));
  EXPECT_FALSE(SameSignature("abc", "abd"));
  EXPECT_FALSE(SameSignature("abc", "ab"));
}

TEST(SigV4Test, CanonicalQueryIsSortedAndReencoded) {
  SigV4Request r;
  r.method = "GET";
  r.raw_path = "/b";
  r.raw_query = "prefix=a%2Fb&list-type=2&delimiter=%2F&empty";
  r.payload_hash = "UNSIGNED-PAYLOAD";
  std::string c = CanonicalRequest(r, {});
  EXPECT_NE(c.find("\ndelimiter=%2F&empty=&list-type=2&prefix=a%2Fb\n"), std::string::npos) << c;
}

}  // namespace
}  // namespace aq::s3
