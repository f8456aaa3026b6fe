/* Gradients: hand the model a buffer to add into, and reduce each unit as soon as the model
 * declares it ready, so the reduction of one unit overlaps the backward of the next.
 *   stages 0-1: the persistent full gradient accumulates every micro-batch; the reduction
 *               (all-reduce in stage 0, reduce-scatter in stage 1) starts in the last one;
 *   stages 2-3: every micro-batch's gradient is reduce-scattered at once and added to the owned
 *               shard, so only the shard persists (plus at most two units in flight). */
#include "engine/internal.h"

#include <string.h>

#define MAX_INFLIGHT_SHARDED 2 /* stages 2-3: full-size gradient buffers alive at once */

/* The half-precision sums go through the host reduction kernel of src/common (the one the
 * shared-memory collectives use: fp32 accumulation, one rounding, SIMD where the CPU has it). */
void zero__wadd(zero_engine *e, void *dst, const void *src, uint64_t n) {
    const void *const srcs[2] = {dst, src};
    zero__reduce(e->wdt, 0, srcs, 2, dst, (size_t)n, 0, ZERO_IMPL_AUTO);
}

void zero__wadd_f32(zero_engine *e, void *dst, const float *src, uint64_t n) {
    zero__accumulate(e->wdt, dst, src, (size_t)n, ZERO_IMPL_AUTO);
}

/* Waits for u's reduction; stages 2-3 add the received shard into the persistent one. */
static zero_status complete(zero_engine *e, eunit *u) {
    const int ar = !e->own.reduce_each_mb && e->own.update_whole;
    zero_status s = zero__eng_wait(e, &u->reduce, u->reduce_t0, ar ? "all-reduce" : "reduce-scatter");
    if (s != ZERO_OK) return s;
    if (e->own.reduce_each_mb && u->grecv) { /* into the persistent shard */
        s = zero__x_add(e, u->grads, u->grecv, u->shard);
        zero__dbuf_put(e, u->grecv);
        zero__dbuf_put(e, u->gsend);
        u->grecv = u->gsend = NULL;
        if (s != ZERO_OK) return s;
    }
    /* drop u from the in-flight list */
    int k = 0;
    for (int i = 0; i < e->inflight_reductions; i++)
        if (&e->units[e->inflight[i]] != u) e->inflight[k++] = e->inflight[i];
    e->inflight_reductions = k;
    return ZERO_OK;
}

/* Grads kept whole: the step's one reduction of the accumulated gradient, in place. */
static zero_status start_reduction_whole(zero_engine *e, int unit) {
    eunit *u = &e->units[unit];
    zero_status s = zero__ctrl_exchange(e, CTRL_REDUCE, unit, 0, 0);
    if (s != ZERO_OK) return s;
    const double t0 = zero_now();
    u->reduce_t0 = t0;
    const int ar = e->own.update_whole;
    /* every unit's reduction may be in flight at once here: blocking on a device (zero__x_async) */
    if (ar) s = zero__x_all_reduce(e, u->grads, u->padded, zero__x_async(e, &u->reduce));
    else s = zero__x_reduce_scatter(e, u->grads, zero__wptr(e, u->grads, u->offset), u->shard, 0,
                                    zero__x_async(e, &u->reduce));
    zero__eng_waited(e, ar ? "all-reduce (issue)" : "reduce-scatter (issue)", t0);
    if (s != ZERO_OK)
        return zero__eng_fail(e, ZERO_ERR_COMM, "reduction of unit '%s' failed: %s", u->name, zero_comm_last_error(e->data));
    u->reduced_step = 1;
    e->inflight[e->inflight_reductions++] = unit;
    return ZERO_OK;
}

