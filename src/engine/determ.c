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
 * The norm's sum of squares is exact: one 128-bit integer sum per fp32 exponent field, per thread
 * and per rank, added over the ranks and rounded once per field. The kernels, with their scalar
 * references, are in determ_kernels.c. */
#include "engine/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONTRIB (1 << 22) /* contributions per element a limb holds without overflow */
#define CONVERT_CHUNK (1u << 18) /* elements the step converts to fp32 at a time, at most */

/* A kernel of determ_kernels.c over n elements, on the engine's threads where n is large, in
 * chunks: every element is independent, so the split does not change a bit. */
enum { DK_FOLD, DK_SET, DK_MERGE };
static void acc_apply(int op, uint8_t *bins, int64_t *limbs, const float *g, const uint8_t *sbins,
                      const int64_t *slimbs, uint64_t n) {
    const int64_t ch = 1 << 14;
#pragma omp parallel for schedule(static) if (n > (1u << 16))
    for (int64_t c = 0; c < (int64_t)n; c += ch) {
        const uint64_t k = (uint64_t)((int64_t)n - c < ch ? (int64_t)n - c : ch);
        if (op == DK_FOLD) zero__dk_fold(bins + c, limbs + 2 * c, g + c, k);
        else if (op == DK_SET) zero__dk_set(bins + c, limbs + 2 * c, g + c, k);
        else zero__dk_merge(bins + c, limbs + 2 * c, sbins + c, slimbs + 2 * c, k);
    }
}

/* ------------------------------------------------------------ the per-element accumulator */

/* An accumulator of n elements: n bin bytes, then 2n int64 limbs (determ_kernels.c). One
 * transient block, charged to buffers. A unit's is whole (padded) where the gradient is reduced
 * once a step (stages 0-1), its shard where every atom is reduced at grad_ready (stages 2-3). */
static size_t acc_bytes(uint64_t n) { return (((size_t)n + 63) & ~(size_t)63) + (size_t)n * 16; }
static uint8_t *acc_bins(void *acc) { return acc; }
static int64_t *acc_limbs(void *acc, uint64_t n) { return (int64_t *)((char *)acc + (((size_t)n + 63) & ~(size_t)63)); }
static uint64_t acc_elems(const zero_engine *e, const eunit *u) { return e->own.reduce_each_mb ? u->shard : u->padded; }

