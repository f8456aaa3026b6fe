/* Checkpoints of the engine: every rank streams the valid slice of its fp32 master and optimizer
 * states per unit into its rank file (src/ckpt), rank 0 commits after every rank finished; load
 * reads, per rank, only the element ranges its stage and world size need, from whatever world
 * size and stage saved them. Working parameters are re-derived from the master, exactly as the
 * step's write-back derives them, so a resume is bitwise identical. Arrays under NVMe offload
 * stream between the swap files and the checkpoint a tile at a time (memory: the pool). */
#include "engine/internal.h"
#include "zero/ckpt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 65536 /* elements streamed at a time: load and save memory is bounded by this */

static const char *state_name(const zero_engine *e, int k) {
    switch (e->cfg.optim.type) {
    case ZERO_OPTIM_ADAMW:
    case ZERO_OPTIM_ADAM: return k == 0 ? "exp_avg" : "exp_avg_sq";
    case ZERO_OPTIM_SGD: return "momentum_buffer";
    case ZERO_OPTIM_LION: return "exp_avg";
    }
    return "state";
}

/* Array k of unit u's update range (-1: the master; else optimizer state k), at unit element
 * u->v.lo, or NULL when it lives in a swap file. */
static float *array_of(const eunit *u, int k) { return k < 0 ? u->v.master : u->v.state[k]; }

/* The engine's typed manifest (docs/CHECKPOINT.md): arrays allocated here, strings borrowed from
 * the engine. manifest_free releases them. */
static zero_status manifest_of(const zero_engine *e, const char *user_json, zero_manifest *m) {
    memset(m, 0, sizeof *m);
    zero_manifest_unit *units = calloc((size_t)e->nunits, sizeof *units);
    zero_manifest_param *params = calloc((size_t)(e->nparams ? e->nparams : 1), sizeof *params);
    if (!units || !params) {
        free(units);
        free(params);
        return ZERO_ERR_NOMEM;
    }
    m->stage = e->cfg.stage;
    m->precision = e->wdt;
    m->align = e->align;
    m->engine_step = e->step;
    m->optimizer = zero_optim_name(e->cfg.optim.type);
    m->states = e->nstates;
    m->scaler = (zero_manifest_scaler){e->scaler.scale, e->scaler.delayed_shift, e->scaler.iter, e->scaler.last_overflow_iter};
    for (int i = 0; i < e->nunits; i++) {
        const eunit *u = &e->units[i];
        units[i] = (zero_manifest_unit){u->name, u->vnumel, u->first_param, u->nparams};
    }
    for (int k = 0; k < e->nparams; k++) {
        const eparam *q = &e->params[k];
        zero_manifest_param *p = &params[k];
        p->name = q->name;
        p->ndim = q->ndim;
        memcpy(p->shape, q->shape, sizeof p->shape);
        p->offset = q->offset;
        p->numel = q->numel;
        p->no_decay = (q->flags & ZERO_PARAM_NO_DECAY) != 0;
        p->frozen = zero__frozen(q);
    }
    m->nunits = e->nunits;
    m->units = units;
    m->nparams = e->nparams;
    m->params = params;
    m->user_json = user_json;
    return ZERO_OK;
}

static void manifest_free(zero_manifest *m) {
    free((void *)m->units);
    free((void *)m->params);
    memset(m, 0, sizeof *m);
}

/* Streams this rank's partition slice of `src` (an array of the update range, at unit element
 * u->v.lo). */
/* Streams `bytes` of src into the rank file, a chunk at a time (from device memory through a host
 * buffer). A writer's failure is returned as it is (its message is the writer's); the device's is
 * recorded on the engine. */
