/* Deterministic mode (zero_extensions.deterministic): gradients summed in fixed point and the
 * gradient norm summed exactly, so that the step is bitwise the same for any world size, stage
 * and offload.
 *
 * Every micro-batch is one atom (docs/ENGINE.md §11). Its fp32 gradient is not added as floats:
 * each element is rounded once onto its block's grid (a multiple of 2^e, e per block of
 * ZERO_DQ_BLOCK elements, the same on every rank) and added as an int32. Integer sums are
 * associative, so the sum depends only on the multiset of atoms, whatever their order, grouping
 * or rank; ranks combine them with an int32 SUM, and the step converts each sum once to fp32.
 * A block's grid comes from the previous step: from its "mass" (the sum over the atoms of the
 * block's largest |q|, which bounds every sum of the block), with GROWTH bits of room, so the
 * accumulator is the gradient buffer itself (fp32 training; a transient int32 buffer in half
 * precision): no wider type. When a step's contributions outgrow their grid (a block's mass
 * reaches 2^31; the first step always: no grid yet), every rank learns it (the seen bytes and
 * masses are combined over the ranks, so the verdict is the same everywhere), the grids are set
 * from what was seen, nothing
 * is updated, and the step reports `redo`: the program computes the same atoms again, which now
 * fit. The grids are part of the run's state: checkpoints save them (save.c). The kernels, with
 * their scalar references, are in determ_kernels.c. */
#include "engine/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ATOMS   (1 << 20) /* world * gradient_accumulation_steps at most: a mass stays below 2^63 */
#define GROWTH      3         /* bits a block's mass may grow by from one step to the next */
#define MASS_LIMIT  ((uint64_t)1 << 31)
#define REFINE_EVERY 8 /* a grid refines by one bit at most every REFINE_EVERY steps */
#define FLOOR        4 /* no block quantizes finer than its unit's coarsest grid by more than FLOOR bits */
#define CHUNK       (1 << 14)
#define CONVERT_TMP (1u << 18) /* half precision: elements the step converts at a time, at most */

uint64_t zero__det_blocks(uint64_t n) { return (n + ZERO_DQ_BLOCK - 1) / ZERO_DQ_BLOCK; }

/* Headroom bits: 1 + ceil(log2(atoms)), for a block without a usable mass: atoms * 2^(31 - L)
 * <= 2^30. */
int zero__det_headroom(const zero_engine *e) {
    const int64_t n = (int64_t)e->world * e->cfg.grad_accum;
    int L = 1;
    while (((int64_t)1 << (L - 1)) < n) L++;
    return L;
}

static int bit_length(uint64_t v) { return v ? 64 - __builtin_clzll(v) : 0; }

static int clamp_grid(int g) { return g < ZERO_DQ_EMIN ? ZERO_DQ_EMIN : g; }

/* The grid a block needs for this step's contributions (before the room for growth): from its
 * mass where its grid is set and the mass is below 2^31 (mass < 2^m: the grid 2^(e + m - 31)
 * keeps it below 2^31), else from its largest field f (every atom's contributions are below
 * 2^(f - 126): L bits of headroom hold the sum of every atom's). Above ZERO_DQ_EMAX no grid
 * holds them. */
static int grid_needed(int g, int f, uint64_t mass, int L) {
    if (g != ZERO_DQ_UNSET && mass && mass < MASS_LIMIT) return g + bit_length(mass) - 31;
    return f - 126 + L - 31;
}

void zero__det_clear_grids(eunit *u) {
    memset(u->dgrid, ZERO_DQ_UNSET, (size_t)zero__det_blocks(u->padded));
    u->dfloor = ZERO_DQ_UNSET;
}

void zero__det_set_floor(eunit *u) {
    const uint64_t nb = zero__det_blocks(u->padded);
    int coarsest = ZERO_DQ_UNSET;
    for (uint64_t b = 0; b < nb; b++)
        if (u->dgrid[b] > coarsest) coarsest = u->dgrid[b];
    u->dfloor = coarsest == ZERO_DQ_UNSET ? ZERO_DQ_UNSET : clamp_grid(coarsest - FLOOR);
}

/* The accumulator: fp32 training sums in the persistent gradient buffer itself (whole at stages
 * 0-1, the shard at 2-3; zeroed after every step); half precision in a transient int32 buffer of
 * the same elements. */
static int32_t *acc_of(zero_engine *e, eunit *u) {
    if (e->wdt == ZERO_DTYPE_FP32 && !e->dev) return (int32_t *)u->grads; /* on a device: host sums, as in half */
    if (!u->dacc) u->dacc = zero__buf_get(e, (size_t)u->v.gelems * 4, 1);
    return u->dacc;
}

