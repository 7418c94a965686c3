#include "report/report.h"

#include <gtest/gtest.h>

#include <limits>

#include "report/svg.h"

namespace aq::report {
namespace {

// Found by fuzz_report: a huge or non-finite axis range left the tick list
// empty (a read past its end) or looped forever.
TEST(SvgTest, NiceTicksOfDegenerateRangesEndWithTheirEnds) {
  for (auto [lo, hi] : {std::pair{1e300, 1.0000001e300}, std::pair{-1e308, 1e308}, std::pair{1e20, 1e20 + 1},
                        std::pair{0.0, std::numeric_limits<double>::infinity()},
                        std::pair{std::numeric_limits<double>::quiet_NaN(), 5.0}}) {
    auto t = NiceTicks(lo, hi);
    EXPECT_GE(t.size(), 2u) << lo << " " << hi;
    EXPECT_LE(t.size(), 101u);
  }
}

TEST(SvgTest, NiceTicks) {
  EXPECT_EQ(NiceTicks(0, 97), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(NiceTicks(0, 1), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  auto t = NiceTicks(5, 5);  // degenerate range still gives an axis
  EXPECT_GE(t.size(), 2u);
}

TEST(SvgTest, LineAndBarCharts) {
  std::string s = RenderSvg(LineChart{"MB/s <over> time", "s", "MB/s", {{"read", {0, 1, 2}, {1, 2, 3}, false}}, true});
  EXPECT_EQ(s.rfind("<svg class=\"chart line\"", 0), 0u);
  EXPECT_NE(s.find("<polyline class=\"series\""), std::string::npos);
  EXPECT_NE(s.find("MB/s &lt;over&gt; time"), std::string::npos);
  EXPECT_EQ(s.find("<over>"), std::string::npos);
  std::string b = RenderSvg(BarChart{"latency", "us", {{"p50", 10, ""}, {"p99", 40, ""}}, 0});
  EXPECT_NE(b.find("<rect class=\"series\""), std::string::npos);
  EXPECT_NE(b.find("40 us"), std::string::npos);
  // Non-finite values are skipped, never printed as "nan" coordinates.
  std::string n = RenderSvg(LineChart{"x", "", "", {{"a", {0, 1}, {1, std::nan("")}, false}}, true});
  EXPECT_EQ(n.find("nan"), std::string::npos);
}

// Labels are placed from their own widths: a long bar label moves the bars
// right instead of running off the left edge, and numbers are never written
// in exponent notation however large or small.
TEST(SvgTest, LayoutFitsItsTextsAndNumbersStayReadable) {
  std::string label(60, 'x');
  std::string b = RenderSvg(BarChart{"t", "%", {{label, 50, ""}, {"short", 1e9, ""}, {"tiny", 1e-7, ""}}, 0});
  auto pos = b.find(label);
  ASSERT_NE(pos, std::string::npos);
  auto x_at = b.rfind("x=\"", pos);
  double x = std::stod(b.substr(x_at + 3));
  EXPECT_GE(x, 60 * 0.6 * 11) << "the label column is as wide as the label";
  EXPECT_EQ(b.find("e+"), std::string::npos) << b;
  EXPECT_EQ(b.find("e-"), std::string::npos) << b;
  EXPECT_NE(b.find("1G %"), std::string::npos) << b;
  std::string l = RenderSvg(LineChart{"t", "s", "B", {{"a", {0, 1}, {2e13, 1e-6}, false}}, true});
  EXPECT_EQ(l.find("e+"), std::string::npos) << l;
  // Many legend entries wrap to more rows instead of running off the right.
  LineChart many{"t", "s", "MB/s", {}, true};
  for (int i = 0; i < 12; ++i) many.lines.push_back({"a rather long series name " + std::to_string(i), {0, 1}, {1, 2}});
  std::string m = RenderSvg(many);
  for (size_t p = m.find("class=\"legend\""); p != std::string::npos; p = m.find("class=\"legend\"", p + 1)) {
    auto tx = m.rfind("x=\"", p);
    EXPECT_LT(std::stod(m.substr(tx + 3)) + 26 * 0.6 * 11, 640.0 + 1);
  }
}

TEST(ReportTest, SelfContainedHtmlWithChartsPerCommand) {
  nlohmann::json series = {{"t", {1, 2, 3}},
                           {"columns",
                            {{{"name", "bench.read"}, {"unit", "MB/s"}, {"values", {10, 20, 30}}},
                             {{"name", "cpu.user"}, {"unit", "%"}, {"values", {1, 2, 3}}}}}};
  nlohmann::json storage = {{"schema", "aquifer-result/1"},
                            {"command", "bench storage"},
                            {"argv", {"aquifer", "bench", "storage", "/d"}},
                            {"config", {{"readers", 2}}},
                            {"machine", {{"cpu_model", "x"}, {"cores", 2}}},
                            {"summary", {{"mb_per_second", 20.0}, {"latency", {{"p50_us", 5.0}, {"p99_us", 9.0}}}}},
                            {"series", series}};
  nlohmann::json size = {{"schema", "aquifer-result/1"},
                         {"command", "size"},
                         {"config", {{"node", "f800"}, {"gpus", 72}}},
                         {"machine", nlohmann::json::object()},
                         {"summary",
                          {{"nodes", 3},
                           {"nodes_exact", 2.37},
                           {"demand_mb_per_second", 5760},
                           {"node_mb_per_second", 2430},
                           {"assumptions", {"a <b>"}}}}};
  nlohmann::json sweep = {{"schema", "aquifer-result/1"},
                          {"command", "bench sweep"},
                          {"config", nlohmann::json::object()},
                          {"machine", nlohmann::json::object()},
                          {"summary",
                           {{"parameter", "readers"},
                            {"metric", "mb_per_second"},
                            {"points", {{{"value", 1}, {"metric_value", 10}}, {{"value", 2}, {"metric_value", 19}}}}}}};
  std::string html = RenderHtml({{"s.json", storage}, {"z.json", size}, {"w.json", sweep}}, "t <1>");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<title>t &lt;1&gt;</title>"), std::string::npos);
  // storage: throughput + latency + CPU; size: one bar chart; sweep: the scaling curve.
  EXPECT_EQ(CountCharts(html), 5u);
  EXPECT_NE(html.find("a &lt;b&gt;"), std::string::npos);
  EXPECT_NE(html.find("1.90x"), std::string::npos);  // sweep table: 19 / 10
  // Nothing is fetched when the file is opened.
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
}

// A doctor result gets its own card: the verdict, both charts (images/s
// each form delivers against the demand, MB/s per GPU), a row per form
// with the pick marked, the warnings, and a line in the overview.
TEST(ReportTest, DoctorResultsShowEachFormAndTheVerdict) {
  auto form = [](const char* name, double rate, double mbps) {
    return nlohmann::json{{"form", name},
                          {"pack_flags", std::string("--image-form ") + name},
                          {"bytes_per_image", 1000.0},
                          {"images_per_second_per_core", rate},
                          {"cores_needed", 100.0 / rate},
                          {"mb_per_second_per_gpu", mbps},
                          {"demand_mb_per_second", 8 * mbps},
                          {"nodes", 1},
                          {"gpu_utilisation", 0.5},
                          {"limit", "cpu decode"}};
  };
  nlohmann::json doctor = {
      {"schema", "aquifer-result/1"},
      {"command", "doctor"},
      {"config", {{"gpus", 8}}},
      {"machine", nlohmann::json::object()},
      {"summary",
       {{"data", "shards"},
        {"format", "tfrecord"},
        {"images", 64},
        {"demand_images_per_second", 19760.0},
        {"cores", 2.0},
        {"storage_mb_per_second", 500.0},
        {"forms", {form("as stored", 950, 277), form("reencode", 3500, 48), form("rawform", 6100, 365)}},
        {"pick", "rawform"},
        {"limit", "cpu decode"},
        {"verdict", "as stored, CPU decode limits training <here>"},
        {"assumptions", {"GPU demand: table"}},
        {"warnings", {"reencode: the decode rate is noisy"}}}}};
  std::string html = RenderHtml({{"d.json", doctor}}, "t");
  EXPECT_EQ(html.find("No chart for this command"), std::string::npos);
  EXPECT_EQ(CountCharts(html), 2u);
  EXPECT_NE(html.find("as stored, CPU decode limits training &lt;here&gt;"), std::string::npos);
  EXPECT_NE(html.find("rawform (pick)"), std::string::npos);
  EXPECT_NE(html.find("--image-form reencode"), std::string::npos);
  EXPECT_NE(html.find("warning: reencode: the decode rate is noisy"), std::string::npos);
  EXPECT_NE(html.find("shards (tfrecord, 64 images)"), std::string::npos) << "the overview's key figure";
  EXPECT_NE(TextSummary({{"d.json", doctor}}).find("CPU decode limits training"), std::string::npos);
}

// Figures served from the page cache are called memory speeds, and the
// advice fits the run: a cache dropped before it does not help a dataset
// that fits in RAM, so that run is told to read more than RAM or O_DIRECT.
TEST(ReportTest, PageCacheFiguresSayWhatWouldMeasureTheStorage) {
  nlohmann::json series = {{"t", {1, 2, 3}},
                           {"columns",
                            {{{"name", "process.read"}, {"unit", "MB/s"}, {"values", {0.1, 0, 0}}},
                             {{"name", "process.rchar"}, {"unit", "MB/s"}, {"values", {500, 900, 900}}}}}};
  nlohmann::json r = {{"schema", "aquifer-result/1"},
                      {"command", "bench storage"},
                      {"config", {{"data", "/d"}, {"drop_caches", true}}},
                      {"machine", {{"memory_bytes", 25e9}}},
                      {"summary", {{"mb_per_second", 900.0}, {"dataset_bytes", 33e6}}},
                      {"series", series}};
  DataPath d = DescribeDataPath(r);
  EXPECT_TRUE(d.memory_speed);
  EXPECT_EQ(d.kind, "page cache");
  EXPECT_NE(d.note.find("dropped before the run (--drop-caches), but the dataset (33.0 MB) fits"), std::string::npos)
      << d.note;
  r["config"]["drop_caches"] = false;
  d = DescribeDataPath(r);
  EXPECT_NE(d.note.find("Drop the cache first (--drop-caches)"), std::string::npos) << d.note;
  // Mostly from the device: no warning.
  r["series"]["columns"][0]["values"] = {400, 800, 800};
  d = DescribeDataPath(r);
  EXPECT_FALSE(d.memory_speed) << d.note;
}

TEST(ReportTest, CheckpointResultsShowEachTargetAgainstTheLocalDisk) {
  auto target = [](double save, double restore) {
    return nlohmann::json{{"save", {{"median_total_mb_per_second", save}, {"median_slowest_seconds", 1.5}}},
                          {"restore", {{"median_total_mb_per_second", restore}, {"median_slowest_seconds", 0.5}}},
                          {"save_vs_local", save / 500},
                          {"restore_vs_local", restore / 2000}};
  };
  nlohmann::json r = {{"schema", "aquifer-result/1"},
                      {"command", "bench checkpoint"},
                      {"config", nlohmann::json::object()},
                      {"machine", nlohmann::json::object()},
                      {"summary",
                       {{"ranks", 4},
                        {"bytes_per_rank", 268e6},
                        {"saves", 3},
                        {"scale", "Llama-3 8B"},
                        {"targets", {{"local disk", target(500, 2000)}, {"aquifer://", target(300, 400)}}},
                        {"semantics", {"local disk: write, fsync <close>"}}}}};
  std::string html = RenderHtml({{"c.json", r}}, "t");
  EXPECT_EQ(html.find("No chart for this command"), std::string::npos);
  EXPECT_EQ(CountCharts(html), 2u);
  EXPECT_NE(html.find("0.60x"), std::string::npos) << "aquifer:// saves at 300 of 500 MB/s";
  EXPECT_NE(html.find("0.20x"), std::string::npos) << "and restores at 400 of 2000";
  EXPECT_NE(html.find("write, fsync &lt;close&gt;"), std::string::npos);
  EXPECT_NE(TextSummary({{"c.json", r}}).find("aquifer://: save 0.60x, restore 0.20x"), std::string::npos);
}

TEST(ReportTest, MalformedResultsRenderWithoutThrowing) {
  // Result files are input: wrong types and missing fields render as empty.
  std::vector<nlohmann::json> bad = {
      nlohmann::json::array(),
      {{"command", "bench train"}, {"summary", nlohmann::json::array()}},
      {{"command", "bench sweep"}, {"summary", {{"points", {1, "x", nullptr, {{"value", "s"}}}}}}},
      {{"command", "size"}, {"summary", {{"assumptions", {1, {{"a", 2}}}}}}, {"config", "f800"}},
      {{"command", "bench storage"}, {"series", {{"t", {"a", 1}}, {"columns", {1, {{"name", 2}}}}}}},
      {{"command", 7}, {"argv", {1, 2}}, {"machine", {{"cores", "two"}}}},
      {{"command", "doctor"}, {"summary", {{"forms", {1, {{"form", 2}}, nullptr}}, {"warnings", "w"}}}},
      {{"command", "bench checkpoint"}, {"summary", {{"targets", {{"x", 1}, {"y", {{"save", "s"}}}}}}}},
      {{"command", "bench checkpoint"}, {"summary", {{"targets", nlohmann::json::array()}}}},
  };
  for (const auto& j : bad) {
    std::vector<Input> in = {{"bad.json", j}};
    std::string html;
    EXPECT_NO_THROW(html = RenderHtml(in, "t")) << j.dump();
    EXPECT_NE(html.find("</html>"), std::string::npos);
    EXPECT_NO_THROW(TextSummary(in)) << j.dump();
  }
}

}  // namespace
}  // namespace aq::report
