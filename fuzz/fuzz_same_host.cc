// Same-host grants (the x-aquifer-same-host header a node sends a client on
// its machine) and the socket's answers: any bytes parse to a grant or an
// error, a parsed grant keeps its blocks in order inside the object, an
// answer has a piece per block and file offsets inside a header, and both
// survive formatting.
#include <cstddef>
#include <cstdint>
#include <string>

#include "s3/same_host.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t object_size = 0;
  for (int i = 0; i < 8; ++i) object_size = object_size << 8 | data[i];
  std::string_view text(reinterpret_cast<const char*>(data) + 8, size - 8);
  const size_t blocks = static_cast<size_t>(object_size % (aq::s3::kMaxSameHostBlocks + 1));
  if (auto a = aq::s3::SameHostAnswerFromText(text, blocks, (object_size & 1u) != 0); a.ok()) {
    if (a->size() != blocks) __builtin_trap();
    for (const auto& p : *a) {
      if (p.data_offset > aq::s3::kMaxSameHostDataOffset) __builtin_trap();
    }
    if (aq::s3::SameHostAnswerToText(*a).size() > aq::s3::kMaxSameHostAnswer) __builtin_trap();
    auto again = aq::s3::SameHostAnswerFromText(aq::s3::SameHostAnswerToText(*a), blocks, true);
    if (!again.ok() || *again != *a) __builtin_trap();
  }
  auto g = aq::s3::SameHostGrantFromJson(text, object_size);
  if (!g.ok()) return 0;
  uint64_t end = 0;
  for (const auto& b : g->blocks) {
    if (b.size == 0 || b.offset < end || b.offset + b.size > object_size || b.offset + b.size < b.offset)
      __builtin_trap();
    end = b.offset + b.size;
  }
  auto again = aq::s3::SameHostGrantFromJson(aq::s3::SameHostGrantToJson(*g), object_size);
  if (!again.ok() || again->socket != g->socket || again->token != g->token || again->blocks.size() != g->blocks.size())
    __builtin_trap();
  return 0;
}
