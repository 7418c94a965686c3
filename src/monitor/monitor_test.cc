#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "monitor/machine.h"
#include "monitor/page_cache.h"
#include "monitor/proc.h"
#include "monitor/prometheus.h"
#include "monitor/sampler.h"

namespace aq::monitor {
namespace {

TEST(ProcTest, StatAggregateCpuLine) {
  auto t = ParseProcStat("cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\nintr 12345\n");
  EXPECT_EQ(t.user, 100u);
  EXPECT_EQ(t.nice, 5u);
  EXPECT_EQ(t.system, 50u);
  EXPECT_EQ(t.idle, 1000u);
  EXPECT_EQ(t.iowait, 20u);
  EXPECT_EQ(t.steal, 1u);
  EXPECT_EQ(t.Total(), 1181u);
  EXPECT_EQ(ParseProcStat("garbage\n").Total(), 0u);
}

TEST(ProcTest, MeminfoInBytes) {
  auto m = ParseMeminfo("MemTotal:       16384 kB\nMemAvailable:    8192 kB\nHugePages_Total:       0\n");
  EXPECT_EQ(m["MemTotal"], 16384u * 1024);
  EXPECT_EQ(m["MemAvailable"], 8192u * 1024);
  EXPECT_EQ(m["HugePages_Total"], 0u);
}

TEST(ProcTest, Diskstats) {
  auto d = ParseDiskstats(
      " 253       0 vda 1000 10 20480 500 2000 20 40960 900 0 1000 1400 0 0 0 0\n"
      "   7       0 loop0 5 0 10 0 0 0 0 0 0 0 0\n short line\n");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].name, "vda");
  EXPECT_EQ(d[0].reads, 1000u);
  EXPECT_EQ(d[0].read_sectors, 20480u);
  EXPECT_EQ(d[0].writes, 2000u);
  EXPECT_EQ(d[0].write_sectors, 40960u);
}

TEST(ProcTest, NetDevSkipsHeaders) {
  auto n = ParseNetDev(
      "Inter-|   Receive                                                |  Transmit\n"
      " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls "
      "carrier compressed\n"
      "    lo: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n"
      "  eth0:5000 50 0 0 0 0 0 0 6000 60 0 0 0 0 0 0\n");
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(n[0].name, "lo");
  EXPECT_EQ(n[1].name, "eth0");
  EXPECT_EQ(n[1].rx_bytes, 5000u);
  EXPECT_EQ(n[1].tx_bytes, 6000u);
  EXPECT_EQ(n[1].tx_packets, 60u);
}

TEST(ProcTest, ProcessCpuTicksWithAwkwardName) {
  // A command name may hold spaces and parentheses; fields count after the last ')'.
  EXPECT_EQ(ParseProcessCpuTicks("42 (a) (b c)) S 1 42 42 0 -1 4194560 100 0 0 0 70 30 0 0 20 0 3"), 100u);
  EXPECT_EQ(ParseProcessCpuTicks("no parenthesis"), 0u);
}

TEST(MachineTest, LongestMountPrefixWins) {
  const std::string mounts =
      "/dev/vda1 / ext4 rw 0 0\n"
      "nas:/export /data nfs4 rw 0 0\n"
      "tmpfs /data/scratch\\040dir tmpfs rw 0 0\n";
  auto a = FindMount("/data/train/x", mounts);
  EXPECT_EQ(a.mount_point, "/data");
  EXPECT_EQ(a.fs_type, "nfs4");
  EXPECT_EQ(a.device, "nas:/export");
  EXPECT_EQ(FindMount("/data2/x", mounts).fs_type, "ext4");  // a prefix of the name is not a parent
  EXPECT_EQ(FindMount("/data/scratch dir/f", mounts).fs_type, "tmpfs");
  auto m = CollectMachineFacts({"/"});
  EXPECT_GT(m.cores, 0u);
  EXPECT_GT(m.memory_bytes, 0u);
  ASSERT_EQ(m.roots.size(), 1u);
  EXPECT_EQ(m.roots[0].mount_point, "/");
}

