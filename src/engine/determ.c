/* Deterministic mode (zero_extensions.deterministic): gradients and the gradient norm summed
 * exactly, so that the step is bitwise the same for any world size, stage and offload.
 *
 * Every micro-batch is one atom (docs/ENGINE.md, "Deterministic mode"). Its fp32 gradient is not
 * added as floats: each element is folded into a binned fixed-point accumulator, the manner of
 * reproducible (binned) summation. The exponent axis is cut into bins of W = 40 bits at fixed
 * places; an element keeps the index B of the highest bin any contribution reached so far and
 * two int64 limbs: the exact integer sum of every contribution's bits inside bin B, and inside
 * bin B-1 (bits below are dropped). When a larger contribution raises B, the limbs of the bins
 * that fall below B-1 are dropped; since a limb is the exact sum of the same bin's bits of every
 * contribution, that is what would have been kept had B been known from the start. So the
 * result depends only on the multiset of contributions: integer sums are associative, the bins
 * are fixed, and the top bin is a max. Ranks combine their accumulators the same way (an
 * all-reduce MAX of the bin indices, the alignment, an int64 SUM all-reduce or reduce-scatter),
 * then convert to fp32 once (rounded to nearest even). Precision: at least 41 bits below the
 * element's largest contribution, before the one rounding to fp32. Headroom: a limb holds up to
 * 2^22 contributions of 2^40, more than any world * gradient_accumulation_steps this accepts.
 * The norm's sum of squares uses the same bins on the exact squares (doubles) with 128-bit limbs,
 * per thread and per rank, combined exactly. */
#include "engine/internal.h"

#include <math.h>
#include <string.h>

#define W           40 /* bits per bin */
#define MASK        ((1ULL << W) - 1)
#define OFF_F32     (-160)    /* bin 0 starts at 2^-160: every fp32 (msb >= 2^-149) is in bins 0..7 */
#define OFF_SQ      (-320)    /* squares of fp32: msb in [2^-298, 2^255]: bins 0..14 */
#define BIN_NAN     255       /* bins byte of an element that received an Inf or NaN */
#define MAX_CONTRIB (1 << 22) /* contributions per element a limb holds without overflow */

typedef __int128 i128;
typedef unsigned __int128 u128;

/* |x| = m * 2^E (m < 2^53) cut at the bins of top index B (offset `off`): q = |x| / 2^(W(B-1)+off)
 * truncated, which is < 2^(2W) because the msb of |x| is inside bin B or below. */
static u128 cut(uint64_t m, int E, int B, int off) {
    const int s = E - (W * (B - 1) + off);
    if (s >= 0) return (u128)m << s;
    return -s >= 64 ? 0 : (u128)(m >> -s);
}

/* Position of the most significant bit of m (m > 0). */
static int msb64(uint64_t m) { return 63 - __builtin_clzll(m); }

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
    *e += sh; /* m may have become 2^bits: still exact as a float/double mantissa */
    return (uint64_t)m;
}

/* The value of limbs (hi, lo) at top bin B, as a double rounded once to `bits` bits. */
static double limbs_value(i128 hi, i128 lo, int B, int off, int bits) {
    const i128 t = hi * (i128)((i128)1 << W) + lo;
    if (t == 0) return 0.0;
    const int neg = t < 0;
    int e = W * (B - 1) + off;
    const uint64_t m = round_bits(neg ? (u128)(-t) : (u128)t, bits, &e);
    const double v = ldexp((double)m, e);
    return neg ? -v : v;
}

/* ------------------------------------------------------------ the per-element accumulator */

/* An accumulator of n elements: n bin bytes (0 empty, b+1 for top bin b, BIN_NAN), then 2n int64
 * limbs [top, below] per element. One transient block, charged to buffers. A unit's is whole
 * (padded) where the gradient is reduced once a step (stages 0-1), its shard where every atom is
 * reduced at grad_ready (stages 2-3). */
static size_t acc_bytes(uint64_t n) { return (((size_t)n + 63) & ~(size_t)63) + (size_t)n * 16; }
static uint8_t *acc_bins(void *acc) { return acc; }
static int64_t *acc_limbs(void *acc, uint64_t n) { return (int64_t *)((char *)acc + (((size_t)n + 63) & ~(size_t)63)); }
static uint64_t acc_elems(const zero_engine *e, const eunit *u) { return e->own.reduce_each_mb ? u->shard : u->padded; }

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

