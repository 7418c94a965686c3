#include "bench/result.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <fstream>

#include "format/json_text.h"
#include "monitor/machine.h"

#ifndef AQ_VERSION
#define AQ_VERSION "0.0.0"
#endif

namespace aq::bench {
namespace {

std::string UtcNow(const char* format) {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Scalar(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  return v.dump();
}

void Flatten(const nlohmann::json& v, const std::string& prefix, std::string& out) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      Flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    }
    return;
  }
  if (v.is_array()) {
    bool scalars = std::all_of(v.begin(), v.end(), [](const auto& e) { return e.is_primitive(); });
    if (!scalars) {
      for (size_t i = 0; i < v.size(); ++i) Flatten(v[i], prefix + "." + std::to_string(i), out);
      return;
    }
    std::string joined;
    for (size_t i = 0; i < v.size(); ++i) joined += (i ? ";" : "") + Scalar(v[i]);
    out += CsvField(prefix) + "," + CsvField(joined) + "\n";
    return;
  }
  out += CsvField(prefix) + "," + CsvField(Scalar(v)) + "\n";
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return IoError(fmt::format("cannot write '{}'", path));
  return Status::Ok();
}

}  // namespace

std::string Version() { return AQ_VERSION; }

nlohmann::json MakeResult(const ResultInfo& info, nlohmann::json config, nlohmann::json summary,
                          const monitor::Series* series) {
  nlohmann::json r;
  r["schema"] = kResultSchema;
  r["command"] = info.command;
  r["argv"] = info.argv;
  r["version"] = Version();
  r["started"] = UtcNow("%Y-%m-%dT%H:%M:%SZ");
  r["machine"] = monitor::ToJson(monitor::CollectMachineFacts(info.roots));
  r["config"] = std::move(config);
  r["summary"] = std::move(summary);
  r["series"] = series != nullptr ? series->ToJson() : nlohmann::json(nullptr);
  return r;
}

Status ValidateResult(const nlohmann::json& r, const std::string& where) {
  if (!r.is_object()) return InvalidArgument(fmt::format("{}: not a JSON object", where));
  if (!r.contains("schema") || !r["schema"].is_string() || r["schema"].get<std::string>() != kResultSchema) {
    return InvalidArgument(fmt::format("{}: not an aquifer result (\"schema\" is not \"{}\")", where, kResultSchema));
  }
  for (const char* key : {"command", "config", "summary", "machine"}) {
    if (!r.contains(key)) return InvalidArgument(fmt::format("{}: missing \"{}\"", where, key));
  }
  if (!r["command"].is_string()) return InvalidArgument(fmt::format("{}: \"command\" is not a string", where));
  if (!r["summary"].is_object()) return InvalidArgument(fmt::format("{}: \"summary\" is not an object", where));
  return Status::Ok();
}

std::string SeriesCsv(const nlohmann::json& s) {
  std::string out = "t";
  const auto& cols = s.at("columns");
  for (const auto& c : cols)
    out += "," + CsvField(c.at("name").get<std::string>() + " (" + c.at("unit").get<std::string>() + ")");
  out += "\n";
  const auto& t = s.at("t");
  for (size_t i = 0; i < t.size(); ++i) {
    out += fmt::format("{:.3f}", t[i].get<double>());
    for (const auto& c : cols) {
      const auto& v = c.at("values");
      out += i < v.size() ? fmt::format(",{:.6g}", v[i].get<double>()) : ",";
    }
    out += "\n";
  }
  return out;
}

std::string FlatCsv(const nlohmann::json& object) {
  std::string out = "key,value\n";
  Flatten(object, "", out);
  return out;
}

Result<std::string> WriteResult(const std::string& dir, const nlohmann::json& result) {
  // mkdir -p
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      std::string part = dir.substr(0, i);
      if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus(errno, "create directory", part);
    }
  }
  std::string stem = result.value("command", std::string("result"));
  for (char& c : stem) {
    if (c == ' ' || c == '/') c = '-';
  }
  stem += "-" + UtcNow("%Y%m%d-%H%M%S");
  std::string base = dir + "/" + stem;
  struct stat st {};
  for (int n = 2; ::stat((base + ".json").c_str(), &st) == 0; ++n) base = dir + "/" + stem + "-" + std::to_string(n);
  AQ_TRY(WriteText(base + ".json", format::DumpJson(result, 1) + "\n"));
  nlohmann::json flat = {{"command", result.value("command", "")},
                         {"config", result.value("config", nlohmann::json())},
                         {"summary", result.value("summary", nlohmann::json())}};
  AQ_TRY(WriteText(base + ".csv", FlatCsv(flat)));
  if (result.contains("series") && result["series"].is_object()) {
    AQ_TRY(WriteText(base + "-series.csv", SeriesCsv(result["series"])));
  }
  return base + ".json";
}

}  // namespace aq::bench