static zero_status write_bytes(zero_engine *e, zero_ckpt_writer *w, const void *src, uint64_t bytes) {
    const int dev = zero__dev_is(e, src);
    void *host = dev ? zero__buf_get(e, CHUNK * 4, 0) : NULL;
    if (dev && !host) return zero__eng_fail(e, ZERO_ERR_NOMEM, "save: out of memory");
    zero_status s = ZERO_OK;
    for (uint64_t i = 0; i < bytes && s == ZERO_OK; i += CHUNK * 4) {
        const uint64_t n = bytes - i < CHUNK * 4 ? bytes - i : CHUNK * 4;
        const void *p = (const char *)src + i;
        if (dev && (s = zero__x_copy(e, host, p, (size_t)n)) != ZERO_OK) break;
        s = zero_ckpt_writer_write(w, dev ? host : p, (size_t)n);
    }
    zero__buf_put(e, host);
    return s;
}

static zero_status write_slice(zero_engine *e, zero_ckpt_writer *w, const eunit *u, const float *src) {
    const eview *v = &u->v;
    return write_bytes(e, w, src + (v->slo - v->lo), (uint64_t)(v->shi - v->slo) * 4);
}

/* 8-bit state k's slice: its indices, then its blocks' absmax (the slice starts on a block). */
static zero_status write_q8_slice(zero_engine *e, zero_ckpt_writer *w, const eunit *u, int k) {
    const eview *v = &u->v;
    const uint8_t *idx = k == 0 ? v->q8.m : v->q8.v;
    const float *am = k == 0 ? v->q8.m_absmax : v->q8.v_absmax;
    const uint64_t at = v->slo - v->lo, n = v->shi - v->slo;
    zero_status s = write_bytes(e, w, idx + at, n);
    if (s == ZERO_OK)
        s = write_bytes(e, w, am + at / ZERO_QUANT_Q8_BLOCK, zero_quant_blocks(n, ZERO_QUANT_Q8_BLOCK) * 4);
    return s;
}

/* Deterministic mode's grids of u (every rank holds them whole): this rank's slice of
 * "<unit>/det_grid", as fp32 integers. */
static zero_status write_grid(zero_engine *e, zero_ckpt_writer *w, const eunit *u) {
    const uint64_t nb = zero__det_blocks(u->numel);
    const uint64_t per = zero_partition_padded(nb, e->world, e->align) / (uint64_t)e->world;
    const uint64_t lo = per * (uint64_t)e->rank, hi = lo + per < nb ? lo + per : nb;
    float buf[1024];
    for (uint64_t b = lo; b < hi; b += 1024) {
        const uint64_t n = hi - b < 1024 ? hi - b : 1024;
        for (uint64_t k = 0; k < n; k++) buf[k] = (float)u->dgrid[b + k];
        zero_status s = zero_ckpt_writer_write(w, buf, (size_t)n * 4);
        if (s != ZERO_OK) return s;
    }
    return ZERO_OK;
}

/* An offloaded array on its way to or from a checkpoint, a tile at a time. */
typedef struct stream_ctx {
    zero_ckpt_writer *w;
    int k;            /* -1: master; else state k */
    int absmax;       /* an 8-bit state: its blocks' absmax (else its indices) */
    zero_status ck;   /* the checkpoint side's failure (its message is the writer's/reader's) */
} stream_ctx;

static float *tile_array(const etile *x, int k) { return k < 0 ? x->master : k == 0 ? x->s0 : x->s1; }

/* An 8-bit state's indices or absmax in a tile, and their bytes. */
static void *tile_q8(const etile *x, int k, int absmax, size_t *bytes) {
    *bytes = absmax ? (size_t)zero_quant_blocks(x->n, ZERO_QUANT_Q8_BLOCK) * 4 : (size_t)x->n;
    if (absmax) return k == 0 ? x->q8.m_absmax : x->q8.v_absmax;
    return k == 0 ? x->q8.m : x->q8.v;
}

static zero_status save_tile(zero_engine *e, etile *x, void *ctx) {
    (void)e;
    stream_ctx *c = ctx;
    size_t bytes = (size_t)x->n * 4;
    const void *src = c->k >= 0 && x->u->q8on ? tile_q8(x, c->k, c->absmax, &bytes) : tile_array(x, c->k);
    c->ck = zero_ckpt_writer_write(c->w, src, bytes);
    return c->ck;
}

