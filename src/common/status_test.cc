#include "common/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>

namespace aq {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  int h = AQ_TRY(Half(x));
  return AQ_TRY(Half(h));
}

Status CheckEven(int x) {
  AQ_TRY(Half(x).status());
  return Status::Ok();
}

TEST(Status, TryPropagatesErrorsAndYieldsValues) {
  auto q = Quarter(8);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, 2);
  auto bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_FALSE(CheckEven(3).ok());
}

TEST(Status, ResultHoldsMoveOnlyValues) {
  auto make = []() -> Result<std::unique_ptr<int>> { return std::make_unique<int>(7); };
  auto r = make();
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

TEST(Status, ResultFromOkStatusIsAnInternalError) {
  Result<int> r{Status::Ok()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(Status, ErrnoMappingNamesOperationAndPath) {
  Status s = ErrnoStatus(ENOSPC, "write", "/data/x");
  EXPECT_EQ(s.code(), StatusCode::kNoSpace);
  EXPECT_NE(s.message().find("/data/x"), std::string::npos);
  EXPECT_NE(s.message().find("write"), std::string::npos);
  EXPECT_EQ(ErrnoStatus(ENOENT, "open", "a").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus(EACCES, "open", "a").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus(EIO, "read", "a").code(), StatusCode::kIoError);
}

TEST(Status, ContextPrefixesMessage) {
  Status s = Corruption("bad CRC").WithContext("shard-3");
  EXPECT_EQ(s.message(), "shard-3: bad CRC");
  EXPECT_EQ(s.ToString(), "Corruption: shard-3: bad CRC");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

}  // namespace
}  // namespace aq
