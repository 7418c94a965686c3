#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench/cache_model.h"
#include "bench/doctor.h"
#include "bench/models.h"
#include "bench/result.h"
#include "bench/sizing.h"
#include "bench/storage_bench.h"
#include "bench/train_bench.h"
#include "common/latency.h"
#include "dataset/commands.h"
#include "monitor/latency_json.h"

namespace aq::bench {
namespace {

TEST(LatencyTest, QuantilesWithinBucketError) {
  LatencyHistogram h;
  for (uint64_t us = 1; us <= 1000; ++us) h.Record(us * 1000);
  EXPECT_EQ(h.count(), 1000u);
  EXPECT_EQ(h.max_ns(), 1000000u);
  EXPECT_NEAR(h.Quantile(0.5), 500e3, 500e3 * 0.05);
  EXPECT_NEAR(h.Quantile(0.99), 990e3, 990e3 * 0.05);
  EXPECT_EQ(h.Quantile(1.0), 1e6);
  EXPECT_NEAR(h.mean_ns(), 500500, 1);
  LatencyHistogram small;
  for (int i = 0; i < 10; ++i) small.Record(7);  // exact below 16 ns
  EXPECT_EQ(small.Quantile(0.5), 7);
  h.Merge(small);
  EXPECT_EQ(h.count(), 1010u);
  EXPECT_EQ(LatencyHistogram().Quantile(0.5), 0);
  auto j = monitor::LatencyJson(h);
  EXPECT_EQ(j["count"], 1010);
  EXPECT_NEAR(j["max_us"].get<double>(), 1000, 1e-9);
}

// The last interval of a cumulative histogram: what was recorded since a
// copy, with its own quantiles (the node's per-second latency series).
TEST(LatencyTest, SinceAnEarlierCopyIsTheIntervalBetween) {
  LatencyHistogram h;
  for (int i = 0; i < 1000; ++i) h.Record(1'000'000);  // 1 ms, before
  const LatencyHistogram before = h;
  for (int i = 0; i < 100; ++i) h.Record(50'000);  // 50 us, since
  LatencyHistogram d = h.Since(before);
  EXPECT_EQ(d.count(), 100u);
  EXPECT_NEAR(d.Quantile(0.99), 50e3, 50e3 * 0.05);
  EXPECT_NEAR(d.mean_ns(), 50e3, 1);
  EXPECT_LE(d.max_ns(), 1'000'000u);
  EXPECT_GE(d.max_ns(), 50'000u);
  EXPECT_LT(d.max_ns(), 60'000u) << "the top of the highest bucket of the interval, not the old max";
  EXPECT_EQ(h.Since(h).count(), 0u);
  EXPECT_EQ(h.Since(h).Quantile(0.99), 0);
}

// The documents' sizing table, reproduced from the profiles.
TEST(SizingTest, ReproducesTheDocumentsTable) {
  auto rows = SizingTable();
  ASSERT_EQ(rows.size(), 3u);
  struct Want {
    const char* demand;
    double mbps, f800, h500;
  } want[] = {{"low", 90, 27, 7}, {"medium", 160, 20, 5}, {"high", 300, 9, 2}};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rows[i].demand, want[i].demand);
    ASSERT_TRUE(rows[i].mb_per_second_per_gpu.has_value());
    EXPECT_EQ(*rows[i].mb_per_second_per_gpu, want[i].mbps);
    EXPECT_EQ(rows[i].gpus_per_node.at("f800"), want[i].f800);
    EXPECT_EQ(rows[i].gpus_per_node.at("h500"), want[i].h500);
  }
}

TEST(SizingTest, ReproducesTheDocumentsExamples) {
  // "72 * 80 = 5760 MB/sec which can be handled by 2.4 Isilon nodes"
  SizeRequest r;
  r.gpus = 72;
  r.mb_per_second_per_gpu = 80;
  auto a = Size(r);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_DOUBLE_EQ(a->demand_mb_per_second, 5760);
  EXPECT_DOUBLE_EQ(a->node_mb_per_second, 2430);  // 27 GPUs x 90 MB/s
  EXPECT_NEAR(a->nodes_exact, 2.4, 0.05);
  EXPECT_EQ(a->nodes, 3);
  // "80 * 90 = 7200 MB/sec which can be handled by 2.9 Isilon F800 nodes"
  // (7200 / 2430 = 2.96: the document truncated where the first example rounded).
  r = {};
  r.gpus = 80;
  a = Size(r);
  ASSERT_TRUE(a.ok());
  EXPECT_DOUBLE_EQ(a->demand_mb_per_second, 7200);
  EXPECT_NEAR(a->nodes_exact, 2.96, 0.005);
  EXPECT_EQ(std::floor(a->nodes_exact * 10) / 10, 2.9);
  // "72 * 300 = 21,600 MB/sec which can be handled by eight Isilon nodes"
  r = {};
  r.gpus = 72;
  r.workload = "inception4-train-large";
  a = Size(r);
  ASSERT_TRUE(a.ok());
  EXPECT_DOUBLE_EQ(a->demand_mb_per_second, 21600);
  EXPECT_DOUBLE_EQ(a->nodes_exact, 8);
  EXPECT_EQ(a->nodes, 8);
  // A100: "a single F800 node could handle eight NVIDIA A100 GPUs" (4 DGX A100 = 1 chassis of 4 nodes).
  r = {};
  r.gpus = 32;
  r.workload = "resnet50-train-a100";
  a = Size(r);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->nodes, 4);
  EXPECT_EQ(a->demand_mb_per_second, 0);
  // H500 chassis: 4 nodes x 7 GPUs = 28 GPUs of the low workload.
  r = {};
  r.gpus = 28;
  r.node = "h500";
  a = Size(r);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->nodes, 4);
}

TEST(SizingTest, HeadroomSpareNodesAndAssumptions) {
  SizeRequest r;
  r.gpus = 72;
  r.workload = "inception4-train-large";
  r.headroom = 0.25;
  r.spare_nodes = 1;
  auto a = Size(r);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->nodes, 10 + 1);  // 8 x 1.25 = 10, plus one spare
  bool mentions_headroom = false;
  for (const auto& s : a->assumptions) mentions_headroom |= s.find("headroom: 25%") != std::string::npos;
  EXPECT_TRUE(mentions_headroom);
  r.node_mb_per_second = 5400;
  r.headroom = 0;
  r.spare_nodes = 0;
  a = Size(r);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->nodes, 4);
}