static zero_status save_local(zero_engine *e, const char *dir, const char *save_id, zero_ckpt_writer **wout) {
    zero_error err = {{0}};
    zero_ckpt_writer *w = NULL;
    zero_status s = zero__off_quiesce(e);
    if (s != ZERO_OK) return s;
    s = zero_ckpt_writer_begin(&w, NULL, dir, e->step, e->rank, e->world, save_id, &err);
    if (s != ZERO_OK) return zero__eng_fail(e, s, "save: %s", err.msg);
    *wout = w;
    char name[512];
    /* per unit: the trainable part's master and states (a unit of frozen parameters only has
     * none), then with save_frozen the frozen part in its dtype */
    const int frozen = e->cfg.save_frozen;
    for (int i = 0; i < e->nunits && s == ZERO_OK; i++) {
        eunit *u = &e->units[i];
        if (u->numel) {
            snprintf(name, sizeof name, "%s/master", u->name);
            s = zero_ckpt_writer_add(w, name, ZERO_DTYPE_FP32, u->numel, e->align);
        }
        for (int k = 0; u->numel && k < e->nstates && s == ZERO_OK; k++) {
            snprintf(name, sizeof name, "%s/%s", u->name, state_name(e, k));
            s = zero_ckpt_writer_add(w, name, u->q8on ? ZERO_DTYPE_UINT8 : ZERO_DTYPE_FP32, u->numel, e->align);
            if (u->q8on && s == ZERO_OK) { /* 8-bit: the indices, then the blocks' absmax (sharded as the blocks are) */
                snprintf(name, sizeof name, "%s/%s.absmax", u->name, state_name(e, k));
                s = zero_ckpt_writer_add(w, name, ZERO_DTYPE_FP32, zero_quant_blocks(u->numel, ZERO_QUANT_Q8_BLOCK), 1);
            }
        }
        if (u->dgrid && s == ZERO_OK) {
            snprintf(name, sizeof name, "%s/det_grid", u->name);
            s = zero_ckpt_writer_add(w, name, ZERO_DTYPE_FP32, zero__det_blocks(u->numel), e->align);
        }
        if (frozen && u->fnumel && s == ZERO_OK) {
            snprintf(name, sizeof name, "%s/frozen", u->name);
            s = zero_ckpt_writer_add(w, name, e->fdt, u->fnumel, e->align);
        }
    }
    for (int i = 0; i < e->nunits && s == ZERO_OK; i++) {
        eunit *u = &e->units[i];
        for (int k = -1; u->numel && k < e->nstates && s == ZERO_OK; k++) {
            float *ram = array_of(u, k);
            if (u->valid == 0) continue; /* this rank's slice is all padding: nothing to write */
            if (k >= 0 && u->q8on && u->v.q8.m) {
                s = write_q8_slice(e, w, u, k);
                continue;
            }
            if (ram) {
                s = write_slice(e, w, u, ram);
                continue;
            }
            /* on NVMe, a tile at a time (an 8-bit state: its indices, then a second pass for the absmax) */
            for (int part = 0; part < (k >= 0 && u->q8on ? 2 : 1) && s == ZERO_OK; part++) {
                stream_ctx c = {w, k, part, ZERO_OK};
                eopass p = {i, i + 1, 0, UINT64_MAX, k < 0 ? ARR_MASTER : k == 0 ? ARR_S0 : ARR_S1, 0, save_tile, &c};
                s = zero__off_run(e, &p);
                if (c.ck != ZERO_OK) s = c.ck;
                else if (s != ZERO_OK) return s; /* the offload's message */
            }
        }
        if (u->dgrid && s == ZERO_OK) s = write_grid(e, w, u);
        if (frozen && u->fnumel && u->fvalid && s == ZERO_OK) { /* this rank's slice of the frozen part */
            if (e->own.k[EK_FROZEN].tier != TIER_NVME) {
                s = write_bytes(e, w, (const char *)u->v.fp + (u->foffset - u->v.flo) * e->fsize, u->fvalid * e->fsize);
            } else { /* on NVMe: its shard read out first */
                void *b = zero__buf_get(e, (size_t)(u->fvalid * e->fsize), 0);
                s = b ? zero__foff_read(e, u, b, (size_t)(u->fvalid * e->fsize)) : ZERO_ERR_NOMEM;
                if (s == ZERO_OK) s = write_bytes(e, w, b, u->fvalid * e->fsize);
                zero__buf_put(e, b);
                if (s == ZERO_ERR_NOMEM) return zero__eng_fail(e, s, "save '%s': out of memory for its frozen shard", u->name);
            }
        }
    }
    if (s == ZERO_OK) s = zero_ckpt_writer_finish(w);
    if (s != ZERO_OK) return zero__eng_fail(e, s, "save: %s", zero_ckpt_writer_last_error(w));
    return ZERO_OK;
}

