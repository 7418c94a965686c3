// CPU dispatch for hot loops. AQ_HOT_CLONES builds a function for AVX2 and
// for the x86-64 baseline; the dynamic loader picks the best one for the CPU
// at startup (GCC/Clang target_clones, via an ifunc). Elsewhere it is empty.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define AQ_HOT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define AQ_HOT_CLONES
#endif

namespace aq {
// AQUIFER_NO_SIMD=1: hand-written SIMD paths step aside for the portable
// code, so what they buy can be measured in the same binary (read once).
bool SimdDisabled();
// AQUIFER_NO_AVX2=1: hand-written AVX2 paths step aside for the SSE ones.
bool Avx2Disabled();
}  // namespace aq