// Capacity by hand: 150 TB of data stored at 0.48 of its bytes (compressed),
// 3 replicas: 216 TB on disk; 40 TB usable per node -> 5.4 nodes, more than
// throughput's 4: 6 nodes, set by capacity. Without compression 450 TB ->
// 11.25 -> 12. Erasure code 8+2: 150 x 0.48 x 1.25 = 90 TB -> 2.25: the
// throughput count (4) stands.
TEST(SizingTest, CapacityInPhysicalBytesWithTheStoredRatio) {
  SizeRequest r;
  r.gpus = 72;
  r.workload = "inception4-train-large";
  r.node_mb_per_second = 5400;
  r.dataset_bytes = 150e12;
  r.node_capacity_bytes = 40e12;
  r.stored_ratio = 0.48;
  r.protection = "3x";
  auto a = Size(r);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_DOUBLE_EQ(a->stored_bytes, 216e12);
  EXPECT_NEAR(a->capacity_nodes_exact, 5.4, 1e-9);
  EXPECT_EQ(a->nodes, 6);
  EXPECT_EQ(a->bound, "capacity");
  r.stored_ratio = 1;
  EXPECT_EQ(Size(r)->nodes, 12);
  r.stored_ratio = 0.48;
  r.protection = "8+2";
  a = Size(r);
  EXPECT_DOUBLE_EQ(a->stored_bytes, 90e12);
  EXPECT_EQ(a->nodes, 4);
  EXPECT_EQ(a->bound, "throughput");
  EXPECT_DOUBLE_EQ(ProtectionFactor("3x").value(), 3);
  EXPECT_DOUBLE_EQ(ProtectionFactor("4+2").value(), 1.5);
  for (const char* bad : {"x", "0x", "3", "8+", "+2", "8+2x", "three"}) EXPECT_FALSE(ProtectionFactor(bad).ok()) << bad;
  r.protection = "3x";
  r.node_capacity_bytes = 0;  // half of the capacity question
  EXPECT_EQ(Size(r).status().code(), StatusCode::kInvalidArgument);
  r.node_capacity_bytes = 40e12;
  r.stored_ratio = 7;
  EXPECT_EQ(Size(r).status().code(), StatusCode::kInvalidArgument);
}

// `size --from`: the demand at full utilisation, whatever bound the run.
// Hand calculation: 1,400 images/s per GPU x 130,714 bytes per image =
// 183.0 MB/s per GPU; 32 GPUs demand 5,856 MB/s; at 1,000 MB/s per node
// that is 5.86 -> 6 nodes. The input-bound run's delivered 75 MB/s per GPU
// would have given 2,400 MB/s -> 3 nodes: half of what is needed.
TEST(SizingTest, DemandFromATrainResultIsTheDemandAtFullUtilisation) {
  auto result = [](double au, bool au_ok, const char* bound, double delivered) {
    return nlohmann::json{{"config", {{"gpus", 32}, {"model_images_per_second_per_gpu", 1400}, {"batch_size", 256}}},
                          {"summary",
                           {{"mb_per_second_per_gpu", delivered},
                            {"au", au},
                            {"au_ok", au_ok},
                            {"bound", bound},
                            {"mean_image_bytes", 130714}}}};
  };
  struct Case {
    const char* what;
    nlohmann::json json;
    bool gpu_bound;
  };
  const Case cases[] = {
      {"input-bound", result(0.41, false, "decode", 75), false},
      {"storage-bound", result(0.50, false, "storage", 91), false},
      {"GPU-bound", result(0.97, true, "gpu", 178), true},
  };
  for (const auto& c : cases) {
    auto d = DemandFromTrainResult(c.json, "r.json");
    ASSERT_TRUE(d.ok()) << c.what << ": " << d.status().ToString();
    EXPECT_NEAR(d->demand_mb_per_second_per_gpu, 183.0, 0.01) << c.what;
    EXPECT_EQ(d->gpu_bound, c.gpu_bound) << c.what;
    EXPECT_NE(d->explanation.find(c.gpu_bound ? "GPU-bound" : "NOT GPU-bound"), std::string::npos) << d->explanation;
    SizeRequest r;
    r.gpus = 32;
    r.mb_per_second_per_gpu = d->demand_mb_per_second_per_gpu;
    r.node_mb_per_second = 1000;
    auto a = Size(r);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->nodes, 6) << c.what;
  }
  // An older result without the GPUs' rate cannot be sized from.
  nlohmann::json old = {{"config", {{"gpus", 8}}}, {"summary", {{"mb_per_second_per_gpu", 75}}}};
  EXPECT_FALSE(DemandFromTrainResult(old, "old.json").ok());
  EXPECT_FALSE(DemandFromTrainResult(nlohmann::json::object(), "x.json").ok());
}

