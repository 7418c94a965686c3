#include "s3/xml.h"

#include <gtest/gtest.h>

namespace aq::s3 {
namespace {

TEST(S3XmlTest, CompleteMultipartUploadAsBoto3SendsIt) {
  auto parts = ParseCompleteMultipartUpload(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Part><ETag>\"0123456789abcdef0123456789abcdef\"</ETag><PartNumber>1</PartNumber></Part>\n"
      "  <Part><PartNumber>7</PartNumber><ETag>&quot;fedcba9876543210fedcba9876543210&quot;</ETag></Part>"
      "</CompleteMultipartUpload>");
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].number, 1u);
  EXPECT_EQ((*parts)[0].etag, "\"0123456789abcdef0123456789abcdef\"");
  EXPECT_EQ((*parts)[1].number, 7u);
  EXPECT_EQ((*parts)[1].etag, "\"fedcba9876543210fedcba9876543210\"");
}

TEST(S3XmlTest, CompleteMultipartUploadRefusesBadBodies) {
  auto refused = [](const std::string& xml, const std::string& words) {
    auto r = ParseCompleteMultipartUpload(xml);
    ASSERT_FALSE(r.ok()) << xml;
    EXPECT_NE(std::string(r.status().message()).find(words), std::string::npos) << r.status().ToString();
  };
  refused("", "malformed");
  refused("<CompleteMultipartUpload><Part>", "line 1");
  refused("<CompleteMultipartUpload></CompleteMultipartUpload>", "no part");
  refused("<Other><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></Other>", "not a CompleteMultipartUpload");
  refused("<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>",
          "1..10000");
  refused("<CompleteMultipartUpload><Part><PartNumber>1x</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>",
          "1..10000");
  refused("<CompleteMultipartUpload><Part><PartNumber>2</PartNumber></Part></CompleteMultipartUpload>",
          "lacks a PartNumber or an ETag");
  // No entity expansion from a request (billion laughs and friends).
  refused(
      "<!DOCTYPE x [<!ENTITY a \"aaaaaaaa\">]><CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
      "<ETag>&a;</ETag></Part></CompleteMultipartUpload>",
      "document type");
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "<a>";
  refused(deep, "deeper than 16");
  refused("<CompleteMultipartUpload><Part><ETag>" + std::string(5000, 'e') + "</ETag></Part></CompleteMultipartUpload>",
          "longer than 4096");
}

TEST(S3XmlTest, DeleteObjects) {
  auto r = ParseDeleteObjects(
      "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>"
      "<Object><Key>train/a &amp; b.tfrecord</Key></Object><Object><Key>x</Key><VersionId>1</VersionId></Object>"
      "</Delete>");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->quiet);
  ASSERT_EQ(r->keys.size(), 2u);
  EXPECT_EQ(r->keys[0], "train/a & b.tfrecord");
  EXPECT_EQ(r->keys[1], "x");
  EXPECT_EQ(r->condition, "");
  auto c = ParseDeleteObjects(
      "<Delete><Object><Key>a</Key></Object><Object><Key>b</Key><ETag>\"e\"</ETag></Object></Delete>");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->condition, "ETag of object 2");
  EXPECT_FALSE(ParseDeleteObjects("<Delete><Object></Object></Delete>").ok());
  EXPECT_FALSE(ParseDeleteObjects("<Delete><Quiet>yes</Quiet><Object><Key>k</Key></Object></Delete>").ok());
  EXPECT_FALSE(ParseDeleteObjects("<Delete></Delete>").ok());
  std::string many = "<Delete>";
  for (int i = 0; i < 1001; ++i) many += "<Object><Key>k</Key></Object>";
  EXPECT_FALSE(ParseDeleteObjects(many + "</Delete>").ok());
}

