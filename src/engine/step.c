/* The optimizer step: wait for the reductions, compute the global gradient norm and overflow
 * flag over the owned shards (summed in rank order, so every rank gets the same numbers),
 * update the loss scale, clip, run the optimizer on this rank's shard with the fused write-back
 * of the working copy (under NVMe offload: tile by tile through the pool, offload.c), and
 * all-gather the working parameters (stages 1-2), each unit's as soon as its update is done. */
#include "engine/internal.h"
#include "quant/internal.h"

#include <math.h>
#include <string.h>

#define GRAD_CHUNK 16384 /* elements of half-precision gradient converted to fp32 at a time */

/* The gradient of the rank's partition slice (what its part of the norm sums): `n` working-dtype
 * elements starting at *g. */
static void owned_grads(const zero_engine *e, const eunit *u, void **g, uint64_t *n) {
    const eview *v = &u->v;
    *g = zero__wptr(e, v->grad, v->slo - v->lo);
    *n = v->shi - v->slo;
}

/* Σ g² of n working-dtype elements into *sumsq: blocks of SUMSQ_BLOCK elements summed in parallel
 * (zero__sumsq, vectorized), their sums added in block order, so the figure does not depend on
 * the thread count; a NaN or infinity sets *overflow. */
enum { SUMSQ_BLOCK = 1 << 15, SUMSQ_BATCH = 64 };
static zero_status sum_squares(zero_engine *e, const void *g, uint64_t n, double *sumsq, int *overflow) {
    const size_t es = zero_dtype_size(e->wdt);
    const uint64_t nblocks = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    double acc = 0;
    if (zero__dev_is(e, g)) { /* the blocks' sums on the device, added here in block order */
        double *part = zero__buf_get(e, (size_t)(nblocks ? nblocks : 1) * sizeof(double), 0);
        if (!part) return zero__eng_fail(e, ZERO_ERR_NOMEM, "step: out of memory");
        zero_status s = zero__x_sumsq(e, g, n, SUMSQ_BLOCK, part);
        for (uint64_t k = 0; k < nblocks && s == ZERO_OK; k++) acc += part[k];
        zero__buf_put(e, part);
        *sumsq += acc;
        *overflow |= !isfinite(acc);
        return s;
    }
    for (uint64_t b0 = 0; b0 < nblocks; b0 += SUMSQ_BATCH) {
        double part[SUMSQ_BATCH];
        const int nb = (int)(nblocks - b0 < SUMSQ_BATCH ? nblocks - b0 : SUMSQ_BATCH);
#pragma omp parallel for schedule(static) if (nb > 1)
        for (int k = 0; k < nb; k++) {
            const uint64_t lo = (b0 + (uint64_t)k) * SUMSQ_BLOCK, cnt = n - lo < SUMSQ_BLOCK ? n - lo : SUMSQ_BLOCK;
            part[k] = zero__sumsq(e->wdt, (const char *)g + lo * es, (size_t)cnt, ZERO_IMPL_AUTO);
        }
        for (int k = 0; k < nb; k++) acc += part[k];
    }
    *sumsq += acc;
    *overflow |= !isfinite(acc);
    return ZERO_OK;
}

/* Runs the optimizer on unit elements [lo, hi) (unit coordinates) of the owned slices, with
 * `base` the unit element that index 0 of master/states/grad/out corresponds to. */
