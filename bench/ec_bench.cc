// Erasure-coding speed per core: ISA-L's kernels against the table-driven
// Reed-Solomon engine (same matrix, same fragments), on the same blocks in
// the same run. Encode = K data fragments -> M parity; decode = the block
// back from K fragments with M of them lost (the worst case: data
// fragments lost, so every byte is recomputed from parity).
//   build/ec_bench [--block 4MiB] [--schemes 4+2,8+2,8+3] [--repeats 5] [--json]
// Prints GB/s of block data per core (median of the repeats) and the ratio.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/units.h"
#include "ec/erasure.h"

namespace {

double Seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// GB/s of block bytes for `fn`, repeated until ~0.3 s has passed; median of `repeats`.
template <typename Fn>
double Rate(uint64_t bytes, int repeats, Fn fn) {
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    int n = 0;
    const double t0 = Seconds();
    double t = t0;
    do {
      fn();
      ++n;
      t = Seconds();
    } while (t - t0 < 0.3);
    rates.push_back(static_cast<double>(bytes) * n / (t - t0) / 1e9);
  }
  return Median(rates);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t block = 4 << 20;
  std::string schemes = "4+2,8+2,8+3";
  int repeats = 5;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "ec_bench: {} needs a value\n", a);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--block") {
      auto b = aq::units::ParseBytes(next());
      if (!b.ok() || *b == 0) {
        fmt::print(stderr, "ec_bench: --block: not a size\n");
        return 2;
      }
      block = *b;
    } else if (a == "--schemes") {
      schemes = next();
    } else if (a == "--repeats") {
      repeats = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--json") {
      json = true;
    } else {
      fmt::print(stderr, "usage: ec_bench [--block 4MiB] [--schemes 4+2,8+2] [--repeats 5] [--json]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  std::mt19937_64 rng(42);
  std::string data(block, '\0');
  for (auto& c : data) c = static_cast<char>(rng());
  if (!json) {
    fmt::print("erasure coding, {} blocks, one core, GB/s of block data (median of {}):\n", aq::units::IecBytes(block),
               repeats);
    fmt::print("  {:<6} {:>10} {:>10} {:>7}   {:>10} {:>10} {:>7}\n", "scheme", "encode", "table", "ratio", "decode",
               "table", "ratio");
  }
  std::string out = "[";
  size_t start = 0;
  while (start <= schemes.size()) {
    size_t comma = schemes.find(',', start);
    if (comma == std::string::npos) comma = schemes.size();
    const std::string text = schemes.substr(start, comma - start);
    start = comma + 1;
    if (text.empty()) continue;
    auto scheme = aq::ec::ParseScheme(text);
    if (!scheme.ok()) {
      fmt::print(stderr, "ec_bench: {}\n", scheme.status().message());
      return 2;
    }
    double enc[2], dec[2];
    for (int e = 0; e < 2; ++e) {
      auto codec = *aq::ec::Codec::Make(*scheme, e == 0 ? aq::ec::Engine::kIsal : aq::ec::Engine::kTable);
      const auto full = codec->Encode(data);
      // Encode: the parity of K data fragments already in memory (the
      // kernel; Encode's copies into fragments are not counted).
      std::vector<const uint8_t*> in;
      for (int i = 0; i < scheme->k; ++i) in.push_back(reinterpret_cast<const uint8_t*>(full[i].data()));
      std::vector<std::string> parity(scheme->m, std::string(full[0].size(), '\0'));
      std::vector<uint8_t*> out;
      for (auto& p : parity) out.push_back(reinterpret_cast<uint8_t*>(p.data()));
      enc[e] = Rate(block, repeats, [&] {
        codec->EncodeInto(in, out, full[0].size());
        if (parity[0] != full[scheme->k]) std::abort();
      });
      std::vector<bool> have(full.size(), true);
      for (int i = 0; i < scheme->m; ++i) have[i] = false;  // M data fragments lost
      auto f = full;
      dec[e] = Rate(block, repeats, [&] {
        for (int i = 0; i < scheme->m; ++i) f[i].clear();
        if (!codec->Reconstruct(f, have).ok() || f[0] != full[0]) std::abort();
      });
    }
    if (json) {
      out += fmt::format(
          "{}{{\"scheme\":\"{}\",\"block_bytes\":{},\"encode_gbps\":{:.3f},\"encode_table_gbps\":{:.3f},"
          "\"decode_gbps\":{:.3f},\"decode_table_gbps\":{:.3f}}}",
          out.size() > 1 ? "," : "", text, block, enc[0], enc[1], dec[0], dec[1]);
    } else {
      fmt::print("  {:<6} {:>10.2f} {:>10.2f} {:>6.1f}x   {:>10.2f} {:>10.2f} {:>6.1f}x\n", text, enc[0], enc[1],
                 enc[0] / enc[1], dec[0], dec[1], dec[0] / dec[1]);
    }
  }
  if (json) fmt::print("{}]\n", out);
  return 0;
}
