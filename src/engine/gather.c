/* gather/release: hand the model a unit's full fp32 parameters (or, gather_parts, its two parts
 * as they are kept). Stage 3 all-gathers the unit's
 * shards into a transient buffer and, from the second step on, prefetches the next units of the
 * gather order recorded in the first step (as many as stage3_prefetch_bucket_size holds) while
 * the model computes with the current one. Under
 * parameter offload the shards come from the swap file, read ahead in the same order
 * (offload_param.c). */
#include "engine/internal.h"

#include <stdlib.h>
#include <string.h>

/* Elements a stage-3 gather of u holds: both parts, padded. */
static uint64_t gather_elems(const eunit *u) { return u->padded + u->fpadded; }

/* Whether u's all-gathers were started (or done): a unit with an empty part has no buffer there. */
static int is_gathered(const eunit *u) { return u->gathered || u->fgathered; }

/* hpZ: u's all-gather over the world has landed: its secondary shard is the slice of it. */
static void sec_refresh(zero_engine *e, eunit *u) {
    if (!u->sec_fill) return;
    const uint64_t n = zero__own_sec_elems(e, u);
    if (zero__x_copy(e, u->sec, zero__wptr(e, u->gathered, zero__own_sec_offset(e, u)), (size_t)(n * e->wsize)) != ZERO_OK)
        return; /* the device failed: the secondary shard stays stale (the next gather goes over the world) */
    u->sec_valid = 1;
    u->sec_fill = 0;
}

void zero__sec_stale(zero_engine *e, eunit *u) {
    if (!e->own.hpz) return;
    if (u) u->sec_valid = 0;
    else
        for (int i = 0; i < e->nunits; i++) e->units[i].sec_valid = 0;
}

/* The shards u's all-gathers send (this rank's own slices of the gathered parts): the working
 * one in RAM or, under parameter offload, in its pool buffer (read from NVMe, the frozen one behind
 * it), valid until zero__poff_done. */
static const void *shard_of(zero_engine *e, eunit *u) { return e->off.par ? zero__poff_shard(e, u) : u->v.wp; }
static const void *fshard_of(zero_engine *e, eunit *u) {
    return e->off.par ? (const char *)zero__poff_shard(e, u) + zero__poff_frozen_at(e, u) : u->v.fp;
}

/* qwZ: the messages of one part's all-gather (shard elements of dt, sent from src): this rank's
 * coded, the world's receive buffer. */
static zero_status qwz_start(zero_engine *e, const void *src, zero_dtype dt, uint64_t shard, void **qsend,
                             void **qrecv) {
    const uint64_t R = zero__qwz_bytes(e, shard);
    *qsend = zero__dbuf_get(e, (size_t)R, 0);
    *qrecv = zero__dbuf_get(e, (size_t)(R * (uint64_t)e->world), 0);
    if (!*qsend || !*qrecv) return ZERO_ERR_NOMEM;
    return zero__qwz_encode(e, src, dt, shard, *qsend);
}

static void qwz_free(zero_engine *e, eunit *u) {
    zero__dbuf_put(e, u->qsend);
    zero__dbuf_put(e, u->qrecv);
    zero__dbuf_put(e, u->fqsend);
    zero__dbuf_put(e, u->fqrecv);
    u->qsend = u->qrecv = u->fqsend = u->fqrecv = NULL;
}

/* u's all-gathers have landed: under qwZ the messages decoded into the gathered parts (this
 * rank's slices from its shards, unquantized), before the shards' pool buffer is let go. */
static zero_status land(zero_engine *e, eunit *u) {
    zero_status s = ZERO_OK;
    if (u->qrecv) s = zero__qwz_decode(e, u->qrecv, e->wdt, u->shard, shard_of(e, u), u->gathered);
    if (s == ZERO_OK && u->fqrecv) s = zero__qwz_decode(e, u->fqrecv, e->fdt, u->fshard, fshard_of(e, u), u->fgathered);
    qwz_free(e, u);
    return s == ZERO_OK ? ZERO_OK : zero__eng_fail(e, s, "decoding the quantized all-gather of unit '%s': %s", u->name,
                                                   zero_status_string(s));
}