zero_status zero_engine_save(zero_engine *e, const char *dir, const char *user_json) {
    if (!e || !dir) return ZERO_ERR_INVALID_ARG;
    if (!e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "save: finalize the engine first");
    if (e->broken) return zero__eng_fail(e, ZERO_ERR_STATE, "save: the engine failed earlier; free it");
    if (e->mb || e->mb_open) return zero__eng_fail(e, ZERO_ERR_STATE, "save: a step is in progress: save between steps");
    /* the manifest is checked on every rank before anything is written (the same values everywhere) */
    zero_manifest m;
    if (manifest_of(e, user_json, &m) != ZERO_OK) return zero__eng_fail(e, ZERO_ERR_NOMEM, "save: out of memory");
    zero_error verr;
    if (zero_manifest_validate(&m, &verr) != ZERO_OK) {
        manifest_free(&m);
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "save: %s", verr.msg);
    }
    zero_status s = zero__ctrl_exchange(e, CTRL_SAVE, -1, 0, 0);
    zero_ckpt_writer *w = NULL;
    /* the save's id, which binds every rank file to this save: rank 0's, sent to all */
    char id[ZERO_CKPT_ID_CHARS + 1] = {0};
    if (s == ZERO_OK && e->rank == 0 && zero_ckpt_new_id(id, sizeof id) != ZERO_OK) memset(id, 0, sizeof id);
    if (s == ZERO_OK && zero_comm_broadcast(e->ctrl, id, sizeof id, ZERO_DTYPE_UINT8, 0) != ZERO_OK)
        s = zero__eng_fail(e, ZERO_ERR_COMM, "save: sharing the save's id: %s", zero_comm_last_error(e->ctrl));
    else if (s == ZERO_OK && !id[0]) /* every rank sees it: they fail together */
        s = zero__eng_fail(e, ZERO_ERR_IO, "save: no random bytes for the save's id");
    if (s == ZERO_OK) {
        zero_status mine = save_local(e, dir, id, &w);
        s = zero__eng_agree(e, mine, "save");
        if (s == ZERO_OK && e->rank == 0) {
            mine = zero_ckpt_commit_engine(w, &m);
            if (mine != ZERO_OK) zero__eng_fail(e, mine, "save: commit: %s", zero_ckpt_writer_last_error(w));
        } else {
            mine = s;
        }
        if (s == ZERO_OK) s = zero__eng_agree(e, mine, "save commit");
    }
    zero_ckpt_writer_free(w);
    manifest_free(&m);
    return s;
}

/* ------------------------------------------------------------------ load */