/* A new accumulator of a whole unit holding g alone (zeros if g is NULL), without zeroing it first. */
static void *acc_new(zero_engine *e, const eunit *u, const float *g) {
    const uint64_t P = u->padded;
    void *acc = zero__buf_get(e, acc_bytes(P), g == NULL);
    if (!acc || !g) return acc;
    acc_apply(DK_SET, acc_bins(acc), acc_limbs(acc, P), g, NULL, NULL, u->numel);
    memset(acc_bins(acc) + u->numel, 0, (size_t)(P - u->numel));
    memset(acc_limbs(acc, P) + 2 * u->numel, 0, (size_t)(P - u->numel) * 16);
    return acc;
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
            if (bins[i] == ZERO_DK_NAN || local[i] == bins[i]) continue;
            uint8_t b = local[i];
            zero__dk_align(&b, limbs + 2 * i, bins[i]);
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

static zero_status no_acc(zero_engine *e, const eunit *u) {
    return zero__eng_fail(e, ZERO_ERR_NOMEM, "'%s': out of memory for the exact gradient accumulator", u->name);
}

zero_status zero__det_fold(zero_engine *e, eunit *u, const float *g) {
    if (!e->own.reduce_each_mb) {                 /* kept whole: reduced once, at the step */
        if (!u->dacc) u->dacc = acc_new(e, u, g); /* the step's first atom sets it */
        else if (g) acc_apply(DK_FOLD, acc_bins(u->dacc), acc_limbs(u->dacc, u->padded), g, NULL, NULL, u->numel);
        return u->dacc ? ZERO_OK : no_acc(e, u);
    }
    /* gradients sharded: this atom's exact sum over the ranks lands in the owned shard now, so
     * only the shard's accumulator persists (every rank reduces, with or without a gradient) */
    if (!u->dacc && !(u->dacc = zero__buf_get(e, acc_bytes(u->shard), 1))) return no_acc(e, u);
    void *t = acc_new(e, u, g);
    if (!t) return no_acc(e, u);
    zero_status s = exact_sum(e, u, t, 0);
    if (s == ZERO_OK)
        acc_apply(DK_MERGE, acc_bins(u->dacc), acc_limbs(u->dacc, u->shard), NULL, acc_bins(t) + u->offset,
                  acc_limbs(t, u->padded) + 2 * u->offset, u->shard);
    zero__buf_put(e, t);
    return s;
}

/* One unit at the step: its exact sum over the ranks (kept whole: now; sharded: already made
 * atom by atom), converted once into the owned gradient (working dtype). */
static zero_status reduce_unit(zero_engine *e, eunit *u, float *tmp, uint64_t tmp_n) {
    if (!u->dacc && !(u->dacc = zero__buf_get(e, acc_bytes(acc_elems(e, u)), 1))) /* no gradient: zeros */
        return no_acc(e, u);
    const uint64_t n0 = acc_elems(e, u), base = e->own.reduce_each_mb ? u->offset : 0;
    zero_status s = ZERO_OK;
    if (!e->own.reduce_each_mb && (s = exact_sum(e, u, u->dacc, e->own.update_whole)) != ZERO_OK) return s;
    const uint8_t *bins = acc_bins(u->dacc);
    const int64_t *limbs = acc_limbs(u->dacc, n0);
    /* convert the update range [lo, hi) into the owned gradient, a chunk at a time */
    const eview *v = &u->v;
    for (uint64_t c = v->lo; c < v->hi; c += tmp_n) {
        const uint64_t n = v->hi - c < tmp_n ? v->hi - c : tmp_n, i0 = c - base;
        const int64_t ch = 1 << 12;
#pragma omp parallel for schedule(static) if (n > (1u << 16))
        for (int64_t k = 0; k < (int64_t)n; k += ch) {
            const uint64_t m = (uint64_t)((int64_t)n - k < ch ? (int64_t)n - k : ch);
            zero__dk_convert(bins + i0 + k, limbs + 2 * (i0 + k), tmp + k, m);
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
    /* the conversion's chunk: 2^18 elements, or the largest update range where that is smaller */
    uint64_t tmp_n = 1;
    for (int i = 0; i < e->nunits; i++) {
        const uint64_t n = e->units[i].v.hi - e->units[i].v.lo;
        if (n > tmp_n) tmp_n = n;
    }
    if (tmp_n > CONVERT_CHUNK) tmp_n = CONVERT_CHUNK;
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

zero_status zero__det_norm(zero_engine *e, double *sumsq, int *overflow) {
    /* this rank's exact sum (one per exponent field) and Inf/NaN flag: rec[0] the flag, then the
     * 256 sums as (high, low) 64-bit halves; every rank's, all-gathered and added exactly */
    const size_t nrec = 1 + 2 * 256;
    int64_t *recs = zero__buf_get(e, 8 * nrec * (size_t)(e->world + 1), 0);
    zero__dk_sq *all = malloc(sizeof *all);
    if (!recs || !all) {
        zero__buf_put(e, recs);
        free(all);
        return zero__eng_fail(e, ZERO_ERR_NOMEM, "step: out of memory");
    }
    memset(all, 0, sizeof *all);
    int bad = 0;
    const int half = e->wdt != ZERO_DTYPE_FP32;
    for (int i = 0; i < e->nunits; i++) {
        const eview *v = &e->units[i].v;
        const void *g = zero__wptr(e, v->grad, v->slo - v->lo);
        const int64_t n = (int64_t)(v->shi - v->slo), ch = 1 << 12;
#pragma omp parallel if (n > (1 << 16))
        {
            zero__dk_sq mine;
            float buf[1 << 12];
            int mbad = 0;
            memset(&mine, 0, sizeof mine);
#pragma omp for schedule(static)
            for (int64_t k = 0; k < n; k += ch) {
                const uint64_t m = (uint64_t)(n - k < ch ? n - k : ch);
                const float *x = (const float *)g + k;
                if (half) {
                    zero_convert(zero__wptr(e, (void *)g, (uint64_t)k), e->wdt, buf, ZERO_DTYPE_FP32, m,
                                 ZERO_IMPL_AUTO);
                    x = buf;
                }
                zero__dk_sq_add(&mine, x, m, &mbad);
            }
#pragma omp critical(zero_det_norm) /* exact: the order of the merges does not matter */
            {
                zero__dk_sq_merge(all, &mine);
                bad |= mbad;
            }
        }
    }
    int64_t *rec = recs + nrec * (size_t)e->world;
    rec[0] = bad;
    for (int k = 0; k < 256; k++) {
        rec[1 + 2 * k] = (int64_t)(uint64_t)(all->b[k] >> 64);
        rec[2 + 2 * k] = (int64_t)(uint64_t)all->b[k];
    }
    const double t0 = zero_now();
    zero_status s = zero_comm_all_gather(e->ctrl, rec, recs, nrec, ZERO_DTYPE_INT64);
    zero__eng_waited(e, "exact norm", t0);
    if (s != ZERO_OK) {
        zero__buf_put(e, recs);
        free(all);
        return zero__eng_fail(e, ZERO_ERR_COMM, "exact norm: all-gather failed: %s", zero_comm_last_error(e->ctrl));
    }
    memset(all, 0, sizeof *all);
    int any_bad = 0;
    for (int r = 0; r < e->world; r++) {
        const int64_t *x = recs + nrec * (size_t)r;
        any_bad |= x[0] != 0;
        for (int k = 0; k < 256; k++)
            all->b[k] += ((unsigned __int128)(uint64_t)x[1 + 2 * k] << 64) | (uint64_t)x[2 + 2 * k];
    }
    *overflow = any_bad;
    *sumsq = zero__dk_sq_value(all);
    zero__buf_put(e, recs);
    free(all);
    return ZERO_OK;
}