/* Folds one atom's fp32 gradient (n elements) into an accumulator. */
static void fold(uint8_t *bins, int64_t *limbs, const float *g, uint64_t n) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
    for (int64_t i = 0; i < (int64_t)n; i++) {
        uint32_t x;
        memcpy(&x, &g[i], 4);
        const uint32_t ef = (x >> 23) & 0xff, fr = x & 0x7fffff;
        if (bins[i] == BIN_NAN) continue;
        if (ef == 0xff) {
            bins[i] = BIN_NAN;
            continue;
        }
        if (ef == 0 && fr == 0) continue;
        const uint64_t m = ef ? (fr | 0x800000u) : fr;
        const int E = ef ? (int)ef - 150 : -149;
        const int b = (msb64(m) + E - OFF_F32) / W;
        int64_t *l = limbs + 2 * i;
        if (!bins[i] || b + 1 > bins[i]) raise_to(&bins[i], l, (uint8_t)(b + 1));
        const u128 q = cut(m, E, bins[i] - 1, OFF_F32);
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

/* dst += src, element by element (both accumulators of n elements): exact, order-independent. */
static void merge(uint8_t *dbins, int64_t *dl, const uint8_t *sbins, const int64_t *sl, uint64_t n) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
    for (int64_t i = 0; i < (int64_t)n; i++) {
        const uint8_t sb = sbins[i];
        if (dbins[i] == BIN_NAN || !sb) continue;
        if (sb == BIN_NAN) {
            dbins[i] = BIN_NAN;
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

/* The exact cross-rank sum of an accumulator of a whole unit, in place: the global top bins (an
 * all-reduce MAX of the bin bytes), every rank's limbs aligned to them, then an int64 SUM: an
 * all-reduce, or a reduce-scatter whose result is this rank's block [offset, offset + shard). */
static zero_status exact_sum(zero_engine *e, eunit *u, void *acc, int all) {
    const uint64_t P = u->padded;
    uint8_t *bins = acc_bins(acc);
    int64_t *limbs = acc_limbs(acc, P);
    zero_status s = zero__ctrl_exchange(e, CTRL_REDUCE, (int)(u - e->units), 0, 0);
    if (s != ZERO_OK || e->world == 1) return s;
    const double t0 = zero_now();
    uint8_t *local = zero__buf_get(e, (size_t)P, 0);
    if (!local) return zero__eng_fail(e, ZERO_ERR_NOMEM, "exact reduction of '%s': out of memory", u->name);
    memcpy(local, bins, (size_t)P);
    s = zero_comm_all_reduce(e->data, bins, bins, (size_t)P, ZERO_DTYPE_UINT8, ZERO_OP_MAX);
    if (s == ZERO_OK) {
#pragma omp parallel for schedule(static) if (P > (1u << 16))
        for (int64_t i = 0; i < (int64_t)P; i++) {
            if (bins[i] == BIN_NAN || local[i] == bins[i]) continue;
            uint8_t b = local[i];
            raise_to(&b, limbs + 2 * i, bins[i]);
        }
        if (all) s = zero_comm_all_reduce(e->data, limbs, limbs, (size_t)(2 * P), ZERO_DTYPE_INT64, ZERO_OP_SUM);
        else
            s = zero_comm_reduce_scatter(e->data, limbs, limbs + 2 * u->offset, (size_t)(2 * u->shard),
                                         ZERO_DTYPE_INT64, ZERO_OP_SUM);
    }
    zero__buf_put(e, local);
    zero__eng_waited(e, "exact reduction", t0);
    if (s != ZERO_OK)
        return zero__eng_fail(e, ZERO_ERR_COMM, "exact reduction of unit '%s' failed: %s", u->name,
                              zero_comm_last_error(e->data));
    return ZERO_OK;
}

static zero_status ensure_acc(zero_engine *e, eunit *u) {
    if (u->dacc) return ZERO_OK;
    u->dacc = zero__buf_get(e, acc_bytes(acc_elems(e, u)), 1);
    if (!u->dacc)
        return zero__eng_fail(e, ZERO_ERR_NOMEM, "'%s': out of memory for the exact gradient accumulator", u->name);
    return ZERO_OK;
}

zero_status zero__det_fold(zero_engine *e, eunit *u, const float *g) {
    zero_status s = ensure_acc(e, u);
    if (s != ZERO_OK) return s;
    if (!e->own.reduce_each_mb) { /* kept whole: reduced once, at the step */
        if (g) fold(acc_bins(u->dacc), acc_limbs(u->dacc, u->padded), g, u->numel);
        return ZERO_OK;
    }
    /* gradients sharded: this atom's exact sum over the ranks lands in the owned shard now, so
     * only the shard's accumulator persists (every rank reduces, with or without a gradient) */
    void *t = zero__buf_get(e, acc_bytes(u->padded), 1);
    if (!t)
        return zero__eng_fail(e, ZERO_ERR_NOMEM, "grad_ready '%s': out of memory for the exact accumulator", u->name);
    if (g) fold(acc_bins(t), acc_limbs(t, u->padded), g, u->numel);
    s = exact_sum(e, u, t, 0);
    if (s == ZERO_OK)
        merge(acc_bins(u->dacc), acc_limbs(u->dacc, u->shard), acc_bins(t) + u->offset,
              acc_limbs(t, u->padded) + 2 * u->offset, u->shard);
    zero__buf_put(e, t);
    return s;
}

/* One unit at the step: its exact sum over the ranks (kept whole: now; sharded: already made
 * atom by atom), converted once into the owned gradient (working dtype). */
static zero_status reduce_unit(zero_engine *e, eunit *u, float *tmp, uint64_t tmp_n) {
    zero_status s = ensure_acc(e, u); /* no gradient this step: zeros */
    if (s != ZERO_OK) return s;
    const uint64_t n0 = acc_elems(e, u), base = e->own.reduce_each_mb ? u->offset : 0;
    if (!e->own.reduce_each_mb && (s = exact_sum(e, u, u->dacc, e->own.update_whole)) != ZERO_OK) return s;
    const uint8_t *bins = acc_bins(u->dacc);
    const int64_t *limbs = acc_limbs(u->dacc, n0);
    /* convert the update range [lo, hi) into the owned gradient, a chunk at a time */
    const eview *v = &u->v;
    for (uint64_t c = v->lo; c < v->hi; c += tmp_n) {
        const uint64_t n = v->hi - c < tmp_n ? v->hi - c : tmp_n;
#pragma omp parallel for schedule(static) if (n > (1u << 16))
        for (int64_t k = 0; k < (int64_t)n; k++) {
            const uint64_t i = c + (uint64_t)k - base;
            const uint8_t b = bins[i];
            if (b == BIN_NAN) tmp[k] = NAN;
            else if (!b) tmp[k] = 0.0f;
            else tmp[k] = (float)limbs_value(limbs[2 * i], limbs[2 * i + 1], b - 1, OFF_F32, 24);
        }
        zero_convert(tmp, ZERO_DTYPE_FP32, zero__wptr(e, v->grad, c - v->lo), e->wdt, n, ZERO_IMPL_AUTO);
    }
    zero__buf_put(e, u->dacc);
    u->dacc = NULL;
    return ZERO_OK;
}

zero_status zero__det_reduce_all(zero_engine *e) {
    if ((int64_t)e->world * e->cfg.grad_accum > MAX_CONTRIB)
        return zero__eng_fail(
            e, ZERO_ERR_UNSUPPORTED,
            "deterministic: world * gradient_accumulation_steps = %lld: at most %d atoms per step are supported",
            (long long)e->world * (long long)e->cfg.grad_accum, MAX_CONTRIB);
    const uint64_t tmp_n = 16384;
    float *tmp = zero__buf_get(e, tmp_n * 4, 0);
    if (!tmp) return zero__eng_fail(e, ZERO_ERR_NOMEM, "step: out of memory");
    zero_status s = ZERO_OK;
    for (int i = 0; i < e->nunits && s == ZERO_OK; i++) {
        eunit *u = &e->units[i];
        if (u->gscratch && e->own.reduce_each_mb) { /* as in the default mode: a caller error */
            zero__buf_put(e, u->gscratch);
            u->gscratch = NULL;
            s = zero__eng_fail(e, ZERO_ERR_STATE, "step: unit '%s' has a gradient that was never passed to grad_ready",
                               u->name);
            break;
        }
        if (u->gscratch) { /* grad() without grad_ready: still counts, as in the default mode */
            s = zero__det_fold(e, u, u->gscratch);
            zero__buf_put(e, u->gscratch);
            u->gscratch = NULL;
            if (s != ZERO_OK) break;
        }
        s = reduce_unit(e, u, tmp, tmp_n);
    }
    zero__buf_put(e, tmp);
    for (int i = 0; i < e->nunits; i++) {
        e->units[i].reduced_step = 0;
        e->units[i].ready_mb = -1;
    }
    return s;
}

void zero__det_drop(zero_engine *e) {
    for (int i = 0; i < e->nunits; i++) {
        zero__buf_put(e, e->units[i].dacc);
        e->units[i].dacc = NULL;
    }
}

/* ------------------------------------------------------------ the exact sum of squares */

typedef struct sqacc {
    int b;       /* top bin, -1 empty */
    i128 hi, lo; /* limbs of bins b and b-1 */
} sqacc;

static void sq_raise(sqacc *a, int b) {
    const int d = a->b < 0 ? 2 : b - a->b;
    if (d == 1) {
        a->lo = a->hi;
        a->hi = 0;
    } else if (d >= 2) {
        a->hi = a->lo = 0;
    }
    a->b = b;
}

static void sq_add(sqacc *a, float x) {
    const double d = (double)x * (double)x; /* exact: 48 significant bits, exponent in range */
    if (d == 0) return;
    int E;
    const double fr = frexp(d, &E); /* d = fr * 2^E, fr in [0.5, 1) */
    const uint64_t m = (uint64_t)ldexp(fr, 53);
    E -= 53;
    const int b = (msb64(m) + E - OFF_SQ) / W;
    if (a->b < b) sq_raise(a, b);
    const u128 q = cut(m, E, a->b, OFF_SQ);
    a->hi += (i128)(q >> W);
    a->lo += (i128)(q & MASK);
}

static void sq_merge(sqacc *a, sqacc o) {
    if (o.b < 0) return;
    if (a->b < o.b) sq_raise(a, o.b);
    else if (o.b < a->b) sq_raise(&o, a->b);
    a->hi += o.hi;
    a->lo += o.lo;
}

zero_status zero__det_norm(zero_engine *e, double *sumsq, int *overflow) {
    sqacc all = {-1, 0, 0};
    int bad = 0;
    for (int i = 0; i < e->nunits; i++) {
        const eview *v = &e->units[i].v;
        const void *g = zero__wptr(e, v->grad, v->slo - v->lo);
        const int64_t n = (int64_t)(v->shi - v->slo);
        const int half = e->wdt != ZERO_DTYPE_FP32, bf = e->wdt == ZERO_DTYPE_BF16;
#pragma omp parallel if (n > (1 << 16))
        {
            sqacc mine = {-1, 0, 0};
            int mbad = 0;
#pragma omp for schedule(static)
            for (int64_t k = 0; k < n; k++) {
                const float x = !half ? ((const float *)g)[k]
                                : bf  ? zero_bf16_to_fp32(((const uint16_t *)g)[k])
                                      : zero_fp16_to_fp32(((const uint16_t *)g)[k]);
                if (!isfinite(x)) mbad = 1;
                else sq_add(&mine, x);
            }
#pragma omp critical(zero_det_norm) /* exact: the order of the merges does not matter */
            {
                sq_merge(&all, mine);
                bad |= mbad;
            }
        }
    }
    /* every rank's accumulator, merged exactly on every rank */
    int64_t rec[6] = {all.b,
                      bad,
                      (int64_t)(all.hi >> 64),
                      (int64_t)(uint64_t)all.hi,
                      (int64_t)(all.lo >> 64),
                      (int64_t)(uint64_t)all.lo};
    int64_t *recs = zero__buf_get(e, sizeof rec * (size_t)e->world, 0);
    if (!recs) return zero__eng_fail(e, ZERO_ERR_NOMEM, "step: out of memory");
    const double t0 = zero_now();
    zero_status s = zero_comm_all_gather(e->ctrl, rec, recs, 6, ZERO_DTYPE_INT64);
    zero__eng_waited(e, "exact norm", t0);
    if (s != ZERO_OK) {
        zero__buf_put(e, recs);
        return zero__eng_fail(e, ZERO_ERR_COMM, "exact norm: all-gather failed: %s", zero_comm_last_error(e->ctrl));
    }
    sqacc sum = {-1, 0, 0};
    int any_bad = 0;
    for (int r = 0; r < e->world; r++) {
        const int64_t *x = recs + 6 * r;
        sqacc o = {(int)x[0], (i128)(((u128)(uint64_t)x[2] << 64) | (uint64_t)x[3]),
                   (i128)(((u128)(uint64_t)x[4] << 64) | (uint64_t)x[5])};
        sq_merge(&sum, o);
        any_bad |= x[1] != 0;
    }
    zero__buf_put(e, recs);
    *overflow = any_bad;
    *sumsq = sum.b < 0 ? 0.0 : limbs_value(sum.hi, sum.lo, sum.b, OFF_SQ, 53);
    return ZERO_OK;
}