/* The checkpoint's engine manifest (validated by the ckpt layer) against this engine's model. */
static zero_status check_manifest(zero_engine *e, const zero_ckpt *c, const zero_manifest **out) {
    const zero_manifest *m = zero_ckpt_engine_manifest(c);
    *out = m;
    if (!m)
        return zero__eng_fail(e, ZERO_ERR_FORMAT, "load: %s: the manifest has no engine part: not a checkpoint of zero_engine_save",
                              zero_ckpt_dir(c));
    if (m->nunits != e->nunits)
        return zero__eng_fail(e, ZERO_ERR_FORMAT, "load: the checkpoint has %d units; this model has %d", m->nunits, e->nunits);
    for (int i = 0; i < m->nunits; i++) {
        const eunit *u = &e->units[i];
        const zero_manifest_unit *mu = &m->units[i];
        if (strcmp(mu->name, u->name) || mu->numel != u->vnumel)
            return zero__eng_fail(e, ZERO_ERR_FORMAT,
                                  "load: the checkpoint's unit %d is '%s' of %llu elements; this model's is '%s' of %llu "
                                  "(another model?)",
                                  i, mu->name, (unsigned long long)mu->numel, u->name, (unsigned long long)u->vnumel);
        /* the same parameters trainable and frozen: the trainable part's layout depends on it */
        for (int k = 0; k < mu->nparams && k < u->nparams; k++) {
            const zero_manifest_param *mp = &m->params[mu->first_param + k];
            const eparam *p = &e->params[u->first_param + k];
            if ((mp->frozen != 0) != zero__frozen(p) || mp->offset != p->offset)
                return zero__eng_fail(e, ZERO_ERR_FORMAT,
                                      "load: parameter '%s' is %s in the checkpoint and %s in this model (parameter '%s')",
                                      mp->name, mp->frozen ? "frozen" : "trainable", zero__frozen(p) ? "frozen" : "trainable",
                                      p->name);
        }
    }
    if (strcmp(m->optimizer, zero_optim_name(e->cfg.optim.type)) || m->states != e->nstates)
        return zero__eng_fail(e, ZERO_ERR_FORMAT, "load: the checkpoint's optimizer is '%s'; this run uses '%s'", m->optimizer,
                              zero_optim_name(e->cfg.optim.type));
    return ZERO_OK;
}

/* Reads elements [lo, hi) of tensor `name` into dst: as fp32 (es 4, raw 0: the reader converts), or
 * raw, as they are stored (elements of es bytes). dst is host memory, or the device's, reached
 * through a host buffer a chunk at a time. */
static zero_status read_elems(zero_engine *e, zero_ckpt *c, const char *name, uint64_t lo, uint64_t hi, size_t es,
                              int raw, void *dst) {
    if (hi <= lo) return ZERO_OK;
    if (zero__dev_is(e, dst)) {
        const uint64_t step = CHUNK * 4 / es;
        void *host = zero__buf_get(e, CHUNK * 4, 0);
        if (!host) return zero__eng_fail(e, ZERO_ERR_NOMEM, "load: out of memory");
        zero_status s = ZERO_OK;
        for (uint64_t i = lo; i < hi && s == ZERO_OK; i += step) {
            const uint64_t n = hi - i < step ? hi - i : step;
            s = read_elems(e, c, name, i, i + n, es, raw, host); /* its own message */
            if (s == ZERO_OK) s = zero__x_copy(e, (char *)dst + (i - lo) * es, host, (size_t)(n * es));
        }
        zero__buf_put(e, host);
        return s;
    }
    const zero_status s = raw ? zero_ckpt_read_range_raw(c, name, lo, hi, dst) : zero_ckpt_read_range(c, name, lo, hi, dst);
    if (s != ZERO_OK) return zero__eng_fail(e, s, "load: %s", zero_ckpt_last_error(c));
    return ZERO_OK;
}

static zero_status read_raw(zero_engine *e, zero_ckpt *c, const char *name, uint64_t lo, uint64_t hi, size_t es, void *dst) {
    return read_elems(e, c, name, lo, hi, es, 1, dst);
}

static zero_status read_range(zero_engine *e, zero_ckpt *c, const char *name, uint64_t lo, uint64_t hi, float *dst) {
    return read_elems(e, c, name, lo, hi, 4, 0, dst);
}

