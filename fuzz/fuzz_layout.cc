// Any bytes as an object layout (what a node tells the aquifer:// client)
// or as a stored block list (what the cluster's metadata holds): parsed or
// refused with an error, never a crash; what parses obeys its invariants.
#include <cstddef>
#include <cstdint>
#include <string>

#include "s3/layout.h"
#include "store/meta_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto l = aq::s3::LayoutFromJson(text);
  if (l.ok()) {
    uint64_t sum = 0;
    for (const auto& b : l->blocks) {
      sum += b.size;
      if (!b.fragments.empty()) {
        const uint64_t f = b.fragments[0].size;
        if (f == 0 || b.k < 2 || b.fragments.size() <= static_cast<size_t>(b.k) ||
            b.size > f * static_cast<uint64_t>(b.k))
          __builtin_trap();
        for (const auto& x : b.fragments) {
          if (x.size != f) __builtin_trap();
        }
      }
    }
    if (sum != l->size) __builtin_trap();
    // What parses, written back, parses to the same.
    auto again = aq::s3::LayoutFromJson(aq::s3::LayoutToJson(*l));
    if (!again.ok() || again->blocks.size() != l->blocks.size()) __builtin_trap();
  }
  auto blocks = aq::store::BlocksFromJson(text);
  if (blocks.ok()) {
    for (const auto& b : *blocks) {
      if (b.erasure_coded()) {
        const size_t n = static_cast<size_t>(b.ec_k) + b.ec_m;
        if (b.nodes.size() != n || b.fragment_crcs.size() != n) __builtin_trap();
        for (const auto& [node, piece] : aq::store::StoredPieces(b)) {
          if (piece.size != b.FragmentSize() || piece.id == b.id) __builtin_trap();
        }
      }
    }
    auto again = aq::store::BlocksFromJson(aq::store::BlocksToJson(*blocks));
    if (!again.ok() || *again != *blocks) __builtin_trap();
  }
  return 0;
}
