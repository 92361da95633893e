#pragma once
// The x86 host SIMD paths' common preamble (private to kernels/src): on an
// x86-64 GCC or clang host build, QSGD_HAVE_AVX512_PATH and <immintrin.h>;
// each file names its own target("...") instruction sets.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && \
    !defined(__HIPCC__)
#include <immintrin.h>
#define QSGD_HAVE_AVX512_PATH 1
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 headers start masked operations from _mm512_undefined_*(),
// which -Wmaybe-uninitialized reports at every inlined use (a false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif
