// CRC32C throughput per core, hardware (SSE4.2) and portable paths. Verifying
// TFRecords must be bound by the disk, not by the CRC: compare the GB/s here
// with the storage's per-core read rate.
//   build/crc32c_bench                         table
//   build/crc32c_bench --benchmark_format=json JSON
#include <benchmark/benchmark.h>

#include <string>

#include "common/crc32c.h"

namespace {

void Run(benchmark::State& state, uint32_t (*fn)(uint32_t, const void*, size_t)) {
  std::string buf(static_cast<size_t>(state.range(0)), '\0');
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>(i * 131 + 7);
  uint32_t crc = 0;
  for (auto _ : state) {
    crc = fn(crc, buf.data(), buf.size());
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_Crc32cHardware(benchmark::State& state) {
  if (!aq::crc32c::HaveHardware()) {
    state.SkipWithError("no SSE4.2 on this CPU");
    return;
  }
  Run(state, &aq::crc32c::ExtendHardware);
}
void BM_Crc32cPortable(benchmark::State& state) { Run(state, &aq::crc32c::ExtendPortable); }

BENCHMARK(BM_Crc32cHardware)->Arg(4 << 10)->Arg(110 << 10)->Arg(4 << 20);
BENCHMARK(BM_Crc32cPortable)->Arg(4 << 10)->Arg(110 << 10)->Arg(4 << 20);

}  // namespace

BENCHMARK_MAIN();
