#include "s3/post_form.h"

#include <gtest/gtest.h>

namespace aq::s3 {
namespace {

const std::string kForm =
    "preamble\r\n--xYz\r\nContent-Disposition: form-data; name=\"Key\"\r\n\r\nup/${filename}\r\n"
    "--xYz\r\nContent-Disposition: form-data; name=\"acl\"\r\n\r\nprivate\r\n"
    "--xYz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a;b.txt\"\r\nContent-Type: text/plain\r\n"
    "\r\nline\r\n--xY not the end\r\n--xYz\r\nContent-Disposition: form-data; name=\"after\"\r\n\r\nx\r\n"
    "--xYz--\r\nepilogue";

// The form read whole and a byte at a time: the same fields and file.
TEST(PostFormTest, FieldsAndFileInAnyPieces) {
  EXPECT_EQ(FormBoundary("multipart/form-data; boundary=xYz").value(), "xYz");
  EXPECT_EQ(FormBoundary("Multipart/Form-Data; charset=x; boundary=\"a b\"").value(), "a b");
  EXPECT_FALSE(FormBoundary("application/x-www-form-urlencoded").ok());
  EXPECT_FALSE(FormBoundary("multipart/form-data").ok());
  for (size_t piece : {kForm.size(), size_t{1}, size_t{7}}) {
    FormReader f("xYz");
    std::string file;
    for (size_t i = 0; i < kForm.size(); i += piece) ASSERT_TRUE(f.Feed(kForm.substr(i, piece), &file).ok());
    EXPECT_TRUE(f.in_file());
    EXPECT_TRUE(f.done());
    EXPECT_EQ(f.fields(), (std::map<std::string, std::string>{{"key", "up/${filename}"}, {"acl", "private"}}));
    EXPECT_EQ(f.filename(), "a;b.txt");
    EXPECT_EQ(file, "line\r\n--xY not the end") << piece;
  }
}

TEST(PostFormTest, MalformedAndOversizedForms) {
  std::string file;
  FormReader no_disposition("xYz");
  EXPECT_FALSE(no_disposition.Feed("--xYz\r\nX-Other: 1\r\n\r\nv\r\n--xYz--", &file).ok());
  FormReader big("xYz", 100);
  EXPECT_EQ(
      big.Feed("--xYz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n" + std::string(200, 'v'), &file).code(),
      StatusCode::kUnsupported);
}

TEST(PostFormTest, PolicyConditions) {
  const std::map<std::string, std::string> fields = {
      {"key", "up/a.txt"}, {"content-type", "text/plain"}, {"x-amz-meta-who", "me"}, {"policy", "..."}};
  PostLimits limits;
  auto check = [&](const std::string& json) { return CheckPostPolicy(json, fields, "bkt", 1000, &limits); };
  const std::string exp = "\"expiration\": \"2030-01-01T00:00:00.000Z\"";
  EXPECT_FALSE(check("{" + exp +
                     ", \"conditions\": [{\"bucket\": \"bkt\"}, [\"starts-with\", \"$key\", \"up/\"], "
                     "[\"eq\", \"$Content-Type\", \"text/plain\"], [\"starts-with\", \"$x-amz-meta-who\", \"\"], "
                     "[\"content-length-range\", 1, 9]]}"));
  EXPECT_EQ(limits.min_size, 1u);
  EXPECT_EQ(limits.max_size, 9u);
  // x-amz-meta-who is not covered.
  auto e = check("{" + exp +
                 ", \"conditions\": [[\"starts-with\", \"$key\", \"up/\"], {\"content-type\": \"text/plain\"}]}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 403);
  EXPECT_NE(e->message.find("x-amz-meta-who"), std::string::npos);
  EXPECT_EQ(check("{\"expiration\": \"1969-01-01T00:00:00Z\", \"conditions\": []}")->status, 403);
  EXPECT_EQ(check("{\"conditions\": []}")->status, 400);
  EXPECT_EQ(check("{" + exp + "}")->status, 400);
  EXPECT_EQ(check("{" + exp + ", \"conditions\": [{}]}")->status, 400);
  EXPECT_EQ(check("{" + exp + ", \"conditions\": [[\"content-length-range\", 5, 1]]}")->status, 400);
  EXPECT_EQ(check("{" + exp + ", \"conditions\": [[\"matches\", \"$key\", \"x\"]]}")->status, 400);
  EXPECT_EQ(check("{" + exp + ", \"conditions\": [{\"bucket\": \"other\"}]}")->status, 403);
  EXPECT_EQ(check("not json")->status, 400);
}

}  // namespace
}  // namespace aq::s3
