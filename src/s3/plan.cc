#include "s3/plan.h"

#include <fmt/format.h>

#include <cctype>
#include <nlohmann/json.hpp>

#include "s3/internal_routes.h"

namespace aq::s3 {

std::string PlanToJson(const std::vector<PlanRead>& reads) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : reads) {
    nlohmann::json e = {{"bucket", r.bucket}, {"key", r.key}};
    if (r.offset != 0) e["offset"] = r.offset;
    if (r.length != UINT64_MAX) e["length"] = r.length;
    a.push_back(std::move(e));
  }
  return nlohmann::json{{"reads", std::move(a)}}.dump();
}

namespace {

constexpr const char* kPlanShape = R"(a plan is {"reads": [{"bucket", "key", "offset", "length"}, ...]})";

// Reads a plan as the parser meets it (SAX), so that what a request body
// costs is the reads it names, not a document tree: a tree of 8 MiB of
// small JSON values takes hundreds of MiB. Stops at the first read that is
// wrong, or at the read past kMaxPlanReads.
class PlanReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<PlanRead> reads;
  std::string error;
  bool saw_reads = false;

  bool null() override { return Scalar(); }
  bool boolean(bool) override { return Scalar(); }
  bool number_integer(number_integer_t) override { return Scalar(); }
  bool number_unsigned(number_unsigned_t v) override {
    if (skip_ == 0 && depth_ == 3 && (field_ == "offset" || field_ == "length")) {
      (field_ == "offset" ? read_.offset : read_.length) = v;
      return true;
    }
    return Scalar();
  }
  bool number_float(number_float_t, const string_t&) override { return Scalar(); }
  bool string(string_t& v) override {
    if (skip_ == 0 && depth_ == 3 && (field_ == "bucket" || field_ == "key")) {
      (field_ == "bucket" ? read_.bucket : read_.key) = std::move(v);
      (field_ == "bucket" ? has_bucket_ : has_key_) = true;
      return true;
    }
    return Scalar();
  }
  bool binary(binary_t&) override { return Scalar(); }
  bool start_object(std::size_t) override {
    if (skip_ > 0 || Skipping()) return Enter();
    if (depth_ == 0 || depth_ == 2) {
      if (depth_ == 2 && reads.size() == kMaxPlanReads) {
        return Fail(fmt::format("a plan names at most {} reads", kMaxPlanReads));
      }
      read_ = PlanRead();
      has_bucket_ = has_key_ = false;
      ++depth_;
      return true;
    }
    return depth_ == 1 && field_ == "reads" ? Shape() : Fail(ReadError());
  }
  bool key(string_t& k) override {
    if (skip_ == 0) field_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (skip_ > 0) return Leave();
    if (depth_ == 3) {
      if (!has_bucket_ || !has_key_ || read_.bucket.empty() || read_.key.empty()) return Fail(ReadError());
      reads.push_back(std::move(read_));
      field_.clear();
    }
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    if (skip_ > 0) return Enter();
    if (depth_ == 1 && field_ == "reads") {
      if (saw_reads) return Fail("a plan has one reads array");
      saw_reads = true;
      ++depth_;
      return true;
    }
    if (depth_ == 0 || depth_ == 2 || (depth_ == 3 && IsReadField())) return depth_ == 0 ? Shape() : Fail(ReadError());
    return Enter();  // a field this reader does not use
  }
  bool end_array() override {
    if (skip_ > 0) return Leave();
    --depth_;
    field_.clear();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    if (error.empty()) error = kPlanShape;  // not JSON
    return false;
  }

 private:
  // Depth: 0 outside, 1 in the plan, 2 in its reads, 3 in a read. Values of
  // fields this reader does not use are skipped (skip_ open containers).
  bool Skipping() const { return (depth_ == 1 && field_ != "reads") || (depth_ == 3 && !IsReadField()); }
  bool IsReadField() const { return field_ == "bucket" || field_ == "key" || field_ == "offset" || field_ == "length"; }
  bool Enter() {
    ++skip_;
    return true;
  }
  bool Leave() {
    --skip_;
    return true;
  }
  // A scalar where this reader wanted nothing in particular is fine outside
  // the fields it reads; in one of them, or as a read, it is an error.
  bool Scalar() {
    if (skip_ > 0) return true;
    if (depth_ == 0) return Shape();
    if (depth_ == 1) return field_ == "reads" ? Shape() : true;
    if (depth_ == 2) return Fail(ReadError());
    return IsReadField() ? Fail(ReadError()) : true;
  }
  bool Shape() { return Fail(kPlanShape); }
  std::string ReadError() const {
    return fmt::format(
        "read {} of the plan: expected bucket and key (strings) and optional offset and length (unsigned integers)",
        reads.size());
  }
  bool Fail(std::string why) {
    error = std::move(why);
    return false;
  }

  int depth_ = 0;
  size_t skip_ = 0;
  std::string field_;
  PlanRead read_;
  bool has_bucket_ = false, has_key_ = false;
};

}  // namespace

Result<std::vector<PlanRead>> PlanFromJson(std::string_view json) {
  PlanReader reader;
  if (!nlohmann::json::sax_parse(json, &reader)) return InvalidArgument(reader.error);
  if (!reader.saw_reads) return InvalidArgument(kPlanShape);
  return std::move(reader.reads);
}

std::string PiecesToJson(const std::vector<PlanPiece>& pieces) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : pieces) a.push_back({{"id", p.id}, {"pool", p.pool}, {"size", p.size}, {"crc", p.crc32c}});
  return nlohmann::json{{"pieces", std::move(a)}}.dump();
}

Result<std::vector<PlanPiece>> PiecesFromJson(std::string_view json) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("pieces") || !doc["pieces"].is_array()) {
    return InvalidArgument(R"(a node's share of a plan is {"pieces": [{"id", "pool", "size", "crc"}, ...]})");
  }
  const auto& pieces = doc["pieces"];
  if (pieces.size() > kMaxPlanReads) {
    return InvalidArgument(fmt::format("a plan names at most {} pieces", kMaxPlanReads));
  }
  std::vector<PlanPiece> out;
  out.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto& e = pieces[i];
    const bool ok = e.is_object() && e.contains("id") && e["id"].is_string() && e.contains("pool") &&
                    e["pool"].is_string() && e.contains("size") && e["size"].is_number_unsigned() &&
                    e.contains("crc") && e["crc"].is_number_unsigned() && e["crc"].get<uint64_t>() <= UINT32_MAX;
    PlanPiece p;
    if (ok) {
      p.id = e["id"].get<std::string>();
      p.pool = e["pool"].get<std::string>();
      p.size = e["size"].get<uint64_t>();
      p.crc32c = static_cast<uint32_t>(e["crc"].get<uint64_t>());
    }
    if (!ok || !internal::IsBlockId(p.id)) {
      return InvalidArgument(fmt::format(
          "piece {} of the plan: expected id ([0-9A-Za-z._-], 1 to 128), pool (string), size and crc (unsigned)", i));
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace aq::s3
