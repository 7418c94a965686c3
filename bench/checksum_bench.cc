// What each digest a PUT can cost the node, per core: the ETag's MD5, the
// signed payload's SHA-256, and the stored checksum's algorithms (CRC32,
// CRC32C, CRC64NVME, SHA-1, SHA-256; docs/s3.md#checksums). A client that
// sends no checksum gets CRC64NVME computed by the node; the aquifer://
// client sends CRC32C (hardware) instead.
//   build/checksum_bench                         table
//   build/checksum_bench --benchmark_format=json JSON
#include <benchmark/benchmark.h>

#include <string>

#include "s3/checksum.h"

namespace {

void BM_Checksum(benchmark::State& state, const char* algorithm) {
  std::string buf(static_cast<size_t>(state.range(0)), '\0');
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>(i * 131 + 7);
  for (auto _ : state) {
    auto sum = aq::s3::Checksum::Make(algorithm).value();
    sum->Update(buf);
    benchmark::DoNotOptimize(sum->Base64());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

BENCHMARK_CAPTURE(BM_Checksum, md5, "md5")->Arg(4 << 20);
BENCHMARK_CAPTURE(BM_Checksum, sha256, "sha256")->Arg(4 << 20);
BENCHMARK_CAPTURE(BM_Checksum, sha1, "sha1")->Arg(4 << 20);
BENCHMARK_CAPTURE(BM_Checksum, crc32, "crc32")->Arg(4 << 20);
BENCHMARK_CAPTURE(BM_Checksum, crc32c, "crc32c")->Arg(4 << 20);
BENCHMARK_CAPTURE(BM_Checksum, crc64nvme, "crc64nvme")->Arg(4 << 20);

}  // namespace

BENCHMARK_MAIN();