/* The step's seen bytes and masses of u, zeroed at the unit's first atom: 0 when out of memory. */
static int marks_of(zero_engine *e, eunit *u) {
    const size_t nb = (size_t)zero__det_blocks(u->padded);
    if (!u->dseen) u->dseen = zero__buf_get(e, nb, 1);
    if (!u->dmass) u->dmass = zero__buf_get(e, nb * 8, 1);
    return u->dseen && u->dmass;
}

static zero_status no_mem(zero_engine *e, const eunit *u) {
    return zero__eng_fail(e, ZERO_ERR_NOMEM, "'%s': out of memory for the deterministic gradient accumulator", u->name);
}

/* Elements [0, n) of g onto u's grids into dst (add) or in place, on the engine's threads in
 * chunks of whole blocks: every block is independent, so the split does not change a bit. */
static void quantize(eunit *u, const float *g, int32_t *dst, uint64_t n, int add) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
    for (int64_t c = 0; c < (int64_t)n; c += CHUNK) {
        const uint64_t k = (uint64_t)((int64_t)n - c < CHUNK ? (int64_t)n - c : CHUNK);
        zero__dq_quantize(g + c, dst + c, (uint64_t)c, k, u->dgrid, u->dfloor, u->dseen, u->dmass, add);
    }
}

zero_status zero__det_fold(zero_engine *e, eunit *u, const float *g) {
    if (!marks_of(e, u)) return no_mem(e, u);
    int32_t *acc = acc_of(e, u);
    if (!acc) return no_mem(e, u);
    if (!e->own.reduce_each_mb) { /* kept whole: summed over the ranks once, at the step */
        if (g) quantize(u, g, acc, u->numel, 1);
        return ZERO_OK;
    }
    /* gradients sharded: this atom's sum over the ranks lands in the owned shard now, so only the
     * shard persists (every rank reduces, with or without a gradient); quantized in place */
    int32_t *t = (int32_t *)g;
    if (g) quantize(u, g, t, u->numel, 0);
    else if (!(t = zero__buf_get(e, (size_t)u->padded * 4, 1))) return no_mem(e, u);
    zero_status s = zero__ctrl_exchange(e, CTRL_REDUCE, (int)(u - e->units), 0, 0);
    if (s == ZERO_OK && e->world > 1) {
        const double t0 = zero_now();
        s = zero_comm_reduce_scatter(e->data, t, t + u->offset, (size_t)u->shard, ZERO_DTYPE_INT32, ZERO_OP_SUM);
        zero__eng_waited(e, "reduce-scatter (deterministic)", t0);
        if (s != ZERO_OK)
            s = zero__eng_fail(e, ZERO_ERR_COMM, "reduce-scatter of unit '%s' failed: %s", u->name,
                               zero_comm_last_error(e->data));
    }
    if (s == ZERO_OK) {
        const int32_t *mine = t + u->offset;
        for (uint64_t i = 0; i < u->shard; i++) acc[i] = (int32_t)((uint32_t)acc[i] + (uint32_t)mine[i]);
    }
    if (!g) zero__buf_put(e, t);
    return s;
}

/* Every rank's seen bytes and masses of u: their MAX and SUM over the ranks, in place. */
static zero_status marks_everywhere(zero_engine *e, eunit *u) {
    if (!marks_of(e, u)) return no_mem(e, u);
    if (e->world == 1) return ZERO_OK;
    const size_t nb = (size_t)zero__det_blocks(u->padded);
    const double t0 = zero_now();
    zero_status s = zero_comm_all_reduce(e->data, u->dseen, u->dseen, nb, ZERO_DTYPE_UINT8, ZERO_OP_MAX);
    if (s == ZERO_OK) s = zero_comm_all_reduce(e->data, u->dmass, u->dmass, nb, ZERO_DTYPE_INT64, ZERO_OP_SUM);
    zero__eng_waited(e, "deterministic grids", t0);
    if (s != ZERO_OK)
        return zero__eng_fail(e, ZERO_ERR_COMM, "all-reduce of unit '%s' failed: %s", u->name, zero_comm_last_error(e->data));
    return ZERO_OK;
}

/* The verdict on u's blocks (the same on every rank: from the global seen bytes and masses). A
 * block whose contributions are too large for any grid is marked as an Inf or NaN would be (the
 * step is then skipped as an overflow); *outgrown when a block's sums may have left int32 (its
 * mass reached 2^31, or a contribution was clamped) or it has no grid yet. */