/* Starts the all-gathers of u's shards into transient buffers (stage 3): the trainable part in
 * the working dtype, the frozen part in the frozen dtype (each when not empty). Under hpZ (whose
 * units have no frozen part: finalize) a unit whose secondary shard is current is gathered inside
 * the group; otherwise over the world, and the secondary shard is refreshed from the result
 * (sec_refresh, once it has landed). Under qwZ a gather over the world sends int8 messages (the
 * frozen part too, unless the model has a quantized base: its records go as stored), decoded as
 * it lands. */
static zero_status start_gather(zero_engine *e, eunit *u, int blocking) {
    if (u->padded) u->gathered = zero__dbuf_get(e, (size_t)(u->padded * e->wsize), 0);
    if (u->fpadded) u->fgathered = zero__dbuf_get(e, (size_t)(u->fpadded * e->fsize), 0);
    if ((u->padded && !u->gathered) || (u->fpadded && !u->fgathered))
        return zero__eng_fail(e, ZERO_ERR_NOMEM, "gather '%s': out of memory for %llu elements", u->name,
                              (unsigned long long)gather_elems(u));
    e->live += gather_elems(u);
    zero_status s = ZERO_OK;
    const int group = e->own.hpz && u->sec_valid;
    zero_comm *c = group ? e->sec : e->data;
    const void *send = group ? u->sec : shard_of(e, u), *fsend = fshard_of(e, u);
    const uint64_t count = group ? zero__own_sec_elems(e, u) : u->shard;
    const int qw = zero__qwz_on(e) && !group && u->padded, fqw = zero__qwz_frozen(e) && u->fpadded;
    u->sec_fill = e->own.hpz && !group;
    double t0 = zero_now();
    if (qw) s = qwz_start(e, send, e->wdt, u->shard, &u->qsend, &u->qrecv);
    if (s == ZERO_OK && fqw) s = qwz_start(e, fsend, e->fdt, u->fshard, &u->fqsend, &u->fqrecv);
    if (s != ZERO_OK)
        return zero__eng_fail(e, s, "gather '%s': coding its quantized all-gather: %s", u->name,
                              s == ZERO_ERR_NOMEM ? "out of memory" : zero_status_string(s));
    /* what goes over the wire: a part's shard, or its message (bytes) under qwZ */
    const void *tx = qw ? u->qsend : send, *ftx = fqw ? u->fqsend : fsend;
    void *rx = qw ? u->qrecv : u->gathered, *frx = fqw ? u->fqrecv : u->fgathered;
    const uint64_t tn = qw ? zero__qwz_bytes(e, u->shard) : count, ftn = fqw ? zero__qwz_bytes(e, u->fshard) : u->fshard;
    const zero_dtype tdt = qw ? ZERO_DTYPE_UINT8 : e->wdt, fdt = fqw ? ZERO_DTYPE_UINT8 : e->fdt;
    if (blocking) {
        if (u->padded) s = zero__x_all_gather(e, c, tx, rx, tn, tdt, NULL);
        if (s == ZERO_OK && u->fpadded) s = zero__x_all_gather(e, e->data, ftx, frx, ftn, fdt, NULL);
        zero__eng_waited(e, "all-gather (not prefetched)", t0);
        if (s == ZERO_OK) { /* landed: decoded (land sets its own error) */
            s = land(e, u);
            if (e->off.par) zero__poff_done(e, u);
            if (s != ZERO_OK) return s;
            sec_refresh(e, u);
        } else if (e->off.par) {
            zero__poff_done(e, u);
        }
    } else {
        u->prefetch_t0 = t0;
        if (u->padded) s = zero__x_all_gather(e, c, tx, rx, tn, tdt, &u->prefetch);
        if (s == ZERO_OK && u->fpadded) s = zero__x_all_gather(e, e->data, ftx, frx, ftn, fdt, &u->fprefetch);
        zero__eng_waited(e, "all-gather prefetch (issue)", t0);
        u->pf_pending = s == ZERO_OK; /* landed or not, its use still to be made */
    }
    if (s != ZERO_OK)
        return zero__eng_fail(e, ZERO_ERR_COMM, "all-gather of unit '%s'%s failed: %s", u->name,
                              group ? " inside its hpZ group" : "", zero_comm_last_error(c));
    return ZERO_OK;
}

