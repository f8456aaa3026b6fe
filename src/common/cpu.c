/* CPU feature detection and the run-time choice of kernel implementation (ZERO_IMPL env
 * overrides it, for tests and benchmarks). */
#include "common/internal.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
static unsigned long long xgetbv0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}
static int detect(int want512) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return 0;
    unsigned long long xcr0 = xgetbv0();
    if ((xcr0 & 6) != 6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int avx2 = (b >> 5) & 1;
    if (!want512) return avx2 && fma && f16c;
    int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    return avx2 && fma && f16c && f && dq && bw && vl && (xcr0 & 0xe6) == 0xe6;
}
#else
static int detect(int want512) { (void)want512; return 0; }
#endif

int zero__cpu_has_avx2_fma_f16c(void) {
    static int v = -1;
    if (v < 0) v = detect(0);
    return v;
}

int zero__cpu_has_avx512(void) {
    static int v = -1;
    if (v < 0) v = detect(1);
    return v;
}

int zero_impl_available(zero_impl impl) {
    switch (impl) {
    case ZERO_IMPL_AUTO:
    case ZERO_IMPL_SCALAR: return 1;
    case ZERO_IMPL_AVX2: return zero__cpu_has_avx2_fma_f16c();
    case ZERO_IMPL_AVX512: return zero__cpu_has_avx512();
    }
    return 0;
}

static int g_forced = ZERO_IMPL_AUTO; /* zero_options.impl */

void zero__impl_force(zero_impl impl) { g_forced = (int)impl; }

zero_impl zero_impl_best(void) {
    if (g_forced != ZERO_IMPL_AUTO && zero_impl_available((zero_impl)g_forced)) return (zero_impl)g_forced;
    const char *v = getenv("ZERO_IMPL");
    if (v) {
        if (!strcmp(v, "scalar")) return ZERO_IMPL_SCALAR;
        if (!strcmp(v, "avx2") && zero_impl_available(ZERO_IMPL_AVX2)) return ZERO_IMPL_AVX2;
        if (!strcmp(v, "avx512") && zero_impl_available(ZERO_IMPL_AVX512)) return ZERO_IMPL_AVX512;
    }
    if (zero_impl_available(ZERO_IMPL_AVX512)) return ZERO_IMPL_AVX512;
    if (zero_impl_available(ZERO_IMPL_AVX2)) return ZERO_IMPL_AVX2;
    return ZERO_IMPL_SCALAR;
}

const char *zero_impl_name(zero_impl impl) {
    switch (impl) {
    case ZERO_IMPL_AUTO: return "auto";
    case ZERO_IMPL_SCALAR: return "scalar";
    case ZERO_IMPL_AVX2: return "avx2";
    case ZERO_IMPL_AVX512: return "avx512";
    }
    return "invalid";
}