static void verdict(const zero_engine *e, eunit *u, int *nan, int *outgrown) {
    const int L = zero__det_headroom(e);
    const uint64_t nb = zero__det_blocks(u->padded);
    for (uint64_t b = 0; b < nb; b++) {
        const int f = u->dseen[b];
        if (f == ZERO_DQ_NAN) *nan = 1;
        if (f == 0 || f == ZERO_DQ_NAN) continue;
        const uint64_t m = u->dmass[b];
        const int g = zero__dq_grid(u->dgrid[b], u->dfloor);
        if (grid_needed(g, f, m, L) > ZERO_DQ_EMAX) {
            u->dseen[b] = ZERO_DQ_NAN;
            *nan = 1;
        } else if (g == ZERO_DQ_UNSET || m >= MASS_LIMIT) {
            *outgrown = 1;
        }
    }
}

/* The next step's grids of u from this step's seen bytes and masses. A block that saw something
 * gets the grid it needed with GROWTH bits of room; a coarser grid is taken at once, a finer one
 * by one bit every REFINE_EVERY steps (e->step: the same on every rank, and saved), so that a
 * block keeps room for what it held in recent steps; a block that saw nothing refines then too
 * (its grid forgets old values). The unit's floor follows its coarsest own grid, FLOOR bits
 * below: a block quantizes with the coarser of the two, and a block that never saw anything (a
 * row of a rare token, the padding: the same on every world size, as none has a grid of its
 * own) with the floor, so a block whose values jump seldom outgrows its grid. Measured:
 * docs/BENCHMARKS.md, "Deterministic mode". */
static void regrid(const zero_engine *e, eunit *u) {
    const int L = zero__det_headroom(e);
    const uint64_t nb = zero__det_blocks(u->padded);
    const int refine = e->step % REFINE_EVERY == 0;
    for (uint64_t b = 0; b < nb; b++) {
        const int f = u->dseen[b], old = u->dgrid[b];
        if (f != 0 && f != ZERO_DQ_NAN) {
            int g = clamp_grid(grid_needed(zero__dq_grid(u->dgrid[b], u->dfloor), f, u->dmass[b], L) + GROWTH);
            if (old != ZERO_DQ_UNSET && g < old) g = refine ? old - 1 : old;
            u->dgrid[b] = (int8_t)(g > ZERO_DQ_EMAX ? ZERO_DQ_EMAX : g);
        } else if (f == 0 && refine && old != ZERO_DQ_UNSET) {
            u->dgrid[b] = (int8_t)clamp_grid(old - 1);
        }
    }
    zero__det_set_floor(u);
}

/* Frees the step's transients of u. */
static void drop_marks(zero_engine *e, eunit *u) {
    zero__buf_put(e, u->dacc);
    zero__buf_put(e, u->dseen);
    zero__buf_put(e, u->dmass);
    u->dacc = NULL;
    u->dseen = NULL;
    u->dmass = NULL;
}

/* One unit at the step: its sum over the ranks (kept whole: now; sharded: already made atom by
 * atom), converted once into the owned gradient (working dtype). */
static zero_status reduce_unit(zero_engine *e, eunit *u, float *tmp, uint64_t tmp_n) {
    int32_t *acc = acc_of(e, u);
    if (!acc) return no_mem(e, u);
    if (!e->own.reduce_each_mb) {
        zero_status s = zero__ctrl_exchange(e, CTRL_REDUCE, (int)(u - e->units), 0, 0);
        if (s == ZERO_OK && e->world > 1) {
            const double t0 = zero_now();
            if (e->own.update_whole)
                s = zero_comm_all_reduce(e->data, acc, acc, (size_t)u->padded, ZERO_DTYPE_INT32, ZERO_OP_SUM);
            else
                s = zero_comm_reduce_scatter(e->data, acc, acc + u->offset, (size_t)u->shard, ZERO_DTYPE_INT32,
                                             ZERO_OP_SUM);
            zero__eng_waited(e, e->own.update_whole ? "all-reduce (deterministic)" : "reduce-scatter (deterministic)", t0);
            if (s != ZERO_OK)
                s = zero__eng_fail(e, ZERO_ERR_COMM, "reduction of unit '%s' failed: %s", u->name,
                                   zero_comm_last_error(e->data));
        }
        if (s != ZERO_OK) return s;
    }
    /* the update range [lo, hi), a chunk at a time (fp32: in place, the sums are the gradient buffer) */
    const eview *v = &u->v;
    const uint64_t base = e->own.reduce_each_mb ? u->offset : 0, step = tmp ? tmp_n : CHUNK;
    for (uint64_t c = v->lo; c < v->hi; c += step) {
        const uint64_t n = v->hi - c < step ? v->hi - c : step;
        float *out = tmp ? tmp : (float *)v->grad + (c - v->lo); /* on a device always tmp */
        const int64_t ch = 1 << 12;
#pragma omp parallel for schedule(static) if (n > (1u << 16))
        for (int64_t k = 0; k < (int64_t)n; k += ch) {
            const uint64_t m = (uint64_t)((int64_t)n - k < ch ? (int64_t)n - k : ch);
            zero__dq_convert(acc + (c - base) + (uint64_t)k, out + k, c + (uint64_t)k, m, u->dgrid, u->dfloor,
                             u->dseen);
        }
        if (tmp) {
            zero_status s = zero__x_store(e, zero__wptr(e, v->grad, c - v->lo), e->wdt, tmp, n);
            if (s != ZERO_OK) return s;
        }
    }
    return ZERO_OK;
}