TEST(SizingTest, BadRequestsAreClearErrors) {
  SizeRequest r;
  EXPECT_FALSE(Size(r).ok());  // no GPUs
  r.gpus = 8;
  r.workload = "gpt";
  auto a = Size(r);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().ToString().find("resnet50-train-small"), std::string::npos);  // lists the known ones
  r.workload = "resnet50-train-a100";
  r.node = "h500";
  EXPECT_FALSE(Size(r).ok());  // no H500 figure for A100
  r.node = "f800";
  r.mb_per_second_per_gpu = -1;
  EXPECT_FALSE(Size(r).ok());
}

// aquifer's own nodes: a bench storage result read from a node sizes the
// cluster with its MB/s, and says what the figure leaves out; results that
// did not read from a node are refused with the command that would.
TEST(SizingTest, MeasuredNodeFromABenchStorageResult) {
  nlohmann::json r = {
      {"command", "bench storage"},
      {"started", "2026-11-28T00:17:03Z"},
      {"config", {{"data", "aquifer://10.0.0.5:9000/data/ds"}, {"readers", 4}, {"request_bytes", 1 << 20}}},
      {"summary", {{"mb_per_second", 800.0}, {"seconds", 60.0}}}};
  auto m = NodeFromStorageResult(r, "nb.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_DOUBLE_EQ(m->mb_per_second, 800);
  EXPECT_NE(m->source.find("aquifer://10.0.0.5:9000/data/ds with 4 reader(s) of 1 MiB"), std::string::npos)
      << m->source;
  for (const auto& c : m->caveats) {
    EXPECT_EQ(c.find("own machine"), std::string::npos) << "another host: " << c;
    EXPECT_EQ(c.find("s run"), std::string::npos) << "a 60 s run is long enough: " << c;
  }
  SizeRequest q;
  q.gpus = 16;  // 16 x 90 MB/s = 1440 MB/s over 800 MB/s a node: 1.8 -> 2
  q.node = "measured";
  q.node_mb_per_second = m->mb_per_second;
  q.node_mb_per_second_source = m->source;
  auto a = Size(q);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_DOUBLE_EQ(a->nodes_exact, 1.8);
  EXPECT_EQ(a->nodes, 2);
  bool named = false;
  for (const auto& s : a->assumptions) {
    named |= s.find("one aquifer node delivers 800 MB/s (measured: bench storage") != std::string::npos;
    EXPECT_EQ(s.find("spec for comparison"), std::string::npos) << "no vendor spec for a measured node";
  }
  EXPECT_TRUE(named);

  r["config"]["data"] = "aquifer://127.0.0.1:9000/data/ds";  // the client shared the node's machine
  r["summary"]["seconds"] = 2.5;
  m = NodeFromStorageResult(r, "nb.json");
  ASSERT_TRUE(m.ok());
  std::string all;
  for (const auto& c : m->caveats) all += c + "\n";
  EXPECT_NE(all.find("node's own machine"), std::string::npos) << all;
  EXPECT_NE(all.find("a 2.5 s run"), std::string::npos) << all;

  r["config"]["data"] = "/local/ds";
  EXPECT_NE(NodeFromStorageResult(r, "x.json").status().ToString().find("not an aquifer node"), std::string::npos);
  r["command"] = "bench train";
  EXPECT_FALSE(NodeFromStorageResult(r, "x.json").ok());
  EXPECT_FALSE(NodeFromStorageResult(nlohmann::json::array(), "x.json").ok());
  q.node_mb_per_second.reset();  // measured without a figure
  EXPECT_FALSE(Size(q).ok());
  q.node_mb_per_second = 800;  // a workload without MB/s per GPU and no GPUs-per-node figure
  q.workload = "resnet50-train-a100";
  EXPECT_NE(Size(q).status().ToString().find("--mbps-per-gpu"), std::string::npos);
}

TEST(CacheModelTest, TheDocumentsFigures) {
  // 512 GB client RAM and 2 TB storage cache over 22.2 TB: ~2%, ~9%, ~91% from SSD.
  auto m = ModelCache({22.2e12, 512e9, 2e12});
  ASSERT_TRUE(m.ok());
  EXPECT_NEAR(m->client_hit, 0.023, 0.001);
  EXPECT_NEAR(m->storage_hit, 0.090, 0.001);
  EXPECT_NEAR(m->storage_media, 0.910, 0.001);
  // 768 GB and 1 TB (4 nodes): 3.5%, 4.5%, 95.5%; at 44.4 TB, 97.8% from SSD.
  m = ModelCache({22.2e12, 768e9, 1e12});
  EXPECT_NEAR(m->client_hit, 0.035, 0.001);
  EXPECT_NEAR(m->storage_hit, 0.045, 0.001);
  EXPECT_NEAR(m->storage_media, 0.955, 0.001);
  m = ModelCache({44.4e12, 768e9, 1e12});
  EXPECT_NEAR(m->storage_media, 0.978, 0.001);
  // 148 GB fully cached in a 512 GB server: the "Linux cache" baseline.
  m = ModelCache({148e9, 512e9, 0});
  EXPECT_EQ(m->client_hit, 1);
  EXPECT_EQ(m->media_of_all, 0);
  EXPECT_FALSE(ModelCache({0, 1, 1}).ok());
}

TEST(CacheModelTest, PlanStagingReadsAheadWhatItsMediaRateAllows) {
  // Dataset 4x the storage RAM: 75% of storage reads come from media.
  CacheModelInput in{100e9, 0, 25e9};
  auto m = ModelCache(in);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->storage_staged, 0);  // no plans: every media read is waited for
  EXPECT_NEAR(m->storage_waited, 0.75, 1e-9);
  // 16 staging threads at 8 ms: 2,000 blocks/s of media; readers asking
  // 1,000 blocks/s need 750 from media: all staged ahead.
  in.staging_reads_per_second = 2000;
  in.demand_reads_per_second = 1000;
  m = ModelCache(in);
  EXPECT_NEAR(m->storage_staged, 0.75, 1e-9);
  EXPECT_NEAR(m->storage_waited, 0, 1e-9);
  // Asking 4,000 blocks/s (3,000 from media): two thirds staged, a third waited for.
  in.demand_reads_per_second = 4000;
  m = ModelCache(in);
  EXPECT_NEAR(m->storage_staged, 0.5, 1e-9);
  EXPECT_NEAR(m->storage_waited, 0.25, 1e-9);
  in.demand_reads_per_second = 0;  // unknown: staging keeps up
  EXPECT_NEAR(ModelCache(in)->storage_staged, 0.75, 1e-9);
  in.staging_reads_per_second = -1;
  EXPECT_FALSE(ModelCache(in).ok());
}