// A long-running sampler (a node's metrics) keeps the last keep_samples:
// its memory and Take() stay bounded however long it runs, and what it
// keeps is the newest, with every column as long as the time axis.
TEST(SamplerTest, KeepsOnlyTheLastSamplesWhenBounded) {
  SamplerOptions o;
  o.interval_seconds = 0;
  o.system = false;
  o.keep_samples = 10;
  Sampler s(o);
  double n = 0;
  s.AddGauge("n", "", [&] { return n; });
  s.Start();
  for (int i = 0; i < 1000; ++i) {
    n = i;
    s.SampleNow();
    const Series now = s.Take();
    ASSERT_LE(now.t.size(), 10u + 10u / 4 + 1) << i;
    ASSERT_EQ(now.columns[0].values.size(), now.t.size()) << i;
    ASSERT_EQ(now.columns[0].values.back(), i);
  }
  const Series last = s.Take();
  ASSERT_GE(last.t.size(), 10u);
  EXPECT_EQ(last.columns[0].values.front(), 1000.0 - static_cast<double>(last.t.size()));
  s.Stop();
}

TEST(SamplerTest, CountersBecomeRatesGaugesAsRead) {
  SamplerOptions o;
  o.interval_seconds = 0;  // driven by SampleNow()
  o.system = false;
  Sampler s(o);
  double counter = 0, gauge = 7;
  s.AddCounter(
      "bench.read", "MB/s", [&] { return counter; }, 1e-6);
  s.AddGauge("queue", "items", [&] { return gauge; });
  s.Start();
  counter = 5e6;
  s.SampleNow();
  gauge = 9;
  counter = 8e6;
  s.SampleNow();
  s.Stop();
  Series series = s.Take();
  ASSERT_EQ(series.t.size(), 2u);
  const Column* read = series.Find("bench.read");
  ASSERT_NE(read, nullptr);
  ASSERT_EQ(read->values.size(), 2u);
  // Rates are bytes over elapsed time; the sign and ordering are what is fixed.
  EXPECT_GT(read->values[0], 0);
  EXPECT_GT(read->values[1], 0);
  EXPECT_EQ(series.Find("queue")->values, (std::vector<double>{7, 9}));
  EXPECT_EQ(series.Find("nothing"), nullptr);
  auto j = series.ToJson();
  EXPECT_EQ(j["columns"].size(), 2u);
}

TEST(SamplerTest, SystemColumnsFromProc) {
  SamplerOptions o;
  o.interval_seconds = 0;
  Sampler s(o);
  s.Start();
  s.SampleNow();
  s.Stop();
  Series series = s.Take();
  for (const char* name : {"cpu.user", "cpu.system", "cpu.iowait", "mem.used", "mem.page_cache", "process.cpu",
                           "process.rss", "process.read", "process.rchar"}) {
    const Column* c = series.Find(name);
    ASSERT_NE(c, nullptr) << name;
    ASSERT_EQ(c->values.size(), 1u) << name;
    EXPECT_GE(c->values[0], 0) << name;
  }
  EXPECT_GT(series.Find("process.rss")->values[0], 0);
  EXPECT_FALSE(series.notes.empty());  // says whether GPUs were found
}

TEST(ProcTest, ProcessIo) {
  auto io = ParseProcessIo(
      "rchar: 4096123\nwchar: 77\nsyscr: 12\nsyscw: 3\nread_bytes: 8192\nwrite_bytes: 4096\n"
      "cancelled_write_bytes: 0\n");
  EXPECT_EQ(io.rchar, 4096123u);
  EXPECT_EQ(io.wchar, 77u);
  EXPECT_EQ(io.read_bytes, 8192u);
  EXPECT_EQ(io.write_bytes, 4096u);
  auto none = ParseProcessIo("garbage\n: \nread_bytes:\n");  // unreadable or odd: zeros
  EXPECT_EQ(none.read_bytes, 0u);
  // The real file of this process parses, and reading it counted some bytes.
  EXPECT_GT(ParseProcessIo(ReadProcFile("/proc/self/io")).rchar, 0u);
}

