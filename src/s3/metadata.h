// User metadata (x-amz-meta-*) values as S3 keeps them: text, stored as
// UTF-8, and sent back mail-safe. A value arrives as
//   - RFC 2047 encoded words ("=?UTF-8?B?Y2Fmw6k=?=", B or Q encoding, UTF-8
//     or ISO-8859-1), which are decoded, as S3 does;
//   - UTF-8 bytes (curl, clients that send raw UTF-8), kept;
//   - otherwise ISO-8859-1 bytes, HTTP's historic header charset (what
//     Python's http.client, under boto3, sends for "café"), converted.
// Control characters other than TAB are refused. A value with anything
// outside US-ASCII is answered RFC 2047-encoded ("=?UTF-8?B?...?="), a
// US-ASCII one as it is.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace aq::s3 {

Result<std::string> MetadataValueIn(std::string_view raw);
std::string MetadataValueOut(std::string_view stored);

}  // namespace aq::s3