zero_status zero__det_reduce_all(zero_engine *e, int *redo) {
    *redo = 0;
    if ((int64_t)e->world * e->cfg.grad_accum > MAX_ATOMS)
        return zero__eng_fail(
            e, ZERO_ERR_UNSUPPORTED,
            "deterministic: world * gradient_accumulation_steps = %lld: at most %d atoms per step are supported",
            (long long)e->world * (long long)e->cfg.grad_accum, MAX_ATOMS);
    zero_status s = ZERO_OK;
    int nan = 0, outgrown = 0;
    for (int i = 0; i < e->nunits && s == ZERO_OK; i++) {
        eunit *u = &e->units[i];
        if (!u->numel) continue;
        if (u->gscratch && e->own.reduce_each_mb) { /* as in the default mode: a caller error */
            s = zero__eng_fail(e, ZERO_ERR_STATE, "step: unit '%s' has a gradient that was never passed to grad_ready",
                               u->name);
            break;
        }
        if (u->gscratch) { /* grad() without grad_ready: still counts, as in the default mode */
            s = zero__det_fold(e, u, u->gscratch);
            zero__buf_put(e, u->gscratch);
            u->gscratch = NULL;
        }
        if (s == ZERO_OK && (s = marks_everywhere(e, u)) == ZERO_OK) verdict(e, u, &nan, &outgrown);
    }
    /* half precision converts through an fp32 chunk: 2^18 elements, or the largest update range */
    float *tmp = NULL;
    uint64_t tmp_n = 1;
    for (int i = 0; i < e->nunits; i++) {
        const uint64_t n = e->units[i].v.hi - e->units[i].v.lo;
        if (n > tmp_n) tmp_n = n;
    }
    if (tmp_n > CONVERT_TMP) tmp_n = CONVERT_TMP;
    if (s == ZERO_OK && !(outgrown && !nan) && (e->wdt != ZERO_DTYPE_FP32 || e->dev) && !(tmp = zero__buf_get(e, tmp_n * 4, 0)))
        s = zero__eng_fail(e, ZERO_ERR_NOMEM, "step: out of memory");
    for (int i = 0; i < e->nunits && s == ZERO_OK; i++) {
        eunit *u = &e->units[i];
        if (!u->numel) continue;
        if (!(outgrown && !nan)) s = reduce_unit(e, u, tmp, tmp_n);
        regrid(e, u);
    }
    zero__buf_put(e, tmp);
    for (int i = 0; i < e->nunits; i++) {
        eunit *u = &e->units[i];
        u->reduced_step = 0;
        u->ready_mb = -1;
        zero__buf_put(e, u->gscratch);
        u->gscratch = NULL;
        /* a redo (or a failure) drops the sums: the persistent buffer is zeroed */
        if ((s != ZERO_OK || (outgrown && !nan)) && e->wdt == ZERO_DTYPE_FP32 && !e->dev && u->grads)
            memset(u->grads, 0, (size_t)u->v.gelems * 4);
        drop_marks(e, u);
    }
    *redo = s == ZERO_OK && outgrown && !nan;
    return s;
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
        void *host = NULL; /* on a device: the owned gradient's host copy */
        if (n > 0 && zero__dev_is(e, g)) {
            host = zero__buf_get(e, (size_t)n * e->wsize, 0);
            const zero_status cs = host ? zero__x_copy(e, host, g, (size_t)n * e->wsize)
                                        : zero__eng_fail(e, ZERO_ERR_NOMEM, "step: out of memory");
            if (cs != ZERO_OK) {
                zero__buf_put(e, host);
                zero__buf_put(e, recs);
                free(all);
                return cs;
            }
            g = host;
        }
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
        zero__buf_put(e, host);
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