TEST(CacheModelTest, MeasuredFromResultSeries) {
  nlohmann::json r = {{"summary", {{"total_bytes", 4e9}, {"page_cache_before", 0.0}, {"page_cache_after", 1.0}}},
                      {"series",
                       {{"t", {1.0, 2.0, 3.0}},
                        {"columns",
                         {{{"name", "disk.vda.read"}, {"unit", "MB/s"}, {"values", {500, 300, 200}}},
                          {{"name", "disk.vda.read_iops"}, {"unit", "IOPS"}, {"values", {9, 9, 9}}},
                          {{"name", "bench.read"}, {"unit", "MB/s"}, {"values", {1000, 1000, 2000}}}}}}}};
  auto m = MeasureCacheFromResult(r, "r.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_DOUBLE_EQ(m->disk_bytes, 1e9);
  EXPECT_DOUBLE_EQ(m->client_hit, 0.75);
  EXPECT_EQ(*m->residency_after, 1.0);
  r["summary"] = nlohmann::json::object();
  EXPECT_FALSE(MeasureCacheFromResult(r, "r.json").ok());
}

TEST(ModelsTest, EveryEntryHasASource) {
  const auto& t = ModelTable();
  EXPECT_EQ(t.size(), 7u * 3 * 2);
  for (const auto& e : t) {
    EXPECT_FALSE(e.source.empty()) << e.model << " " << e.gpu << " " << e.precision;
    EXPECT_GT(e.train_images_per_second, 0);
  }
  auto rn50 = FindModel("resnet50", "v100", "fp16");
  ASSERT_TRUE(rn50.ok());
  EXPECT_EQ(rn50->train_images_per_second, 819);
  EXPECT_TRUE(rn50->measured);
  EXPECT_EQ(FindModel("resnet50", "a100", "fp16")->train_images_per_second, 2470);
  EXPECT_EQ(FindModel("inception4", "v100", "fp16")->image_size, 299);
  EXPECT_FALSE(FindModel("resnet50", "h100", "fp16")->measured);
  auto bad = FindModel("bert", "v100", "fp16");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("resnet50"), std::string::npos);
}

