/* The exact-summation kernels of deterministic mode (determ.c, docs/ENGINE.md §11), each with its
 * scalar reference, which tests/unit/test_determ_kernels.c checks it against bit for bit.
 *
 * An accumulator of n elements is n bin bytes (0 empty, B+1 for top bin B, ZERO_DK_NAN) and 2n
 * int64 limbs [bin B, bin B-1] per element; bins are W = 40 bits wide, bin 0 starts at 2^-160
 * (every fp32 is in bins 0..7). A contribution x = m * 2^E is cut at bin B-1:
 * q = |x| / 2^(W(B-1) - 160) truncated, < 2^(2W); the limbs gain q's two 40-bit halves.
 *
 * The references compute the cut in 128 bits, as the derivation reads; the fast kernels use
 * 64-bit shifts only (m < 2^24, and the shift is below 57 once the top bin holds x), and convert
 * with one int64 -> fp32 rounding where the value fits in 63 bits.
 *
 * The sum of squares (the gradient norm) is kept exactly: x^2 = m^2 * 4^E with m^2 < 2^48, so one
 * unsigned 128-bit sum per fp32 exponent field holds every square's exact sum (a zero__dk_sq);
 * its value is rounded once per field into a double and the fields are added in a fixed order,
 * so the result depends on the multiset of squares only. */
#include "engine/internal.h"

#include <math.h>
#include <string.h>

#define W    40 /* bits per bin */
#define MASK ((1ULL << W) - 1)
#define OFF  (-160) /* bin 0 starts at 2^-160 */

typedef __int128 i128;
typedef unsigned __int128 u128;

static int msb64(uint64_t m) { return 63 - __builtin_clzll(m); }

/* Raises an element's top bin to b1 - 1 (bins byte b1), dropping the bins below the new B-1. */
static inline void raise_to(uint8_t *bin, int64_t *l, uint8_t b1) {
    const int d = *bin ? b1 - *bin : 2;
    if (d == 1) {
        l[1] = l[0];
        l[0] = 0;
    } else if (d >= 2) {
        l[0] = l[1] = 0;
    }
    *bin = b1;
}

void zero__dk_align(uint8_t *bin, int64_t *l, uint8_t b1) { raise_to(bin, l, b1); }

void zero__dk_merge(uint8_t *dbins, int64_t *dl, const uint8_t *sbins, const int64_t *sl, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t sb = sbins[i];
        if (dbins[i] == ZERO_DK_NAN || !sb) continue;
        if (sb == ZERO_DK_NAN) {
            dbins[i] = ZERO_DK_NAN;
            continue;
        }
        int64_t *d = dl + 2 * i, s[2] = {sl[2 * i], sl[2 * i + 1]};
        if (!dbins[i] || sb > dbins[i]) raise_to(&dbins[i], d, sb);
        else if (sb < dbins[i]) {
            uint8_t b = sb;
            raise_to(&b, s, dbins[i]);
        }
        d[0] += s[0];
        d[1] += s[1];
    }
}

/* ------------------------------------------------------------ references (128-bit) */

/* |x| = m * 2^E (m < 2^53) cut at the bins of top index B: q = |x| / 2^(W(B-1)+OFF) truncated. */
static u128 cut(uint64_t m, int E, int B) {
    const int s = E - (W * (B - 1) + OFF);
    if (s >= 0) return (u128)m << s;
    return -s >= 64 ? 0 : (u128)(m >> -s);
}

void zero__dk_fold_ref(uint8_t *bins, int64_t *limbs, const float *g, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, &g[i], 4);
        const uint32_t ef = (x >> 23) & 0xff, fr = x & 0x7fffff;
        if (bins[i] == ZERO_DK_NAN) continue;
        if (ef == 0xff) {
            bins[i] = ZERO_DK_NAN;
            continue;
        }
        if (ef == 0 && fr == 0) continue;
        const uint64_t m = ef ? (fr | 0x800000u) : fr;
        const int E = ef ? (int)ef - 150 : -149;
        const int b = (msb64(m) + E - OFF) / W;
        int64_t *l = limbs + 2 * i;
        if (!bins[i] || b + 1 > bins[i]) raise_to(&bins[i], l, (uint8_t)(b + 1));
        const u128 q = cut(m, E, bins[i] - 1);
        const int64_t hi = (int64_t)(q >> W), lo = (int64_t)(q & MASK);
        if (x >> 31) {
            l[0] -= hi;
            l[1] -= lo;
        } else {
            l[0] += hi;
            l[1] += lo;
        }
    }
}

/* Rounds u (> 0) to `bits` significant bits, nearest even: returns the mantissa and adds the
 * shift to *e (the value is mantissa * 2^*e). */
static uint64_t round_bits(u128 u, int bits, int *e) {
    const uint64_t hi = (uint64_t)(u >> 64);
    const int p = hi ? 64 + msb64(hi) : msb64((uint64_t)u);
    if (p < bits) return (uint64_t)u;
    const int sh = p - bits + 1;
    u128 m = u >> sh;
    const u128 rem = u & (((u128)1 << sh) - 1), half = (u128)1 << (sh - 1);
    if (rem > half || (rem == half && (m & 1))) m++;
    *e += sh; /* m may have become 2^bits: still exact as a float mantissa */
    return (uint64_t)m;
}