/* Waits for u's prefetch (both parts). */
static zero_status wait_prefetch(zero_engine *e, eunit *u) {
    zero_status s = ZERO_OK;
    if (u->prefetch) s = zero__eng_wait(e, &u->prefetch, u->prefetch_t0, ZERO__TRACE_PREFETCH);
    if (u->fprefetch) {
        zero_status f = zero__eng_wait(e, &u->fprefetch, u->prefetch_t0, ZERO__TRACE_PREFETCH);
        if (s == ZERO_OK) s = f;
    }
    return s;
}

static void free_gathered(zero_engine *e, eunit *u) {
    if (!is_gathered(u)) return;
    zero__dbuf_put(e, u->gathered);
    zero__dbuf_put(e, u->fgathered);
    u->gathered = u->fgathered = NULL;
    u->sec_fill = 0; /* a prefetch dropped unused refreshes nothing */
    u->pf_pending = 0;
    qwz_free(e, u);
    e->live -= gather_elems(u);
}

/* Stage 3, after the order is known: the unit expected after the current one. */
static void advance_cursor(zero_engine *e, int unit) {
    if (e->recording) {
        if (e->norder == e->cap_order) {
            int cap = e->cap_order ? 2 * e->cap_order : 64;
            int *o = realloc(e->order, (size_t)cap * sizeof *o);
            if (!o) return; /* the order is only an optimization: stop recording */
            e->order = o;
            e->cap_order = cap;
        }
        e->order[e->norder++] = unit;
        return;
    }
    if (e->cursor < e->norder && e->order[e->cursor] == unit) {
        e->cursor++;
        return;
    }
    /* A gather outside the recorded order (the same on every rank, or the control exchange would
     * have failed): an evaluation pass, say. Resynchronize on the next occurrence of the unit. */
    for (int k = 1; k <= e->norder; k++) {
        int j = (e->cursor + k) % e->norder;
        if (e->order[j] == unit) {
            e->cursor = j + 1;
            return;
        }
    }
}

/* Stage 3, after the order is known: starts the all-gathers of the units that come next in the
 * recorded order. Without stage3_prefetch_bucket_size given (zero's default), the next unit
 * only; with it, as many units ahead as fit the bucket (elements prefetched and not yet
 * gathered by the model, DeepSpeed's coordinator's rule; 0: none). Always within
 * stage3_max_live_parameters, and under parameter offload only units whose shard is ready.
 * Every input of the decision is the same on every rank (the calls made), as it must be: a
 * prefetch is a collective. */
static zero_status prefetch_ahead(zero_engine *e) {
    if (e->recording || e->cursor >= e->norder) return ZERO_OK;
    const uint64_t live_max = e->cfg.max_live_parameters > 0 ? (uint64_t)e->cfg.max_live_parameters : UINT64_MAX;
    if (!(e->cfg.set_fields & ZERO_SET_PREFETCH_BUCKET)) {
        eunit *n = &e->units[e->order[e->cursor]];
        if (is_gathered(n) || e->live + gather_elems(n) > live_max) return ZERO_OK;
        if (e->off.par && !zero__poff_ready(e, n)) return ZERO_OK;
        return start_gather(e, n, 0);
    }
    const uint64_t bucket = e->cfg.prefetch_bucket_size > 0 ? (uint64_t)e->cfg.prefetch_bucket_size : 0;
    uint64_t ahead = 0;
    const int walk = ++e->pf_epoch;
    for (int k = e->cursor; k < e->norder; k++) {
        eunit *n = &e->units[e->order[k]];
        if (n->pf_mark == walk || n->gathers > 0) continue; /* seen in this walk, or held by the model */
        n->pf_mark = walk;
        if (is_gathered(n)) { /* prefetched earlier, not used yet */
            ahead += gather_elems(n);
            continue;
        }
        if (ahead + gather_elems(n) > bucket || e->live + gather_elems(n) > live_max) break;
        if (e->off.par && !zero__poff_ready(e, n)) break;
        zero_status s = start_gather(e, n, 0);
        if (s != ZERO_OK) return s;
        ahead += gather_elems(n);
    }
    return ZERO_OK;
}

/* Parameters kept as shards (the table's gather_collective: stage 3): one path whether the
 * shards are in RAM or on NVMe. From NVMe, the shards this gather all-gathers are read before
 * the control exchange, which carries every rank's read status: a failed disk on one rank fails
 * the gather on all of them. */