TEST(StorageMergeTest, ProcessesSumRatesAndKeepTheWorstLatency) {
  auto one = [](int rank, double mb, double p99, double count, double mean, std::vector<double> reads) {
    return nlohmann::json{
        {"config", {{"rank", rank}}},
        {"summary",
         {{"mb_per_second", mb},
          {"files", 10},
          {"seconds", 5.0 + rank},
          {"file_count", 100},
          {"latency",
           {{"p50_us", p99 / 2}, {"p99_us", p99}, {"max_us", p99 * 2}, {"count", count}, {"mean_us", mean}}}}},
        {"series", {{"columns", {{{"name", "bench.read"}, {"unit", "B"}, {"values", reads}}}}}}};
  };
  monitor::Series series;
  series.t = {0, 1, 2};
  const auto sum = MergeStorageResults({one(0, 100, 10, 2, 1, {1, 2}), one(1, 50, 20, 6, 3, {10, 20, 30})}, &series);
  EXPECT_EQ(sum["mb_per_second"].get<double>(), 150);
  EXPECT_EQ(sum["files"].get<double>(), 20);
  EXPECT_EQ(sum["seconds"].get<double>(), 6);    // the longest process
  EXPECT_EQ(sum["file_count"].get<int>(), 100);  // the dataset's, not summed
  EXPECT_EQ(sum["latency"]["p99_us"].get<double>(), 20);
  EXPECT_EQ(sum["latency"]["max_us"].get<double>(), 40);
  EXPECT_EQ(sum["latency"]["count"].get<double>(), 8);
  EXPECT_EQ(sum["latency"]["mean_us"].get<double>(), 2.5);  // weighted by count
  ASSERT_EQ(sum["processes"].size(), 2u);
  EXPECT_EQ(sum["processes"][1]["rank"].get<int>(), 1);
  const auto* reads = series.Find("bench.read");
  ASSERT_NE(reads, nullptr);
  EXPECT_EQ(reads->values, (std::vector<double>{11, 22, 30}));  // by sample index, cut to the parent's samples
  EXPECT_EQ(series.Find("bench.files")->values, (std::vector<double>{0, 0, 0}));
}

TEST(ResultTest, EnvelopeCsvAndFiles) {
  monitor::Series s;
  s.t = {1, 2};
  s.columns.push_back({"bench.read", "MB/s", {10, 20}});
  auto r = MakeResult({"bench storage", {"aquifer", "bench", "storage", "x"}, {"/"}}, {{"readers", 2}},
                      {{"mb_per_second", 15.5}, {"latency", {{"p50_us", 3}}}}, &s);
  EXPECT_TRUE(ValidateResult(r, "r").ok());
  EXPECT_EQ(r["schema"], kResultSchema);
  EXPECT_TRUE(r["machine"].contains("cores"));
  EXPECT_EQ(SeriesCsv(r["series"]), "t,bench.read (MB/s)\n1.000,10\n2.000,20\n");
  std::string flat = FlatCsv(r["summary"]);
  EXPECT_NE(flat.find("latency.p50_us,3\n"), std::string::npos) << flat;
  EXPECT_NE(flat.find("mb_per_second,15.5\n"), std::string::npos) << flat;

  auto dir = std::filesystem::temp_directory_path() / ("aq_result_test_" + std::to_string(getpid()));
  auto path = WriteResult((dir / "sub").string(), r);
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_TRUE(std::filesystem::exists(*path));
  std::string stem = path->substr(0, path->size() - 5);
  EXPECT_TRUE(std::filesystem::exists(stem + ".csv"));
  EXPECT_TRUE(std::filesystem::exists(stem + "-series.csv"));
  auto second = WriteResult((dir / "sub").string(), r);  // same second: a new name, nothing overwritten
  ASSERT_TRUE(second.ok());
  EXPECT_NE(*second, *path);
  std::filesystem::remove_all(dir);

  nlohmann::json bad = r;
  bad.erase("summary");
  EXPECT_FALSE(ValidateResult(bad, "r").ok());
  EXPECT_FALSE(ValidateResult(nlohmann::json::array(), "r").ok());
  bad = r;
  bad["schema"] = "other";
  EXPECT_NE(ValidateResult(bad, "x.json").ToString().find("x.json"), std::string::npos);
}

class StorageBenchTest : public testing::Test {
 protected:
  void SetUp() override {
    fs_ = io::NewMemFileSystem();
    ASSERT_TRUE(fs_->MakeDirs("/data").ok());
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(io::WriteFileAtomic(*fs_, "/data/f" + std::to_string(i), std::string(300000 + i, 'a')).ok());
    }
  }
  StorageBenchOptions Options() {
    StorageBenchOptions o;
    o.data = "/data";
    o.readers = 2;
    o.request_bytes = 65536;
    o.duration_seconds = 0.3;
    o.ramp_seconds = 0.1;
    o.progress = false;
    o.sampler.interval_seconds = 0.1;
    o.sampler.system = false;
    return o;
  }
  std::unique_ptr<io::FileSystem> fs_;
};

TEST_F(StorageBenchTest, AsyncRandomReadsWholeFiles) {
  auto r = RunStorageBench(*fs_, Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->file_count, 4u);
  EXPECT_EQ(r->dataset_bytes, 4u * 300000 + 6);
  EXPECT_GT(r->bytes, 0u);
  EXPECT_GT(r->files, 0u);
  EXPECT_GT(r->latency.count(), 0u);
  EXPECT_GE(r->total_bytes, r->bytes);
  EXPECT_NEAR(r->mb_per_second, static_cast<double>(r->bytes) / 1e6 / r->seconds, 1e-6);
  EXPECT_NE(r->series.Find("bench.read"), nullptr);
}

TEST_F(StorageBenchTest, SyncRoundRobinSteps) {
  auto o = Options();
  o.mode = StorageMode::kSync;
  o.step_bytes = 200000;
  o.selection = FileSelection::kRoundRobin;
  auto r = RunStorageBench(*fs_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->sync_steps, 0u);
  EXPECT_GT(r->files, 0u);
}

