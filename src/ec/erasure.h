// Reed-Solomon erasure coding of blocks: K data fragments and M parity
// fragments, any K of which give the block back.
//
// A block of B bytes is cut into K data fragments of FragmentSize(B, K)
// bytes (the last one zero-padded); parity row p is the Cauchy matrix row
// of Intel ISA-L's gf_gen_cauchy1_matrix over GF(2^8) (polynomial 0x11d).
// Two engines compute the same fragments: ISA-L's SIMD kernels (what the
// cluster uses) and a plain table-driven one (one 64 KiB multiplication
// table, a byte at a time) that is the unit tests' oracle and the
// benchmark's baseline.
//
// Thread safety: a Codec is immutable; Encode/Reconstruct may run on many
// threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace aq::ec {

// K data + M parity fragments ("4+2").
struct Scheme {
  int k = 0, m = 0;
  bool operator==(const Scheme&) const = default;
  std::string ToString() const;
};
// "K+M" with 2 <= K <= 32, 1 <= M <= 16 (InvalidArgument otherwise).
Result<Scheme> ParseScheme(std::string_view text);
Status CheckScheme(const Scheme& s);

// Bytes in each fragment of a block of `bytes` bytes.
inline uint64_t FragmentSize(uint64_t bytes, int k) { return (bytes + static_cast<uint64_t>(k) - 1) / k; }

enum class Engine { kIsal, kTable };

class Codec {
 public:
  // InvalidArgument for a scheme CheckScheme refuses.
  static Result<std::shared_ptr<const Codec>> Make(Scheme scheme, Engine engine = Engine::kIsal);
  // The shared ISA-L codec of a scheme (built once per scheme).
  static Result<std::shared_ptr<const Codec>> Get(Scheme scheme);

  const Scheme& scheme() const { return scheme_; }
  Engine engine() const { return engine_; }

  // The K+M fragments of `data` (non-empty), each FragmentSize bytes.
  std::vector<std::string> Encode(std::string_view data) const;
  // The M parity fragments of K data fragments of `len` bytes each.
  void EncodeInto(const std::vector<const uint8_t*>& data, const std::vector<uint8_t*>& parity, size_t len) const;
  // `fragments` has K+M entries; those with have[i] hold fragment i (all
  // the same size); every other entry is filled in. InvalidArgument with
  // fewer than K present or sizes that differ.
  Status Reconstruct(std::vector<std::string>& fragments, const std::vector<bool>& have) const;
  // The block's first `bytes` bytes from its K data fragments.
  std::string Join(const std::vector<std::string>& fragments, uint64_t bytes) const;

  // Computes `rows` output fragments from K inputs with a rows x K matrix
  // (row-major): the one kernel both encoding and decoding use.
  void Multiply(const std::vector<uint8_t>& matrix, int rows, const std::vector<const uint8_t*>& in,
                const std::vector<uint8_t*>& out, size_t len) const;

 private:
  Codec(Scheme scheme, Engine engine);
  Scheme scheme_;
  Engine engine_;
  std::vector<uint8_t> matrix_;         // (K+M) x K: identity, then the Cauchy rows
  std::vector<uint8_t> parity_tables_;  // ISA-L's expanded tables of the parity rows
};

// GF(2^8) arithmetic (polynomial 0x11d), table-driven.
uint8_t GfMul(uint8_t a, uint8_t b);
uint8_t GfInv(uint8_t a);  // a != 0
// Inverts an n x n matrix; false when it is singular.
bool GfInvert(std::vector<uint8_t> m, std::vector<uint8_t>& out, int n);

}  // namespace aq::ec