TEST(S3XmlTest, AclPoliciesGrantingOnlyTheirOwnerArePrivate) {
  // What a GET ?acl answers (and s3cmd copies back): the owner, FULL_CONTROL.
  const std::string owner =
      "<AccessControlPolicy xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Owner><ID>aquifer</ID>"
      "<DisplayName>aquifer</DisplayName></Owner><AccessControlList><Grant><Grantee "
      "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:type=\"CanonicalUser\"><ID>aquifer</ID>"
      "<DisplayName>aquifer</DisplayName></Grantee><Permission>FULL_CONTROL</Permission></Grant>"
      "</AccessControlList></AccessControlPolicy>";
  auto p = ParseAccessControlPolicy(owner);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->owner_id, "aquifer");
  ASSERT_EQ(p->grants.size(), 1u);
  EXPECT_EQ(p->grants[0].permission, "FULL_CONTROL");
  EXPECT_TRUE(OwnerOnly(*p));
  // A public-read policy (the AllUsers group) and a grant to someone else are not.
  std::string pub = owner;
  pub.replace(pub.find("</AccessControlList>"), 0,
              "<Grant><Grantee xsi:type=\"Group\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><URI>"
              "http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee><Permission>READ</Permission></Grant>");
  p = ParseAccessControlPolicy(pub);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(OwnerOnly(*p));
  std::string other = owner;
  other.replace(other.find("<ID>aquifer</ID><DisplayName>aquifer</DisplayName></Grantee>"), 16, "<ID>someone</ID>");
  p = ParseAccessControlPolicy(other);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(OwnerOnly(*p));
  // No owner: nothing to compare with.
  p = ParseAccessControlPolicy("<AccessControlPolicy><AccessControlList/></AccessControlPolicy>");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(OwnerOnly(*p));
  // Malformed: a grant without a permission or a grantee, an unknown permission or element.
  for (const char* bad : {
           "<AccessControlPolicy><Owner><ID>a</ID></Owner><AccessControlList><Grant><Grantee><ID>a</ID></Grantee>"
           "</Grant></AccessControlList></AccessControlPolicy>",
           "<AccessControlPolicy><Owner><ID>a</ID></Owner><AccessControlList><Grant><Permission>READ</Permission>"
           "</Grant></AccessControlList></AccessControlPolicy>",
           "<AccessControlPolicy><Owner><ID>a</ID></Owner><AccessControlList><Grant><Grantee><ID>a</ID></Grantee>"
           "<Permission>EVERYTHING</Permission></Grant></AccessControlList></AccessControlPolicy>",
           "<AccessControlPolicy><Surprise/></AccessControlPolicy>",
           "<Tagging/>",
       }) {
    EXPECT_FALSE(ParseAccessControlPolicy(bad).ok()) << bad;
  }
}

TEST(S3XmlTest, LifecycleKeepsOnlyWhatTheNodeCarriesOut) {
  auto r = ParseLifecycle(
      "<LifecycleConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Rule><ID>tmp</ID><Filter><Prefix>tmp/</Prefix></Filter><Status>Enabled</Status>"
      "<AbortIncompleteMultipartUpload><DaysAfterInitiation>3</DaysAfterInitiation></AbortIncompleteMultipartUpload>"
      "</Rule><Rule><Prefix>old/</Prefix><Status>Disabled</Status><AbortIncompleteMultipartUpload>"
      "<DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>"
      "<Rule><Filter/><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>7"
      "</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule></LifecycleConfiguration>");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].id, "tmp");
  EXPECT_EQ((*r)[0].prefix, "tmp/");
  EXPECT_TRUE((*r)[0].enabled);
  EXPECT_EQ((*r)[0].abort_days, 3u);
  EXPECT_EQ((*r)[1].prefix, "old/");
  EXPECT_FALSE((*r)[1].enabled);
  EXPECT_EQ((*r)[2].prefix, "");
  EXPECT_EQ((*r)[2].abort_days, 7u);
  const std::string abort =
      "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload>";
  auto code = [](const std::string& xml) { return ParseLifecycle(xml).status().code(); };
  auto rule = [&](const std::string& inner) {
    return "<LifecycleConfiguration><Rule>" + inner + "</Rule></LifecycleConfiguration>";
  };
  // Actions and filters not carried out: refused, whatever else the rule has.
  EXPECT_EQ(code(rule("<Status>Enabled</Status><Expiration><Days>1</Days></Expiration>")), StatusCode::kUnsupported);
  EXPECT_EQ(code(rule("<Status>Enabled</Status>" + abort + "<Transition><Days>1</Days></Transition>")),
            StatusCode::kUnsupported);
  EXPECT_EQ(code(rule("<Filter><Tag><Key>a</Key><Value>b</Value></Tag></Filter><Status>Enabled</Status>" + abort)),
            StatusCode::kUnsupported);
  EXPECT_EQ(code(rule("<Filter><And><Prefix>a</Prefix></And></Filter><Status>Enabled</Status>" + abort)),
            StatusCode::kUnsupported);
  // Malformed.
  for (const std::string bad :
       {rule("<Status>Enabled</Status>"), rule(abort), rule("<Status>On</Status>" + abort),
        rule("<Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>0</DaysAfterInitiation>"
             "</AbortIncompleteMultipartUpload>"),
        rule("<Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>-1</DaysAfterInitiation>"
             "</AbortIncompleteMultipartUpload>"),
        rule("<Status>Enabled</Status><AbortIncompleteMultipartUpload></AbortIncompleteMultipartUpload>"),
        rule("<Prefix>a</Prefix><Filter><Prefix>b</Prefix></Filter><Status>Enabled</Status>" + abort),
        std::string("<LifecycleConfiguration></LifecycleConfiguration>"), std::string("<Other/>"),
        "<LifecycleConfiguration><Rule><ID>x</ID><Status>Enabled</Status>" + abort + "</Rule><Rule><ID>x</ID>" +
            "<Status>Enabled</Status>" + abort + "</Rule></LifecycleConfiguration>"}) {
    EXPECT_EQ(code(bad), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace aq::s3