/* Grads kept as shards: this micro-batch's gradient is reduce-scattered at once. */
static zero_status start_reduction_shard(zero_engine *e, int unit) {
    eunit *u = &e->units[unit];
    zero_status s = zero__ctrl_exchange(e, CTRL_REDUCE, unit, 0, 0);
    if (s != ZERO_OK) return s;
    if (!u->gscratch) { /* the model produced no gradient for this unit: it contributes zeros */
        u->gscratch = zero__buf_get(e, (size_t)u->padded * 4, 1);
        if (!u->gscratch) return zero__eng_fail(e, ZERO_ERR_NOMEM, "grad_ready '%s': out of memory", u->name);
    }
    if (e->wdt == ZERO_DTYPE_FP32 && !e->dev) {
        u->gsend = u->gscratch;
    } else { /* in the working dtype, where the unit arrays are (on a device: converted on the host, copied over) */
        u->gsend = zero__dbuf_get(e, (size_t)(u->padded * e->wsize), 0);
        if (!u->gsend) return zero__eng_fail(e, ZERO_ERR_NOMEM, "grad_ready '%s': out of memory", u->name);
        s = zero__x_store(e, u->gsend, e->wdt, u->gscratch, u->padded);
        zero__buf_put(e, u->gscratch);
        u->gscratch = NULL;
        if (s != ZERO_OK) return s;
    }
    u->gscratch = NULL;
    u->grecv = zero__dbuf_get(e, (size_t)(u->shard * e->wsize), 0);
    if (!u->grecv) return zero__eng_fail(e, ZERO_ERR_NOMEM, "grad_ready '%s': out of memory", u->name);
    const double t0 = zero_now();
    u->reduce_t0 = t0;
    /* qgZ: the quantized reduce-scatter (zero_config.quant_grads; its config check keeps it at stages 2-3) */
    const size_t qblock = e->cfg.quant_grads && e->world > 1 ? (size_t)e->cfg.quant_grads_block : 0;
    s = zero__x_reduce_scatter(e, u->gsend, u->grecv, u->shard, qblock, &u->reduce);
    zero__eng_waited(e, "reduce-scatter (issue)", t0);
    if (s != ZERO_OK)
        return zero__eng_fail(e, ZERO_ERR_COMM, "reduce-scatter of unit '%s' failed: %s", u->name,
                              zero_comm_last_error(e->data));
    e->inflight[e->inflight_reductions++] = unit;
    while (e->inflight_reductions > MAX_INFLIGHT_SHARDED) {
        s = complete(e, &e->units[e->inflight[0]]);
        if (s != ZERO_OK) return s;
    }
    return ZERO_OK;
}

/* fp32 gradients kept whole accumulate in place: the model adds into the persistent gradient
 * itself (on a device, into a host copy of it). */
static int direct_grads(const zero_engine *e) {
    return !e->cfg.deterministic && !e->own.reduce_each_mb && e->wdt == ZERO_DTYPE_FP32;
}

/* The model's gradient of this micro-batch (u->gscratch) into the persistent one, where the
 * gradient is kept whole: added (half precision: it was zeroed), or copied back (fp32 on a
 * device: it was the persistent gradient's copy). */
static zero_status fold_scratch(zero_engine *e, eunit *u) {
    zero_status s = direct_grads(e) ? zero__x_copy(e, u->grads, u->gscratch, (size_t)u->padded * 4)
                                    : zero__x_accum_f32(e, u->grads, u->gscratch, u->numel);
    zero__buf_put(e, u->gscratch);
    u->gscratch = NULL;
    return s;
}

/* A unit with nothing trainable has no gradient and takes part in no reduction. */
static zero_status check_trainable(zero_engine *e, const eunit *u, const char *what) {
    if (u->numel) return ZERO_OK;
    return zero__eng_fail(e, ZERO_ERR_STATE, "%s '%s': every parameter of the unit is ZERO_PARAM_FROZEN: it has no gradient",
                          what, u->name);
}

float *zero_engine_grad(zero_engine *e, int unit) {
    if (!e || zero__eng_check_unit(e, unit, "grad") != ZERO_OK) return NULL;
    eunit *u = &e->units[unit];
    if (check_trainable(e, u, "grad") != ZERO_OK) return NULL;
    if (u->ready_mb == e->mb) {
        zero__eng_fail(e, ZERO_ERR_STATE,
                       "grad '%s': its gradient of micro-batch %d was already declared ready: call "
                       "zero_engine_micro_batch_done between micro-batches",
                       u->name, e->mb + 1);
        return NULL;
    }
    if (e->mb >= e->cfg.grad_accum) {
        zero__eng_fail(e, ZERO_ERR_STATE,
                       "grad '%s': micro-batch %d of a step with gradient_accumulation_steps = %lld: call step first",
                       u->name, e->mb + 1, (long long)e->cfg.grad_accum);
        return NULL;
    }
    e->mb_open = 1;
    if (direct_grads(e)) { /* the persistent whole gradient */
        if (u->reduced_step) {
            zero__eng_fail(e, ZERO_ERR_STATE, "grad '%s': its reduction for this step already started", u->name);
            return NULL;
        }
        if (!e->dev) return (float *)u->grads;
        if (!u->gscratch) { /* on a device: a host copy the model adds into, copied back at grad_ready */
            u->gscratch = zero__buf_get(e, (size_t)u->padded * 4, 0);
            if (!u->gscratch || zero__x_copy(e, u->gscratch, u->grads, (size_t)u->padded * 4) != ZERO_OK) {
                if (!u->gscratch) zero__eng_fail(e, ZERO_ERR_NOMEM, "grad '%s': out of memory", u->name);
                zero__buf_put(e, u->gscratch);
                u->gscratch = NULL;
                return NULL;
            }
        }
        return u->gscratch;
    }
    if (!u->gscratch) {
        u->gscratch = zero__buf_get(e, (size_t)u->padded * 4, 1);
        if (!u->gscratch) {
            zero__eng_fail(e, ZERO_ERR_NOMEM, "grad '%s': out of memory for %llu fp32 elements", u->name,
                           (unsigned long long)u->padded);
            return NULL;
        }
    }
    return u->gscratch;
}