typedef struct load_ctx {
    zero_ckpt *c;
    const char *name;
    int k; /* -1: master, else state k; -2: derive the working copy from the master */
    const char *absmax; /* an 8-bit state: its absmax tensor's name (name: its indices') */
} load_ctx;

static zero_status load_tile(zero_engine *e, etile *x, void *ctx) {
    const load_ctx *l = ctx;
    if (l->k == -2) return zero__x_store(e, x->work, e->wdt, x->master, x->n); /* the working copy may be the device's */
    const uint64_t lo = x->u->offset + x->first;
    if (l->absmax) { /* the tile starts on a block */
        size_t ib, ab;
        void *idx = tile_q8(x, l->k, 0, &ib), *am = tile_q8(x, l->k, 1, &ab);
        const uint64_t b0 = lo / ZERO_QUANT_Q8_BLOCK;
        zero_status s = read_raw(e, l->c, l->name, lo, lo + x->n, 1, idx);
        return s == ZERO_OK ? read_raw(e, l->c, l->absmax, b0, b0 + ab / 4, 4, am) : s;
    }
    return read_range(e, l->c, l->name, lo, lo + x->n, tile_array(x, l->k));
}

/* Loads array k (-1: master) of unit u: into RAM when it lives there, else through the pool. */
static zero_status load_array(zero_engine *e, zero_ckpt *c, eunit *u, int k, const char *name, uint64_t lo, uint64_t hi) {
    float *ram = array_of(u, k);
    if (ram) return read_range(e, c, name, lo, hi, ram + (lo - u->v.lo));
    load_ctx l = {c, name, k, NULL};
    const int ui = (int)(u - e->units);
    eopass p = {ui, ui + 1, 0, UINT64_MAX, 0, k < 0 ? ARR_MASTER : k == 0 ? ARR_S0 : ARR_S1, load_tile, &l};
    return zero__off_run(e, &p);
}

/* State k over [lo, hi): fp32, or 8-bit (the indices and the blocks' absmax, "<name>.absmax"); a
 * checkpoint whose states are in the other format is refused. */
static zero_status load_state(zero_engine *e, zero_ckpt *c, eunit *u, int k, const char *name, uint64_t lo, uint64_t hi) {
    char an[600];
    snprintf(an, sizeof an, "%s.absmax", name);
    const int saved_q8 = zero_ckpt_find(c, an) >= 0;
    if (saved_q8 != u->q8on)
        return zero__eng_fail(e, ZERO_ERR_FORMAT,
                              "load: '%s' is %s in the checkpoint and %s in this run (zero_extensions.optimizer_states, "
                              "optimizer_states_min_size): resume with the setting it was saved with",
                              name, saved_q8 ? "8-bit" : "fp32", u->q8on ? "8-bit" : "fp32");
    if (!u->q8on) return load_array(e, c, u, k, name, lo, hi);
    if (hi <= lo) return ZERO_OK; /* this rank's slice is all padding */
    if (!u->v.q8.m) { /* on NVMe: a tile at a time */
        load_ctx l = {c, name, k, an};
        const int ui = (int)(u - e->units);
        eopass p = {ui, ui + 1, 0, UINT64_MAX, 0, k == 0 ? ARR_S0 : ARR_S1, load_tile, &l};
        return zero__off_run(e, &p);
    }
    const zero_q8_state *q = &u->v.q8;
    const uint64_t b0 = lo / ZERO_QUANT_Q8_BLOCK, b1 = zero_quant_blocks(hi, ZERO_QUANT_Q8_BLOCK);
    zero_status s = read_raw(e, c, name, lo, hi, 1, (k == 0 ? q->m : q->v) + (lo - u->v.lo));
    if (s == ZERO_OK)
        s = read_raw(e, c, an, b0, b1, 4, (k == 0 ? q->m_absmax : q->v_absmax) + (b0 - u->v.lo / ZERO_QUANT_Q8_BLOCK));
    return s;
}