static zero_status update_range(zero_engine *e, eunit *u, const zero_optim_hparams *h, uint64_t lo, uint64_t hi,
                                uint64_t base, float *master, float *s0, float *s1, void *grad, void *out, float gscale,
                                float *tmp, zero__upl *up) {
    /* slice by slice: the flags (decay) are per parameter */
    for (int k = 0; k < u->v.nslices; k++) {
        const eslice *sl = &u->v.slices[k];
        uint64_t a = sl->lo > lo ? sl->lo : lo;
        uint64_t b = sl->hi < hi ? sl->hi : hi;
        if (a >= b) continue;
        float decay = (sl->flags & ZERO_PARAM_NO_DECAY) ? 0.0f : 1.0f;
        if (zero__dev_is(e, master)) { /* the optimizer's kernel on the device */
            const uint64_t k = a - base;
            zero_status s = zero__x_optim(e, h, master + k, s0 ? s0 + k : NULL, s1 ? s1 + k : NULL, zero__wptr(e, grad, k),
                                          gscale, decay, b - a, out ? zero__wptr(e, out, k) : NULL);
            if (s != ZERO_OK) return s;
            continue;
        }
        /* on the host (the states in host memory: a host rank, or ZeRO-Offload on a device, whose
         * gradient is in pinned memory and whose updated working copy goes up a chunk at a time,
         * each copy running while the host computes the next chunk) */
        const int dout = out && zero__dev_is(e, out);
        for (uint64_t c = a; c < b; c += tmp ? GRAD_CHUNK : (b - a)) {
            uint64_t n = b - c;
            if (tmp && n > GRAD_CHUNK) n = GRAD_CHUNK;
            uint64_t k = c - base;
            const float *gf;
            zero_status s = ZERO_OK;
            if (tmp) {
                s = zero__x_load(e, tmp, zero__wptr(e, grad, k), e->wdt, n);
                gf = tmp;
            } else {
                gf = (const float *)grad + k;
            }
            void *o = out && !dout ? zero__wptr(e, out, k) : NULL;
            if (s == ZERO_OK && dout &&
                (s = zero__upl_take(e, up, out, zero__wptr(e, out, k), (size_t)(n * e->wsize), &o)) != ZERO_OK)
                return s; /* recorded */
            if (s == ZERO_OK)
                s = zero_optim_step(h, e->step + 1, master + k, s0 ? s0 + k : NULL, s1 ? s1 + k : NULL, gf, gscale, decay, n,
                                    o, e->wdt, ZERO_IMPL_AUTO);
            if (s != ZERO_OK) return zero__eng_fail(e, s, "optimizer step on unit '%s' failed", u->name);
        }
    }
    return ZERO_OK;
}

/* Params whole, update sharded (stages 1-2): every rank gets the updated working parameters of
 * the others, unit by unit. Started as soon as the unit's update is done, so that it travels
 * while the next units update; every started all-gather is waited for in regather_wait. */
static zero_status regather_start(zero_engine *e, eunit *u) {
    const eview *v = &u->v;
    if (u->numel == 0) return ZERO_OK; /* nothing trainable: nothing changed */
    u->reduce_t0 = zero_now();
    /* every unit's all-gather may be in flight at once: blocking on a device (zero__x_async) */
    zero_status s = zero__x_all_gather(e, e->data, zero__wptr(e, v->wp, v->slo - v->wlo), v->wp, u->shard, e->wdt,
                                       zero__x_async(e, &u->reduce));
    zero__eng_waited(e, "all-gather (updated parameters, issue)", u->reduce_t0);
    if (s != ZERO_OK)
        return zero__eng_fail(e, ZERO_ERR_COMM, "all-gather of unit '%s' failed: %s", u->name, zero_comm_last_error(e->data));
    return ZERO_OK;
}

static zero_status regather_wait(zero_engine *e) {
    zero_status s = ZERO_OK;
    for (int i = 0; i < e->nunits; i++) {
        zero_status w = zero__eng_wait(e, &e->units[i].reduce, e->units[i].reduce_t0, "all-gather (updated parameters)");
        if (s == ZERO_OK) s = w;
    }
    return s;
}

/* 8-bit states (docs/QUANT.md): n elements of the update range from unit element `base` (a block's
 * first: the update range or an NVMe tile), a chunk of whole blocks at a time, their moments
 * decoded to fp32, the step of update_range on them, coded again against their new absmax. Every
 * block lies in one rank's range (the alignment is a multiple of the blocks), and the tensor's
 * last, partial block is the last of the range that ends at the unit's end: the same codes for
 * every world size and stage, in RAM or through the NVMe tiles. */