zero_status zero_engine_grad_ready(zero_engine *e, int unit) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    zero_status s = zero__eng_check_unit(e, unit, "grad_ready");
    if (s != ZERO_OK) return s;
    eunit *u = &e->units[unit];
    if ((s = check_trainable(e, u, "grad_ready")) != ZERO_OK) return s;
    if (u->ready_mb == e->mb)
        return zero__eng_fail(e, ZERO_ERR_STATE,
                              "grad_ready '%s': already called in micro-batch %d: call zero_engine_micro_batch_done "
                              "between micro-batches",
                              u->name, e->mb + 1);
    if (e->mb >= e->cfg.grad_accum)
        return zero__eng_fail(e, ZERO_ERR_STATE,
                              "grad_ready '%s': micro-batch %d of a step with gradient_accumulation_steps = %lld: call step first",
                              u->name, e->mb + 1, (long long)e->cfg.grad_accum);
    e->mb_open = 1;
    u->ready_mb = e->mb;
    if (e->cfg.deterministic) { /* onto the grids now, summed over the ranks at the step (determ.c) */
        s = zero__det_fold(e, u, u->gscratch); /* NULL: no gradient, zeros (stages 2-3 still reduce) */
        zero__buf_put(e, u->gscratch);
        u->gscratch = NULL;
        return s;
    }
    if (!e->own.reduce_each_mb) {
        if (u->reduced_step)
            return zero__eng_fail(e, ZERO_ERR_STATE, "grad_ready '%s': its reduction for this step already started", u->name);
        if (u->gscratch && (s = fold_scratch(e, u)) != ZERO_OK) return s; /* this micro-batch's gradient */
        if (e->mb == e->cfg.grad_accum - 1) return start_reduction_whole(e, unit);
        return ZERO_OK;
    }
    if (u->reduce || u->grecv) { /* the previous micro-batch's reduction of this unit must land first (and
                                  * its received shard be added) */
        s = complete(e, u);
        if (s != ZERO_OK) return s;
    }
    return start_reduction_shard(e, unit);
}

zero_status zero_engine_micro_batch_done(zero_engine *e) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    if (!e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "micro_batch_done: finalize the engine first");
    if (e->mb_open) {
        e->mb++;
        e->mb_open = 0;
    }
    return ZERO_OK;
}

zero_status zero__reduce_finish_all(zero_engine *e) {
    zero_status s;
    if (e->cfg.deterministic) return zero__det_reduce_all(e, &e->det_redo);
    if (!e->own.reduce_each_mb) {
        for (int i = 0; i < e->nunits; i++) {
            eunit *u = &e->units[i];
            if (u->gscratch && (s = fold_scratch(e, u)) != ZERO_OK) return s; /* grad() without grad_ready: still counts */
            if (!u->reduced_step && u->numel && (s = start_reduction_whole(e, i)) != ZERO_OK) return s;
        }
    }
    while (e->inflight_reductions > 0)
        if ((s = complete(e, &e->units[e->inflight[0]])) != ZERO_OK) return s;
    for (int i = 0; i < e->nunits; i++) {
        eunit *u = &e->units[i];
        u->reduced_step = 0;
        u->ready_mb = -1;
        if (u->gscratch) { /* stage 2-3: grad() without grad_ready is a caller error */
            zero__buf_put(e, u->gscratch);
            u->gscratch = NULL;
            return zero__eng_fail(e, ZERO_ERR_STATE, "step: unit '%s' has a gradient that was never passed to grad_ready",
                                  u->name);
        }
    }
    return ZERO_OK;
}