/* The frozen part from "<unit>/frozen" when the checkpoint has it (save_frozen), a chunk at a
 * time into what this rank keeps of it; else the values stay as the caller set them. */
static zero_status load_frozen(zero_engine *e, zero_ckpt *c, eunit *u, float *chunk) {
    char name[512];
    snprintf(name, sizeof name, "%s/frozen", u->name);
    if (!u->fnumel || zero_ckpt_find(c, name) < 0) return ZERO_OK;
    const eview *v = &u->v;
    zero_status s = ZERO_OK;
    char *fp = v->fp;
    if (e->own.k[EK_FROZEN].tier == TIER_NVME && v->flo < v->fhi) { /* on NVMe: the shard held for the write (zero__foff_region) */
        void *r;
        if ((s = zero__foff_region(e, u, &r)) != ZERO_OK) return s;
        fp = r;
    }
    for (uint64_t i = v->flo; i < v->fhi && s == ZERO_OK; i += CHUNK) {
        const uint64_t n = v->fhi - i < CHUNK ? v->fhi - i : CHUNK;
        s = read_range(e, c, name, i, i + n, chunk);
        if (s == ZERO_OK) s = zero__x_store(e, fp + (i - v->flo) * e->fsize, e->fdt, chunk, n);
    }
    return s;
}

/* Deterministic mode's grids of u from "<unit>/det_grid" where the checkpoint has them (saved in
 * that mode), else none (the first step sets them: a redo); the padding's blocks have none. */
static zero_status load_grid(zero_engine *e, zero_ckpt *c, eunit *u, float *chunk) {
    char name[512];
    snprintf(name, sizeof name, "%s/det_grid", u->name);
    zero__det_clear_grids(u);
    if (zero_ckpt_find(c, name) < 0) return ZERO_OK;
    const uint64_t nb = zero__det_blocks(u->numel);
    for (uint64_t b = 0; b < nb; b += CHUNK) {
        const uint64_t n = nb - b < CHUNK ? nb - b : CHUNK;
        zero_status s = read_range(e, c, name, b, b + n, chunk);
        if (s != ZERO_OK) return s;
        for (uint64_t k = 0; k < n; k++) {
            const float g = chunk[k];
            if (!(g == (float)ZERO_DQ_UNSET || (g >= ZERO_DQ_EMIN && g <= ZERO_DQ_EMAX && g == floorf(g)))) {
                memset(u->dgrid, ZERO_DQ_UNSET, (size_t)zero__det_blocks(u->padded));
                return zero__eng_fail(e, ZERO_ERR_FORMAT,
                                      "load: %s: %g at block %llu: expected an integer in [%d, %d], or %d (no grid)", name,
                                      (double)g, (unsigned long long)(b + k), ZERO_DQ_EMIN, ZERO_DQ_EMAX, ZERO_DQ_UNSET);
            }
            u->dgrid[b + k] = (int8_t)g;
        }
    }
    zero__det_set_floor(u);
    return ZERO_OK;
}