TEST_F(StorageBenchTest, BadOptionsAndInputs) {
  auto o = Options();
  o.ramp_seconds = 1;  // longer than the run
  EXPECT_EQ(RunStorageBench(*fs_, o).status().code(), StatusCode::kInvalidArgument);
  o = Options();
  o.readers = 0;
  EXPECT_FALSE(RunStorageBench(*fs_, o).ok());
  o = Options();
  o.data = "/nothing";
  auto r = RunStorageBench(*fs_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("/nothing"), std::string::npos);
  ASSERT_TRUE(fs_->MakeDirs("/empty").ok());
  o.data = "/empty";
  EXPECT_FALSE(RunStorageBench(*fs_, o).ok());
  o = Options();
  o.iodepth = 8;  // io_uring needs a local file descriptor
  r = RunStorageBench(*fs_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("iodepth 8"), std::string::npos);
}

TEST(StorageBenchPosixTest, IoUringQueueOnLocalFiles) {
  auto dir = std::filesystem::temp_directory_path() / ("aq_storage_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (int i = 0; i < 3; ++i) std::ofstream(dir / ("f" + std::to_string(i))) << std::string(1 << 20, 'z');
  auto fs = io::NewPosixFileSystem();
  StorageBenchOptions o;
  o.data = dir.string();
  o.readers = 2;
  o.iodepth = 4;
  o.request_bytes = 128 << 10;
  o.duration_seconds = 0.3;
  o.ramp_seconds = 0.05;
  o.drop_caches = true;
  o.progress = false;
  o.sampler.interval_seconds = 0.1;
  auto r = RunStorageBench(*fs, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->bytes, 0u);
  EXPECT_GT(r->files, 0u);
  EXPECT_NE(r->cache_drop.find("fadvise"), std::string::npos);
  o.mode = StorageMode::kSync;
  o.step_bytes = 1 << 20;
  r = RunStorageBench(*fs, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->sync_steps, 0u);
  std::filesystem::remove_all(dir);
}

class TrainBenchTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs_ = io::NewMemFileSystem().release();
    dataset::SynthOptions s;
    s.out = "/raw";
    s.classes = 4;
    s.images = 48;
    s.seed = 2;
    s.common.progress = false;
    ASSERT_TRUE(dataset::Synthesize(*fs_, s).ok());
    dataset::PackOptions p;
    p.input = "/raw";
    p.out = "/tf";
    p.shards = 4;
    p.common.progress = false;
    ASSERT_TRUE(dataset::Pack(*fs_, p).ok());
  }
  static void TearDownTestSuite() { delete fs_; }
  static TrainBenchOptions Options() {
    TrainBenchOptions o;
    o.pipeline.data = "/tf";
    o.pipeline.batch_size = 4;
    o.pipeline.image_size = 32;
    o.pipeline.workers = 2;
    o.pipeline.store.dtype = image::DType::kUint8;
    o.progress = false;
    o.sampler.interval_seconds = 0.05;
    o.sampler.system = false;
    return o;
  }
  static io::FileSystem* fs_;
};
io::FileSystem* TrainBenchTest::fs_ = nullptr;