#define Q8_CHUNK ((uint64_t)1 << 16)

static zero_status update_q8(zero_engine *e, eunit *u, const zero_optim_hparams *h, uint64_t base, uint64_t n,
                             float *master, const zero_q8_state *q, void *grad, void *work, float gscale, float *tmp,
                             zero__upl *up) {
    const float *ms = zero__quant_map(ZERO__QMAP_SIGNED), *vs = zero__quant_map(ZERO__QMAP_UNSIGNED);
    /* states on the device (all on it): decoded into device buffers, stepped and coded by kernels */
    const int dev = zero__dev_is(e, q->m);
    float *m = dev ? zero__dbuf_get(e, Q8_CHUNK * 4, 0) : zero__buf_get(e, Q8_CHUNK * 4, 0);
    float *s = dev ? zero__dbuf_get(e, Q8_CHUNK * 4, 0) : zero__buf_get(e, Q8_CHUNK * 4, 0);
    zero_status st = m && s ? ZERO_OK : zero__eng_fail(e, ZERO_ERR_NOMEM, "step: out of memory");
    for (uint64_t k = 0; k < n && st == ZERO_OK; k += Q8_CHUNK) {
        const uint64_t c = n - k < Q8_CHUNK ? n - k : Q8_CHUNK, b = k / ZERO_QUANT_Q8_BLOCK;
        if (dev) {
            st = zero__x_q8_load(e, q->m + k, q->m_absmax + b, ZERO__QMAP_SIGNED, ZERO_QUANT_Q8_BLOCK, c, m);
            if (st == ZERO_OK) st = zero__x_q8_load(e, q->v + k, q->v_absmax + b, ZERO__QMAP_UNSIGNED, ZERO_QUANT_Q8_BLOCK, c, s);
        } else {
            zero_dequant_blockwise(q->m + k, q->m_absmax + b, ms, ZERO_QUANT_Q8_BLOCK, 0, c, m);
            zero_dequant_blockwise(q->v + k, q->v_absmax + b, vs, ZERO_QUANT_Q8_BLOCK, 0, c, s);
        }
        if (st == ZERO_OK)
            st = update_range(e, u, h, base + k, base + k + c, base + k, master + k, m, s, zero__wptr(e, grad, k),
                              work ? zero__wptr(e, work, k) : NULL, gscale, tmp, up);
        if (st != ZERO_OK) break;
        if (dev) {
            st = zero__x_q8_store(e, m, ZERO__QMAP_SIGNED, ZERO_QUANT_Q8_BLOCK, c, q->m + k, q->m_absmax + b);
            if (st == ZERO_OK) st = zero__x_q8_store(e, s, ZERO__QMAP_UNSIGNED, ZERO_QUANT_Q8_BLOCK, c, q->v + k, q->v_absmax + b);
        } else {
            zero_quant_blockwise(m, c, ZERO_QUANT_Q8_BLOCK, ms, q->m + k, q->m_absmax + b);
            zero_quant_blockwise(s, c, ZERO_QUANT_Q8_BLOCK, vs, q->v + k, q->v_absmax + b);
        }
    }
    if (dev) {
        zero__dbuf_put(e, m);
        zero__dbuf_put(e, s);
    } else {
        zero__buf_put(e, m);
        zero__buf_put(e, s);
    }
    return st;
}