static zero_status gather_shards(zero_engine *e, eunit *u) {
    const int unit = (int)(u - e->units), nvme = e->off.par;
    advance_cursor(e, unit);
    zero_status s = nvme ? zero__poff_prepare(e, u) : ZERO_OK;
    if ((s = zero__ctrl_exchange(e, CTRL_GATHER, unit, (double)s, 0)) != ZERO_OK) return s;
    if (nvme && (s = zero__poff_check(e, u)) != ZERO_OK) return s;
    if (u->pf_pending) { /* a prefetch: waited for */
        u->pf_pending = 0;
        if ((s = wait_prefetch(e, u)) != ZERO_OK) return s;
        s = land(e, u);
        if (nvme) zero__poff_done(e, u);
        if (s != ZERO_OK) return s;
        sec_refresh(e, u);
    } else if (!is_gathered(u)) {
        if ((s = start_gather(e, u, 1)) != ZERO_OK) return s;
    }
    if ((s = prefetch_ahead(e)) != ZERO_OK) return s;
    if (nvme) zero__poff_read_ahead(e);
    return ZERO_OK;
}

/* A quantized parameter's record (host or device memory) decoded into dst (its numel fp32). */
static zero_status decode_record(zero_engine *e, const eparam *p, const void *rec, float *dst) {
    const size_t bytes = (size_t)(p->slots * e->fsize);
    void *host = NULL;
    if (zero__dev_is(e, rec)) { /* a host copy of the record first */
        host = zero__buf_get(e, bytes, 0);
        zero_status s = host ? zero__x_copy(e, host, rec, bytes) : ZERO_ERR_NOMEM;
        if (s != ZERO_OK) {
            zero__buf_put(e, host);
            return s == ZERO_ERR_NOMEM ? zero__eng_fail(e, s, "decoding '%s': out of memory", p->name) : s;
        }
        rec = host;
    }
    zero_quant_view qv;
    zero_status s = zero_quant_record_view(p->qfmt, rec, p->numel, &qv);
    if (s == ZERO_OK) s = zero_quant_record_decode(&qv, 0, p->numel, dst);
    zero__buf_put(e, host);
    return s == ZERO_OK ? s : zero__eng_fail(e, s, "decoding '%s' (%s): %s", p->name, zero_qformat_name(p->qfmt),
                                             zero_status_string(s));
}

zero_status zero__assemble_view(zero_engine *e, const eunit *u, const void *tfull, zero_dtype tdt, const void *ffull,
                                float *view) {
    int pi = u->first_param;
    const int end = u->first_param + u->nparams;
    zero_status s = ZERO_OK;
    while (pi < end && s == ZERO_OK) {
        const eparam *p = &e->params[pi];
        if (zero__quantized(p)) { /* its record decoded */
            s = decode_record(e, p, (const char *)ffull + p->soff * e->fsize, view + p->offset);
            pi++;
            continue;
        }
        const int fr = zero__frozen(p);
        uint64_t n = p->numel;
        int q = pi + 1;
        for (; q < end && zero__frozen(&e->params[q]) == fr && !zero__quantized(&e->params[q]) &&
               e->params[q].soff == p->soff + n;
             q++)
            n += e->params[q].numel;
        const void *src = fr ? ffull : tfull;
        const zero_dtype dt = fr ? e->fdt : tdt;
        s = zero__x_load(e, view + p->offset, (const char *)src + p->soff * zero_dtype_size(dt), dt, n);
        pi = q;
    }
    return s;
}

/* The trainable part in the working dtype while u is gathered. */
static const void *working_of(const zero_engine *e, const eunit *u) {
    return e->own.gather_collective ? u->gathered : u->v.wp;
}

/* The frozen part in the frozen dtype while u is gathered. */
static const void *frozen_of(const zero_engine *e, const eunit *u) {
    return e->own.gather_collective ? u->fgathered : u->v.fp;
}

/* The first gather of u (nothing held): stage 3 all-gathers its shards. */
static zero_status gather_first(zero_engine *e, eunit *u) {
    return u->gathers == 0 && e->own.gather_collective ? gather_shards(e, u) : ZERO_OK;
}