static zero_status load_unit(zero_engine *e, zero_ckpt *c, eunit *u, float *chunk) {
    char name[512];
    const eview *v = &u->v;
    zero_status fs = load_frozen(e, c, u, chunk);
    if (fs == ZERO_OK && u->dgrid) fs = load_grid(e, c, u, chunk);
    if (fs != ZERO_OK || u->numel == 0) return fs;
    const uint64_t lo = v->lo, hi = v->hi; /* what the rank updates: master and states */
    snprintf(name, sizeof name, "%s/master", u->name);
    zero_status s = load_array(e, c, u, -1, name, lo, hi);
    for (int k = 0; k < e->nstates && s == ZERO_OK; k++) {
        char sn[512];
        snprintf(sn, sizeof sn, "%s/%s", u->name, state_name(e, k));
        s = load_state(e, c, u, k, sn, lo, hi);
    }
    if (s != ZERO_OK) return s;
    /* working parameters: where they are the update range's (stages 0 and 3), derived from the
     * master; kept whole beside a sharded update (stages 1-2), the whole unit is read (and
     * converted) a chunk at a time */
    const int half = e->wdt != ZERO_DTYPE_FP32;
    if (!e->own.regather) {
        if (!half && e->own.master_in_params) return ZERO_OK; /* the master is the working copy */
        if (v->master && v->work) return zero__x_convert(e, v->master, ZERO_DTYPE_FP32, v->work, e->wdt, hi - lo);
        load_ctx l = {c, name, -2, NULL};
        const int ui = (int)(u - e->units);
        eopass p = {ui, ui + 1, 0, UINT64_MAX, ARR_MASTER, ARR_WORK, load_tile, &l};
        return zero__off_run(e, &p);
    }
    if (!half) return read_range(e, c, name, 0, u->numel, (float *)v->wp);
    for (uint64_t i = 0; i < u->numel && s == ZERO_OK; i += CHUNK) {
        uint64_t n = u->numel - i < CHUNK ? u->numel - i : CHUNK;
        s = read_range(e, c, name, i, i + n, chunk);
        if (s == ZERO_OK) s = zero__x_store(e, zero__wptr(e, v->wp, i), e->wdt, chunk, n);
    }
    return s;
}

static zero_status load_local(zero_engine *e, const char *path, char **user_json) {
    zero_error err = {{0}};
    zero_ckpt *c = NULL;
    zero_status s = zero__gather_drain(e); /* as set_range: no prefetch in flight or held */
    if (s != ZERO_OK) return s;
    zero__sec_stale(e, NULL); /* hpZ: refreshed by the first gather over the world */
    s = zero_ckpt_open(&c, NULL, path, 0, &err);
    if (s != ZERO_OK) return zero__eng_fail(e, s, "load: %s", err.msg);
    const zero_manifest *m = NULL;
    float *chunk = zero__buf_get(e, CHUNK * 4, 0);
    if (!chunk) s = zero__eng_fail(e, ZERO_ERR_NOMEM, "load: out of memory");
    else s = check_manifest(e, c, &m);
    for (int i = 0; i < e->nunits && s == ZERO_OK; i++) s = load_unit(e, c, &e->units[i], chunk);
    if (s == ZERO_OK) {
        if (e->wdt == ZERO_DTYPE_FP16 && e->scaler.dynamic) { /* every field validated by the ckpt layer */
            e->scaler.scale = m->scaler.scale;
            e->scaler.delayed_shift = m->scaler.delayed_shift;
            e->scaler.iter = m->scaler.iter;
            e->scaler.last_overflow_iter = m->scaler.last_overflow_iter;
        }
        e->step = zero_ckpt_step(c);
        if (user_json && m->user_json) {
            *user_json = strdup(m->user_json);
            if (!*user_json) s = zero__eng_fail(e, ZERO_ERR_NOMEM, "load: out of memory");
        }
    }
    zero__buf_put(e, chunk);
    zero_ckpt_close(c);
    return s;
}

zero_status zero_engine_load(zero_engine *e, const char *path, char **user_json) {
    if (user_json) *user_json = NULL;
    if (!e || !path) return ZERO_ERR_INVALID_ARG;
    if (!e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "load: finalize the engine first");
    if (e->broken) return zero__eng_fail(e, ZERO_ERR_STATE, "load: the engine failed earlier; free it");
    if (e->mb || e->mb_open) return zero__eng_fail(e, ZERO_ERR_STATE, "load: a step is in progress: load between steps");
    zero_status s = zero__ctrl_exchange(e, CTRL_LOAD, -1, 0, 0);
    if (s != ZERO_OK) return s;
    zero_status mine = load_local(e, path, user_json);
    s = zero__eng_agree(e, mine, "load");
    if (s != ZERO_OK && user_json) {
        free(*user_json);
        *user_json = NULL;
    }
    return s;
}