static zero_status optimizer_update(zero_engine *e, const zero_optim_hparams *h, float gscale) {
    /* host steps: half-precision gradients widen into tmp; under ZeRO-Offload on a device the
     * working copy goes up through the upload buffers */
    const int half = e->wdt != ZERO_DTYPE_FP32, offl = e->dev && e->own.k[EK_OPTIM].tier == TIER_PINNED;
    float *tmp = NULL;
    zero__upl up;
    zero__upl_open(e, &up, offl ? ZERO__UPL_BYTES : 0);
    zero_status s = ZERO_OK;
    if (half || offl) {
        tmp = zero__buf_get(e, GRAD_CHUNK * 4, 0);
        if (!tmp) {
            (void)zero__upl_close(e, &up);
            return zero__eng_fail(e, ZERO_ERR_NOMEM, "step: out of memory");
        }
    }
    for (int i = 0; i < e->nunits && s == ZERO_OK; i++) {
        eunit *u = &e->units[i];
        const eview *v = &u->v;
        if (u->numel == 0) continue; /* frozen parameters only */
        s = u->q8on ? update_q8(e, u, h, v->lo, v->hi - v->lo, v->master, &v->q8, v->grad, v->work, gscale, tmp, &up)
                    : update_range(e, u, h, v->lo, v->hi, v->lo, v->master, v->state[0], v->state[1], v->grad, v->work,
                                   gscale, tmp, &up);
        /* the unit's last chunk goes up before its all-gather reads it (on the same stream) */
        if (s == ZERO_OK && e->own.regather && (s = zero__upl_flush(e, &up)) == ZERO_OK)
            s = regather_start(e, u); /* overlaps the next units' update */
    }
    zero__buf_put(e, tmp);
    const zero_status c = zero__upl_close(e, &up);
    return s != ZERO_OK ? s : c;
}

/* Under NVMe offload: the same kernel on the same numbers, one tile at a time, the tile's master
 * and states in the pool buffer (or in RAM, for what is not offloaded). */
typedef struct tile_step {
    const zero_optim_hparams *h;
    float gscale;
    float *tmp;
    zero__upl up;
} tile_step;

zero_status zero__step_tile(zero_engine *e, etile *x, void *ctx) {
    tile_step *t = ctx;
    eunit *u = x->u;
    void *g = zero__wptr(e, u->v.grad, x->first);
    const uint64_t base = u->v.lo + x->first;
    if (u->q8on) return update_q8(e, u, t->h, base, x->n, x->master, &x->q8, g, x->work, t->gscale, t->tmp, &t->up);
    return update_range(e, u, t->h, base, base + x->n, base, x->master, x->s0, x->s1, g, x->work, t->gscale, t->tmp, &t->up);
}

static zero_status offload_update(zero_engine *e, const zero_optim_hparams *h, float gscale) {
    tile_step t = {.h = h, .gscale = gscale};
    /* on a device: the working copy goes up through the upload buffers (where it is on the device) */
    zero__upl_open(e, &t.up, ZERO__UPL_BYTES);
    zero_status s = ZERO_OK;
    if (e->wdt != ZERO_DTYPE_FP32 || e->dev) {
        t.tmp = zero__buf_get(e, GRAD_CHUNK * 4, 0);
        if (!t.tmp) {
            (void)zero__upl_close(e, &t.up);
            return zero__eng_fail(e, ZERO_ERR_NOMEM, "step: out of memory");
        }
    }
    const int half = zero__work_apart(e);
    /* everything the kernel reads and writes; the half working copy is only written */
    eopass p = {0, e->nunits, 0, UINT64_MAX, ARR_MASTER | ARR_S0 | ARR_S1, ARR_MASTER | ARR_S0 | ARR_S1 | (half ? ARR_WORK : 0u),
                zero__step_tile, &t};
    s = zero__off_run(e, &p);
    zero__buf_put(e, t.tmp);
    const zero_status c = zero__upl_close(e, &t.up);
    return s != ZERO_OK ? s : c;
}

/* The step is over (advance), or is to be computed again (a deterministic redo: the sums were
 * dropped already, nothing was updated). */
static void end_step(zero_engine *e, int advance) {
    for (int i = 0; i < e->nunits && advance; i++) {
        eunit *u = &e->units[i];
        if (u->grads) (void)zero__x_zero(e, u->grads, (size_t)(u->v.gelems * e->wsize)); /* a failure is the next sync's */
    }
    e->step += advance;
    e->steps_run += advance;
    e->mb = 0;
    e->mb_open = 0;
    e->recording = 0;
    e->cursor = 0;
}

