// Abandoned multipart uploads: every failed large upload (a client killed
// between parts, a mount or `cp` that lost its node) leaves parts whose
// blocks nobody will ever complete or abort. The node expires them: an
// upload older than the node's limit (UploadExpiryOptions::max_age_s,
// 7 days by default), or than a bucket lifecycle rule's
// AbortIncompleteMultipartUpload days for its key, is aborted and its
// blocks freed.
//
// A bucket's lifecycle rules are kept with the metadata (setting
// "lifecycle/BUCKET", JSON), so every node of a cluster carries out the same
// ones; only AbortIncompleteMultipartUpload rules exist here (the S3 layer
// refuses the others before anything is stored).
//
// Thread safety: functions are safe to call from any thread; a sweep racing
// a client's abort or completion counts the upload once at most.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "store/meta_store.h"
#include "store/object_store.h"

namespace aq::store {

// S3's AbortIncompleteMultipartUpload lifecycle rule.
struct UploadRule {
  std::string id;      // the client's name for it ("" when none was given)
  std::string prefix;  // keys it applies to ("" = all)
  bool enabled = true;
  uint32_t days = 0;  // DaysAfterInitiation, >= 1
};

// The bucket's rules (empty when it has none).
Result<std::vector<UploadRule>> LoadUploadRules(MetaStore& meta, const std::string& bucket);
// Replaces the bucket's rules; empty removes them.
Status SaveUploadRules(MetaStore& meta, const std::string& bucket, const std::vector<UploadRule>& rules);

struct UploadExpiryOptions {
  double max_age_s = 7 * 86400.0;  // any upload older than this is aborted (<= 0: only by rules)
  double day_s = 86400;            // a lifecycle day (shorter only to test rules)
};

struct UploadSweep {
  uint64_t in_progress = 0;            // uploads left after the sweep
  uint64_t parts = 0, part_bytes = 0;  // ... their parts, and the bytes those hold
  uint64_t expired = 0;                // aborted by this sweep
  uint64_t expired_bytes = 0;
  uint64_t errors = 0;
  std::string last_error;
  double oldest_age_s = 0;  // of the uploads left
};

// The age limit for an upload of `key` (seconds; <= 0: none): the shortest
// of the node's limit and every enabled rule whose prefix the key has.
double UploadAgeLimit(const std::vector<UploadRule>& rules, const std::string& key, const UploadExpiryOptions& o);

// One pass over every bucket's uploads: aborts those past their limit.
Result<UploadSweep> ExpireUploads(ObjectStore& objects, const UploadExpiryOptions& o, int64_t now_ns);

}  // namespace aq::store