// The doctor's arithmetic holds for every form, and its verdict follows
// the figures: few cores make decode the limit, a slow store the storage,
// enough of both the GPUs; the pick is the form that feeds the GPUs with
// the fewest bytes.
TEST_F(TrainBenchTest, DoctorJudgesEachFormByItsOwnFigures) {
  io::FileSystem* fs = fs_;
  DoctorOptions o;
  o.data = "/tf";
  o.sample = 16;
  o.decoded = 16;
  o.gpus = 4;
  o.cores = 1;
  o.storage_mb_per_second = 1e6;
  o.progress = false;
  o.rounds = 3;
  o.min_round_seconds = 0;
  o.noisy = 0;  // any spread at all is reported
  auto r = RunDoctor(*fs, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->forms.size(), 4u);
  size_t spread = 0;
  for (const auto& f : r->forms) {
    ASSERT_EQ(f.decode_rounds.size(), 3u) << f.form;
    std::vector<double> v = f.decode_rounds;
    std::sort(v.begin(), v.end());
    EXPECT_DOUBLE_EQ(f.images_per_second_per_core, v[1]) << "the median round counts: " << f.form;
    EXPECT_NEAR(f.decode_spread, (v[2] - v[0]) / v[1], 1e-12) << f.form;
    spread += f.decode_spread > 0;
  }
  EXPECT_EQ(r->warnings.size(), spread) << "every form whose runs differ is reported at --noisy 0";
  for (const auto& w : r->warnings) EXPECT_NE(w.find("noisy"), std::string::npos) << w;
  o.rounds = 1;  // one run has no spread to report
  o.noisy = 0.25;
  EXPECT_EQ(r->images, 48u);
  const double rate = FindModel("resnet50", "a100", "fp16")->train_images_per_second;
  EXPECT_DOUBLE_EQ(r->demand_images_per_second, 4 * rate);
  for (const auto& f : r->forms) {
    EXPECT_GT(f.images_per_second_per_core, 0) << f.form;
    EXPECT_GT(f.bytes_per_image, 0) << f.form;
    EXPECT_NEAR(f.cores_needed, 4 * rate / f.images_per_second_per_core, 1e-9) << f.form;
    EXPECT_NEAR(f.mb_per_second_per_gpu, rate * f.bytes_per_image / 1e6, 1e-9) << f.form;
    EXPECT_EQ(f.limit, "cpu decode") << "one core cannot feed four A100s: " << f.form;
    EXPECT_GE(f.nodes, 1) << f.form;
  }
  EXPECT_GT(r->forms[2].bytes_per_image, r->forms[1].bytes_per_image) << "raw stores more bytes than JPEG";
  EXPECT_NE(r->verdict.find("CPU decode limits training"), std::string::npos) << r->verdict;

  o.cores = 1e6;  // decode is never short, nor storage: the GPUs are the limit, and the form stays
  r = RunDoctor(*fs, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->warnings.empty());
  for (const auto& f : r->forms) EXPECT_EQ(f.limit, "gpu") << f.form;
  EXPECT_EQ(r->pick, 0u);
  EXPECT_NE(r->verdict.find("keep the form as stored"), std::string::npos) << r->verdict;

  // A store that feeds half of what the stored form needs: the pick is the
  // form with the fewest bytes among those that keep the GPUs fed.
  o.storage_mb_per_second = r->forms[0].demand_mb_per_second / 2;
  r = RunDoctor(*fs, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->forms[0].limit, "storage");
  size_t fewest = 0;
  for (size_t i = 1; i < r->forms.size(); ++i) {
    if (r->forms[i].gpu_utilisation >= 1 &&
        (fewest == 0 || r->forms[i].bytes_per_image < r->forms[fewest].bytes_per_image)) {
      fewest = i;
    }
  }
  ASSERT_NE(fewest, 0u) << "re-encoded at 256 px, some form needs less than half the bytes";
  EXPECT_EQ(r->pick, fewest);
  EXPECT_EQ(r->forms[r->pick].limit, "gpu");

  o.storage_mb_per_second = 1;  // a store far slower than any form needs
  r = RunDoctor(*fs, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const auto& f : r->forms) {
    EXPECT_EQ(f.limit, "storage") << f.form;
    EXPECT_NEAR(f.gpu_utilisation, 1 / f.demand_mb_per_second, 1e-12);
  }
  EXPECT_NE(r->verdict.find("storage limits training"), std::string::npos) << r->verdict;

  o.model = "resnet51";
  EXPECT_FALSE(RunDoctor(*fs, o).ok());
  o.model = "resnet50";
  o.data = "/nothing";
  EXPECT_FALSE(RunDoctor(*fs, o).ok());
}

