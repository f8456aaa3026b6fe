/* The kernels of deterministic mode (determ.c, docs/ENGINE.md §11), each fast one beside its
 * scalar reference, which tests/unit/test_determ_kernels.c holds it to bit for bit.
 *
 * Fixed-point accumulation on a grid: a unit's elements are cut into blocks of ZERO_DQ_BLOCK; a
 * block has a grid exponent e (the same on every rank, set from earlier steps by determ.c). An
 * atom's contribution x is rounded once to a multiple of 2^e, q = rint(x * 2^-e) (nearest, ties to
 * even), clamped to |q| <= ZERO_DQ_CLAMP, and added as an int32. Integer addition is associative,
 * so the sum depends only on the multiset of contributions: on no order, grouping or world size.
 * While it quantizes, a kernel records per block the largest fp32 exponent field (the "seen"
 * byte: 0 for zeros and subnormals only, 255 after an Inf or NaN) and adds the largest |q| to the
 * block's "mass": while a block's mass, summed over every atom on every rank, stays below 2^31,
 * no element's sum (nor any partial sum, in any order) can leave int32, and determ.c knows it
 * from the mass alone.
 * convert rounds a sum S once to fp32, S * 2^e (NaN where a block saw an Inf or NaN).
 *
 * The references compute in double (x * 2^-e is exact there), independently of the fast kernels,
 * which compute in float: SSE2 four lanes at a time, the tails and the conversion through the
 * element formulas of kernels/elem.h (zero__dq_quantize_elem & co., what a GPU kernel runs), with
 * round to nearest even as the references' nearbyint.
 *
 * The sum of squares (the gradient norm) is kept exactly: x^2 = m^2 * 4^E with m^2 < 2^48, so one
 * unsigned 128-bit sum per fp32 exponent field holds every square's exact sum (a zero__dk_sq);
 * its value is rounded once per field into a double and the fields are added in a fixed order,
 * so the result depends on the multiset of squares only. */
#include "engine/internal.h"
#include "kernels/elem.h"

#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef unsigned __int128 u128;

/* 2^k as a float, for -126 <= k <= 127. */
static inline float pow2f(int k) { return zero__f32_from_bits((uint32_t)(127 + k) << 23); }

/* The exponent a block quantizes with: its grid, or the unit's floor where that is coarser or the
 * block has none; the coarsest of all where neither is set (such a block may only hold zeros and
 * subnormals, which then round to 0). */
static inline int grid_of(int8_t g, int floor) {
    const int e = zero__dq_grid(g, floor);
    return e == ZERO_DQ_UNSET ? ZERO_DQ_EMAX : e;
}

/* ------------------------------------------------------------ scalar references */

void zero__dq_quantize_ref(const float *x, int32_t *dst, uint64_t i0, uint64_t n, const int8_t *grid, int floor,
                           uint8_t *seen, uint64_t *mass, int add) {
    const double C = (double)ZERO_DQ_CLAMP;
    uint64_t bmax = 0, cur = UINT64_MAX;
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t b = (i0 + i) / ZERO_DQ_BLOCK;
        if (b != cur) { /* a new block: the last one's largest |q| joins its mass */
            if (cur != UINT64_MAX) mass[cur] += bmax;
            cur = b;
            bmax = 0;
        }
        const float v = x[i];
        const uint8_t f = (uint8_t)((zero__f32_bits(v) >> 23) & 0xff);
        if (f > seen[b]) seen[b] = f;
        double y = isnan(v) ? 0.0 : ldexp((double)v, -grid_of(grid[b], floor));
        y = y > C ? C : y < -C ? -C : y;
        const int32_t q = (int32_t)nearbyint(y);
        const uint64_t aq = (uint64_t)(q < 0 ? -(int64_t)q : q);
        if (aq > bmax) bmax = aq;
        dst[i] = add ? (int32_t)((uint32_t)dst[i] + (uint32_t)q) : q;
    }
    if (cur != UINT64_MAX) mass[cur] += bmax;
}

void zero__dq_convert_ref(const int32_t *acc, float *out, uint64_t i0, uint64_t n, const int8_t *grid, int floor,
                          const uint8_t *seen) {
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t b = (i0 + i) / ZERO_DQ_BLOCK;
        out[i] = seen[b] == ZERO_DQ_NAN ? NAN : (float)ldexp((double)acc[i], grid_of(grid[b], floor));
    }
}

void zero__dk_sq_add_ref(zero__dk_sq *a, const float *x, uint64_t n, int *bad) {
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        const uint32_t ef = (u >> 23) & 0xff, fr = u & 0x7fffff;
        if (ef == 0xff) {
            *bad = 1;
            continue;
        }
        const uint64_t m = ef ? (fr | 0x800000u) : fr;
        a->b[ef] += (u128)(m * m);
    }
}

/* ------------------------------------------------------------ fast kernels */

/* Elements [i, i + m) of one block: quantized with scale s; the block's largest exponent field
 * and largest |q| returned. */