/* The value of limbs (hi, lo) under bins byte b: rounded once to 24 bits (then to fp32's range). */
static float value_ref(int64_t hi, int64_t lo, uint8_t b) {
    const i128 t = (i128)hi * ((i128)1 << W) + lo;
    if (t == 0) return 0.0f;
    const int neg = t < 0;
    int e = W * (b - 2) + OFF;
    const uint64_t m = round_bits(neg ? (u128)(-t) : (u128)t, 24, &e);
    const double v = ldexp((double)m, e);
    return (float)(neg ? -v : v);
}

void zero__dk_convert_ref(const uint8_t *bins, const int64_t *limbs, float *out, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t b = bins[i];
        out[i] = b == ZERO_DK_NAN ? NAN : !b ? 0.0f : value_ref(limbs[2 * i], limbs[2 * i + 1], b);
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

/* ------------------------------------------------------------ fast kernels (64-bit) */

/* The two limb increments of |x| = m * 2^E under bins byte bb (the top bin holds x). */
static inline void cut64(uint64_t m, int E, uint8_t bb, uint64_t *hi, uint64_t *lo) {
    const int s = E - (W * (bb - 2) + OFF); /* < 57: m < 2^24 and its msb is at most bin bb-1's top */
    if (s >= 0) {
        *lo = (m << s) & MASK;
        *hi = s >= W ? m << (s - W) : m >> (W - s);
    } else {
        *hi = 0;
        *lo = -s >= 64 ? 0 : m >> -s;
    }
}

void zero__dk_fold(uint8_t *bins, int64_t *limbs, const float *g, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, &g[i], 4);
        const uint32_t ef = (x >> 23) & 0xff, fr = x & 0x7fffff;
        uint8_t bb = bins[i];
        if (ef == 0xff || bb == ZERO_DK_NAN) {
            bins[i] = ZERO_DK_NAN;
            continue;
        }
        if (!(x << 1)) continue;
        const uint64_t m = ef ? (fr | 0x800000u) : fr;
        const int E = ef ? (int)ef - 150 : -149;
        /* top bin of x: (msb + E - OFF) / W, i.e. (ef + 33) / W for a normal x, 0 for a subnormal */
        const uint8_t need = (uint8_t)((ef ? (ef + 33) / W : 0) + 1);
        int64_t *l = limbs + 2 * i;
        if (need > bb) {
            raise_to(&bins[i], l, need);
            bb = need;
        }
        uint64_t hi, lo;
        cut64(m, E, bb, &hi, &lo);
        if (x >> 31) {
            l[0] -= (int64_t)hi;
            l[1] -= (int64_t)lo;
        } else {
            l[0] += (int64_t)hi;
            l[1] += (int64_t)lo;
        }
    }
}

void zero__dk_set(uint8_t *bins, int64_t *limbs, const float *g, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, &g[i], 4);
        const uint32_t ef = (x >> 23) & 0xff, fr = x & 0x7fffff;
        int64_t *l = limbs + 2 * i;
        l[0] = l[1] = 0;
        if (ef == 0xff || !(x << 1)) {
            bins[i] = ef == 0xff ? ZERO_DK_NAN : 0;
            continue;
        }
        const uint64_t m = ef ? (fr | 0x800000u) : fr;
        const int E = ef ? (int)ef - 150 : -149;
        const uint8_t bb = (uint8_t)((ef ? (ef + 33) / W : 0) + 1);
        uint64_t hi, lo;
        cut64(m, E, bb, &hi, &lo);
        bins[i] = bb;
        l[0] = x >> 31 ? -(int64_t)hi : (int64_t)hi;
        l[1] = x >> 31 ? -(int64_t)lo : (int64_t)lo;
    }
}

void zero__dk_convert(const uint8_t *bins, const int64_t *limbs, float *out, uint64_t n) {
    double scale[9];
    for (int b = 1; b < 9; b++) scale[b] = ldexp(1.0, W * (b - 2) + OFF);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t b = bins[i];
        if (b == ZERO_DK_NAN || !b || b > 8) {
            out[i] = b == ZERO_DK_NAN ? NAN : 0.0f;
            continue;
        }
        const i128 t = (i128)limbs[2 * i] * ((i128)1 << W) + limbs[2 * i + 1];
        const int64_t t64 = (int64_t)t;
        if ((i128)t64 == t) { /* one rounding to 24 bits, then an exact scaling by 2^k */
            out[i] = (float)((double)(float)t64 * scale[b]);
            continue;
        }
        /* |t| >= 2^63: kept to 63 bits rounded to odd (a sticky last bit), so that the rounding
         * to 24 bits is the one |t| itself would get */
        const u128 u = t < 0 ? -(u128)t : (u128)t;
        const uint64_t uh = (uint64_t)(u >> 64);
        const int sh = (uh ? 64 + msb64(uh) : msb64((uint64_t)u)) - 62; /* 1..40 */
        const uint64_t v = (uint64_t)(u >> sh) | (uint64_t)((u & (((u128)1 << sh) - 1)) != 0);
        const float f = (float)(int64_t)v;
        out[i] = (float)((double)(t < 0 ? -f : f) * scale[b] * (double)(1ULL << sh));
    }
}

void zero__dk_sq_add(zero__dk_sq *a, const float *x, uint64_t n, int *bad) {
    uint64_t st[256] = {0}; /* 2^16 - 1 squares below 2^48 fit in 64 bits */
    for (uint64_t c = 0; c < n; c += 65535) {
        const uint64_t e = n - c < 65535 ? n : c + 65535;
        for (uint64_t i = c; i < e; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            const uint32_t ef = (u >> 23) & 0xff, fr = u & 0x7fffff;
            const uint64_t m = ef ? (fr | 0x800000u) : fr;
            st[ef] += m * m;
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
