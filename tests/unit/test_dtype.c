/* Tests of dtypes and fp32 <-> bf16/fp16 conversion: every 16-bit pattern, rounding from fp32
 * against an independent double-precision reference, and every vector impl bitwise vs scalar
 * (random arrays, every 16-bit pattern, every narrowing tie and its neighbours). */
#include "harness.h"
#include "zero/zero.h"

#include <float.h>
#include <stdint.h>

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* xorshift64*: deterministic inputs */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* A 16-bit float format: `mbits` stored mantissa bits, exponent bias, largest exponent. */
typedef struct fmt {
    const char *name;
    int mbits, bias, emax, ebits;
    uint16_t (*narrow)(float);
    float (*widen)(uint16_t);
    zero_dtype dt;
} fmt;

static const fmt FMTS[2] = {
    {"bf16", 7, 127, 127, 8, zero_fp32_to_bf16, zero_bf16_to_fp32, ZERO_DTYPE_BF16},
    {"fp16", 10, 15, 15, 5, zero_fp32_to_fp16, zero_fp16_to_fp32, ZERO_DTYPE_FP16},
};

/* The value a 16-bit pattern denotes, decoded with ldexp from the format's definition. */
static double decode(const fmt *F, uint16_t h) {
    int s = h >> 15, e = (h >> F->mbits) & ((1 << F->ebits) - 1), m = h & ((1 << F->mbits) - 1);
    double v;
    if (e == (1 << F->ebits) - 1) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, 1 - F->bias - F->mbits);
    else v = ldexp(1.0 + ldexp((double)m, -F->mbits), e - F->bias);
    return s ? -v : v;
}

/* x rounded to the format, nearest-even, as a double (Inf past the range), computed with
 * frexp/ldexp/rint in double precision: independent of the library's bit manipulation. */
static double ref_round(const fmt *F, double x) {
    if (x != x) return x;
    double a = fabs(x);
    if (a == 0 || isinf(a)) return x;
    int k;
    frexp(a, &k); /* a = f * 2^k, f in [0.5, 1): exponent of a is k-1 */
    int e = k - 1, emin = 1 - F->bias;
    if (e < emin) e = emin;
    double q = ldexp(1.0, e - F->mbits); /* spacing of the format at a */
    double t = rint(a / q) * q;          /* rint: ties to even in the default mode */
    if (t >= ldexp(1.0, F->emax + 1)) t = INFINITY;
    return x < 0 ? -t : t;
}

static int same_double(double a, double b) {
    if (a != a || b != b) return (a != a) && (b != b) && (!signbit(a) == !signbit(b));
    return a == b && !signbit(a) == !signbit(b);
}