static inline void quantize_run(const float *x, int32_t *dst, uint64_t m, float s, int add, uint32_t *field,
                                uint32_t *qmax) {
    const float c = (float)ZERO_DQ_CLAMP;
    uint32_t fmax = 0, amax = 0;
    uint64_t i = 0;
#if defined(__SSE2__)
    const __m128 vs = _mm_set1_ps(s), vc = _mm_set1_ps(c), vnc = _mm_set1_ps(-c);
    const __m128i emask = _mm_set1_epi32(0x7f800000);
    __m128i vf = _mm_setzero_si128(), va = _mm_setzero_si128();
    for (; i + 4 <= m; i += 4) {
        const __m128 v = _mm_loadu_ps(x + i);
        /* the exponent fields, compared as non-negative int32 (a field, shifted, is < 2^31) */
        const __m128i e = _mm_and_si128(_mm_castps_si128(v), emask);
        const __m128i gt = _mm_cmpgt_epi32(e, vf);
        vf = _mm_or_si128(_mm_and_si128(gt, e), _mm_andnot_si128(gt, vf));
        __m128 y = _mm_mul_ps(v, vs);
        y = _mm_and_ps(y, _mm_cmpord_ps(y, y)); /* NaN -> 0 */
        y = _mm_min_ps(_mm_max_ps(y, vnc), vc);
        __m128i q = _mm_cvtps_epi32(y);
        /* |q| (< 2^31 after the clamp), its running max as non-negative int32 */
        const __m128i sg = _mm_srai_epi32(q, 31), aq = _mm_sub_epi32(_mm_xor_si128(q, sg), sg);
        const __m128i ga = _mm_cmpgt_epi32(aq, va);
        va = _mm_or_si128(_mm_and_si128(ga, aq), _mm_andnot_si128(ga, va));
        if (add) q = _mm_add_epi32(q, _mm_loadu_si128((const __m128i *)(dst + i)));
        _mm_storeu_si128((__m128i *)(dst + i), q);
    }
    uint32_t lf[4], la[4];
    _mm_storeu_si128((__m128i *)lf, vf);
    _mm_storeu_si128((__m128i *)la, va);
    for (int k = 0; k < 4; k++) {
        if (lf[k] > fmax) fmax = lf[k];
        if (la[k] > amax) amax = la[k];
    }
    fmax >>= 23;
#endif
    for (; i < m; i++) {
        const float v = x[i];
        const uint32_t f = zero__f32_field(v);
        if (f > fmax) fmax = f;
        const int32_t q = zero__dq_quantize_elem(v, s, c);
        const uint32_t aq = (uint32_t)(q < 0 ? -(int64_t)q : q);
        if (aq > amax) amax = aq;
        dst[i] = add ? (int32_t)((uint32_t)dst[i] + (uint32_t)q) : q;
    }
    *field = fmax;
    *qmax = amax;
}

void zero__dq_quantize(const float *x, int32_t *dst, uint64_t i0, uint64_t n, const int8_t *grid, int floor,
                       uint8_t *seen, uint64_t *mass, int add) {
    for (uint64_t i = 0; i < n;) {
        const uint64_t b = (i0 + i) / ZERO_DQ_BLOCK, end = (b + 1) * ZERO_DQ_BLOCK - i0;
        const uint64_t m = (end < n ? end : n) - i;
        uint32_t f, a;
        quantize_run(x + i, dst + i, m, pow2f(-grid_of(grid[b], floor)), add, &f, &a);
        if (f > seen[b]) seen[b] = (uint8_t)f;
        mass[b] += a;
        i += m;
    }
}

void zero__dq_convert(const int32_t *acc, float *out, uint64_t i0, uint64_t n, const int8_t *grid, int floor,
                      const uint8_t *seen) {
    for (uint64_t i = 0; i < n;) {
        const uint64_t b = (i0 + i) / ZERO_DQ_BLOCK, end = (b + 1) * ZERO_DQ_BLOCK - i0;
        const uint64_t m = (end < n ? end : n) - i;
        if (seen[b] == ZERO_DQ_NAN) {
            for (uint64_t k = 0; k < m; k++) out[i + k] = NAN;
        } else {
            const float s = pow2f(grid_of(grid[b], floor));
            /* int32 -> fp32 rounds to nearest even; the power of two then scales exactly (|S| <= 2^30
             * and -126 <= e <= ZERO_DQ_EMAX keep every nonzero result normal and finite) */
            for (uint64_t k = 0; k < m; k++) out[i + k] = zero__dq_dequantize_elem(acc[i + k], s);
        }
        i += m;
    }
}

void zero__dk_sq_add(zero__dk_sq *a, const float *x, uint64_t n, int *bad) {
    uint64_t st[256] = {0}; /* 2^16 - 1 squares below 2^48 fit in 64 bits */
    for (uint64_t c = 0; c < n; c += 65535) {
        const uint64_t e = n - c < 65535 ? n : c + 65535;
        for (uint64_t i = c; i < e; i++) {
            uint32_t ef;
            const uint64_t m2 = zero__dk_sq_elem(x[i], &ef);
            st[ef] += m2;
        }
        for (int k = 0; k < 255; k++) {
            a->b[k] += st[k];
            st[k] = 0;
        }
        if (st[255]) *bad = 1; /* Inf or NaN */
        st[255] = 0;
    }
}

void zero__dk_sq_merge(zero__dk_sq *a, const zero__dk_sq *o) {
    for (int k = 0; k < 256; k++) a->b[k] += o->b[k];
}

double zero__dk_sq_value(const zero__dk_sq *a) {
    double v = 0;
    for (int k = 0; k < 255; k++) /* ascending: the small terms first */
        if (a->b[k]) v += ldexp((double)a->b[k], 2 * (k ? k - 150 : -149));
    return v;
}
