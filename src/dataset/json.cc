// JSON forms of the dataset reports (the --json output of the CLI).
#include "dataset/commands.h"

namespace aq::dataset {

using nlohmann::json;

json ToJson(const std::vector<format::SkippedRecord>& skipped) {
  json a = json::array();
  for (const auto& s : skipped) {
    a.push_back(
        {{"file", s.file}, {"offset", s.offset}, {"record", s.record}, {"bytes", s.bytes}, {"reason", s.reason}});
  }
  return a;
}

json ToJson(const std::vector<Problem>& problems) {
  json a = json::array();
  for (const auto& p : problems) {
    a.push_back({{"file", p.file}, {"record", p.record}, {"offset", p.offset}, {"message", p.message}});
  }
  return a;
}

json ToJson(const SynthReport& r) {
  return {{"command", "dataset synth"}, {"out", r.out},     {"classes", r.classes},
          {"images", r.images},         {"bytes", r.bytes}, {"avg_image_bytes", r.images ? r.bytes / r.images : 0},
          {"seconds", r.seconds}};
}

json ToJson(const PackReport& r) {
  json converted = json::array();
  for (const auto& c : r.converted) {
    converted.push_back({{"file", c.file}, {"from", c.from}, {"bytes_in", c.bytes_in}, {"bytes_out", c.bytes_out}});
  }
  json warnings = json::array();
  for (const auto& w : r.warnings) warnings.push_back({{"file", w.path}, {"warning", w.reason}});
  json ignored = json::array();
  for (const auto& i : r.ignored) ignored.push_back({{"file", i.path}, {"reason", i.reason}});
  return {{"command", "dataset pack"},
          {"out", r.out},
          {"format", FormatName(r.format)},
          {"files", r.files},
          {"found", r.found},
          {"images", r.images},
          {"classes", r.classes},
          {"bytes_in", r.bytes_in},
          {"bytes_out", r.bytes_out},
          {"seconds", r.seconds},
          {"converted", converted},
          {"skipped", ToJson(r.skipped)},
          {"warnings", warnings},
          {"reencoded", r.reencoded},
          {"raw", r.raw},
          {"ignored_files", r.ignored.size()},
          {"ignored", ignored},
          {"empty_classes", r.empty_classes},
          {"manifest", r.manifest}};
}

json ToJson(const ExpandReport& r) {
  return {{"command", "dataset expand"},
          {"files", r.files},
          {"bytes", r.bytes},
          {"seconds", r.seconds},
          {"methods", r.methods},
          {"manifest", r.manifest},
          {"manifest_entries", r.manifest_entries}};
}

json ToJson(const ResizeReport& r) {
  return {{"command", "dataset resize"}, {"files", r.files},         {"images", r.images},
          {"bytes_in", r.bytes_in},      {"bytes_out", r.bytes_out}, {"seconds", r.seconds},
          {"skipped", ToJson(r.skipped)}};
}

json ToJson(const VerifyReport& r) {
  json labels = json::object();
  for (const auto& [l, c] : r.labels) labels[std::to_string(l)] = c;
  return {{"command", "dataset verify"},
          {"path", r.path},
          {"format", FormatName(r.format)},
          {"ok", r.ok()},
          {"files", r.files},
          {"records", r.records},
          {"bytes", r.bytes},
          {"image_bytes", r.image_bytes},
          {"avg_image_bytes", r.records ? r.image_bytes / r.records : 0},
          {"classes", r.labels.size()},
          {"labels", labels},
          {"label_note", r.label_note},
          {"problem_count", r.problem_count},
          {"problems", ToJson(r.problems)},
          {"seconds", r.seconds},
          {"mb_per_s", r.seconds > 0 ? static_cast<double>(r.bytes) / 1e6 / r.seconds : 0.0},
          {"manifest", r.manifest},
          {"manifest_records", r.manifest_records},
          {"manifest_error", r.manifest_error}};
}

json ToJson(const std::vector<InspectRow>& rows) {
  json a = json::array();
  for (const auto& r : rows) {
    json j = {
        {"file", r.file},   {"record", r.record}, {"offset", r.offset},           {"size", r.size},
        {"key", r.key},     {"label", r.label},   {"image_bytes", r.image_bytes}, {"image_crc32c", r.image_crc32c},
        {"width", r.width}, {"height", r.height}, {"components", r.components}};
    if (!r.image_format.empty()) j["image_format"] = r.image_format;
    if (!r.subsampling.empty()) {
      j["subsampling"] = r.subsampling;
      j["progressive"] = r.progressive;
    }
    if (!r.error.empty()) j["error"] = r.error;
    a.push_back(std::move(j));
  }
  return {{"command", "dataset inspect"}, {"records", a}};
}

}  // namespace aq::dataset