zero_status zero_engine_step(zero_engine *e, zero_step_stats *stats) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    if (!e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "step: finalize the engine first");
    if (e->broken) return zero__eng_fail(e, ZERO_ERR_STATE, "step: the engine failed earlier; free it");
    double t0 = zero_now();
    zero_status s = zero__ctrl_exchange(e, CTRL_STEP, -1, 0, 0);
    if (s != ZERO_OK) return s;
    for (int i = 0; i < e->nunits; i++)
        if (e->units[i].gathers)
            return zero__eng_fail(e, ZERO_ERR_STATE, "step: unit '%s' is still gathered: release it first", e->units[i].name);
    const int mbs = e->mb + (e->mb_open ? 1 : 0);
    if (mbs != e->cfg.grad_accum)
        return zero__eng_fail(e, ZERO_ERR_STATE, "step after %d micro-batch(es): gradient_accumulation_steps is %lld", mbs,
                              (long long)e->cfg.grad_accum);
    if ((s = zero__gather_drain(e)) != ZERO_OK) return s;
    if ((s = zero__reduce_finish_all(e)) != ZERO_OK) return s;
    if (e->det_redo) { /* deterministic: the grids fit these atoms now; the program computes them again */
        e->det_redo = 0;
        end_step(e, 0);
        if (stats) {
            memset(stats, 0, sizeof *stats);
            stats->step = e->step;
            stats->lr = e->cfg.sched_enabled ? zero_sched_lr(&e->cfg.sched, e->cfg.optim.lr, e->step) : e->cfg.optim.lr;
            stats->grad_norm = NAN;
            stats->loss_scale = e->scaler.scale;
            stats->redo = 1;
            stats->comm_wait_ms = e->comm_wait * 1e3;
            stats->step_ms = (zero_now() - t0) * 1e3;
        }
        e->comm_wait = 0;
        return ZERO_OK;
    }

    double sumsq = 0;
    int overflow = 0;
    if (e->cfg.deterministic) { /* exact over every rank; the exchange below only checks divergence */
        if ((s = zero__det_norm(e, &sumsq, &overflow)) != ZERO_OK) return s;
        if ((s = zero__ctrl_exchange(e, CTRL_NORM, -1, 0, overflow)) != ZERO_OK) return s;
    }
    for (int i = 0; i < e->nunits && !e->cfg.deterministic; i++) {
        void *g;
        uint64_t n;
        if (!e->units[i].v.grad) continue; /* nothing trainable (or nothing owned) */
        owned_grads(e, &e->units[i], &g, &n);
        if ((s = sum_squares(e, g, n, &sumsq, &overflow)) != ZERO_OK) return s;
    }
    if (!e->cfg.deterministic) {
        if ((s = zero__ctrl_exchange(e, CTRL_NORM, -1, sumsq, overflow)) != ZERO_OK) return s;
        sumsq = 0;
        overflow = 0;
        for (int r = 0; r < e->world; r++) { /* rank order: the same sum on every rank */
            sumsq += e->ctrl_all[r].a;
            overflow |= e->ctrl_all[r].b != 0;
        }
    }
    const double scale = e->scaler.scale;
    const double inv = 1.0 / ((double)e->world * (double)e->cfg.grad_accum * scale);
    const double norm = sqrt(sumsq) * inv;
    const double lr = e->cfg.sched_enabled ? zero_sched_lr(&e->cfg.sched, e->cfg.optim.lr, e->step) : e->cfg.optim.lr;
    zero_loss_scaler_update(&e->scaler, overflow || !isfinite(norm));
    int skipped = overflow || !isfinite(norm);
    if (!skipped) {
        double coef = 1.0;
        if (e->cfg.gradient_clipping > 0 && norm > e->cfg.gradient_clipping)
            coef = e->cfg.gradient_clipping / (norm + 1e-6);
        zero_optim_hparams h = e->cfg.optim;
        h.lr = (float)lr;
        if (zero__off_on(e)) {
            /* Every rank learns whether every rank's disk held: the next collective must not
             * wait for a rank that stopped. A failed pass leaves the files half-updated. */
            s = zero__eng_agree(e, offload_update(e, &h, (float)(inv * coef)), "step: NVMe offload");
            if (s != ZERO_OK) {
                e->broken = 1;
                return s;
            }
            /* the pass ran over every unit's tiles: the all-gathers start once every rank's
             * disk has held (a rank that stopped mid-pass must not leave the others waiting) */
            for (int i = 0; e->own.regather && i < e->nunits && s == ZERO_OK; i++) s = regather_start(e, &e->units[i]);
            zero_status w = regather_wait(e);
            if (s == ZERO_OK) s = w;
        } else {
            s = optimizer_update(e, &h, (float)(inv * coef)); /* starts each unit's all-gather */
            zero_status w = regather_wait(e);
            if (s == ZERO_OK) s = w;
        }
        zero__sec_stale(e, NULL); /* hpZ: the next gather of each unit goes over the world */
        if (s != ZERO_OK) return s;
    }
    end_step(e, 1);
    if (stats) {
        stats->step = e->step;
        stats->lr = lr;
        stats->grad_norm = norm;
        stats->loss_scale = scale;
        stats->skipped = skipped;
        stats->redo = 0;
        stats->comm_wait_ms = e->comm_wait * 1e3;
        stats->step_ms = (zero_now() - t0) * 1e3;
    }
    e->comm_wait = 0;
    return ZERO_OK;
}