TEST(PrometheusTest, TextFormat) {
  std::vector<Column> cols = {{"disk.sda.read", "MB/s", {1, 12.5}},
                              {"disk.sdb.read", "MB/s", {3}},
                              {"cpu.user", "%", {40}},
                              {"net.eth0.rx", "MB/s", {2}},
                              {"empty", "x", {}}};
  std::string t = PrometheusText(cols);
  // Base units: MB/s as bytes per second, percent as a ratio.
  EXPECT_NE(t.find("# TYPE aquifer_disk_read_bytes_per_second gauge\n"), std::string::npos) << t;
  EXPECT_NE(t.find("aquifer_disk_read_bytes_per_second{device=\"sda\"} 12500000\n"), std::string::npos) << t;
  EXPECT_NE(t.find("aquifer_disk_read_bytes_per_second{device=\"sdb\"} 3000000\n"), std::string::npos) << t;
  EXPECT_NE(t.find("aquifer_cpu_user_ratio 0.4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("aquifer_net_rx_bytes_per_second{interface=\"eth0\"} 2000000\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("empty"), std::string::npos);
  // One HELP/TYPE header per metric even with several label sets.
  EXPECT_EQ(t.find("# TYPE aquifer_disk_read_bytes_per_second"), t.rfind("# TYPE aquifer_disk_read_bytes_per_second"));
}

// Counters, gauges and histograms as the exposition format has them.
TEST(PrometheusTest, WriterFamilies) {
  PrometheusWriter w;
  w.Counter("x_requests_total", "Requests", 3, {{"op", "get"}});
  w.Gauge("x_used_bytes", "Used \\ bytes\nnow", 1.5);
  w.Counter("x_requests_total", "Requests", 4, {{"op", "we\"ird"}});
  w.Histogram("x_duration_seconds", "Durations", {{0.1, 2}, {1, 5}}, 2.25, 6, {{"op", "get"}});
  EXPECT_EQ(w.Text(),
            "# HELP x_requests_total Requests\n# TYPE x_requests_total counter\n"
            "x_requests_total{op=\"get\"} 3\nx_requests_total{op=\"we\\\"ird\"} 4\n"
            "# HELP x_used_bytes Used \\\\ bytes\\nnow\n# TYPE x_used_bytes gauge\nx_used_bytes 1.5\n"
            "# HELP x_duration_seconds Durations\n# TYPE x_duration_seconds histogram\n"
            "x_duration_seconds_bucket{op=\"get\",le=\"0.1\"} 2\nx_duration_seconds_bucket{op=\"get\",le=\"1\"} 5\n"
            "x_duration_seconds_bucket{op=\"get\",le=\"+Inf\"} 6\nx_duration_seconds_sum{op=\"get\"} 2.25\n"
            "x_duration_seconds_count{op=\"get\"} 6\n");
}

TEST(PrometheusTest, ServesMetricsOverHttp) {
  SamplerOptions o;
  o.interval_seconds = 0;
  o.system = false;
  Sampler s(o);
  s.AddGauge("bench.images", "images/s", [] { return 123.0; });
  s.Start();
  s.SampleNow();
  auto e = PrometheusExporter::Start(s, "127.0.0.1", 0);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  httplib::Client client("127.0.0.1", (*e)->port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("aquifer_bench_images_per_second 123"), std::string::npos) << res->body;
  auto missing = client.Get("/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // A port in use is a clear error.
  auto again = PrometheusExporter::Start(s, "127.0.0.1", (*e)->port());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().ToString().find("in use"), std::string::npos);
}

TEST(PageCacheTest, ResidencyOfReadFile) {
  char path[] = "/tmp/aq_residency_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string data(1 << 20, 'x');
  ASSERT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  close(fd);
  std::ifstream in(path, std::ios::binary);
  std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto r = PageCacheResidency({path, "/nonexistent/file"});
  EXPECT_EQ(r.bytes, data.size());  // the missing file counts for nothing
  EXPECT_GT(r.fraction(), 0.5);     // just written and read
  EXPECT_LE(r.fraction(), 1.0);
  std::remove(path);
}

}  // namespace
}  // namespace aq::monitor