const float *zero_engine_gather(zero_engine *e, int unit) {
    if (!e || zero__eng_check_unit(e, unit, "gather") != ZERO_OK) return NULL;
    eunit *u = &e->units[unit];
    if (gather_first(e, u) != ZERO_OK) return NULL;
    const float *out;
    if (!e->dev && u->numel == 0 && e->fdt == ZERO_DTYPE_FP32 && !u->nquant) { /* only an fp32 frozen part: it is the view, no copy */
        out = frozen_of(e, u);
    } else if (!e->dev && !u->fnumel && e->wdt == ZERO_DTYPE_FP32) { /* the working copy is the view */
        out = working_of(e, u);
    } else { /* an fp32 view (on a device: in host memory, for the model), made at the first
              * gather that asks for it and kept until release */
        if (!u->view) {
            /* with frozen parameters assembled from both parts; else the working copy widened, in a
             * buffer of the padded size (the gradient buffers', which the cache then shares) */
            u->view = zero__buf_get(e, (size_t)(u->fnumel ? u->vnumel : u->padded) * 4, 0);
            if (!u->view) {
                zero__eng_fail(e, ZERO_ERR_NOMEM, "gather '%s': out of memory for the fp32 view", u->name);
                return NULL;
            }
            zero_status s = u->fnumel ? zero__assemble_view(e, u, working_of(e, u), e->wdt, frozen_of(e, u), u->view)
                                      : zero__x_load(e, u->view, working_of(e, u), e->wdt, u->numel);
            if (s != ZERO_OK) {
                zero__buf_put(e, u->view);
                u->view = NULL;
                return NULL;
            }
        }
        out = u->view;
    }
    u->gathers++;
    return out;
}

zero_status zero_engine_gather_parts(zero_engine *e, int unit, zero_unit_parts *out) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    zero_status s = zero__eng_check_unit(e, unit, "gather_parts");
    if (s != ZERO_OK) return s;
    eunit *u = &e->units[unit];
    if (!out) return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "gather_parts '%s': out is NULL", u->name);
    if ((s = gather_first(e, u)) != ZERO_OK) return s;
    const void *tp = u->numel ? working_of(e, u) : NULL, *fp = u->fnumel ? frozen_of(e, u) : NULL;
    if (e->dev) { /* host copies of the parts, for the model, kept until release */
        if (tp && !u->hpart) {
            u->hpart = zero__buf_get(e, (size_t)(u->numel * e->wsize), 0);
            if (!u->hpart) return zero__eng_fail(e, ZERO_ERR_NOMEM, "gather_parts '%s': out of memory", u->name);
            if ((s = zero__x_copy(e, u->hpart, tp, (size_t)(u->numel * e->wsize))) != ZERO_OK) return s;
        }
        if (fp && !u->hfpart) {
            u->hfpart = zero__buf_get(e, (size_t)(u->fnumel * e->fsize), 0);
            if (!u->hfpart) return zero__eng_fail(e, ZERO_ERR_NOMEM, "gather_parts '%s': out of memory", u->name);
            if ((s = zero__x_copy(e, u->hfpart, fp, (size_t)(u->fnumel * e->fsize))) != ZERO_OK) return s;
        }
        tp = tp ? u->hpart : NULL;
        fp = fp ? u->hfpart : NULL;
    }
    u->gathers++;
    out->trainable = tp;
    out->trainable_numel = u->numel;
    out->trainable_dtype = e->wdt;
    out->frozen = fp;
    out->frozen_numel = u->fnumel;
    out->frozen_dtype = e->fdt;
    return ZERO_OK;
}

zero_status zero_engine_release(zero_engine *e, int unit) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    zero_status s = zero__eng_check_unit(e, unit, "release");
    if (s != ZERO_OK) return s;
    eunit *u = &e->units[unit];
    if (u->gathers == 0) return zero__eng_fail(e, ZERO_ERR_STATE, "release '%s': the unit is not gathered", u->name);
    if (--u->gathers > 0) return ZERO_OK;
    zero__buf_put(e, u->view);
    zero__buf_put(e, u->hpart);
    zero__buf_put(e, u->hfpart);
    u->view = u->hpart = u->hfpart = NULL;
    if (e->own.gather_collective) free_gathered(e, u);
    return ZERO_OK;
}

zero_status zero__gather_drain(zero_engine *e) {
    zero_status first = ZERO_OK;
    for (int i = 0; i < e->nunits; i++) {
        eunit *u = &e->units[i];
        if (u->prefetch || u->fprefetch) {
            zero_status s = wait_prefetch(e, u);
            if (first == ZERO_OK) first = s;
        }
        if (u->gathers == 0) free_gathered(e, u);
    }
    if (e->off.par) zero__poff_release_all(e); /* read-ahead past this point would be stale */
    return first;
}