/* read_unit's offloaded master: tile by tile into the owned block of the gather buffer. */
static zero_status copy_master(zero_engine *e, etile *x, void *ctx) {
    (void)e;
    memcpy((float *)ctx + x->first, x->master, (size_t)x->n * 4);
    return ZERO_OK;
}

zero_status zero_engine_read_unit(zero_engine *e, int unit, float *dst) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    if (!e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "read_unit: finalize the engine first");
    if (unit < 0 || unit >= e->nunits || !dst)
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "read_unit: unit %d: expected 0..%d and a destination", unit,
                              e->nunits - 1);
    if (e->broken) return zero__eng_fail(e, ZERO_ERR_STATE, "read_unit: the engine failed earlier; free it");
    zero_status s = zero__ctrl_exchange(e, CTRL_READ, unit, 0, 0);
    if (s != ZERO_OK) return s;
    eunit *u = &e->units[unit];
    const eview *v = &u->v;
    /* the trainable part's masters, whole: held by every rank (stage 0) or all-gathered */
    float *tfull = NULL, *full = NULL;
    void *ffull = NULL, *fbuf = NULL;
    const int dev = zero__dev_is(e, v->master) || zero__dev_is(e, v->fp);
    if (u->numel && e->own.update_whole) {
        tfull = v->master;
        if (dev) { /* a host copy of the device's master */
            tfull = full = zero__buf_get(e, (size_t)u->padded * 4, 0);
            if (!full) return zero__eng_fail(e, ZERO_ERR_NOMEM, "read_unit '%s': out of memory", u->name);
            if ((s = zero__x_copy(e, full, v->master, (size_t)u->numel * 4)) != ZERO_OK) {
                zero__buf_put(e, full);
                return s;
            }
        }
    } else if (u->numel) {
        full = zero__buf_get(e, (size_t)u->padded * 4, 0);
        if (!full) return zero__eng_fail(e, ZERO_ERR_NOMEM, "read_unit '%s': out of memory", u->name);
        const float *mine;
        if (!v->master) { /* on NVMe */
            /* in place: this rank's block of `full` is the all-gather's input */
            float *block = full + (size_t)e->rank * u->shard;
            memset(block + u->valid, 0, (size_t)(u->shard - u->valid) * 4);
            zero_status q = zero__off_quiesce(e);
            eopass p = {unit, unit + 1, 0, UINT64_MAX, ARR_MASTER, 0, copy_master, block};
            if (q == ZERO_OK) q = zero__off_run(e, &p);
            if ((s = zero__eng_agree(e, q, "read_unit: NVMe offload")) != ZERO_OK) {
                zero__buf_put(e, full);
                return s;
            }
            mine = block;
        } else if (dev) { /* this rank's block of `full`, copied from the device: the all-gather's input */
            float *block = full + (size_t)e->rank * u->shard;
            memset(block + u->valid, 0, (size_t)(u->shard - u->valid) * 4);
            if ((s = zero__x_copy(e, block, v->master + (v->slo - v->lo), (size_t)u->valid * 4)) != ZERO_OK) {
                zero__buf_put(e, full);
                return s;
            }
            mine = block;
        } else {
            mine = v->master + (v->slo - v->lo);
        }
        s = zero_comm_all_gather(e->ctrl, mine, full, u->shard, ZERO_DTYPE_FP32);
        if (s != ZERO_OK) {
            zero__buf_put(e, full);
            return zero__eng_fail(e, ZERO_ERR_COMM, "read_unit '%s': all-gather failed: %s", u->name,
                                  zero_comm_last_error(e->ctrl));
        }
        tfull = full;
    }
    /* the frozen part, whole: held (stages 0-2) or all-gathered in its dtype (stage 3) */
    if (u->fnumel && e->own.k[EK_FROZEN].extent == EXT_WHOLE) {
        ffull = v->fp;
        if (dev) { /* a host copy of the device's frozen part */
            ffull = fbuf = zero__buf_get(e, (size_t)(u->fpadded * e->fsize), 0);
            s = fbuf ? zero__x_copy(e, fbuf, v->fp, (size_t)(u->fnumel * e->fsize)) : ZERO_ERR_NOMEM;
            if (s != ZERO_OK) {
                zero__buf_put(e, full);
                zero__buf_put(e, fbuf);
                return s == ZERO_ERR_NOMEM ? zero__eng_fail(e, s, "read_unit '%s': out of memory", u->name) : s;
            }
        }
    } else if (u->fnumel) {
        fbuf = zero__buf_get(e, (size_t)(u->fpadded * e->fsize), 0);
        const void *fmine = v->fp;
        const int fnvme = e->own.k[EK_FROZEN].tier == TIER_NVME;
        if (fbuf && (fnvme || dev)) { /* this rank's block, read from the parameter file or copied from
                                       * the device: the all-gather's input */
            char *block = (char *)fbuf + (size_t)e->rank * u->fshard * e->fsize;
            if (fnvme) {
                s = zero__foff_read(e, u, block, (size_t)(u->fshard * e->fsize));
            } else {
                memset(block, 0, (size_t)(u->fshard * e->fsize));
                s = zero__x_copy(e, block, v->fp, (size_t)(u->fvalid * e->fsize));
            }
            if (s != ZERO_OK) {
                zero__buf_put(e, full);
                zero__buf_put(e, fbuf);
                return s;
            }
            fmine = block;
        }
        s = fbuf ? zero_comm_all_gather(e->ctrl, fmine, fbuf, u->fshard, e->fdt) : ZERO_ERR_NOMEM;
        if (s != ZERO_OK) {
            zero__buf_put(e, full);
            zero__buf_put(e, fbuf);
            return s == ZERO_ERR_NOMEM ? zero__eng_fail(e, s, "read_unit '%s': out of memory", u->name)
                                       : zero__eng_fail(e, ZERO_ERR_COMM, "read_unit '%s': all-gather failed: %s", u->name,
                                                        zero_comm_last_error(e->ctrl));
        }
        ffull = fbuf;
    }
    s = ZERO_OK;
    if (!u->fnumel) memcpy(dst, tfull, (size_t)u->numel * 4);
    else s = zero__assemble_view(e, u, tfull, ZERO_DTYPE_FP32, ffull, dst); /* parameter by parameter, from its part */
    zero__buf_put(e, full);
    zero__buf_put(e, fbuf);
    return s;
}