TEST_F(TrainBenchTest, SlowGpusAreGpuBound) {
  auto o = Options();
  o.gpus = 2;
  o.step_seconds = 0.02;         // 200 images/s per GPU: easily fed
  std::vector<uint64_t> epochs;  // as the pipelines finish reading each
  o.on_epoch = [&](uint64_t e) { epochs.push_back(e); };
  o.add_series = [](monitor::Sampler& s) { s.AddGauge("outside.reading", "x", [] { return 7.0; }); };
  auto r = RunTrainBench(*fs_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->gpus.size(), 2u);
  EXPECT_EQ(epochs, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
  bool outside = false;
  for (const auto& c : r->series.columns) outside = outside || c.name == "outside.reading";
  EXPECT_TRUE(outside);
  // 48 images over 2 ranks, batches of 4: 6 steps a pass; a verdict needs
  // 20 measured steps, so 4 passes: 24 steps each, the first excluded.
  EXPECT_EQ(r->epochs, 4u);
  EXPECT_EQ(r->gpus[0].steps, 23u);
  EXPECT_EQ(r->gpus[1].steps, 23u);
  EXPECT_EQ(r->measured_steps, 23u);
  EXPECT_EQ(r->images, 2u * 23 * 4);
  EXPECT_GT(r->step_min_seconds, 0);
  EXPECT_LE(r->step_min_seconds, r->step_median_seconds);
  EXPECT_LE(r->step_median_seconds, r->step_max_seconds);
  EXPECT_GE(r->step_median_seconds, 0.02);  // a step is at least its compute time
  EXPECT_GT(r->au, 0);
  EXPECT_LE(r->au, 1.0);
  EXPECT_GT(r->bytes_read, 0u);
  EXPECT_GT(r->mean_image_bytes, 0);
  EXPECT_DOUBLE_EQ(r->demand_images_per_second, 2 * 4 / 0.02);
  EXPECT_FALSE(r->verdict.empty());
  EXPECT_FALSE(r->bound.empty());
  auto sum = SummaryJson(*r);
  EXPECT_EQ(sum["gpus"].size(), 2u);
}

TEST_F(TrainBenchTest, ImpossiblyFastGpusAreInputBound) {
  auto o = Options();
  o.step_seconds = 1e-6;
  auto r = RunTrainBench(*fs_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LT(r->au, 0.9);
  EXPECT_FALSE(r->au_ok);
  EXPECT_TRUE(r->bound == "decode" || r->bound == "storage") << r->bound;
}

// Storage with a device's latency: every read takes at least `delay`.
class SlowFileSystem final : public io::FileSystem {
 public:
  SlowFileSystem(io::FileSystem& base, std::chrono::milliseconds delay) : base_(base), delay_(delay) {}
  Result<std::unique_ptr<io::RandomAccessFile>> OpenRead(const std::string& path, io::AccessHint hint) override {
    return std::unique_ptr<io::RandomAccessFile>(
        std::make_unique<SlowFile>(AQ_TRY(base_.OpenRead(path, hint)), delay_));
  }
  Result<std::unique_ptr<io::WritableFile>> OpenWrite(const std::string& path) override {
    return base_.OpenWrite(path);
  }
  Result<io::FileInfo> Stat(const std::string& path) override { return base_.Stat(path); }
  Result<std::vector<io::FileInfo>> List(const std::string& dir) override { return base_.List(dir); }
  Status MakeDirs(const std::string& path) override { return base_.MakeDirs(path); }
  Status Remove(const std::string& path) override { return base_.Remove(path); }
  Status Rename(const std::string& a, const std::string& b) override { return base_.Rename(a, b); }

 private:
  struct SlowFile final : io::RandomAccessFile {
    SlowFile(std::unique_ptr<io::RandomAccessFile> f, std::chrono::milliseconds d) : f_(std::move(f)), d_(d) {}
    Result<size_t> ReadAt(uint64_t offset, size_t n, void* buf) const override {
      std::this_thread::sleep_for(d_);  // the device's latency, not a wait for a thread
      return f_->ReadAt(offset, n, buf);
    }
    uint64_t size() const override { return f_->size(); }
    const std::string& path() const override { return f_->path(); }
    std::unique_ptr<io::RandomAccessFile> f_;
    std::chrono::milliseconds d_;
  };
  io::FileSystem& base_;
  std::chrono::milliseconds delay_;
};

TEST_F(TrainBenchTest, SlowStorageIsStorageBound) {
  SlowFileSystem slow(*fs_, std::chrono::milliseconds(80));
  auto o = Options();
  o.step_seconds = 1e-4;
  auto r = RunTrainBench(slow, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->au_ok);
  EXPECT_EQ(r->bound, "storage") << r->verdict;
  EXPECT_NE(r->verdict.find("storage-bound"), std::string::npos);
}

TEST_F(TrainBenchTest, InferenceAndModelTable) {
  auto o = Options();
  o.inference = true;
  o.model = "alexnet";
  auto r = RunTrainBench(*fs_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->step_seconds, 4 / (7095.0 / 4 * kInferenceSpeedup), 1e-9);
  EXPECT_EQ(r->gpus[0].sync_seconds, 0);  // forward only: no all-reduce
  auto c = ConfigJson(o, *r);
  EXPECT_EQ(c["mode"], "inference");
}

// A run shorter than min_steps states no bound, however its AU looks.
TEST_F(TrainBenchTest, TooFewStepsGiveNoVerdict) {
  auto o = Options();
  o.step_seconds = 0.02;
  o.steps = 4;
  auto r = RunTrainBench(*fs_, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->measured_steps, 3u);
  EXPECT_FALSE(r->au_ok);
  EXPECT_EQ(r->bound, "insufficient");
  EXPECT_NE(r->verdict.find("not enough samples"), std::string::npos) << r->verdict;
  o.min_steps = 3;  // the user's own minimum
  r = RunTrainBench(*fs_, o);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->bound, "insufficient");
}

TEST_F(TrainBenchTest, ClearErrors) {
  auto o = Options();
  o.gpus = 0;
  EXPECT_FALSE(RunTrainBench(*fs_, o).ok());
  o = Options();
  o.model = "nope";
  EXPECT_EQ(RunTrainBench(*fs_, o).status().code(), StatusCode::kNotFound);
  o = Options();
  o.gpus = 12;
  o.steps = 1;  // nothing left once the first is excluded
  auto r = RunTrainBench(*fs_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("at least 2"), std::string::npos);
}

// The verdict alone, over the cases a run can end in: too few steps wins
// over any AU, then AU against the threshold, then the busier stage names
// the bound.
TEST(JudgeTrainRun, EveryBound) {
  TrainBenchOptions o;
  o.min_steps = 20;
  o.au_threshold = 0.9;
  auto report = [](double au, uint64_t steps, double read_util, double decode_util) {
    TrainBenchReport r;
    r.au = au;
    r.measured_steps = steps;
    pipeline::StageStats read, decode;
    read.name = "read";
    read.utilisation = read_util;
    decode.name = "decode";
    decode.utilisation = decode_util;
    r.stages = {read, decode};
    return r;
  };
  struct Case {
    double au;
    uint64_t steps;
    double read, decode;
    const char* bound;
    bool ok;
  };
  for (const Case& c : {Case{0.99, 19, 0.1, 0.1, "insufficient", false}, Case{0.95, 20, 0.9, 0.9, "gpu", true},
                        Case{0.90, 20, 0.0, 0.0, "gpu", true}, Case{0.89, 20, 0.8, 0.3, "storage", false},
                        Case{0.50, 20, 0.3, 0.8, "decode", false}, Case{0.50, 20, 0.5, 0.5, "decode", false}}) {
    auto r = report(c.au, c.steps, c.read, c.decode);
    JudgeTrainRun(o, r);
    EXPECT_EQ(r.bound, c.bound) << c.au << " " << c.steps;
    EXPECT_EQ(r.au_ok, c.ok) << c.au << " " << c.steps;
    EXPECT_FALSE(r.verdict.empty());
  }
}

}  // namespace
}  // namespace aq::bench