static void test_names(void) {
    ZT_EQ_INT(zero_dtype_size(ZERO_DTYPE_FP32), 4);
    ZT_EQ_INT(zero_dtype_size(ZERO_DTYPE_BF16), 2);
    ZT_EQ_INT(zero_dtype_size(ZERO_DTYPE_FP16), 2);
    ZT_EQ_INT(zero_dtype_size(ZERO_DTYPE_INT32), 4);
    ZT_EQ_INT(zero_dtype_size(ZERO_DTYPE_INT64), 8);
    ZT_EQ_INT(zero_dtype_size(ZERO_DTYPE_UINT8), 1);
    ZT_EQ_INT(zero_dtype_size(ZERO_DTYPE_COUNT), 0);
    ZT_EQ_INT(zero_dtype_size((zero_dtype)-3), 0);
    ZT_CHECK(!strcmp(zero_dtype_name(ZERO_DTYPE_BF16), "bf16"));
    ZT_CHECK(!strcmp(zero_dtype_name(ZERO_DTYPE_UINT8), "uint8"));
    ZT_CHECK(!strcmp(zero_dtype_name((zero_dtype)99), "invalid"));
    static const struct { const char *s; zero_dtype dt; } ok[] = {
        {"fp32", ZERO_DTYPE_FP32}, {"float32", ZERO_DTYPE_FP32}, {"BF16", ZERO_DTYPE_BF16},
        {"bfloat16", ZERO_DTYPE_BF16}, {"fp16", ZERO_DTYPE_FP16}, {"Float16", ZERO_DTYPE_FP16},
        {"half", ZERO_DTYPE_FP16}, {"int32", ZERO_DTYPE_INT32}, {"int64", ZERO_DTYPE_INT64},
        {"uint8", ZERO_DTYPE_UINT8},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        zero_dtype dt = ZERO_DTYPE_COUNT;
        ZT_OK(zero_dtype_parse(ok[i].s, &dt));
        ZT_EQ_INT(dt, ok[i].dt);
        dt = ZERO_DTYPE_COUNT;
        ZT_OK(zero_dtype_parse(zero_dtype_name(ok[i].dt), &dt));
        ZT_EQ_INT(dt, ok[i].dt);
    }
    zero_dtype dt = ZERO_DTYPE_FP16;
    ZT_EQ_INT(zero_dtype_parse("fp8", &dt), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_dtype_parse("", &dt), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_dtype_parse("fp32 ", &dt), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_dtype_parse(NULL, &dt), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(dt, ZERO_DTYPE_FP16);
}

/* Every 16-bit pattern: widening equals the decoded value exactly; narrowing it back gives
 * the same pattern (NaNs: quiet, same sign, payload kept). */
static void test_all_patterns(const fmt *F) {
    int bad = 0;
    const uint16_t quiet = (uint16_t)(1u << (F->mbits - 1));
    for (uint32_t h = 0; h < 65536; h++) {
        float f = F->widen((uint16_t)h);
        double d = decode(F, (uint16_t)h);
        uint16_t back = F->narrow(f);
        if (d != d) {
            uint32_t fu = f2u(f);
            int ok = f != f && (fu >> 31) == (h >> 15) && (fu & 0x00400000u) && back == (h | quiet);
            if (!ok && bad++ < 5) ZT_FAIL("%s NaN 0x%04x: widened 0x%08x, back 0x%04x", F->name, h, fu, back);
            zt_checks++;
            continue;
        }
        if (!same_double((double)f, d) || back != h) {
            if (bad++ < 5)
                ZT_FAIL("%s 0x%04x: widened %.9g (expected %.9g), back 0x%04x", F->name, h, (double)f, d, back);
        }
        zt_checks++;
    }
    ZT_EQ_INT(bad, 0);
}

static int check_narrow(const fmt *F, float x) {
    uint16_t h = F->narrow(x);
    double got = decode(F, h), want = ref_round(F, (double)x);
    if (x != x) {
        uint16_t quiet = (uint16_t)(1u << (F->mbits - 1));
        int ok = got != got && !signbit(got) == !signbit(x) && (h & quiet);
        if (!ok) ZT_FAIL("%s narrow NaN 0x%08x -> 0x%04x", F->name, f2u(x), h);
        zt_checks++;
        return ok;
    }
    zt_checks++;
    if (!same_double(got, want)) {
        ZT_FAIL("%s narrow %.9g (0x%08x) -> 0x%04x = %.9g, expected %.9g", F->name, (double)x, f2u(x), h,
                got, want);
        return 0;
    }
    return 1;
}

/* Rounding from fp32: exact halfway points between neighbours (ties to even), one fp32 ulp
 * either side, the edges of the range, the subnormal boundaries, random floats. */
static void test_rounding(const fmt *F) {
    int bad = 0;
    const uint16_t maxfin = (uint16_t)(((1u << F->ebits) - 2) << F->mbits | ((1u << F->mbits) - 1));
    for (uint32_t h = 0; h < maxfin && bad < 5; h++) {
        double lo = decode(F, (uint16_t)h), hi = decode(F, (uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2); /* exact: needs mbits+2 significant bits */
        float cand[4] = {mid, nextafterf(mid, INFINITY), nextafterf(mid, -INFINITY), (float)lo};
        for (int c = 0; c < 4; c++) {
            bad += !check_narrow(F, cand[c]);
            bad += !check_narrow(F, -cand[c]);
        }
    }
    /* halfway ties go to the even neighbour: spot values computed by hand */
    if (F->dt == ZERO_DTYPE_FP16) {
        ZT_EQ_INT(zero_fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);          /* tie, even below */
        ZT_EQ_INT(zero_fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);      /* tie, even above */
        ZT_EQ_INT(zero_fp32_to_fp16(nextafterf(1.0f + 0x1p-11f, 2)), 0x3c01);
        ZT_EQ_INT(zero_fp32_to_fp16(65504.0f), 0x7bff);                 /* max finite */
        ZT_EQ_INT(zero_fp32_to_fp16(nextafterf(65520.0f, 0)), 0x7bff);  /* just under the overflow tie */
        ZT_EQ_INT(zero_fp32_to_fp16(65520.0f), 0x7c00);                 /* tie to even = Inf */
        ZT_EQ_INT(zero_fp32_to_fp16(-1e30f), 0xfc00);
        ZT_EQ_INT(zero_fp32_to_fp16(0x1p-24f), 0x0001);                 /* smallest subnormal */
        ZT_EQ_INT(zero_fp32_to_fp16(0x1p-25f), 0x0000);                 /* tie to even = 0 */
        ZT_EQ_INT(zero_fp32_to_fp16(nextafterf(0x1p-25f, 1)), 0x0001);
        ZT_EQ_INT(zero_fp32_to_fp16(-3 * 0x1p-25f), 0x8002);            /* 1.5 quanta: tie to 2 */
        ZT_EQ_INT(zero_fp32_to_fp16(0x1p-14f), 0x0400);                 /* smallest normal */
        ZT_EQ_INT(zero_fp32_to_fp16(0x1p-14f - 0x1p-25f), 0x0400);      /* tie between 0x3ff, 0x400 */
        ZT_EQ_INT(zero_fp32_to_fp16(0x1p-14f - 0x1p-24f), 0x03ff);      /* largest subnormal */
        ZT_EQ_INT(zero_fp32_to_fp16(FLT_TRUE_MIN), 0x0000);
        ZT_EQ_INT(zero_fp32_to_fp16(-0.0f), 0x8000);
        ZT_EQ_INT(zero_fp32_to_fp16(INFINITY), 0x7c00);
        ZT_EQ_INT(zero_fp32_to_fp16(u2f(0x7f800001u)), 0x7e00); /* signalling NaN comes out quiet */
        ZT_EQ_INT(zero_fp32_to_fp16(u2f(0xffc02000u)), 0xfe01);
    } else {
        ZT_EQ_INT(zero_fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);           /* tie, even below */
        ZT_EQ_INT(zero_fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);       /* tie, even above */
        ZT_EQ_INT(zero_fp32_to_bf16(nextafterf(1.0f + 0x1p-8f, 0)), 0x3f80);
        ZT_EQ_INT(zero_fp32_to_bf16(FLT_MAX), 0x7f80);                  /* rounds up past max: Inf */
        ZT_EQ_INT(zero_fp32_to_bf16(u2f(0x7f7f7fffu)), 0x7f7f);         /* max finite bf16 region */
        ZT_EQ_INT(zero_fp32_to_bf16(u2f(0x7f7f8000u)), 0x7f80);         /* tie, odd below: Inf */
        ZT_EQ_INT(zero_fp32_to_bf16(FLT_TRUE_MIN), 0x0000);             /* 2^-149: below half quantum */
        ZT_EQ_INT(zero_fp32_to_bf16(u2f(0x00008000u)), 0x0000);         /* tie to even 0 */
        ZT_EQ_INT(zero_fp32_to_bf16(u2f(0x00018000u)), 0x0002);         /* tie to even 2 */
        ZT_EQ_INT(zero_fp32_to_bf16(u2f(0x00010001u)), 0x0001);         /* subnormal kept */
        ZT_EQ_INT(zero_fp32_to_bf16(u2f(0x007fffffu)), 0x0080);         /* rounds up to FLT_MIN */
        ZT_EQ_INT(zero_fp32_to_bf16(-INFINITY), 0xff80);
        ZT_EQ_INT(zero_fp32_to_bf16(u2f(0x7f800001u)), 0x7fc0);         /* signalling NaN: quiet */
        ZT_EQ_INT(zero_fp32_to_bf16(u2f(0xff81ffffu)), 0xffc1);         /* payload kept, no rounding */
    }
    static const float edges[] = {0.0f, FLT_MIN, FLT_TRUE_MIN, FLT_MAX, 1.0f, 0.1f, 65504.0f, 65519.99f,
                                  65520.0f, 0x1p-24f, 0x1p-25f, 0x1p-14f, 3.0e-8f, 1e-40f, 1e38f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        bad += !check_narrow(F, edges[i]);
        bad += !check_narrow(F, -edges[i]);
    }
    for (int i = 0; i < 400000 && bad < 5; i++) {
        uint32_t r = (uint32_t)rng();
        bad += !check_narrow(F, u2f(r));
        /* values concentrated in and around the format's range */
        float v = ldexpf((float)(r & 0xffffff) / (float)0x1000000, (int)(rng() % (unsigned)(F->emax + F->bias + 30)) - F->bias - 25);
        bad += !check_narrow(F, (r >> 31) ? -v : v);
    }
    ZT_EQ_INT(bad, 0);
}

/* Random fp32 patterns with specials sprinkled in. */
static void fill_specials(float *x, size_t n) {
    static const uint32_t sp[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
                                  0x00000001u, 0x80000000u, 0x00000000u, 0x477ff000u, 0x33000000u,
                                  0x7f7fffffu, 0x3f808000u, 0x38800000u};
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng();
        if (r % 17 == 0) x[i] = u2f(sp[(r >> 8) % (sizeof sp / sizeof sp[0])]);
        else if (r % 3 == 0) x[i] = u2f((uint32_t)(r >> 32));
        else x[i] = ldexpf((float)((r >> 40) & 0xffffff) / (float)0x1000000, (int)((r >> 8) % 60) - 30) * ((r & 4) ? -1 : 1);
    }
}

/* Every vector impl against the scalar one on every 16-bit pattern (widening: each NaN payload,
 * Inf, subnormal, ±0) and on the narrowing edges of every pair of neighbouring finite values: the
 * halfway point (a tie: to even), one fp32 ulp either side, both signs; plus, for every 16-bit
 * pattern h, the fp32 words h << 16 | {0x7fff, 0x8000, 0x8001} (bf16's ties and their
 * neighbours in every binade, NaN payloads included). */
static void test_vector_edges(const fmt *F) {
    const uint16_t maxfin = (uint16_t)(((1u << F->ebits) - 2) << F->mbits | ((1u << F->mbits) - 1));
    const size_t cap = 65536 * 9;
    float *x = malloc(cap * sizeof *x);
    uint16_t *all = malloc(65536 * 2), *n0 = malloc(cap * 2), *n1 = malloc(cap * 2);
    float *w0 = malloc(65536 * sizeof *w0), *w1 = malloc(65536 * sizeof *w1);
    ZT_CHECK(x && all && n0 && n1 && w0 && w1);
    size_t m = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        all[h] = (uint16_t)h;
        x[m++] = u2f(h << 16 | 0x7fffu), x[m++] = u2f(h << 16 | 0x8000u), x[m++] = u2f(h << 16 | 0x8001u);
        if (h >= maxfin) continue;
        const float mid = (float)((decode(F, (uint16_t)h) + decode(F, (uint16_t)(h + 1))) / 2);
        const float c3[3] = {mid, nextafterf(mid, INFINITY), nextafterf(mid, -INFINITY)};
        for (int j = 0; j < 3; j++) x[m++] = c3[j], x[m++] = -c3[j];
    }
    const zero_impl impls[] = {ZERO_IMPL_AVX2, ZERO_IMPL_AVX512};
    for (size_t k = 0; k < 2; k++) {
        if (!zero_impl_available(impls[k])) continue;
        ZT_OK(zero_convert(x, ZERO_DTYPE_FP32, n0, F->dt, m, ZERO_IMPL_SCALAR));
        ZT_OK(zero_convert(x, ZERO_DTYPE_FP32, n1, F->dt, m, impls[k]));
        size_t d = 0;
        while (d < m && n0[d] == n1[d]) d++;
        ZT_CHECKF(d == m, "%s narrow %s: 0x%08x -> 0x%04x, scalar 0x%04x", F->name, zero_impl_name(impls[k]),
                  d < m ? f2u(x[d]) : 0, d < m ? n1[d] : 0, d < m ? n0[d] : 0);
        ZT_OK(zero_convert(all, F->dt, w0, ZERO_DTYPE_FP32, 65536, ZERO_IMPL_SCALAR));
        ZT_OK(zero_convert(all, F->dt, w1, ZERO_DTYPE_FP32, 65536, impls[k]));
        ZT_CHECKF(!memcmp(w0, w1, 65536 * sizeof *w0), "%s widen %s differs from scalar on some pattern", F->name,
                  zero_impl_name(impls[k]));
        zt_checks += 2;
    }
    free(x), free(all), free(n0), free(n1), free(w0), free(w1);
}

