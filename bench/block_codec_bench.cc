// A block's codecs per core: encode (the write path's attempt, sample and
// filter choice included) and decode (a read's: CRCs, decompression, the
// inverse filter) of one 4 MiB block, for each policy, against reading a
// plain block's bytes (its CRC, the cost every read pays anyway). The
// block is the start of a file given in AQ_BLOCK_FILE (a raw-pixel
// TFRecord shard, a JPEG shard, text), else smooth synthetic pixels.
//   AQ_BLOCK_FILE=shard build/block_codec_bench          table
//   build/block_codec_bench --benchmark_format=json       JSON
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "common/crc32c.h"
#include "store/block_format.h"

namespace {

const std::string& Block() {
  static const std::string block = [] {
    std::string s;
    if (const char* path = std::getenv("AQ_BLOCK_FILE")) {
      std::ifstream f(path, std::ios::binary);
      std::stringstream ss;
      ss << f.rdbuf();
      s = ss.str().substr(0, 4 << 20);
    }
    if (s.size() < (4 << 20)) {  // smooth RGB with a little noise
      std::mt19937 g(1);
      s.clear();
      for (size_t i = 0; s.size() < (4 << 20); ++i) {
        const int x = static_cast<int>(i % 640), y = static_cast<int>(i / 640);
        for (int c = 0; c < 3; ++c) s.push_back(static_cast<char>((x * (c + 1) / 5 + y * (3 - c) / 4 + g() % 7) % 256));
      }
      s.resize(4 << 20);
    }
    return s;
  }();
  return block;
}

aq::store::Compression Policy(int which) {
  return aq::store::ParseCompression(which == 0 ? "none" : which == 1 ? "lz4" : "zstd").value();
}

void BM_Encode(benchmark::State& state) {
  const auto& block = Block();
  const auto policy = Policy(static_cast<int>(state.range(0)));
  const uint32_t crc = aq::crc32c::Value(block);
  size_t stored = 0;
  for (auto _ : state) {
    auto e = aq::store::EncodeBlock(block, crc, policy);
    stored = e.is_compressed() ? e.compressed.size() : block.size();
    benchmark::DoNotOptimize(e);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(block.size()));
  state.counters["stored_ratio"] = static_cast<double>(stored) / static_cast<double>(block.size());
  state.SetLabel(std::string(aq::store::CodecName(policy.codec)));
}

void BM_Decode(benchmark::State& state) {
  const auto& block = Block();
  const auto e = aq::store::EncodeBlock(block, aq::crc32c::Value(block), Policy(static_cast<int>(state.range(0))));
  const auto h = aq::store::ParseBlockHeader(e.header).value();
  const std::string_view stored = e.is_compressed() ? std::string_view(e.compressed) : std::string_view(block);
  for (auto _ : state) {
    auto r = aq::store::DecodeBlock(h, stored);
    if (!r.ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(block.size()));
  state.SetLabel(std::string(aq::store::CodecName(h.codec)) + (h.filter == aq::store::Filter::kDelta ? "+delta" : ""));
}

BENCHMARK(BM_Encode)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Decode)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