static void test_vector_vs_scalar(void) {
    const size_t N = 1000003 + 1;
    float *f = malloc(N * sizeof *f), *w0 = malloc(N * sizeof *w0), *w1 = malloc(N * sizeof *w1);
    uint16_t *h0 = malloc(N * 2), *h1 = malloc(N * 2), *hs = malloc(N * 2);
    ZT_CHECK(f && w0 && w1 && h0 && h1 && hs);
    fill_specials(f, N);
    for (size_t i = 0; i < N; i++) hs[i] = (uint16_t)rng();
    static const size_t lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 1000, 1000003};
    const zero_impl impls[] = {ZERO_IMPL_AVX2, ZERO_IMPL_AVX512, ZERO_IMPL_AUTO};
    for (int fi = 0; fi < 2; fi++) {
        zero_dtype dt = FMTS[fi].dt;
        for (size_t k = 0; k < sizeof impls / sizeof impls[0]; k++) {
            zero_impl im = impls[k];
            if (!zero_impl_available(im)) {
                ZT_EQ_INT(zero_convert(f, ZERO_DTYPE_FP32, h1, dt, 8, im), ZERO_ERR_UNSUPPORTED);
                continue;
            }
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
                size_t n = lens[l];
                /* odd start: unaligned loads and stores */
                memset(h0, 0xab, N * 2);
                memset(h1, 0xab, N * 2);
                ZT_OK(zero_convert(f + 1, ZERO_DTYPE_FP32, h0 + 1, dt, n, ZERO_IMPL_SCALAR));
                ZT_OK(zero_convert(f + 1, ZERO_DTYPE_FP32, h1 + 1, dt, n, im));
                ZT_CHECKF(!memcmp(h0, h1, N * 2), "%s narrow %s n=%zu differs from scalar", FMTS[fi].name,
                          zero_impl_name(im), n);
                for (size_t i = 0; i < n; i++) /* the array path equals the scalar entry point */
                    if (h0[i + 1] != FMTS[fi].narrow(f[i + 1])) { ZT_FAIL("array/scalar differ at %zu", i); break; }
                memset(w0, 0xcd, N * 4);
                memset(w1, 0xcd, N * 4);
                ZT_OK(zero_convert(hs + 1, dt, w0 + 1, ZERO_DTYPE_FP32, n, ZERO_IMPL_SCALAR));
                ZT_OK(zero_convert(hs + 1, dt, w1 + 1, ZERO_DTYPE_FP32, n, im));
                ZT_CHECKF(!memcmp(w0, w1, N * 4), "%s widen %s n=%zu differs from scalar", FMTS[fi].name,
                          zero_impl_name(im), n);
            }
        }
    }
    /* same dtype: a copy; other pairs: refused */
    ZT_OK(zero_convert(hs, ZERO_DTYPE_BF16, h0, ZERO_DTYPE_BF16, 1001, ZERO_IMPL_AUTO));
    ZT_CHECK(!memcmp(hs, h0, 1001 * 2));
    ZT_OK(zero_convert(f, ZERO_DTYPE_FP32, w0, ZERO_DTYPE_FP32, 777, ZERO_IMPL_SCALAR));
    ZT_CHECK(!memcmp(f, w0, 777 * 4));
    ZT_EQ_INT(zero_convert(hs, ZERO_DTYPE_BF16, h0, ZERO_DTYPE_FP16, 8, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_convert(f, ZERO_DTYPE_FP32, h0, ZERO_DTYPE_INT32, 8, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_convert(NULL, ZERO_DTYPE_FP32, h0, ZERO_DTYPE_BF16, 8, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_convert(f, ZERO_DTYPE_FP32, h0, ZERO_DTYPE_BF16, 8, (zero_impl)9), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_convert(f, ZERO_DTYPE_COUNT, h0, ZERO_DTYPE_COUNT, 8, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_OK(zero_convert(NULL, ZERO_DTYPE_FP32, NULL, ZERO_DTYPE_BF16, 0, ZERO_IMPL_AUTO));
    free(f), free(w0), free(w1), free(h0), free(h1), free(hs);
}

int main(void) {
    test_names();
    for (int i = 0; i < 2; i++) {
        test_all_patterns(&FMTS[i]);
        test_rounding(&FMTS[i]);
        test_vector_edges(&FMTS[i]);
    }
    test_vector_vs_scalar();
    return zt_finish("test_dtype");
}
